// Runs every benchmark in one go (`npm run bench`): each prints its own table of medians,
// ratios against upstream and the system tools, and peak RSS, then one JSON line
// `{"rows":[…]}` (the row shape: bench/summary.mjs emitRows); this collects those lines into
// one summary table at the end: path, ours, upstream, floor, ours/upstream, ours/floor, peak RSS.
// Not part of the test run. bench/activation.mjs needs Node >= 24.11 (module.registerHooks).
// Usage: node bench/run.mjs [snapshot,tar,ignore,...] [--runs N] [--quick] [--corpora L] [--dir DIR] [--save FILE]
//   --runs N     passed on to every script (their default otherwise)
//   --quick      one run each, corpus a only where a script takes corpora (a first look)
//   --corpora L  these corpora (e.g. a,c) where a script takes corpora; a script that takes
//                one corpus at a time runs once per corpus
//   --dir D      the corpora live under D (e.g. /dev/shm/pc-bench for tmpfs figures; default
//                .bench/). Every other copy and target the scripts make (SSH and sandbox
//                targets, workspaces, the deep archive, the watched tree, the clone) goes on
//                the same kind of file system: /dev/shm when D is on tmpfs, else os.tmpdir()
//                ($BENCH_SCRATCH overrides), so one run measures one kind
//   --save F     also write the summary rows to F as JSON `{"rows":[…]}` (bench/table.mjs reads it)
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BENCH_DIR } from "./corpus.mjs";
import { fsType, summaryColumns } from "./summary.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const option = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const quick = args.includes("--quick");
const runs = option("--runs") ?? (quick ? "1" : undefined);
const dir = option("--dir");
const corpora = option("--corpora") ?? (quick ? "a" : undefined);
const save = option("--save");
const positional = args.filter(
  (a, i) => !a.startsWith("--") && !["--runs", "--dir", "--corpora", "--save"].includes(args[i - 1]),
);

/**
 * The scripts, in the order they run, and how each takes its arguments:
 *   corpora  "list": one run over the corpora (`a,c`); "each": one run per corpus; absent: none
 *   defaults the corpora when --corpora is not given (absent: the script's own)
 *   perCorpus extra arguments for one corpus
 *   place    the option that says which file system it works on (`--fs tmpfs`, `--repo disk`)
 */
const SCRIPTS = {
  snapshot: { corpora: "list" },
  "snapshot-watch": { corpora: "each", place: "--fs" },
  ignore: {},
  tar: { corpora: "list" },
  "deep-tar": { place: "--fs" },
  merge: { corpora: "list" },
  ssh: { corpora: "list" },
  sandbox: { corpora: "list" },
  "sandbox-git": { corpora: "each", place: "--repo" },
  // Upstream's own `git bundle create` of corpus a's ~300 MB of tracked files can pass its
  // 60 s deadline, so corpus a runs as a plain directory (bench/activation.mjs --no-git).
  activation: { corpora: "each", defaults: "c,a", perCorpus: (name) => (name === "a" ? ["--no-git"] : []) },
  // The shaped-link benchmark (its own network namespace: root only), with its own defaults.
  links: {},
};
const selected = positional[0] ? positional[0].split(",") : Object.keys(SCRIPTS);
const unknown = selected.filter((name) => !SCRIPTS[name]);
if (unknown.length > 0) {
  console.error(`bench/run.mjs: no script ${unknown.join(", ")} (scripts: ${Object.keys(SCRIPTS).join(", ")})`);
  process.exit(2);
}

// One kind of file system for the whole run: the corpora's.
const corporaDir = dir ? path.resolve(dir) : BENCH_DIR;
mkdirSync(corporaDir, { recursive: true });
const place = fsType(corporaDir) === "tmpfs" ? "tmpfs" : "disk";
const scratch = process.env.BENCH_SCRATCH ?? (place === "tmpfs" ? "/dev/shm" : os.tmpdir());

/** The argument lists one script runs with (several for a script that takes one corpus at a time). */
function invocations(name) {
  const spec = SCRIPTS[name];
  const common = [...(runs ? ["--runs", runs] : []), ...(spec.place ? [spec.place, place] : [])];
  const list = (corpora ?? spec.defaults)?.split(",");
  if (!spec.corpora || !list) return [common];
  if (spec.corpora === "list") return [[list.join(","), ...common]];
  return list.map((corpus) => [corpus, ...(spec.perCorpus?.(corpus) ?? []), ...common]);
}

/** Runs one script, its output passed through; resolves to { status, rows } (its last JSON rows line). */
function runScript(name, scriptArgs) {
  const argv = [path.join(here, `${name}.mjs`), ...scriptArgs];
  const env = {
    ...process.env,
    PC_BENCH_DIR: corporaDir,
    BENCH_SCRATCH: scratch,
    ...(name === "sandbox-git" ? { TMPDIR: scratch } : {}),
  };
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

const failed = [];
const summary = [];
const began = Date.now();
const seconds = (since) => `${((Date.now() - since) / 1000).toFixed(0)} s`;
for (const name of selected) {
  for (const scriptArgs of invocations(name)) {
    console.log(`\n## ${[name, ...scriptArgs].join(" ")}\n`);
    const started = Date.now();
    const { status, rows } = await runScript(name, scriptArgs);
    if (status !== 0) failed.push(`${name} (exit status ${status})`);
    summary.push(...rows);
    console.log(`\n(${name}: ${seconds(started)})`);
  }
}
console.log(
  `\n## summary (ms, medians; ${os.cpus().length} cores, load average ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")} at the end; corpora under ${corporaDir}, scratch under ${scratch}; ${seconds(began)} in all)\n`,
);
console.table(summary.map(summaryColumns));
if (failed.length > 0) console.error(`failed: ${failed.join(", ")}`);
if (save) writeFileSync(save, `${JSON.stringify({ rows: summary })}\n`);
process.exitCode = failed.length === 0 ? 0 : 1;
