// Validates every constrained output (schema_gen's JSON lines) with ajv, a
// real JSON Schema validator: each text must parse as JSON and be valid
// under its schema. Prints a summary; exits 1 on any failure.
import Ajv from "ajv";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

const [schemaDir, outputs] = process.argv.slice(2);
const ajv = new Ajv({ strict: false, allErrors: true });
const validators = {};
for (const f of readdirSync(schemaDir).filter((f) => f.endsWith(".json")).sort())
  validators[f] = ajv.compile(JSON.parse(readFileSync(join(schemaDir, f), "utf8")));

let total = 0, bad = 0, tokens = 0, maxTokens = 0;
const perSchema = {};
for (const line of readFileSync(outputs, "utf8").split("\n")) {
  if (!line) continue;
  const r = JSON.parse(line);
  total++;
  tokens += r.tokens;
  maxTokens = Math.max(maxTokens, r.tokens);
  perSchema[r.schema] = (perSchema[r.schema] || 0) + 1;
  let why = null;
  if (!r.ended) why = "did not end";
  else {
    let v;
    try {
      v = JSON.parse(r.text);
    } catch (e) {
      why = "does not parse: " + e.message;
    }
    if (!why && !validators[r.schema](v)) why = "invalid: " + ajv.errorsText(validators[r.schema].errors);
  }
  if (why) {
    bad++;
    if (bad <= 10) console.log(`FAIL ${r.schema} seed ${r.seed}: ${why}\n  ${JSON.stringify(r.text)}`);
  }
}
const schemas = Object.keys(perSchema).length;
console.log(`ajv: ${total} outputs over ${schemas} schemas, ${total - bad} valid, ${bad} invalid; ` +
            `${(tokens / Math.max(total, 1)).toFixed(1)} tokens/output on average, ${maxTokens} at most`);
process.exit(bad === 0 && total > 0 ? 0 : 1);
