// Activation benchmark: upstream's own, unmodified `prepareAdapterExecutionTargetRuntime`
// + `restoreWorkspace()` for an SSH target (a real sshd on loopback, the tests' helper), on
// a git workspace made from a corpus of bench/corpus.mjs (default a: 100 000 files;
// `node_modules/` ignored), with and without
// `--import @paperclipai/adapter-utils-native/register`, interleaved run by run. Each run is
// a fresh process (scripts/harness/execution-target-probe.mjs) on a fresh copy of the workspace: it
// stages, lets an "agent" edit, commit and leave an uncommitted change on the remote side,
// restores, and reports the timings, its peak RSS (children not counted) and the host
// child processes it started. The two runs' remote trees and restored workspaces are
// checked equal. Prints medians and ratios, the summary row (bench/summary.mjs), and the
// SSH logins each lifecycle cost (the
// server's log of accepted logins: with activation, the sessions the pool opened; without,
// upstream's `ssh` processes). `PAPERCLIP_NATIVE_SSH_REUSE=0` in the environment runs the
// activated side without session reuse and overlap (docs/ssh.md). Needs a Node with
// `module.registerHooks` (>= 24.11, upstream's engine; scripts/setup/node-versions.sh installs one).
// Usage: node bench/activation.mjs [a|c] [--runs N] [--no-git]   (BENCH_SCRATCH: where the copies go; /dev/shm by default)
import { execFileSync, spawnSync } from "node:child_process";
import { accessSync, constants, cpSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import module from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { startSshd } from "../__test__/helpers/sshd.js";
import { corpus } from "./corpus.mjs";
import { emitRows, median } from "./summary.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.join(here, "..");
const args = process.argv.slice(2);
const name = args.find((a) => !a.startsWith("--") && !/^\d+$/.test(a)) ?? "a";
const runsIndex = args.indexOf("--runs");
const runs = runsIndex >= 0 ? Number(args[runsIndex + 1]) : 3;
// --no-git: the workspace as a plain directory (upstream's own 60 s `git bundle create`
// deadline can expire on corpus a's ~300 MB of incompressible tracked files on a loaded VM).
const withGit = !args.includes("--no-git");
if (typeof module.registerHooks !== "function") {
  console.error(
    `bench/activation.mjs: Node ${process.versions.node} has no module.registerHooks, so the activation cannot load; run it under Node >= 24.11`,
  );
  process.exit(1);
}
const PINNED = { GIT_AUTHOR_DATE: "2026-01-02T03:04:05Z", GIT_COMMITTER_DATE: "2026-01-02T03:04:05Z" };

function isWritableDir(dir) {
  try {
    accessSync(dir, constants.W_OK);
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}
const scratchParent = process.env.BENCH_SCRATCH ?? (isWritableDir("/dev/shm") ? "/dev/shm" : os.tmpdir());
const scratch = mkdtempSync(path.join(scratchParent, "pc-bench-activation-"));
console.error(`scratch (workspaces and remote): ${scratch}`);

const git = (dir, ...a) =>
  execFileSync("git", ["-C", dir, "-c", "user.name=Bench", "-c", "user.email=bench@example.com", ...a], {
    env: { ...process.env, ...PINNED },
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 1 << 28,
  });

const { dir: corpusDir, describe } = corpus(name);
const master = path.join(scratch, "master");
console.error(`making a ${withGit ? "git workspace" : "plain-directory workspace"} of corpus ${name} (${describe}) …`);
cpSync(corpusDir, master, { recursive: true, verbatimSymlinks: true });
if (withGit) {
  writeFileSync(path.join(master, ".gitignore"), "node_modules/\n");
  git(master, "init", "-q", "-b", "main");
  git(master, "add", "-A");
  git(master, "commit", "-q", "-m", "initial");
}

const server = await startSshd(path.join(scratch, "sshd"));
const specFile = path.join(scratch, "spec.json");
writeFileSync(specFile, JSON.stringify(server.spec));
const register = pathToFileURL(path.join(repo, "lib/activation/register.js")).href;

/** The logins the server accepted so far (its log, LogLevel VERBOSE). */
const acceptedLogins = () =>
  readFileSync(server.logPath, "utf8")
    .split("\n")
    .filter((line) => line.includes("Accepted publickey")).length;

function measure(mode, i) {
  const workspace = path.join(scratch, `ws-${mode}-${i}`);
  const loginsBefore = acceptedLogins();
  cpSync(master, workspace, { recursive: true, verbatimSymlinks: true });
  const argv = [
    ...(mode === "activated" ? ["--import", register] : []),
    path.join(repo, "scripts/harness/execution-target-probe.mjs"),
    specFile,
    workspace,
    `bench-${mode}-${i}`,
    "--agent",
  ];
  const out = spawnSync(process.execPath, argv, {
    cwd: repo,
    encoding: "utf8",
    env: { ...process.env, ...PINNED, NODE_OPTIONS: "" },
    maxBuffer: 1 << 26,
  });
  rmSync(workspace, { recursive: true, force: true });
  rmSync(path.join(server.workspace, ".paperclip-runtime", "runs", `bench-${mode}-${i}`), {
    recursive: true,
    force: true,
  });
  if (out.status !== 0) throw new Error(`${mode} run failed: ${out.stderr}`);
  return { ...JSON.parse(out.stdout.trim().split("\n").pop()), logins: acceptedLogins() - loginsBefore };
}

const samples = { plain: [], activated: [] };
try {
  for (let i = 0; i < runs; i += 1) {
    // Interleaved, alternating which goes first, so load changes weigh on both alike.
    for (const mode of i % 2 === 0 ? ["plain", "activated"] : ["activated", "plain"]) {
      const r = measure(mode, i);
      samples[mode].push(r);
      console.error(
        `run ${i + 1} ${mode}: prepare ${r.prepare.ms.toFixed(0)} ms, restore ${r.restore.ms.toFixed(0)} ms, peak RSS ${r.peakRssMb} MB, SSH logins ${r.logins}, children ${JSON.stringify({ ...r.prepare.children, ...Object.fromEntries(Object.entries(r.restore.children).map(([k, v]) => [k, v + (r.prepare.children[k] ?? 0)])) })}`,
      );
    }
    const [p, a] = [samples.plain[i], samples.activated[i]];
    if (JSON.stringify([p.remote, p.local]) !== JSON.stringify([a.remote, a.local]))
      throw new Error(
        `run ${i + 1}: the activated run's remote tree or restored workspace differs from the plain run's`,
      );
    if (!a.activation.active) throw new Error("the activation was not active");
  }
} finally {
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}

const children = (r) => {
  const all = {};
  for (const phase of [r.prepare, r.restore])
    for (const [k, v] of Object.entries(phase.children)) all[k] = (all[k] ?? 0) + v;
  return all;
};
const rows = [];
const summary = {};
const peakRssMb = {};
for (const mode of ["plain", "activated"]) {
  const s = samples[mode];
  const total = median(s.map((r) => r.prepare.ms + r.restore.ms));
  summary[mode] = total;
  peakRssMb[mode] = Math.max(...s.map((r) => r.peakRssMb));
  const kids = children(s[0]);
  rows.push({
    run: mode === "plain" ? "upstream (no activation)" : "--import …/register",
    "prepare ms": median(s.map((r) => r.prepare.ms)).toFixed(0),
    "restore ms": median(s.map((r) => r.restore.ms)).toFixed(0),
    "total ms": total.toFixed(0),
    "peak RSS MB": peakRssMb[mode],
    "host ssh/tar/git": `${kids.ssh ?? 0}/${kids.tar ?? 0}/${kids.git ?? 0}`,
    "SSH logins": median(s.map((r) => r.logins)),
  });
}
console.table(rows);
const variant = `corpus ${name}, ${withGit ? "git workspace" : "plain directory"}`;
console.log(
  `${variant} (${describe}), ${runs} interleaved runs, scratch on ${scratchParent}: ${(summary.plain / summary.activated).toFixed(2)}x with activation; results equal`,
);
emitRows([
  {
    path: `activation: upstream's SSH execution target (prepare + restore), ${variant}`,
    hotPath: "Upstream's SSH execution target, activated",
    case: variant,
    ours: summary.activated,
    upstream: summary.plain,
    floor: null,
    oursRssMb: peakRssMb.activated,
    upstreamRssMb: peakRssMb.plain,
  },
]);
