// Tar benchmark: our pack (streamed, and into a file) vs the system tar (`tar -cf - | cat >
// /dev/null`, upstream's arguments) vs upstream's createTarballFromDirectory; then gzip level 1:
// our stream (the pack and its compression run on one thread) vs `tar -cf - | gzip -1` (GNU
// gzip), on the corpora of bench/corpus.mjs (b is random data, d compressible text). Each
// measurement runs in its own process (bench/tar-worker.mjs) so peak RSS is its own. Prints
// medians, MB/s of the uncompressed tar stream, ratios, CPU time and peak RSS.
// Usage: node bench/tar.mjs [a,b,d] [--runs N] [--skip-upstream] [--gzip-only]
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { corpus } from "./corpus.mjs";
import { emitRows, median } from "./summary.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const names = (args.find((a) => !a.startsWith("--") && !/^\d+$/.test(a)) ?? "a,b,d").split(",");
const runsIndex = args.indexOf("--runs");
const runs = runsIndex >= 0 ? Number(args[runsIndex + 1]) : 3;
const skipUpstream = args.includes("--skip-upstream");
const gzipOnly = args.includes("--gzip-only");

function measure(kind, dir) {
  const out = spawnSync(process.execPath, [path.join(here, "tar-worker.mjs"), kind, dir], {
    encoding: "utf8",
    maxBuffer: 1 << 26,
  });
  if (out.status !== 0) throw new Error(`${kind} failed: ${out.stderr}`);
  return JSON.parse(out.stdout.trim().split("\n").pop());
}

const rows = [];
const summary = [];
const gzipRows = [];
for (const name of names) {
  const { dir, describe } = corpus(name);
  measure("system", dir); // warm the page cache
  const sample = (kind, n = runs) => {
    const results = Array.from({ length: n }, () => measure(kind, dir));
    return {
      ms: median(results.map((r) => r.ms)),
      cpuMs: median(results.map((r) => r.cpuMs)),
      rssMb: Math.max(...results.map((r) => r.rssMb)),
      result: results[0],
    };
  };
  const oursGz = sample("ours-stream-gz1");
  const tarMb = oursGz.result.tarBytes / 1e6;
  const mbps = (s) => tarMb / (s.ms / 1000);
  if (!gzipOnly) {
    const row = (label, sampleResult, baseline) => ({
      corpus: `${name}: ${describe}`,
      measurement: label,
      ms: sampleResult ? sampleResult.ms.toFixed(0) : "-",
      "MB/s": sampleResult ? mbps(sampleResult).toFixed(0) : "-",
      "vs ours": sampleResult && baseline ? `${(sampleResult.ms / baseline.ms).toFixed(2)}x` : "-",
      "peak RSS MB": sampleResult ? sampleResult.rssMb.toFixed(0) : "-",
    });
    // Interleaved: one run of each kind per round, so load changes weigh on all alike.
    const kinds = ["ours-stream", "system", "ours-file", ...(skipUpstream ? [] : ["upstream-file"])];
    const results = Object.fromEntries(kinds.map((kind) => [kind, []]));
    for (let i = 0; i < runs; i += 1) {
      for (const kind of kinds) if (kind !== "upstream-file" || i < 2) results[kind].push(measure(kind, dir));
    }
    const summarize = (kind) =>
      results[kind] && {
        ms: median(results[kind].map((r) => r.ms)),
        cpuMs: median(results[kind].map((r) => r.cpuMs)),
        rssMb: Math.max(...results[kind].map((r) => r.rssMb)),
        result: results[kind][0],
      };
    const [oursStream, system, oursFile, upstreamFile] = kinds.map(summarize).concat([undefined]);
    rows.push(row("ours: stream, 1 MiB chunks", oursStream, oursStream));
    rows.push(row("system: tar -cf - | cat", system, oursStream));
    rows.push(row("ours: createTarballFromDirectory", oursFile, oursFile));
    rows.push(row("upstream: createTarballFromDirectory", skipUpstream ? null : upstreamFile, oursFile));
    const tool = { floor: system.ms, floorIs: "tar -cf - | cat", floorTool: true };
    summary.push({
      path: `tar pack (stream), corpus ${name}`,
      hotPath: "Tar pack (stream)",
      case: `corpus ${name}`,
      ours: oursStream.ms,
      upstream: null,
      ...tool,
      oursRssMb: oursStream.rssMb,
    });
    summary.push({
      path: `tar pack (file), corpus ${name}`,
      hotPath: "Tar pack (file)",
      case: `corpus ${name}`,
      ours: oursFile.ms,
      upstream: upstreamFile?.ms ?? null,
      ...tool,
      oursRssMb: oursFile.rssMb,
      upstreamRssMb: upstreamFile?.rssMb ?? null,
    });
  }
  const gnuGz = sample("system-gz1", Math.min(runs, 2));
  const gzipRow = (label, s) => ({
    corpus: `${name}: ${describe}`,
    "gzip -1": label,
    s: (s.ms / 1000).toFixed(2),
    "MB/s": mbps(s).toFixed(0),
    "CPU s": (s.cpuMs / 1000).toFixed(2),
    "gz MB": (s.result.outBytes / 1e6).toFixed(0),
    "gz/tar": (s.result.outBytes / oursGz.result.tarBytes).toFixed(3),
    "peak RSS MB": s.rssMb.toFixed(0),
  });
  gzipRows.push({
    ...gzipRow("ours: stream, pack + gzip on 1 thread", oursGz),
    "speed vs GNU": `${(gnuGz.ms / oursGz.ms).toFixed(2)}x`,
  });
  gzipRows.push({ ...gzipRow("tar -cf - | gzip -1 (GNU)", gnuGz), "speed vs GNU": "1.00x" });
  summary.push({
    path: `tar pack + gzip -1 (stream), corpus ${name}`,
    hotPath: "Tar pack + gzip -1 (stream)",
    case: `corpus ${name}`,
    ours: oursGz.ms,
    upstream: null,
    floor: gnuGz.ms,
    floorIs: "tar -cf - | gzip -1 (GNU)",
    floorTool: true,
    oursRssMb: oursGz.rssMb,
  });
  console.error(`corpus ${name}: uncompressed tar ${tarMb.toFixed(0)} MB`);
}
if (rows.length > 0) console.table(rows);
console.log("gzip level 1 (MB/s of the uncompressed tar stream; CPU s: all threads / processes):");
console.table(gzipRows);
emitRows(summary);
