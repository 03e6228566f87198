// Runs every benchmark in one go (`npm run bench`): each prints its own table of medians,
// ratios against upstream and the system tools, and peak RSS, then one JSON line
// `{"rows":[{path, ours, upstream, floor, floorIs}]}` (ms); this collects those lines into one
// summary table at the end: path, ours, upstream, floor, ours/upstream, ours/floor.
// Not part of the test run.
// Usage: node bench/run.mjs [snapshot,tar,ignore,...] [--runs N] [--quick] [--dir DIR] [--save FILE]
//   --runs N  passed on to every script (their default otherwise)
//   --quick   one run each, corpus a only where a script takes corpora (a first look)
//   --corpora L  these corpora (e.g. a,c) where a script takes corpora
//   --dir D   the corpora live under D (e.g. /dev/shm/pc-bench for tmpfs figures; default .bench/)
//   --save F  also write the summary rows to F as JSON `{"rows":[…]}` (bench/table.mjs reads it)
import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { summaryColumns } from "./summary.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const option = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const quick = args.includes("--quick");
const runs = option("--runs") ?? (quick ? "1" : undefined);
const dir = option("--dir");
const corpora = option("--corpora") ?? (quick ? "a" : undefined);
const save = option("--save");
const positional = args.filter((a, i) => !a.startsWith("--") && !["--runs", "--dir", "--corpora", "--save"].includes(args[i - 1]));
const all = ["snapshot", "snapshot-watch", "ignore", "tar", "deep-tar", "merge", "ssh", "links"].filter((name) => existsSync(path.join(here, `${name}.mjs`)));
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

let failed = 0;
const summary = [];
for (const name of selected) {
  console.log(`\n## ${name}\n`);
  const { status, rows } = await runScript(name);
  if (status !== 0) failed += 1;
  summary.push(...rows);
}
console.log(`\n## summary (ms, medians; ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")} at the end; corpora under ${dir ?? ".bench/"})\n`);
console.table(summary.map(summaryColumns));
if (save) writeFileSync(save, `${JSON.stringify({ rows: summary })}\n`);
process.exitCode = failed === 0 ? 0 : 1;
