// Tar benchmark: our pack (streamed, and into a file) vs the system tar (`tar -cf - | cat >
// /dev/null`, upstream's arguments) vs upstream's createTarballFromDirectory, plain and gzip
// level 1, on the corpora of bench/corpus.mjs. Each measurement runs in its own process
// (bench/tar-worker.mjs) so peak RSS is its own. Prints medians, MB/s of the uncompressed
// tar stream, ratios and peak RSS.
// Usage: node bench/tar.mjs [a,b,c] [--runs N] [--skip-upstream]
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { corpus } from "./corpus.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const names = (args.find((a) => !a.startsWith("--")) ?? "a,b").split(",");
const runsIndex = args.indexOf("--runs");
const runs = runsIndex >= 0 ? Number(args[runsIndex + 1]) : 3;
const skipUpstream = args.includes("--skip-upstream");

function measure(kind, dir) {
  const out = spawnSync(process.execPath, [path.join(here, "tar-worker.mjs"), kind, dir], { encoding: "utf8", maxBuffer: 1 << 26 });
  if (out.status !== 0) throw new Error(`${kind} failed: ${out.stderr}`);
  return JSON.parse(out.stdout.trim().split("\n").pop());
}

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
for (const name of names) {
  const { dir, describe } = corpus(name);
  measure("system", dir); // warm the page cache
  const sample = (kind, n = runs) => {
    const results = Array.from({ length: n }, () => measure(kind, dir));
    return { ms: median(results.map((r) => r.ms)), rssMb: Math.max(...results.map((r) => r.rssMb)), result: results[0] };
  };
  const oursStream = sample("ours-stream");
  const tarMb = oursStream.result.tarBytes / 1e6;
  const row = (label, sampleResult, baseline, extra = {}) => ({
    corpus: `${name}: ${describe}`,
    measurement: label,
    ms: sampleResult ? sampleResult.ms.toFixed(0) : "-",
    "MB/s": sampleResult ? (tarMb / (sampleResult.ms / 1000)).toFixed(0) : "-",
    "vs ours": sampleResult && baseline ? `${(sampleResult.ms / baseline.ms).toFixed(2)}x` : "-",
    "peak RSS MB": sampleResult ? sampleResult.rssMb.toFixed(0) : "-",
    ...extra,
  });
  const system = sample("system");
  rows.push(row("ours: stream, 1 MiB chunks", oursStream, oursStream));
  rows.push(row("system: tar -cf - | cat", system, oursStream));
  const oursFile = sample("ours-file");
  rows.push(row("ours: createTarballFromDirectory", oursFile, oursFile));
  rows.push(row("upstream: createTarballFromDirectory", skipUpstream ? null : sample("upstream-file", Math.min(runs, 2)), oursFile));
  const oursGz = sample("ours-stream-gz1");
  rows.push(row("ours: stream, gzip -1", oursGz, oursGz, { "gz MB": (oursGz.result.outBytes / 1e6).toFixed(0) }));
  const systemGz = sample("system-gz1", Math.min(runs, 2));
  rows.push(row("system: tar -cf - | gzip -1 | cat", systemGz, oursGz, { "gz MB": (systemGz.result.outBytes / 1e6).toFixed(0) }));
  console.error(`corpus ${name}: uncompressed tar ${tarMb.toFixed(0)} MB`);
}
console.table(rows);
