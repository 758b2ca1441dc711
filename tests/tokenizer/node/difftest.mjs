// Differential test: sluice (tok_dump) against two real tiktoken
// implementations, @dqbd/tiktoken (tiktoken's Rust core compiled to WASM)
// and js-tiktoken (pure JavaScript), for o200k_base and cl100k_base, on
// every record of the corpus, in content mode and in markup mode.
//
// The packages ship their ranks offline (as a compressed JSON string); they
// are exported here to tiktoken's text rank-file format and loaded by sluice
// exactly as a container's tokenizer.model would be.
//
// Invalid UTF-8: both packages take JavaScript strings, so each record's
// bytes are decoded with TextDecoder (fatal: false, ignoreBOM: true), which
// substitutes U+FFFD by the maximal-subpart rule, as sluice does.
//
// Usage: node difftest.mjs TOK_DUMP WORKDIR CORPUS
// Exit: 0 all equal, 1 a mismatch, 77 a package cannot be loaded.
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);
const [tokDump, workDir, corpusPath] = process.argv.slice(2);
mkdirSync(workDir, { recursive: true });

let dqbd, jsTiktoken;
try {
  dqbd = require("@dqbd/tiktoken");
  jsTiktoken = require("js-tiktoken");
} catch (e) {
  console.log(`difftest: SKIP: npm packages missing (${e.message.split("\n")[0]}); run npm ci in tests/tokenizer/node`);
  process.exit(77);
}

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

// js-tiktoken's compressed rank format: lines "<tag> <first rank> tok tok ...".
function exportRanks(bpeRanks, file) {
  const lines = [];
  for (const line of bpeRanks.split("\n")) {
    if (!line) continue;
    const [, offsetStr, ...tokens] = line.split(" ");
    const offset = parseInt(offsetStr, 10);
    tokens.forEach((t, i) => lines.push(`${t} ${offset + i}`));
  }
  writeFileSync(file, lines.join("\n") + "\n");
  return lines.length;
}

function runTokDump(args, input) {
  const r = spawnSync(tokDump, args, { input, maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`tok_dump ${args.join(" ")} failed: ${r.stderr}`);
  return r.stdout.toString("utf8").split("\n");
}

const corpus = readFileSync(corpusPath);
const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const texts = records(corpus).map((b) => decoder.decode(b));
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
// Where js-tiktoken departs from tiktoken itself: it runs pat_str as a
// JavaScript RegExp, whose \s includes U+FEFF but not U+0085 (Unicode's
// White_Space, used by tiktoken's Rust regex, is the reverse), and it spells
// (?i:'s|...) as explicit ASCII cases, so "'ſ" (U+017F, which case-folds to
// s) is no contraction. sluice follows tiktoken. A line on which the two
// references disagree is excused for js-tiktoken only if it holds one of
// these characters and sluice equals @dqbd/tiktoken there.
const jsRegexDivergence = /[\u0085\uFEFF]|'\u017F/;
let failed = false;
const summary = [];

for (const name of ["o200k_base", "cl100k_base"]) {
  const data = require(`@dqbd/tiktoken/encoders/${name}.json`);
  const jsData = (await import(`js-tiktoken/ranks/${name}`)).default;
  if (jsData.bpe_ranks !== data.bpe_ranks) {
    console.log(`difftest: ${name}: the two packages ship different ranks`);
    failed = true;
  }
  const rankFile = path.join(workDir, `${name}.tiktoken`);
  const specialsFile = path.join(workDir, `${name}.specials.json`);
  const nRanks = exportRanks(data.bpe_ranks, rankFile);
  writeFileSync(specialsFile, JSON.stringify(
    Object.entries(data.special_tokens).map(([text, id]) => ({ id, text })).sort((a, b) => a.id - b.id), null, 1));

  // The pattern sluice implements must be the one tiktoken ships.
  const ourRegex = runTokDump(["--mode", "regex", "--pattern", name], "")[0];
  if (ourRegex !== data.pat_str) {
    console.log(`difftest: ${name}: sluice's regex differs from pat_str:\n  ${ourRegex}\n  ${data.pat_str}`);
    failed = true;
  }

  const dq = new dqbd.Tiktoken(data.bpe_ranks, data.special_tokens, data.pat_str);
  const js = new jsTiktoken.Tiktoken(jsData);
  for (const mode of ["encode", "markup"]) {
    const args = ["--mode", mode, "--records", "--pattern", name, "--ranks", rankFile, "--specials", specialsFile];
    const ours = runTokDump(args, corpus).map((l) => (l ? l.split(" ").map(Number) : []));
    const stats = { tokens: 0, dqbd: 0, js: 0, refsDisagree: 0, excused: 0 };
    const shown = { dqbd: 0, js: 0 };
    texts.forEach((t, i) => {
      const a = Array.from(mode === "encode" ? dq.encode_ordinary(t) : dq.encode(t, "all"));
      const b = mode === "encode" ? js.encode(t, [], []) : js.encode(t, "all");
      const s = ours[i];
      stats.tokens += a.length;
      const refsAgree = same(a, b);
      if (!refsAgree) stats.refsDisagree++;
      for (const [label, ref] of [["dqbd", a], ["js", b]]) {
        if (same(s, ref)) continue;
        if (label === "js" && !refsAgree && same(s, a) && jsRegexDivergence.test(t)) {
          stats.excused++;
          continue;
        }
        stats[label]++;
        if (shown[label]++ < 3) {
          console.log(`  ${name} ${mode} record ${i} vs ${label}: ${JSON.stringify(t.slice(0, 100))}`);
          console.log(`    ref   : ${ref.slice(0, 40).join(" ")}`);
          console.log(`    sluice: ${s.slice(0, 40).join(" ")}`);
        }
      }
    });
    const line = `difftest: ${name} ${mode}: ${texts.length} lines, ${stats.tokens} tokens, ` +
      `mismatches vs @dqbd/tiktoken ${stats.dqbd}, vs js-tiktoken ${stats.js}` +
      (stats.refsDisagree ? `; the references disagree on ${stats.refsDisagree} lines, ${stats.excused} of them ` +
        `explained by js-tiktoken's JavaScript regex (U+0085, U+FEFF, 'ſ), where sluice equals @dqbd/tiktoken` : "");
    console.log(line);
    summary.push(line);
    if (stats.dqbd || stats.js) failed = true;
  }
  dq.free();
  console.log(`difftest: ${name}: ${nRanks} ranks exported to ${rankFile}`);
}
console.log(failed ? "difftest: FAIL" : "difftest: PASS");
process.exit(failed ? 1 : 0);
