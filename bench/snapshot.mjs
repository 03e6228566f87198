// Snapshot benchmark: our captureDirectorySnapshot vs upstream's vs the sha256sum pipeline,
// on the corpora of bench/corpus.mjs, in one run, runs interleaved. Prints medians, ratios,
// peak RSS and the floor: max(walk floor: our walker alone, no hashing; hash floor: the
// corpus bytes over the SHA-256 throughput of every core), then the summary rows.
// Usage: node bench/snapshot.mjs [a,b,c] [--runs N] [--skip-upstream]
import { execFileSync, spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { corpus } from "./corpus.mjs";
import { emitRows, hashFloorMs, median, peakRss, walkFloor } from "./summary.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const names = (args.find((a) => !a.startsWith("--") && !/^\d+$/.test(a)) ?? "a,b,c").split(",");
const runsIndex = args.indexOf("--runs");
const runs = runsIndex >= 0 ? Number(args[runsIndex + 1]) : 3;
const skipUpstream = args.includes("--skip-upstream");

/** Runs one measurement in a fresh process (so peak RSS is its own); returns { ms, rssMb, extra }. */
function measure(kind, dir) {
  const out = spawnSync(process.execPath, [path.join(here, "snapshot-worker.mjs"), kind, dir], {
    encoding: "utf8",
    maxBuffer: 1 << 26,
  });
  if (out.status !== 0) throw new Error(`${kind} failed: ${out.stderr}`);
  return JSON.parse(out.stdout.trim().split("\n").pop());
}

function shaPipeline(dir) {
  const start = process.hrtime.bigint();
  execFileSync("bash", ["-c", `find . -type f -print0 | xargs -0 -P2 -n 500 sha256sum > /dev/null`], { cwd: dir });
  return { ms: Number(process.hrtime.bigint() - start) / 1e6 };
}

const rows = [];
const summary = [];
for (const name of names) {
  const { dir, describe } = corpus(name);
  shaPipeline(dir); // warm the page cache
  // Interleaved: each run measures every kind once, so load changes weigh on all alike.
  const ours = [];
  const incremental = name === "a" ? [] : null;
  const sha = [];
  for (let i = 0; i < runs; i += 1) {
    ours.push(measure("ours", dir));
    incremental?.push(measure("ours-incremental", dir));
    sha.push(shaPipeline(dir));
  }
  const theirs = skipUpstream ? null : [measure("upstream", dir)];
  const walk = walkFloor(dir, { runs });
  const hashMs = hashFloorMs(walk.bytes);
  const floorMs = Math.max(walk.ms, hashMs);
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
    "walk floor ms": walk.ms.toFixed(0),
    "hash floor ms": hashMs.toFixed(0),
    "ours/floor": (oursMs / floorMs).toFixed(2),
  });
  const floorIs = `max(walk ${walk.ms.toFixed(0)}, hash ${hashMs.toFixed(0)})`;
  summary.push({
    path: `snapshot cold, corpus ${name}`,
    hotPath: "Snapshot (cold)",
    case: `corpus ${name}`,
    ours: oursMs,
    upstream: theirs?.[0].ms ?? null,
    floor: floorMs,
    floorIs,
    oursRssMb: peakRss(ours),
    upstreamRssMb: theirs ? peakRss(theirs) : null,
  });
  if (incremental) {
    const incMs = median(incremental.map((r) => r.ms));
    summary.push({
      path: `snapshot incremental (previous, nothing changed), corpus ${name}`,
      hotPath: "Snapshot (incremental, nothing changed)",
      case: `corpus ${name}`,
      ours: incMs,
      upstream: null,
      floor: walk.ms,
      floorIs: "walk",
      oursRssMb: peakRss(incremental),
    });
  }
}
console.table(rows);
emitRows(summary);
