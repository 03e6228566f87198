// `paperclip-sync demo`: the staging cycle on a generated workspace, each step timed natively
// next to upstream's TypeScript (when @paperclipai/adapter-utils, a devDependency, is
// installed: without it only native timings are printed) and checked for the same result;
// last, upstream's own SSH execution-target code with and without the activation.
import { execFileSync, spawn } from "node:child_process";
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  captureDirectorySnapshot,
  directorySnapshotSha256,
  mergeDirectoryWithBaseline,
  mergeExcludes,
  packDirectoryToFile,
  referencedSourceContentSignature,
  referencedSourceIgnoreExcludeEntries,
  resolveReferencedSourceIgnore,
  snapshotReusedHashCount,
} from "../../index.js";
import { UsageError } from "../args.js";
import { formatBytes, progressReporter, table, timed } from "../output.js";
import { diffSnapshots } from "../snapshots.js";

/** The command's help. */
export const help = `Usage: paperclip-sync demo [--files N] [--keep] [--json]

Generates a realistic workspace (a git repository with sources and an ignored dependency
tree), then runs the staging cycle: ignore resolution, baseline snapshot, content
signature, a simulated remote edit and the re-snapshot, timing each step natively next to
the upstream TypeScript (when @paperclipai/adapter-utils is installed) and checking that
both give the same result.
  --files N  source files to generate (default 4000; dependencies get twice as many)
  --keep     keep the generated workspace and print where it is

Last, upstream's own prepareAdapterExecutionTargetRuntime (unmodified) stages and restores
a copy of the workspace twice, with and without
--import @paperclipai/adapter-utils-native/register, timed, checking equal results: over
SSH (a throwaway sshd on 127.0.0.1; npm run demo installs openssh-server as root when
missing) and into a sandbox through a command runner (its own process on 127.0.0.1).
  --no-ssh      skip the SSH step
  --no-sandbox  skip the sandbox step`;

/** The command's options (node:util.parseArgs). */
export const options = {
  files: { type: "string" },
  keep: { type: "boolean" },
  json: { type: "boolean" },
  "no-ssh": { type: "boolean" },
  "no-sandbox": { type: "boolean" },
};

/** Where the SSH step looks for sshd (as __test__/helpers/sshd.js does). */
const SSHD_PATHS = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/usr/bin/sshd"];

const HEAVY = ["node_modules", "vendor", "dist", "build", "out", "coverage", ".next", ".turbo", ".cache"];
const HEAVY_EXCLUDES = HEAVY.flatMap((n) => [n, `${n}/*`, `*/${n}`, `*/${n}/*`]);

/**
 * Writes the demo's workspace under `root` (a git repository, committed): `files` source
 * files under src/, twice as many in an ignored node_modules/, a .gitignore, an ignored .env
 * and debug.log, a README. Deterministic. Also bench/ignore.mjs's third repository.
 */
export function createDemoWorkspace(root, files) {
  let seed = 12345;
  const rand = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 4294967296;
  };
  const text = (n) => {
    let s = "";
    while (s.length < n) s += `export const v${Math.floor(rand() * 1e6)} = ${Math.floor(rand() * 1e9)};\n`;
    return s.slice(0, n);
  };
  const write = (rel, body) => {
    mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    writeFileSync(path.join(root, rel), body);
  };
  for (let i = 0; i < files; i += 1)
    write(`src/mod${i % 40}/sub${i % 7}/file${i}.ts`, text(200 + Math.floor(rand() * 6000)));
  for (let i = 0; i < files * 2; i += 1)
    write(`node_modules/pkg${i % 150}/lib/f${i}.js`, text(100 + Math.floor(rand() * 3000)));
  write(".gitignore", "node_modules/\n*.log\n.env\n");
  write(".env", "SECRET=do-not-ship\n");
  write("debug.log", "noise\n");
  write("README.md", "# demo workspace\n");
  git(root, "init", "-q", "-b", "main");
  git(root, "add", "-A");
  git(root, "commit", "-q", "-m", "initial");
}

function git(dir, ...args) {
  return execFileSync("git", ["-C", dir, "-c", "user.name=demo", "-c", "user.email=demo@example.invalid", ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
}

async function loadUpstream() {
  try {
    return {
      merge: await import("@paperclipai/adapter-utils/workspace-restore-merge"),
      sandbox: await import("@paperclipai/adapter-utils/sandbox-managed-runtime"),
      execute: await import("@paperclipai/adapter-utils/acpx-engine/execute"),
    };
  } catch {
    return null;
  }
}

// git's racy-clean window, plus a margin: see `captureDirectorySnapshot({ previous })`.
const RACY_WINDOW_MS = 2100;

const repoRoot = new URL("../../", import.meta.url);
const probe = new URL("scripts/harness/execution-target-probe.mjs", repoRoot);
const register = new URL("lib/activation/register.js", repoRoot);
// Pinned commit dates, so the plain and the activated run make the same commits.
const PINNED_DATES = { GIT_AUTHOR_DATE: "2026-01-02T03:04:05Z", GIT_COMMITTER_DATE: "2026-01-02T03:04:05Z" };

/**
 * Upstream's `prepareAdapterExecutionTargetRuntime` + `restoreWorkspace()` (with an agent run
 * in between) on a copy of the workspace each, run by scripts/harness/execution-target-probe.mjs in a
 * fresh process without and then with `--import …/register`. `specFor(name)` writes the
 * target's spec file for the run named `plain` or `native`; `after(name)` is called after each
 * run. Returns both runs' probe reports and whether their remote trees and restored
 * workspaces are equal.
 */
function probePair(work, workspace, label, specFor, after = () => undefined) {
  const runs = {};
  for (const [name, activated] of [
    ["plain", false],
    ["native", true],
  ]) {
    const dir = path.join(work, `${label}-${name}`);
    cpSync(workspace, dir, { recursive: true, verbatimSymlinks: true });
    const args = [
      ...(activated ? ["--import", register.href] : []),
      fileURLToPath(probe),
      specFor(name),
      dir,
      `demo-${label}-${name}`,
      "--agent",
    ];
    const out = execFileSync(process.execPath, args, {
      encoding: "utf8",
      env: { ...process.env, ...PINNED_DATES, NODE_OPTIONS: "" },
      maxBuffer: 1 << 26,
    });
    runs[name] = JSON.parse(out.trim().split("\n").pop());
    after(name);
  }
  const { plain, native } = runs;
  const same = JSON.stringify([plain.remote, plain.local]) === JSON.stringify([native.remote, native.local]);
  return { plain, native, same: same && native.activation.active };
}

/** How many of each of `tools` a probe run started on the host (prepare and restore), by name. */
function hostChildren(run, tools) {
  return Object.fromEntries(tools.map((t) => [t, (run.prepare.children[t] ?? 0) + (run.restore.children[t] ?? 0)]));
}

/** Records an execution-target step from `probePair`'s result. */
function recordPair(record, step, { plain, native, same }, tools, extra = {}) {
  const children = { native: hostChildren(native, tools), plain: hostChildren(plain, tools) };
  const list = (counts) =>
    Object.entries(counts)
      .map(([t, n]) => `${t} ${n}`)
      .join(", ");
  const ms = (run) => ({ prepare: Math.round(run.prepare.ms), restore: Math.round(run.restore.ms) });
  record(
    step,
    native.prepare.ms + native.restore.ms,
    plain.prepare.ms + plain.restore.ms,
    same,
    `prepare ${ms(native).prepare} vs ${ms(plain).prepare} ms, restore ${ms(native).restore} vs ${ms(plain).restore} ms; ` +
      `host children: activated ${list(children.native)}, plain ${list(children.plain)}` +
      Object.entries(extra)
        .map(([key, value]) => `; ${key}: activated ${value.native}, plain ${value.plain}`)
        .join(""),
    {
      native: { ...ms(native), hostChildren: children.native },
      plain: { ...ms(plain), hostChildren: children.plain },
      ...extra,
    },
  );
}

const SSH_STEP = "execution target over SSH (upstream code)";
const SANDBOX_STEP = "execution target in a sandbox (upstream code)";

/**
 * Upstream's own `prepareAdapterExecutionTargetRuntime` + `restoreWorkspace()` for an SSH
 * target (a throwaway sshd on 127.0.0.1, __test__/helpers/sshd.js) with and without the
 * activation: timings, whether the remote trees and restored workspaces are equal, and the
 * host `ssh`/`tar` processes each run started.
 */
async function demoSshTarget(work, workspace, record, log) {
  const helper = new URL("__test__/helpers/sshd.js", repoRoot);
  if (!existsSync(probe) || !existsSync(helper)) {
    record(SSH_STEP, null, null, null, "skipped: needs a checkout of this repository");
    return;
  }
  if (!SSHD_PATHS.some((f) => existsSync(f))) {
    record(
      SSH_STEP,
      null,
      null,
      null,
      "skipped: sshd is not installed (npm run demo installs openssh-server when run as root; or apt-get install openssh-server openssh-client)",
    );
    return;
  }
  const { startSshd } = await import(helper.href);
  let server;
  try {
    server = await startSshd(path.join(work, "sshd"));
  } catch (error) {
    record(SSH_STEP, null, null, null, `skipped: sshd did not start (${String(error.message).split("\n")[0]})`);
    return;
  }
  try {
    log("  (upstream's prepareAdapterExecutionTargetRuntime over SSH, with and without --import …/register)");
    const specFile = path.join(work, "ssh-spec.json");
    writeFileSync(specFile, JSON.stringify(server.spec));
    recordPair(
      record,
      SSH_STEP,
      probePair(work, workspace, "ssh", () => specFile),
      ["ssh", "tar"],
    );
  } finally {
    await server.stop();
  }
}

/**
 * The same for a sandbox target: its commands go through a command runner
 * (scripts/harness/sandbox-runner.mjs, its own process on 127.0.0.1, so the sandbox's own `tar` is
 * not the host's), into a remote directory on this machine. Also counts the runner commands
 * each run sent.
 */
async function demoSandboxTarget(work, workspace, record, log) {
  const runnerScript = new URL("scripts/harness/sandbox-runner.mjs", repoRoot);
  if (!existsSync(probe) || !existsSync(runnerScript)) {
    record(SANDBOX_STEP, null, null, null, "skipped: needs a checkout of this repository");
    return;
  }
  const stats = path.join(work, "sandbox-runner.json");
  const runner = spawn(process.execPath, [fileURLToPath(runnerScript), "0", stats], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, NODE_OPTIONS: "" },
  });
  try {
    const port = await new Promise((resolve, reject) => {
      runner.once("error", reject);
      runner.once("exit", (code) => reject(new Error(`the sandbox runner exited (${code}) before listening`)));
      runner.stdout.setEncoding("utf8");
      runner.stdout.once("data", (line) => resolve(Number(/^ready (\d+)/.exec(line)?.[1])));
    });
    log("  (upstream's prepareAdapterExecutionTargetRuntime in a sandbox, with and without --import …/register)");
    const commandsServed = () => JSON.parse(readFileSync(stats, "utf8")).commands;
    const commands = {};
    let before = commandsServed();
    const pair = probePair(
      work,
      workspace,
      "sandbox",
      (name) => {
        const specFile = path.join(work, `sandbox-spec-${name}.json`);
        writeFileSync(
          specFile,
          JSON.stringify({ runnerPort: port, remoteCwd: path.join(work, `sandbox-remote-${name}`) }),
        );
        return specFile;
      },
      (name) => {
        const now = commandsServed();
        commands[name] = now - before;
        before = now;
      },
    );
    recordPair(record, SANDBOX_STEP, pair, ["tar"], { "runner commands": commands });
  } finally {
    runner.kill();
  }
}

/** Runs the command on its parsed arguments. */
export async function run({ values: opts }) {
  const files = opts.files === undefined ? 4000 : Number(opts.files);
  if (!Number.isInteger(files) || files < 1) throw new UsageError("--files takes a whole number >= 1");
  const log = (line) => {
    if (!opts.json) console.log(line);
  };
  const upstream = await loadUpstream();
  const work = mkdtempSync(path.join(os.tmpdir(), "paperclip-sync-demo-"));
  const workspace = path.join(work, "workspace");
  const remote = path.join(work, "remote");
  const rows = [];
  const record = (step, native, theirs, same, note = "", details = undefined) => {
    rows.push({
      step,
      "native ms": native === null ? "-" : native.toFixed(0),
      "upstream ms": theirs === null ? "-" : theirs.toFixed(0),
      speedup: native !== null && theirs !== null ? `${(theirs / Math.max(native, 0.01)).toFixed(1)}x` : "-",
      "same result": same === null ? "-" : same ? "yes" : "NO",
      note,
      ...(details && { details }),
    });
    const parts = [];
    if (native !== null) parts.push(`native ${native.toFixed(0)} ms`);
    if (theirs !== null) parts.push(`upstream ${theirs.toFixed(0)} ms`);
    if (note) parts.push(note);
    log(`  ${step}: ${parts.join(", ")}`);
  };
  try {
    log(`Generating a workspace in ${workspace}: ${files} source files, ${files * 2} ignored dependency files …`);
    createDemoWorkspace(workspace, files);
    // Wait out the racy-timestamp window (a file modified within 2 s before a capture is
    // always re-read), so the incremental re-snapshot below measures reuse, as on a real host.
    await new Promise((resolve) => setTimeout(resolve, RACY_WINDOW_MS));
    log("Running the staging cycle:");

    // 1. Ignore resolution: in-process, read-only (upstream spawns git twice). Both sides sort
    //    with the process locale's collator, and the first collator a process makes loads
    //    ICU's collation data (a few milliseconds, once): made here, so that this one-time
    //    cost does not land on whichever side runs first.
    new Intl.Collator().compare("a", "b");
    const resolved = await timed(() => resolveReferencedSourceIgnore(workspace));
    if (resolved.value.kind !== "git") throw new Error(`ignore resolution gave ${JSON.stringify(resolved.value)}`);
    const ignored = resolved.value.ignoredPaths;
    const note = `${ignored.length} ignored: ${ignored.join(", ")}`;
    if (upstream) {
      const theirs = await timed(() => upstream.sandbox.resolveReferencedSourceIgnore(workspace));
      record(
        "resolve ignored paths",
        resolved.ms,
        theirs.ms,
        JSON.stringify(theirs.value) === JSON.stringify(resolved.value),
        note,
      );
    } else record("resolve ignored paths", resolved.ms, null, null, note);
    const exclude = mergeExcludes(HEAVY_EXCLUDES, [".git", ".git/*"], ignored);

    // 2. Baseline snapshot.
    const ours = await timed(() => captureDirectorySnapshot(workspace, { exclude, incremental: true }));
    const digest = directorySnapshotSha256(ours.value);
    if (upstream) {
      const theirs = await timed(() => upstream.merge.captureDirectorySnapshot(workspace, { exclude }));
      record(
        "baseline snapshot",
        ours.ms,
        theirs.ms,
        upstream.merge.directorySnapshotSha256(theirs.value) === digest,
        `${ours.value.entries.size} entries`,
      );
    } else record("baseline snapshot", ours.ms, null, null, `${ours.value.entries.size} entries`);

    // 3. Content signature of the workspace as a referenced project.
    const resolution = { kind: "git", ignoredPaths: ignored };
    const sig = await timed(() => referencedSourceContentSignature(workspace, resolution));
    if (upstream) {
      const theirs = await timed(() => upstream.execute.referencedSourceContentSignature(workspace, resolution));
      record("content signature", sig.ms, theirs.ms, theirs.value === sig.value, sig.value);
    } else record("content signature", sig.ms, null, null, sig.value);

    // 4. Pack the workspace for the sandbox (upstream runs tar; we archive in-process).
    const archives = path.join(work, "archives");
    mkdirSync(archives);
    // The sandbox lane's excludes: heavy directories, .git, and the escaped ignored paths.
    const tarExclude = mergeExcludes(HEAVY_EXCLUDES, [".git"], referencedSourceIgnoreExcludeEntries(resolved.value));
    const ourTar = path.join(archives, "ours.tar");
    const packed = await timed(() =>
      packDirectoryToFile({
        localDir: workspace,
        archivePath: ourTar,
        exclude: tarExclude,
        progress: opts.json ? undefined : progressReporter("workspace"),
      }),
    );
    if (upstream) {
      const theirTar = path.join(archives, "upstream.tar");
      const theirs = await timed(() =>
        upstream.sandbox.createTarballFromDirectory({
          localDir: workspace,
          archivePath: theirTar,
          exclude: tarExclude,
        }),
      );
      const members = (file) =>
        execFileSync("tar", ["-tf", file], { encoding: "utf8", maxBuffer: 1 << 28 })
          .split("\n")
          .filter(Boolean)
          .sort()
          .join("\n");
      record(
        "pack workspace (tar)",
        packed.ms,
        theirs.ms,
        members(ourTar) === members(theirTar),
        `${packed.value.entries} members, ${formatBytes(packed.value.tarBytes)}`,
      );
    } else
      record(
        "pack workspace (tar)",
        packed.ms,
        null,
        null,
        `${packed.value.entries} members, ${formatBytes(packed.value.tarBytes)}`,
      );

    // 5. The "remote" edits a copy: modifies, adds and deletes files. (The host as it was
    //    is kept aside, so upstream can merge into an identical copy.)
    if (upstream)
      cpSync(workspace, path.join(work, "workspace-before-merge"), { recursive: true, verbatimSymlinks: true });
    cpSync(workspace, remote, { recursive: true, filter: (src) => !src.includes(`${path.sep}node_modules`) });
    let edits = 0;
    for (const [rel, entry] of ours.value.entries) {
      if (entry.kind !== "file" || !rel.startsWith("src/")) continue;
      edits += 1;
      if (edits % 100 === 0) appendFileSync(path.join(remote, rel), "\n// edited remotely\n");
      else if (edits % 173 === 0) rmSync(path.join(remote, rel));
    }
    writeFileSync(path.join(remote, "src", "added-remotely.ts"), "export const added = true;\n");
    record("simulate remote edit", null, null, null, "copy without dependencies; edit 1%, delete ~0.6%, add 1");

    // 6. Re-snapshot of the remote result, and an incremental re-snapshot of the unchanged host.
    const remoteSnap = await timed(() => captureDirectorySnapshot(remote, { exclude }));
    if (upstream) {
      const theirs = await timed(() => upstream.merge.captureDirectorySnapshot(remote, { exclude }));
      record(
        "snapshot remote result",
        remoteSnap.ms,
        theirs.ms,
        upstream.merge.directorySnapshotSha256(theirs.value) === directorySnapshotSha256(remoteSnap.value),
      );
    } else record("snapshot remote result", remoteSnap.ms, null, null);
    const again = await timed(() => captureDirectorySnapshot(workspace, { exclude, previous: ours.value }));
    record(
      "incremental host re-snapshot",
      again.ms,
      null,
      directorySnapshotSha256(again.value) === digest,
      `${snapshotReusedHashCount(again.value)} hashes reused`,
    );

    const changes = diffSnapshots(ours.value, remoteSnap.value);
    record("diff baseline -> remote", null, null, null, `${changes.length} changes`);

    // 7. Merge back: natively into the workspace, upstream into a copy of it; both must
    //    end equal to the remote result (the excluded dependency tree kept).
    const merged = await timed(() =>
      mergeDirectoryWithBaseline({ baseline: ours.value, sourceDir: remote, targetDir: workspace }),
    );
    const after = directorySnapshotSha256(await captureDirectorySnapshot(workspace, { exclude }));
    const matchesRemote = after === directorySnapshotSha256(remoteSnap.value);
    if (upstream) {
      const hostCopy = path.join(work, "workspace-upstream");
      cpSync(path.join(work, "workspace-before-merge"), hostCopy, { recursive: true, verbatimSymlinks: true });
      const theirs = await timed(() =>
        upstream.merge.mergeDirectoryWithBaseline({ baseline: ours.value, sourceDir: remote, targetDir: hostCopy }),
      );
      const full = async (dir) => directorySnapshotSha256(await captureDirectorySnapshot(dir));
      const same = matchesRemote && (await full(hostCopy)) === (await full(workspace));
      record("merge remote result back", merged.ms, theirs.ms, same, "whole trees equal, node_modules kept");
    } else record("merge remote result back", merged.ms, null, matchesRemote);

    // 8. Upstream's own execution-target code, unmodified, with and without the activation.
    if (!opts["no-ssh"]) await demoSshTarget(work, workspace, record, log);
    if (!opts["no-sandbox"]) await demoSandboxTarget(work, workspace, record, log);

    if (opts.json) {
      console.log(JSON.stringify({ workspace: opts.keep ? workspace : null, steps: rows }));
    } else {
      console.log(`\n${table(rows, ["step", "native ms", "upstream ms", "speedup", "same result", "note"])}`);
      if (!upstream) console.log("\n(upstream @paperclipai/adapter-utils is not installed: native timings only)");
      if (opts.keep) console.log(`\nworkspace kept in ${work}`);
    }
    if (rows.some((r) => r["same result"] === "NO")) {
      const error = new Error("a native step gave a different result than upstream");
      error.code = "ERR_PAPERCLIP_NATIVE_DEMO_MISMATCH";
      throw error;
    }
  } finally {
    if (!opts.keep) rmSync(work, { recursive: true, force: true });
  }
}
