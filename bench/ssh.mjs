// SSH benchmark: ours vs upstream's syncDirectoryToSsh / syncDirectoryFromSsh on loopback,
// against a real sshd started here (key-only, strict host-key checking; the same helper as
// the tests), on the corpora of bench/corpus.mjs. Each transfer runs in its own process
// (bench/ssh-worker.mjs), which counts its child processes from /proc while it runs (ours:
// none; upstream: `tar` and `ssh`, plus `ssh` for the restore's size probe) and reports its
// peak RSS (upstream's excludes its tar and ssh children). Prints medians, MB/s of the tar
// stream, ratios, then the summary rows (bench/summary.mjs).
// Usage: node bench/ssh.mjs [a,b,c] [--runs N]
import { spawnSync } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startSshd } from "../__test__/helpers/sshd.js";
import { native } from "../lib/native.js";
import { corpus } from "./corpus.mjs";
import { emitRows, keepTrees, median, settle } from "./summary.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const names = (args.find((a) => !a.startsWith("--") && !/^\d+$/.test(a)) ?? "a,b").split(",");
const runsIndex = args.indexOf("--runs");
const runs = runsIndex >= 0 ? Number(args[runsIndex + 1]) : 3;

// The transfer targets (both sides of every transfer) live on tmpfs when there is one: on
// this VM's disk, creating and removing 100 000 files waits on the journal for seconds at
// a time, the same for both implementations, which buries the transfer itself in noise.
// BENCH_SCRATCH overrides the place.
const scratchParent = process.env.BENCH_SCRATCH ?? (isWritableDir("/dev/shm") ? "/dev/shm" : os.tmpdir());
const scratch = mkdtempSync(path.join(scratchParent, "pc-bench-ssh-"));
console.error(`scratch (remote and local targets): ${scratch}`);

function isWritableDir(dir) {
  try {
    accessSync(dir, constants.W_OK);
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}
const server = await startSshd(path.join(scratch, "sshd"));
const specFile = path.join(scratch, "spec.json");
writeFileSync(specFile, JSON.stringify(server.spec));

function measure(impl, direction, localDir, remoteDir) {
  const out = spawnSync(
    process.execPath,
    [path.join(here, "ssh-worker.mjs"), impl, direction, specFile, localDir, remoteDir],
    { encoding: "utf8", maxBuffer: 1 << 26 },
  );
  if (out.status !== 0) throw new Error(`${impl} ${direction} failed: ${out.stderr}`);
  return JSON.parse(out.stdout.trim().split("\n").pop());
}

const rows = [];
const summary = [];
try {
  for (const name of names) {
    const { dir, describe } = corpus(name);
    const tarBytes = await native.tarPrecomputeSize({
      root: dir,
      exclude: [],
      followSymlinks: false,
      dotMembers: true,
    });
    const mb = tarBytes / 1e6;
    const results = {};
    for (const direction of ["push", "pull"]) {
      // Interleaved, the order swapped every round (upstream, ours, ours, upstream, …), so
      // that a change in the machine's load during the run weighs on both alike. Off tmpfs
      // every target stays until the direction's runs are done, after an untimed warm-up
      // round (keepTrees in summary.mjs: a target removed between two runs would charge the
      // next run alone).
      const keep = keepTrees(scratch);
      const samplesOf = { upstream: [], ours: [] };
      const targets = [];
      for (let i = keep ? -1 : 0; i < runs; i += 1) {
        for (const impl of i % 2 === 0 ? ["upstream", "ours"] : ["ours", "upstream"]) {
          const target = mkdtempSync(path.join(scratch, `${impl}-${direction}-`));
          targets.push(target);
          settle(scratch);
          // push: corpus → remote target; pull: remote corpus → local target.
          const sample = direction === "push" ? measure(impl, "push", dir, target) : measure(impl, "pull", target, dir);
          if (i >= 0) samplesOf[impl].push(sample);
          if (!keep) rmSync(target, { recursive: true, force: true });
        }
      }
      if (keep) for (const target of targets) rmSync(target, { recursive: true, force: true });
      for (const impl of ["upstream", "ours"]) {
        const samples = samplesOf[impl];
        results[`${impl}-${direction}`] = {
          ms: median(samples.map((s) => s.ms)),
          rssMb: Math.max(...samples.map((s) => s.rssMb)),
          children: Math.max(...samples.map((s) => s.children)),
          childNames: [...new Set(samples.flatMap((s) => s.childNames))].join(" "),
        };
      }
      const theirs = results[`upstream-${direction}`];
      const ours = results[`ours-${direction}`];
      const call = direction === "push" ? "syncDirectoryToSsh" : "syncDirectoryFromSsh";
      summary.push({
        path: `ssh ${direction} (${call}), corpus ${name}`,
        hotPath: `SSH ${direction} (loopback)`,
        case: `corpus ${name}`,
        ours: ours.ms,
        upstream: theirs.ms,
        floor: null,
        oursRssMb: ours.rssMb,
        upstreamRssMb: theirs.rssMb,
      });
      for (const [impl, r] of [
        ["upstream", theirs],
        ["ours", ours],
      ]) {
        rows.push({
          corpus: `${name}: ${describe}`,
          transfer: `${impl} ${direction === "push" ? "syncDirectoryToSsh" : "syncDirectoryFromSsh"}`,
          ms: r.ms.toFixed(0),
          "MB/s": (mb / (r.ms / 1000)).toFixed(0),
          "throughput vs upstream": `${(theirs.ms / r.ms).toFixed(2)}x`,
          "host children": `${r.children}${r.childNames ? ` (${r.childNames})` : ""}`,
          "peak RSS MB": r.rssMb.toFixed(0),
        });
      }
    }
    console.error(`corpus ${name}: tar stream ${mb.toFixed(0)} MB`);
  }
} finally {
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}
console.table(rows);
emitRows(summary);
