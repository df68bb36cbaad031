// The reference implementation's checksum algorithm, written from its description: parse
// the model's argument text with `JSON.parse` (empty text meaning `{}`), write
// `{"args": args, "tool": tool}` with a recursive stable stringify whose object keys are
// in JavaScript's default sort order (UTF-16 code units), and hash the text with SHA-256
// through `node:crypto`, as lowercase hex.
//
// A peer of `runtime/benches/checksum.rs`, which starts it and drives it over stdin:
//
//   node bench/peers/reference.mjs TOOL NAME=FILE...
//
// It prints `checksum NAME HEX` for each fixture, then `ready`; then, for each line
// `NAME ITERATIONS` it reads, it computes that fixture's checksum ITERATIONS times and
// prints the nanoseconds they took. It stops at the end of its input.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

function stableStringify(value) {
  if (value === null || typeof value !== "object") {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return "[" + value.map(stableStringify).join(",") + "]";
  }
  const keys = Object.keys(value).sort();
  return (
    "{" +
    keys.map((key) => JSON.stringify(key) + ":" + stableStringify(value[key])).join(",") +
    "}"
  );
}

function checksum(tool, argsJson) {
  const args = argsJson === "" ? {} : JSON.parse(argsJson);
  const canonical = stableStringify({ args, tool });
  return createHash("sha256").update(canonical).digest("hex");
}

const [tool, ...specs] = process.argv.slice(2);
if (tool === undefined || specs.length === 0) {
  console.error("usage: node reference.mjs TOOL NAME=FILE...");
  process.exit(2);
}
const fixtures = new Map();
for (const spec of specs) {
  const at = spec.indexOf("=");
  const name = spec.slice(0, at);
  const text = readFileSync(spec.slice(at + 1), "utf8");
  fixtures.set(name, text);
  console.log(`checksum ${name} ${checksum(tool, text)}`);
}
console.log("ready");

let sink = 0;
for await (const line of createInterface({ input: process.stdin })) {
  const [name, count] = line.trim().split(/\s+/);
  const text = fixtures.get(name);
  const iterations = Number(count);
  if (text === undefined || !Number.isInteger(iterations) || iterations < 1) {
    console.error(`reference.mjs: bad request ${JSON.stringify(line)}`);
    process.exit(2);
  }
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) {
    sink ^= checksum(tool, text).charCodeAt(0);
  }
  const elapsed = process.hrtime.bigint() - start;
  console.log(String(elapsed));
}
process.exitCode = sink === -1 ? 1 : 0;
