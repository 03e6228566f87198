// Restore-merge benchmark: our mergeDirectoryWithBaseline vs upstream's on a workspace
// where the remote changed 1% of the files, deleted 0.5% and added 0.5% (corpus a:
// ~100 000 files, target ratio 20x; corpus c: 5 000 files, target 10x). Each measurement
// runs in its own process on a fresh copy of the host workspace; the results of both
// implementations are checked equal (snapshot digest of the merged trees). The floor: what any
// merge must do at least, as the baseline holds only digests: walk and hash the remote result
// (max(walk floor, hash floor) of it) and walk the host tree (its walk floor).
// Usage: node bench/merge.mjs [a,c] [--runs N] [--upstream-runs N]
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BENCH_DIR, corpus } from "./corpus.mjs";
import { emitRows, hashFloorMs, median, peakRss, walkFloor } from "./summary.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const names = (args.find((a) => !a.startsWith("--") && !/^\d+$/.test(a)) ?? "a,c").split(",");
const flag = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const runs = flag("--runs", 3);
const upstreamRuns = flag("--upstream-runs", 1);
const TARGETS = { a: 25, c: 10 };

const remove = (dir) => execFileSync("rm", ["-rf", dir]);
const copy = (from, to) => {
  remove(to);
  execFileSync("cp", ["-a", "--reflink=auto", from, to]);
};

function listFiles(root, relative = "", out = []) {
  for (const entry of readdirSync(path.join(root, relative), { withFileTypes: true })) {
    const rel = relative ? `${relative}/${entry.name}` : entry.name;
    if (entry.isDirectory()) listFiles(root, rel, out);
    else if (entry.isFile()) out.push(rel);
  }
  return out;
}

/** The remote result: the corpus with 1% of files modified, 0.5% deleted, 0.5% added. */
function makeRemote(base, remote) {
  copy(base, remote);
  const files = listFiles(remote).sort();
  let seed = 12345;
  const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296;
  const pick = () => files.splice(Math.floor(next() * files.length), 1)[0];
  const count = (share) => Math.round(files.length * share);
  const [modify, remove, add] = [count(0.01), count(0.005), count(0.005)];
  for (let i = 0; i < modify; i += 1)
    writeFileSync(path.join(remote, pick()), `remote change ${i}\n`.repeat(1 + (i % 50)));
  for (let i = 0; i < remove; i += 1) unlinkSync(path.join(remote, pick()));
  for (let i = 0; i < add; i += 1) {
    const dir = path.dirname(path.join(remote, files[Math.floor(next() * files.length)]));
    writeFileSync(path.join(dir, `added-${i}.ts`), `export const added = ${i};\n`);
  }
  return { modify, remove, add };
}

/** One timed merge in a fresh process: { ms, rssMb }. */
function measure(kind, work) {
  const target = path.join(work, `target-${kind}`);
  copy(path.join(work, "host"), target);
  execFileSync("sync"); // no writeback of the fresh copy competing with the measurement
  const out = spawnSync(
    process.execPath,
    [
      path.join(here, "merge-worker.mjs"),
      kind,
      path.join(work, "baseline.json"),
      path.join(work, "remote"),
      target,
      path.join(work, "home"),
    ],
    { encoding: "utf8", maxBuffer: 1 << 26 },
  );
  if (out.status !== 0) throw new Error(`${kind} failed: ${out.stderr}`);
  return { ...JSON.parse(out.stdout.trim().split("\n").pop()), target };
}

const rows = [];
const summary = [];
for (const name of names) {
  const { dir, describe } = corpus(name);
  const work = path.join(BENCH_DIR, `merge-${name}`);
  mkdirSync(work, { recursive: true });
  if (!existsSync(path.join(work, "ready"))) {
    console.error(`preparing merge-${name} (host copy, remote result, baseline) …`);
    copy(dir, path.join(work, "host"));
    const changes = makeRemote(dir, path.join(work, "remote"));
    execFileSync(process.execPath, [
      path.join(here, "merge-worker.mjs"),
      "baseline",
      path.join(work, "baseline.json"),
      "",
      path.join(work, "host"),
      "",
    ]);
    writeFileSync(path.join(work, "ready"), JSON.stringify(changes));
  }
  // Interleaved: the upstream runs alternate with the first of ours.
  const mine = [];
  const theirs = [];
  for (let i = 0; i < Math.max(runs, upstreamRuns); i += 1) {
    if (i < runs) mine.push(measure("ours", work));
    if (i < upstreamRuns) theirs.push(measure("upstream", work));
  }
  const remoteWalk = walkFloor(path.join(work, "remote"), { runs });
  const hostWalk = walkFloor(path.join(work, "host"), { runs });
  const floorMs = Math.max(remoteWalk.ms, hashFloorMs(remoteWalk.bytes)) + hostWalk.ms;
  // Same result: the digests of both merged trees must agree.
  const digest = (target) =>
    execFileSync(process.execPath, [path.join(here, "merge-worker.mjs"), "digest", "", "", target, ""], {
      encoding: "utf8",
    }).trim();
  const same = digest(mine[0].target) === digest(theirs[0].target);
  for (const r of [...mine, ...theirs]) remove(r.target);
  const oursMs = median(mine.map((r) => r.ms));
  const upMs = median(theirs.map((r) => r.ms));
  rows.push({
    corpus: `${name}: ${describe}`,
    "remote changes": readFileSync(path.join(work, "ready"), "utf8"),
    "ours ms (median)": oursMs.toFixed(0),
    "ours peak RSS MB": Math.max(...mine.map((r) => r.rssMb)).toFixed(0),
    "upstream ms": upMs.toFixed(0),
    "upstream peak RSS MB": Math.max(...theirs.map((r) => r.rssMb)).toFixed(0),
    "upstream/ours": `${(upMs / oursMs).toFixed(1)}x (target ${TARGETS[name] ?? "-"}x)`,
    "same result": same,
    "floor ms": floorMs.toFixed(0),
    "ours/floor": (oursMs / floorMs).toFixed(2),
  });
  const floorIs = `remote max(walk ${remoteWalk.ms.toFixed(0)}, hash ${hashFloorMs(remoteWalk.bytes).toFixed(0)}) + host walk ${hostWalk.ms.toFixed(0)}`;
  summary.push({
    path: `merge ${remoteWalk.files} files (1% changed), corpus ${name}`,
    hotPath: "Restore merge (1 % changed)",
    case: `corpus ${name}`,
    ours: oursMs,
    upstream: upMs,
    floor: floorMs,
    floorIs,
    oursRssMb: peakRss(mine),
    upstreamRssMb: peakRss(theirs),
  });
}
console.table(rows);
emitRows(summary);
if (rows.some((r) => !r["same result"])) process.exitCode = 1;
