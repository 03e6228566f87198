// Sandbox-lane benchmark: prepareCommandManagedRuntime + restoreWorkspace(), ours vs
// upstream's, for a plain workspace through a local spawn runner (the sandbox is a
// directory on this host and runs the commands with sh), on the corpora of
// bench/corpus.mjs. Each cycle runs in its own process (bench/sandbox-worker.mjs), which
// reports its peak RSS and counts its own `tar` and `git` children from /proc. Runs are
// interleaved (upstream, ours, ours duplex, upstream, …); prints medians and ratios, then
// the summary rows (bench/summary.mjs: each of our modes against upstream's).
// The sandbox directory is on tmpfs (/dev/shm) unless BENCH_SCRATCH says otherwise; the
// workspace is a copy of the corpus on tmpfs (default) or on disk (`--workspace disk`, in
// os.tmpdir()).
// With `--git`, the workspace is a git repository (node_modules ignored, everything else
// committed, one file modified after the commit), so the git-backed path runs (the shallow
// HEAD export, the delta bundle); each worker then also prints its runtimeSpan durations.
// Usage: node bench/sandbox.mjs [a,b] [--runs N] [--modes chunked,duplex] [--workspace tmpfs|disk] [--git 1]
import { spawnSync } from "node:child_process";
import { accessSync, appendFileSync, constants, cpSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { corpus } from "./corpus.mjs";
import { emitRows, failureCode, median, peakRss } from "./summary.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const flags = new Map();
const positional = [];
for (let i = 0; i < args.length; i += 1) {
  if (args[i].startsWith("--")) flags.set(args[i], args[(i += 1)]);
  else positional.push(args[i]);
}
const names = (positional[0] ?? "a").split(",");
const runs = Number(flags.get("--runs") ?? "3");
const ourModes = (flags.get("--modes") ?? "chunked,duplex").split(",");
// The workspace must not lie inside a git work tree (the corpus under .bench/ does: it would
// be one wholly ignored directory of this repository), so it is a copy: on tmpfs or on disk.
const workspaceOn = flags.get("--workspace") ?? "tmpfs";
const gitBacked = flags.has("--git");

function isWritableDir(dir) {
  try {
    accessSync(dir, constants.W_OK);
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}
const scratchParent = process.env.BENCH_SCRATCH ?? (isWritableDir("/dev/shm") ? "/dev/shm" : os.tmpdir());
const scratch = mkdtempSync(path.join(scratchParent, "pc-bench-sandbox-"));
console.error(`scratch (sandbox directories): ${scratch}`);

function measure(impl, mode, workspace) {
  const remote = mkdtempSync(path.join(scratch, `${impl}-${mode}-`));
  try {
    const out = spawnSync(
      process.execPath,
      ["--max-old-space-size=8192", path.join(here, "sandbox-worker.mjs"), impl, mode, workspace, remote],
      { encoding: "utf8", maxBuffer: 1 << 26 },
    );
    if (out.status !== 0)
      return {
        failed: (
          out.stderr
            .trim()
            .split("\n")
            .find((l) => /Error|error/.test(l)) ??
          out.stderr.trim().split("\n").pop() ??
          ""
        ).slice(0, 200),
      };
    return JSON.parse(out.stdout.trim().split("\n").pop());
  } finally {
    rmSync(remote, { recursive: true, force: true });
  }
}

/** Turns the workspace copy into a repository: node_modules ignored, the rest committed, one change after. */
function makeGitWorkspace(dir) {
  writeFileSync(path.join(dir, ".gitignore"), "node_modules/\n");
  const git = (...gitArgs) => {
    const out = spawnSync(
      "git",
      [
        "-C",
        dir,
        "-c",
        "user.name=bench",
        "-c",
        "user.email=bench@example.com",
        "-c",
        "init.defaultBranch=main",
        ...gitArgs,
      ],
      { encoding: "utf8", maxBuffer: 1 << 26 },
    );
    if (out.status !== 0) throw new Error(`git ${gitArgs.join(" ")}: ${out.stderr}`);
  };
  git("init", "-q");
  git("add", "-A");
  git("commit", "-q", "-m", "bench");
  appendFileSync(path.join(dir, ".gitignore"), "*.log\n");
}

/** What each of our modes moves the files through, as the summary rows name it. */
const MODE_NAMES = { chunked: "base64 slices", single: "one stdin stream", duplex: "duplex channel" };
const summary = [];
const cleanups = [];
const variants = [["upstream", "chunked"], ...ourModes.map((mode) => ["ours", mode])];
try {
  for (const name of names) {
    const source = corpus(name);
    const workspaceParent = mkdtempSync(
      path.join(workspaceOn === "disk" ? os.tmpdir() : scratch, "pc-bench-sandbox-ws-"),
    );
    const workspace = path.join(workspaceParent, `workspace-${name}`);
    cpSync(source.dir, workspace, { recursive: true, verbatimSymlinks: true });
    cleanups.push(workspaceParent);
    if (gitBacked) makeGitWorkspace(workspace);
    const results = new Map(variants.map((v) => [v.join(" "), []]));
    for (let run = 0; run < runs; run += 1) {
      for (const [impl, mode] of variants) {
        const r = measure(impl, mode, workspace);
        results.get(`${impl} ${mode}`).push(r);
        console.error(`${name} run ${run + 1} ${impl} ${mode}: ${JSON.stringify(r)}`);
      }
    }
    console.log(
      `\ncorpus ${name} (${source.describe}); workspace on ${workspaceOn === "disk" ? `disk (${os.tmpdir()})` : "tmpfs"}, sandbox on ${scratchParent}; ${gitBacked ? "git-backed; " : ""}${runs} interleaved runs, medians`,
    );
    console.log(
      "| implementation | prepare s | restore s | total s | peak RSS MB | host tar children | host git children |",
    );
    console.log("|---|---|---|---|---|---|---|");
    const base = results.get("upstream chunked").filter((r) => !r.failed);
    const baseTotal = base.length ? median(base.map((r) => r.ms)) : null;
    for (const [key, list] of results) {
      const ok = list.filter((r) => !r.failed);
      if (ok.length < list.length && key !== "upstream chunked") process.exitCode = 1; // ours must not fail
      if (ok.length === 0) {
        console.log(`| ${key} | failed: ${list[0]?.failed ?? "?"} | | | | | |`);
        continue;
      }
      const total = median(ok.map((r) => r.ms));
      if (key !== "upstream chunked") {
        const mode = key.split(" ")[1];
        const theirs = results.get("upstream chunked");
        const variant = `${name}${gitBacked ? ", git workspace" : ""}`;
        summary.push({
          path: `sandbox lane ${mode} (prepare + restore), corpus ${variant}`,
          hotPath: `Sandbox lane, ${MODE_NAMES[mode] ?? mode}`,
          case: `corpus ${variant}`,
          ours: total,
          upstream: baseTotal,
          ...(baseTotal == null ? { upstreamFails: failureCode(theirs[0]?.failed) } : {}),
          floor: null,
          oursRssMb: peakRss(ok),
          upstreamRssMb: peakRss(base),
        });
      }
      const ratio = baseTotal && key !== "upstream chunked" ? ` (${(baseTotal / total).toFixed(1)}x)` : "";
      console.log(
        `| ${key} | ${(median(ok.map((r) => r.prepareMs)) / 1000).toFixed(1)} | ${(median(ok.map((r) => r.restoreMs)) / 1000).toFixed(1)} | ${(total / 1000).toFixed(1)}${ratio} | ${median(ok.map((r) => r.rssMb)).toFixed(0)} | ${median(ok.map((r) => r.hostTar))} | ${median(ok.map((r) => r.hostGit))} |`,
      );
    }
  }
  emitRows(summary);
} finally {
  for (const dir of cleanups) rmSync(dir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
}
