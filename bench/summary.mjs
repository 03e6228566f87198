// Shared by the bench scripts: the summary rows each prints as its last line (collected by
// bench/run.mjs into one table) and the floor probes of crates/core/examples/bench_floor.rs.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const FLOOR_BIN = path.join(repo, "target", "release", "examples", "bench_floor");

export const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The file system type of `dir` (`tmpfs`, `ext2/ext3`, …), or null when it cannot be told. */
export function fsType(dir) {
  try {
    return execFileSync("stat", ["-f", "-c", "%T", dir], { encoding: "utf8" }).trim();
  } catch {
    return null;
  }
}

/**
 * Whether the scripts whose runs create many files keep every tree a series made until the
 * series ends, after an untimed warm-up round (true unless `dir` is on tmpfs, where removing
 * them at once keeps memory bounded and costs the next run nothing). On ext4 without a
 * journal (this VM's disk) the kernel does not hand out an inode removed less than 60 s ago
 * (6 minutes while its inode table block is not written back) while another is free, and to
 * tell, every file it creates walks the block group's inode bitmap past each such inode
 * (`perf`: `find_inode_bit` → `recently_deleted`, most of the creating process's time); when
 * it finds no other, it reuses the last one. So the first tree made a second or more after a
 * removal pays per removed inode for every entry it creates, and the trees after it do not:
 * a tree removed between two runs charges the next one alone, and the warm-up round takes
 * what earlier removals left. See docs/benchmarks.md, "Why each path sits where it does".
 */
export function keepTrees(dir) {
  return fsType(dir) !== "tmpfs";
}

/**
 * Before a measured run that writes into `dir`: writes back what is dirty on its file
 * system (`sync -f`), so the run does not pay for the previous run's writeback.
 */
export function settle(dir) {
  execFileSync("sync", ["-f", dir]);
}

/**
 * Prints the script's summary rows as one JSON line `{"rows":[…]}` (bench/run.mjs collects
 * them). A row, times in ms (medians), peak RSS in MB of 2^20 bytes:
 *   path         the row's label in the tables of docs/benchmarks.md
 *   hotPath      the hot path it measures (one README "Speed" line gathers its rows)
 *   case         what this row measured of it (the corpus, the mode), for the README line
 *   ours         our median
 *   upstream     upstream's median on the same input, or null (none, or it failed)
 *   upstreamFails  instead of `upstream`: what upstream's run failed with (an error code)
 *   floor, floorIs  the floor or system-tool figure and what it is, or null
 *   floorTool    true when the floor is a system tool's time (a comparison, not a bound)
 *   baseline, baselineMs  another of our own paths this row is measured against
 *   oursRssMb, upstreamRssMb  peak RSS of the measuring process, where it has its own
 */
export function emitRows(rows) {
  console.log(JSON.stringify({ rows }));
}

const fmt = (ms) => (ms == null ? "-" : ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));
const mb = (value) => (value == null ? "-" : value.toFixed(0));

/** `2.5x faster` or `1.4x slower`: how ours compares with `theirs`. */
const faster = (theirs, ours) =>
  theirs >= ours ? `${(theirs / ours).toFixed(1)}x faster` : `${(ours / theirs).toFixed(1)}x slower`;

/** Upstream's median, or what its run failed with. */
const upstreamCell = (r) =>
  r.upstream != null ? fmt(r.upstream) : r.upstreamFails ? `fails (${r.upstreamFails})` : "-";

/**
 * One summary row as the columns of the summary table (the console table of bench/run.mjs
 * and the tables bench/table.mjs writes into docs/benchmarks.md): path, ours, upstream,
 * floor, ours/upstream, ours/floor, vs baseline, peak RSS.
 */
export function summaryColumns(r) {
  return {
    path: r.path,
    ours: fmt(r.ours),
    upstream: upstreamCell(r),
    floor: r.floor == null ? "-" : `${fmt(r.floor)} (${r.floorIs})`,
    "ours/upstream": r.upstream == null ? "-" : `${(r.ours / r.upstream).toFixed(3)} (${faster(r.upstream, r.ours)})`,
    "ours/floor": r.floor == null ? "-" : `${(r.ours / r.floor).toFixed(2)}`,
    // A row measured against another of our own paths (the watched re-snapshot against a
    // cold native capture) names it.
    "vs baseline":
      r.baselineMs == null ? "-" : `${faster(r.baselineMs, r.ours)} than ${r.baseline} (${fmt(r.baselineMs)})`,
    "peak RSS MB ours / upstream":
      r.oursRssMb == null && r.upstreamRssMb == null ? "-" : `${mb(r.oursRssMb)} / ${mb(r.upstreamRssMb)}`,
  };
}

/** The largest peak RSS of `samples` (each with `rssMb`), or null when none has one. */
export const peakRss = (samples) => {
  const values = samples.map((s) => s?.rssMb).filter((v) => typeof v === "number");
  return values.length > 0 ? Math.max(...values) : null;
};

/**
 * The error code a failed run's message names (`ERR_FS_FILE_TOO_LARGE`, `ENOSPC`, …), or
 * "error" when it names none: what a row's `upstreamFails` says.
 */
export const failureCode = (message) => /\b(ERR_[A-Z0-9_]+|E[A-Z]{3,})\b/.exec(String(message ?? ""))?.[1] ?? "error";

let built = false;
/** Runs the floor probe binary (built on first use, release, no default features). */
function floorTool(args) {
  if (!built) {
    execFileSync(
      "cargo",
      [
        "build",
        "--quiet",
        "--release",
        "-p",
        "paperclip-sync-core",
        "--no-default-features",
        "--example",
        "bench_floor",
      ],
      { cwd: repo, stdio: ["ignore", "inherit", "inherit"] },
    );
    built = existsSync(FLOOR_BIN);
  }
  return JSON.parse(execFileSync(FLOOR_BIN, args, { encoding: "utf8" }).trim().split("\n").pop());
}

/**
 * The walk floor of `dir`: our own walker alone (open, getdents, lstat; no hashing), median
 * of `runs`, on every core. `skip`: relative paths left out with everything below them.
 * Returns { ms, entries, files, bytes }.
 */
export function walkFloor(dir, { runs = 3, skip = [] } = {}) {
  const args = ["walk", dir, "--runs", String(runs)];
  let tmp;
  if (skip.length > 0) {
    tmp = mkdtempSync(path.join(os.tmpdir(), "pc-bench-skip-"));
    writeFileSync(path.join(tmp, "skip"), skip.join("\n"));
    args.push("--skip-file", path.join(tmp, "skip"));
  }
  try {
    return floorTool(args);
  } finally {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
}

let shaRate;
/** Measured SHA-256 throughput on every core at once (MB/s, 10^6 bytes), measured once. */
export function sha256MBps() {
  shaRate ??= floorTool(["sha", "--runs", "3"]).mbps;
  return shaRate;
}

/** The hash floor of `bytes`: the time every core needs to SHA-256 them from memory (ms). */
export const hashFloorMs = (bytes) => (bytes / 1e6 / sha256MBps()) * 1000;
