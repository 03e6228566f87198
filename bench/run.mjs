// Runs every benchmark in one go (`npm run bench`): each prints its own table of medians,
// ratios against upstream and the system tools, and peak RSS, then one JSON line
// `{"rows":[{path, ours, upstream, floor, floorIs}]}` (ms); this collects those lines into one
// summary table at the end: path, ours, upstream, floor, ours/upstream, ours/floor.
// Not part of the test run.
// Usage: node bench/run.mjs [snapshot,tar,ignore,...] [--runs N] [--quick] [--dir DIR]
//   --runs N  passed on to every script (their default otherwise)
//   --quick   one run each, corpus a only where a script takes corpora (a first look)
//   --corpora L  these corpora (e.g. a,c) where a script takes corpora
//   --dir D   the corpora live under D (e.g. /dev/shm/pc-bench for tmpfs figures; default .bench/)
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const option = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const quick = args.includes("--quick");
const runs = option("--runs") ?? (quick ? "1" : undefined);
const dir = option("--dir");
const corpora = option("--corpora") ?? (quick ? "a" : undefined);
const positional = args.filter((a, i) => !a.startsWith("--") && !["--runs", "--dir", "--corpora"].includes(args[i - 1]));
const all = ["snapshot", "snapshot-watch", "ignore", "tar", "deep-tar", "merge", "ssh"].filter((name) => existsSync(path.join(here, `${name}.mjs`)));
const selected = positional[0] ? positional[0].split(",") : all;
const CORPUS_SCRIPTS = new Set(["snapshot", "tar", "merge", "ssh"]);

/** Runs one script, its output passed through; resolves to { status, rows } (its last JSON rows line). */
function runScript(name) {
  const argv = [path.join(here, `${name}.mjs`)];
  if (corpora && CORPUS_SCRIPTS.has(name)) argv.push(corpora);
  if (runs) argv.push("--runs", runs);
  const env = dir ? { ...process.env, PC_BENCH_DIR: path.resolve(dir) } : process.env;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, argv, { stdio: ["ignore", "pipe", "inherit"], env });
    let rows = [];
    let pending = "";
    child.stdout.on("data", (data) => {
      process.stdout.write(data);
      pending += data;
      const lines = pending.split("\n");
      pending = lines.pop();
      for (const line of lines) if (line.startsWith('{"rows":')) rows = JSON.parse(line).rows;
    });
    child.on("close", (status) => {
      if (pending.startsWith('{"rows":')) rows = JSON.parse(pending).rows;
      resolve({ status, rows });
    });
  });
}

const fmt = (ms) => (ms == null ? "-" : ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));
let failed = 0;
const summary = [];
for (const name of selected) {
  console.log(`\n## ${name}\n`);
  const { status, rows } = await runScript(name);
  if (status !== 0) failed += 1;
  summary.push(...rows);
}
console.log(`\n## summary (ms, medians; ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")} at the end; corpora under ${dir ?? ".bench/"})\n`);
console.table(
  summary.map((r) => ({
    path: r.path,
    ours: fmt(r.ours),
    upstream: fmt(r.upstream),
    floor: r.floor == null ? "-" : `${fmt(r.floor)} (${r.floorIs})`,
    "ours/upstream": r.upstream == null ? "-" : `${(r.ours / r.upstream).toFixed(3)} (${(r.upstream / r.ours).toFixed(1)}x faster)`,
    "ours/floor": r.floor == null ? "-" : `${(r.ours / r.floor).toFixed(2)}`,
    // A row measured against another of our own paths (the watched re-snapshot against a
    // cold native capture) names it.
    "vs baseline": r.baselineMs == null ? "-" : `${(r.baselineMs / r.ours).toFixed(1)}x faster than ${r.baseline} (${fmt(r.baselineMs)})`,
  })),
);
process.exitCode = failed === 0 ? 0 : 1;
