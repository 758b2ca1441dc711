// Tokenizer throughput: sluice (bench_tokenizer, one thread, through the
// library) against @dqbd/tiktoken (tiktoken's Rust core compiled to WASM)
// and js-tiktoken (pure JavaScript), for o200k_base and cl100k_base, on the
// same corpora, in one run. Driven by bench/tokenizer_bench.sh.
//
// Usage: node tokenizer_bench.mjs BENCH_BIN WORKDIR NODE_DIR REPS NAME=CORPUS...
//   NODE_DIR: the folder whose node_modules holds the two packages
//   (tests/tokenizer/node, pinned by its package.json).
//
// What is timed, for every implementation: one content-mode encode call per
// corpus record (sluice: Tokenizer::encode on the record's bytes; the peers:
// encode_ordinary / encode(t, [], []) on the record decoded to a JavaScript
// string, which is what their callers hold). Not timed: loading the ranks
// (reported separately), reading the corpus, decoding it to strings. Each
// implementation gets one untimed warm-up pass (JIT, caches). Then REPS
// rounds each time one pass of every implementation in turn (sluice: a
// fresh bench_tokenizer process, best of 3 passes inside), so that all three
// sample the same periods of a shared machine's load; the rate is each one's
// best round. MB/s counts the corpus's UTF-8 bytes (10^6 bytes per MB) for
// all three.
//
// Sanity: the warm-up pass's ids are compared record by record with
// sluice's; the totals must be equal. js-tiktoken runs the pattern as a
// JavaScript RegExp and departs from tiktoken on U+0085, U+FEFF and 'ſ
// (see tests/tokenizer/node/difftest.mjs); records holding one of those are
// excused for js-tiktoken only.
//
// Exit: 0, or 1 if an implementation's ids differ from sluice's.
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";

const [benchBin, workDir, nodeDir, repsArg, ...corpusArgs] = process.argv.slice(2);
const reps = Math.max(1, parseInt(repsArg, 10) || 5);
mkdirSync(workDir, { recursive: true });
const require = createRequire(path.resolve(nodeDir, "package.json"));
const dqbd = require("@dqbd/tiktoken");
const jsTiktoken = require("js-tiktoken");
// Read directly: the packages' "exports" hide their package.json.
const versionOf = (pkg) =>
  JSON.parse(readFileSync(path.resolve(nodeDir, "node_modules", pkg, "package.json"), "utf8")).version;
const versions = { dqbd: versionOf("@dqbd/tiktoken"), js: versionOf("js-tiktoken") };

function records(buf) {
  const out = [];
  let pos = 0;
  while (pos < buf.length) {
    const nl = buf.indexOf(10, pos);
    const n = parseInt(buf.subarray(pos, nl).toString("ascii"), 10);
    out.push(buf.subarray(nl + 1, nl + 1 + n));
    pos = nl + 2 + n;
  }
  return out;
}

// The packages ship ranks as one compressed string ("<tag> <first rank> tok
// tok ..." per line); sluice reads tiktoken's rank-file format.
function exportRanks(bpeRanks, file) {
  const lines = [];
  for (const line of bpeRanks.split("\n")) {
    if (!line) continue;
    const [, offsetStr, ...tokens] = line.split(" ");
    const offset = parseInt(offsetStr, 10);
    tokens.forEach((t, i) => lines.push(`${t} ${offset + i}`));
  }
  writeFileSync(file, lines.join("\n") + "\n");
}

function readIds(file, nRecords) {
  const b = readFileSync(file);
  const v = new Int32Array(b.buffer, b.byteOffset, b.length / 4);
  const out = [];
  let p = 0;
  for (let i = 0; i < nRecords; ++i) {
    const n = v[p++];
    out.push(v.subarray(p, p + n));
    p += n;
  }
  return out;
}

const same = (a, b) => {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; ++i) if (a[i] !== b[i]) return false;
  return true;
};
const jsRegexDivergence = /[\u0085\uFEFF]|'\u017F/;

// One pass over the corpus: seconds, and the ids when `keep`.
function pass(texts, encode, keep) {
  const out = keep ? new Array(texts.length) : null;
  let sink = 0;
  const t0 = performance.now();
  for (let i = 0; i < texts.length; ++i) {
    const ids = encode(texts[i]);
    if (keep) out[i] = ids;
    else sink += ids.length;
  }
  const secs = (performance.now() - t0) / 1000;
  if (sink < 0) console.log(sink);  // keeps the results alive
  return { secs, ids: out };
}

function runSluice(rankFile, enc, corpus, passes, idsFile) {
  const args = ["--ranks", rankFile, "--pattern", enc, "--corpus", corpus, "--reps", String(passes)];
  if (idsFile) args.push("--ids-out", idsFile);
  const r = spawnSync(benchBin, args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${benchBin} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const corpora = corpusArgs.map((a) => {
  const eq = a.indexOf("=");
  const file = a.slice(eq + 1);
  const raw = records(readFileSync(file));
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  return {
    name: a.slice(0, eq),
    file,
    bytes: raw.reduce((s, b) => s + b.length, 0),
    texts: raw.map((b) => decoder.decode(b)),
  };
});

console.log(`tokenizer bench: node ${process.version}, @dqbd/tiktoken ${versions.dqbd}, ` +
  `js-tiktoken ${versions.js}, best of ${reps} interleaved rounds, load average ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}`);
const rows = [];
let failed = false;
for (const enc of ["o200k_base", "cl100k_base"]) {
  const data = require(`@dqbd/tiktoken/encoders/${enc}.json`);
  const jsData = require(`js-tiktoken/ranks/${enc}`);
  const rankFile = path.join(workDir, `${enc}.tiktoken`);
  exportRanks(data.bpe_ranks, rankFile);

  let t0 = performance.now();
  const dq = new dqbd.Tiktoken(data.bpe_ranks, data.special_tokens, data.pat_str);
  const dqLoad = (performance.now() - t0) / 1000;
  t0 = performance.now();
  const js = new jsTiktoken.Tiktoken(jsData);
  const jsLoad = (performance.now() - t0) / 1000;

  for (const c of corpora) {
    const idsFile = path.join(workDir, `${enc}.${c.name}.ids`);
    // Round 0: warm-up passes, whose ids are cross-checked.
    const ours = runSluice(rankFile, enc, c.file, 3, idsFile);
    if (ours.bytes !== c.bytes) throw new Error(`byte counts differ: ${ours.bytes} vs ${c.bytes}`);
    const oursIds = readIds(idsFile, c.texts.length);
    const dqFirst = pass(c.texts, (t) => dq.encode_ordinary(t), true).ids;
    const jsFirst = pass(c.texts, (t) => js.encode(t, [], []), true).ids;
    const best = { sluice: Infinity, dqbd: Infinity, js: Infinity };
    for (let r = 0; r < reps; ++r) {
      best.sluice = Math.min(best.sluice, runSluice(rankFile, enc, c.file, 3).best_s);
      best.dqbd = Math.min(best.dqbd, pass(c.texts, (t) => dq.encode_ordinary(t), false).secs);
      best.js = Math.min(best.js, pass(c.texts, (t) => js.encode(t, [], []), false).secs);
    }
    const check = { dqbd: 0, js: 0, excused: 0, dqTokens: 0, jsTokens: 0 };
    c.texts.forEach((t, i) => {
      check.dqTokens += dqFirst[i].length;
      check.jsTokens += jsFirst[i].length;
      if (!same(dqFirst[i], oursIds[i])) check.dqbd++;
      if (!same(jsFirst[i], oursIds[i])) {
        if (same(dqFirst[i], oursIds[i]) && jsRegexDivergence.test(t)) check.excused++;
        else check.js++;
      }
    });
    if (check.dqbd || check.js || check.dqTokens !== ours.tokens) failed = true;
    const mb = c.bytes / 1e6;
    rows.push({
      enc, corpus: c.name, mb, tokens: ours.tokens,
      sluice: mb / best.sluice, dqbd: mb / best.dqbd, js: mb / best.js,
      load: { sluice: ours.load_s, dqbd: dqLoad, js: jsLoad }, check,
    });
    const row = rows[rows.length - 1];
    console.log(`${enc} ${c.name}: ${mb.toFixed(2)} MB, ${ours.tokens} tokens (@dqbd ${check.dqTokens}, ` +
      `js-tiktoken ${check.jsTokens}); records differing from sluice: @dqbd ${check.dqbd}, js-tiktoken ` +
      `${check.js} (+${check.excused} excused: JS RegExp \\s / 'ſ); sluice ${row.sluice.toFixed(2)} MB/s, ` +
      `@dqbd ${row.dqbd.toFixed(2)} MB/s, js-tiktoken ${row.js.toFixed(2)} MB/s`);
  }
  dq.free();
}

console.log("");
console.log("| encoding | corpus | MB | tokens | sluice MB/s | @dqbd/tiktoken MB/s | js-tiktoken MB/s | " +
  "sluice / @dqbd | sluice / js-tiktoken | ids equal |");
console.log("|---|---|---|---|---|---|---|---|---|---|");
for (const r of rows) {
  const ok = r.check.dqbd === 0 && r.check.js === 0 && r.check.dqTokens === r.tokens;
  console.log(`| ${r.enc} | ${r.corpus} | ${r.mb.toFixed(2)} | ${r.tokens} | ${r.sluice.toFixed(2)} | ` +
    `${r.dqbd.toFixed(2)} | ${r.js.toFixed(2)} | ${(r.sluice / r.dqbd).toFixed(2)}x | ` +
    `${(r.sluice / r.js).toFixed(2)}x | ${ok ? "yes" : "NO"}${r.check.excused ? ` (js: ${r.check.excused} excused)` : ""} |`);
}
console.log("");
for (const enc of ["o200k_base", "cl100k_base"]) {
  const r = rows.find((x) => x.enc === enc);
  console.log(`load ${enc}: sluice ${r.load.sluice.toFixed(3)} s, @dqbd/tiktoken ${r.load.dqbd.toFixed(3)} s, ` +
    `js-tiktoken ${r.load.js.toFixed(3)} s (not in the rates)`);
}
console.log(`load average at the end: ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}`);
console.log(failed ? "tokenizer bench: ids DIFFER (see above)" : "tokenizer bench: ids equal");
process.exit(failed ? 1 : 0);
