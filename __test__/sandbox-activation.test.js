// Upstream's own prepareAdapterExecutionTargetRuntime for a sandbox target, with our exports
// swapped into a copy of upstream's dist (as scripts/upstream/swap.mjs composes them), stages
// a generated git workspace and restores the agent's work without starting a host `tar`;
// the unswapped upstream run does start one (the control: both detectors see it), and both
// runs leave the same remote tree and git state and the same restored workspace.
//
// The runner's commands run in a separate helper process (helpers/sandbox-exec-server.mjs),
// so the sandbox's own `tar`/`dd`/`base64` are its descendants, not this process's children.
// Host `tar` runs are detected twice: every direct child of this process sampled from /proc,
// and a `tar` shim first on this process's PATH that logs each call (the helper process gets
// the PATH without it). Rerun a failure with DIFF_SEED=<seed>.
import { execFileSync, spawn } from "node:child_process";
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRandom, runSeed } from "./helpers/random.js";
import { writeSwappedUpstream } from "./helpers/swapped-upstream.js";
import { pinnedGit, repositoryState, treeWithoutGit } from "./helpers/git-state.js";

const seed = runSeed();
const here = path.dirname(fileURLToPath(import.meta.url));
const scratch = mkdtempSync(path.join(os.tmpdir(), "pc-sandbox-activation-"));
const shimDir = path.join(scratch, "shim");
const tarLog = path.join(scratch, "tar-calls.log");
const originalPath = process.env.PATH;
let server;
let plain;
let swapped;

const git = pinnedGit;

beforeAll(async () => {
  mkdirSync(shimDir);
  const realTar = execFileSync("sh", ["-c", "command -v tar"], { encoding: "utf8" }).trim();
  writeFileSync(
    path.join(shimDir, "tar"),
    `#!/bin/sh\nprintf '%s %s\\n' "$PWD" "$*" >> '${tarLog}'\nexec '${realTar}' "$@"\n`,
  );
  chmodSync(path.join(shimDir, "tar"), 0o755);
  process.env.PATH = `${shimDir}:${originalPath}`;
  server = spawn(process.execPath, [path.join(here, "helpers", "sandbox-exec-server.mjs")], {
    env: { ...process.env, PATH: originalPath },
    stdio: ["pipe", "pipe", "inherit"],
  });
  let buffered = "";
  server.stdout.setEncoding("utf8");
  server.stdout.on("data", (chunk) => {
    buffered += chunk;
    let newline;
    while ((newline = buffered.indexOf("\n")) >= 0) {
      const answer = JSON.parse(buffered.slice(0, newline));
      buffered = buffered.slice(newline + 1);
      pending.get(answer.id)?.(answer);
      pending.delete(answer.id);
    }
  });
  plain = await import("@paperclipai/adapter-utils/execution-target");
  const dist = await writeSwappedUpstream(path.join(scratch, "swapped"));
  swapped = await import(pathToFileURL(path.join(dist, "execution-target.js")).href);
});
afterAll(() => {
  process.env.PATH = originalPath;
  server?.kill();
  rmSync(scratch, { recursive: true, force: true });
});

const pending = new Map();
let nextId = 0;
/** A CommandManagedRuntimeRunner whose commands run in the helper process. */
const remoteRunner = () => ({
  execute: (input) =>
    new Promise((resolve) => {
      const id = (nextId += 1);
      const startedAt = new Date().toISOString();
      pending.set(id, (answer) =>
        resolve({
          exitCode: answer.exitCode,
          signal: null,
          timedOut: false,
          stdout: answer.stdout,
          stderr: answer.stderr,
          pid: null,
          startedAt,
        }),
      );
      server.stdin.write(
        `${JSON.stringify({ id, command: input.command, args: input.args, cwd: input.cwd, stdin: input.stdin ?? null })}\n`,
      );
    }),
});

/** Direct children of this process now: pid -> { name, cwd, args }. */
function children() {
  const out = new Map();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[1]) !== process.pid) continue;
      const args = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").filter(Boolean);
      out.set(Number(entry), { name: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")), args });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** Runs `work` while sampling this process's children; returns its value and the host `tar` runs seen. */
async function sampled(work) {
  const seen = new Map();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      for (const [pid, child] of children()) if (!seen.has(pid)) seen.set(pid, child);
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  try {
    return {
      value: await work(),
      tars: [...seen.values()].filter((c) => c.name === "tar" || c.args.some((a) => path.basename(a) === "tar")),
    };
  } finally {
    sampling = false;
    await sampler;
  }
}

const NAMES = ["a.txt", "B.md", "ünïcode-名.txt", "with space.txt", "x.sh", "data.json"];
/** A git workspace with a commit, dirty and untracked files, ignored trees, and enough files that a host `tar` runs long enough to be sampled. */
function writeWorkspace(rng, root) {
  for (let d = 0; d < 40; d += 1) {
    const dir = path.join(root, `dir-${d}`);
    mkdirSync(dir, { recursive: true });
    for (const name of NAMES) {
      if (!rng.chance(0.8)) continue;
      writeFileSync(path.join(dir, name), `${name} ${rng.int(1e9)}\n`.repeat(1 + rng.int(400)));
      chmodSync(path.join(dir, name), rng.pick([0o644, 0o755]));
    }
    if (rng.chance(0.3)) symlinkSync(rng.pick(["a.txt", "../dir-0"]), path.join(dir, "link"));
  }
  mkdirSync(path.join(root, "node_modules", "dep"), { recursive: true });
  writeFileSync(path.join(root, "node_modules", "dep", "index.js"), "heavy\n");
  writeFileSync(path.join(root, ".gitignore"), "*.log\n");
  writeFileSync(path.join(root, "main.js"), "console.log(1);\n");
  git(root, ["init", "-q"]);
  git(root, ["remote", "add", "origin", "https://user:token@example.com/org/repo.git"]);
  git(root, ["add", "-A"]);
  git(root, ["commit", "-q", "-m", "initial"]);
  writeFileSync(path.join(root, "main.js"), "console.log(2);\n");
  writeFileSync(path.join(root, "untracked ünï.txt"), "new\n");
  writeFileSync(path.join(root, "debug.log"), "ignored\n");
  // What no tar of the lane carries: upstream's restore deletes them, ours keeps them.
  for (const kept of NEVER_SENT) writeFileSync(path.join(root, kept), "never sent\n");
}

/** Untracked AppleDouble names at two depths (docs/differences.md, "Nothing the agent did not change"). */
const NEVER_SENT = ["._notes", "dir-2/._draft"];

const tree = treeWithoutGit;

const gitState = (dir) => repositoryState(dir);

function agentWork(remote) {
  writeFileSync(path.join(remote, "main.js"), "console.log(3);\n");
  git(remote, ["add", "main.js"]);
  git(remote, ["commit", "-q", "-m", "agent commit"]);
  writeFileSync(path.join(remote, "made-by-agent ✓.txt"), "agent\n");
  rmSync(path.join(remote, "dir-1"), { recursive: true, force: true });
}

/** prepare + agent work + restore through `module`'s prepareAdapterExecutionTargetRuntime. */
async function cycle(module, workspace, remote) {
  writeFileSync(tarLog, "");
  const { value, tars } = await sampled(async () => {
    const prepared = await module.prepareAdapterExecutionTargetRuntime({
      target: {
        kind: "remote",
        transport: "sandbox",
        providerKey: "local-test",
        remoteCwd: remote,
        timeoutMs: 60_000,
        runner: remoteRunner(),
      },
      adapterKey: "activation",
      workspaceLocalDir: workspace,
    });
    const remoteTree = tree(remote);
    const remoteGit = gitState(remote);
    agentWork(remote);
    await prepared.restoreWorkspace();
    return { remoteTree, remoteGit };
  });
  const logged = readFileSync(tarLog, "utf8").split("\n").filter(Boolean);
  return { ...value, tars, logged };
}

describe("prepareAdapterExecutionTargetRuntime (upstream's) with our exports swapped in", () => {
  it("starts no host tar for a git workspace's prepare and restore, with upstream's remote and restored state", async () => {
    const rng = createRandom(seed);
    try {
      const base = path.join(scratch, "ws");
      writeWorkspace(rng, base);
      const copies = { plain: path.join(scratch, "ws-plain"), swapped: path.join(scratch, "ws-swapped") };
      for (const copy of Object.values(copies)) cpSync(base, copy, { recursive: true, verbatimSymlinks: true });
      const up = await cycle(plain, copies.plain, path.join(scratch, "remote-plain"));
      const me = await cycle(swapped, copies.swapped, path.join(scratch, "remote-swapped"));
      // The control: unswapped, upstream packs with the host's tar and the shim sees it.
      expect(up.logged.length, "upstream runs the host tar (the detector works)").toBeGreaterThan(0);
      expect(me.logged, "no host tar call (PATH shim)").toEqual([]);
      expect(me.tars, "no host tar child (/proc)").toEqual([]);
      expect(me.remoteTree).toEqual(up.remoteTree);
      expect(me.remoteGit).toEqual(up.remoteGit);
      expect(me.remoteGit.shallow).not.toBeNull();
      // Upstream's own orchestration, served our restore, keeps what upstream's deletes; the
      // rest is the unswapped run's.
      const [ours, theirs] = [tree(copies.swapped), tree(copies.plain)];
      for (const kept of NEVER_SENT) {
        expect(ours[kept], kept).toBeDefined();
        expect(theirs[kept], kept).toBeUndefined();
        delete ours[kept];
      }
      expect(ours).toEqual(theirs);
      const withoutKept = (state) => ({
        ...state,
        status: state.status
          .split("\n")
          .filter((line) => !NEVER_SENT.some((kept) => line.endsWith(kept)))
          .join("\n"),
      });
      expect(withoutKept(gitState(copies.swapped))).toEqual(withoutKept(gitState(copies.plain)));
    } catch (error) {
      error.message = `[DIFF_SEED=${seed}] ${error.message}`;
      throw error;
    }
  });
});
