// Snapshot benchmark: our captureDirectorySnapshot vs upstream's vs the sha256sum pipeline,
// on the corpora of bench/corpus.mjs, in one run. Prints medians, ratios and peak RSS.
// Usage: node bench/snapshot.mjs [a,b,c] [--runs N] [--skip-upstream]
import { execFileSync, spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { corpus } from "./corpus.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const names = (args.find((a) => !a.startsWith("--")) ?? "a,b,c").split(",");
const runsIndex = args.indexOf("--runs");
const runs = runsIndex >= 0 ? Number(args[runsIndex + 1]) : 3;
const skipUpstream = args.includes("--skip-upstream");

/** Runs one measurement in a fresh process (so peak RSS is its own); returns { ms, rssMb, extra }. */
function measure(kind, dir) {
  const out = spawnSync(process.execPath, [path.join(here, "snapshot-worker.mjs"), kind, dir], { encoding: "utf8", maxBuffer: 1 << 26 });
  if (out.status !== 0) throw new Error(`${kind} failed: ${out.stderr}`);
  return JSON.parse(out.stdout.trim().split("\n").pop());
}

function shaPipeline(dir) {
  const start = process.hrtime.bigint();
  execFileSync("bash", ["-c", `find . -type f -print0 | xargs -0 -P2 -n 500 sha256sum > /dev/null`], { cwd: dir });
  return { ms: Number(process.hrtime.bigint() - start) / 1e6 };
}

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
for (const name of names) {
  const { dir, describe } = corpus(name);
  shaPipeline(dir); // warm the page cache
  const sample = (fn) => Array.from({ length: runs }, fn);
  const ours = sample(() => measure("ours", dir));
  const incremental = name === "a" ? sample(() => measure("ours-incremental", dir)) : null;
  const theirs = skipUpstream ? null : [measure("upstream", dir)];
  const sha = sample(() => shaPipeline(dir));
  const oursMs = median(ours.map((r) => r.ms));
  rows.push({
    corpus: `${name}: ${describe}`,
    entries: ours[0].entries,
    "ours ms": oursMs.toFixed(0),
    "ours map-build ms": median(ours.map((r) => r.mapMs)).toFixed(0),
    "ours peak RSS MB": Math.max(...ours.map((r) => r.rssMb)).toFixed(0),
    "incremental ms": incremental ? median(incremental.map((r) => r.ms)).toFixed(0) : "-",
    "cold/incremental": incremental ? (oursMs / median(incremental.map((r) => r.ms))).toFixed(1) + "x" : "-",
    "upstream ms": theirs ? theirs[0].ms.toFixed(0) : "-",
    "upstream/ours": theirs ? (theirs[0].ms / oursMs).toFixed(1) + "x" : "-",
    "sha256sum -P2 ms": median(sha.map((r) => r.ms)).toFixed(0),
    "ours/sha256sum": (oursMs / median(sha.map((r) => r.ms))).toFixed(2),
    "ours GB/s": (ours[0].bytes / 1e9 / (oursMs / 1000)).toFixed(2),
  });
}
console.table(rows);
