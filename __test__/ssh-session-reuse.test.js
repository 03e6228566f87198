// SSH session reuse (docs/ssh.md, session reuse) against a real OpenSSH sshd on 127.0.0.1:
// a git workspace lifecycle (prepare, an agent's commit and edits, restore with the baseline
// and history) opens one or two sessions instead of one per step, counted both by the pool's
// own counters and by the server's log of accepted logins; the same lifecycle with
// `PAPERCLIP_NATIVE_SSH_REUSE=0` opens one per step and ends with the same remote tree,
// restored workspace, commit ids and progress lines (the prepare's first command takes the
// session opened ahead of it); concurrent callers get sessions of
// their own; a failed call's session is dropped, a clean one is kept; sessions the server
// closed meanwhile do not fail the next call; idle sessions close by themselves; the
// overlapped export and pull of a restore fail as the sequential steps do. Run as an
// unprivileged user in CI (scripts/test/full.sh).
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { closeIdleSshSessions, sshPoolStats } from "../lib/extras.js";
import {
  prepareWorkspaceForSshExecution,
  restoreWorkspaceFromSshExecution,
  runSshCommand,
  syncDirectoryFromSsh,
} from "../lib/ssh.js";
import { captureDirectorySnapshot } from "../lib/workspace-restore-merge.js";
import { contentState } from "./helpers/git-state.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { scratchPlaces, startSshd } from "./helpers/sshd.js";

const PINNED_DATE = "2026-01-02T03:04:05Z";
process.env.GIT_AUTHOR_DATE = PINNED_DATE;
process.env.GIT_COMMITTER_DATE = PINNED_DATE;
/** The baseline excludes of a git-backed remote-managed runtime (upstream's). */
const GIT_BASELINE_EXCLUDE = [".git", ".git/*", ".paperclip-runtime"];

let server;
let work;
const places = scratchPlaces(
  () => work,
  () => server.workspace,
);

function git(dir, args) {
  return execFileSync("git", ["-C", dir, "-c", "user.name=Test", "-c", "user.email=test@example.com", ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  }).trimEnd();
}

function repoState(dir) {
  return {
    head: git(dir, ["rev-parse", "HEAD"]),
    branch: git(dir, ["rev-parse", "--abbrev-ref", "HEAD"]),
    status: git(dir, ["status", "--porcelain=v1", "--untracked-files=all"]),
    log: git(dir, ["log", "--format=%H %P %s", "HEAD"]),
    refs: git(dir, ["for-each-ref", "--format=%(refname)"]),
  };
}

/** A seeded git workspace: a commit, then a dirty edit, an untracked file and a deletion. */
function gitWorkspace(name, rng) {
  const dir = places.local(name);
  git(dir, ["init", "-q", "-b", "main"]);
  const files = [];
  for (let i = 0; i < 40; i += 1) {
    const rel = path.join(`d${Math.floor(rng() * 4)}`, `f${i}.txt`);
    mkdirSync(path.join(dir, path.dirname(rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), `${i} ${"x".repeat(Math.floor(rng() * 3000))}\n`);
    files.push(rel);
  }
  git(dir, ["add", "-A"]);
  git(dir, ["commit", "-q", "-m", "initial"]);
  writeFileSync(path.join(dir, files[1]), "dirty local edit\n");
  writeFileSync(path.join(dir, "untracked.txt"), "untracked\n");
  rmSync(path.join(dir, files[2]));
  return { dir, files };
}

/** Lines the accepted logins left in the server's log so far. */
function acceptedLogins() {
  return readFileSync(server.logPath, "utf8")
    .split("\n")
    .filter((line) => line.includes("Accepted publickey")).length;
}

/** What the pool and the server counted while `fn` ran. */
async function counted(fn) {
  const before = sshPoolStats();
  const logins = acceptedLogins();
  const value = await fn();
  const after = sshPoolStats();
  const delta = {};
  for (const key of Object.keys(after)) if (key !== "idle") delta[key] = after[key] - before[key];
  // sshd writes its log line while authenticating, before our call returns.
  return { value, delta, logins: acceptedLogins() - logins, idle: after.idle };
}

/** Runs `fn` with `PAPERCLIP_NATIVE_SSH_REUSE` set to `value` (or unset for `undefined`). */
async function withReuse(value, fn) {
  const saved = process.env.PAPERCLIP_NATIVE_SSH_REUSE;
  if (value === undefined) delete process.env.PAPERCLIP_NATIVE_SSH_REUSE;
  else process.env.PAPERCLIP_NATIVE_SSH_REUSE = value;
  try {
    return await fn();
  } finally {
    if (saved === undefined) delete process.env.PAPERCLIP_NATIVE_SSH_REUSE;
    else process.env.PAPERCLIP_NATIVE_SSH_REUSE = saved;
  }
}

/**
 * A remote-managed run's workspace lifecycle: prepare, baseline, an "agent" that commits,
 * edits, adds and deletes on the remote, restore with the baseline and the history.
 * Returns the remote state after the prepare, the restored workspace and the progress lines
 * (MB figures, which depend on timing only in the intermediate lines, kept as they are).
 */
async function lifecycle(localDir, remoteDir, files) {
  const lines = [];
  const onProgress = (line) => {
    lines.push(line);
  };
  const { gitBacked } = await prepareWorkspaceForSshExecution({ spec: server.spec, localDir, remoteDir, onProgress });
  const afterPrepare = { ...repoState(remoteDir), files: contentState(remoteDir, [".git", ".paperclip-runtime"]) };
  const baselineSnapshot = await captureDirectorySnapshot(localDir, { exclude: GIT_BASELINE_EXCLUDE });
  const agent = [
    `cd '${remoteDir}'`,
    `printf 'agent edit\\n' > '${files[3]}'`,
    "git -c user.name=Agent -c user.email=agent@example.com commit -q -am 'agent commit'",
    `printf 'uncommitted\\n' > '${files[4]}'`,
    "printf 'new\\n' > agent-new.txt",
    `rm -f '${files[5]}'`,
  ].join(" && ");
  await runSshCommand(server.config, agent, {
    env: { GIT_AUTHOR_DATE: PINNED_DATE, GIT_COMMITTER_DATE: PINNED_DATE },
    timeoutMs: 30_000,
  });
  await restoreWorkspaceFromSshExecution({
    spec: server.spec,
    localDir,
    remoteDir,
    baselineSnapshot,
    restoreGitHistory: gitBacked,
    onProgress,
  });
  return {
    gitBacked,
    afterPrepare,
    restored: { ...repoState(localDir), files: contentState(localDir) },
    // The phases in order and the last line of each (the intermediate ones depend on how
    // the bytes arrived).
    ...lastLines(lines),
  };
}

/** The phases of progress `lines` in order of first appearance, and each phase's last line. */
function lastLines(lines) {
  const last = new Map();
  for (const line of lines) last.set(line.replace(/:.*$/s, ""), line);
  return { phases: [...last.keys()], terminal: [...last.values()] };
}

beforeAll(async () => {
  if (process.getuid?.() === 0)
    throw new Error("run the SSH suites as an unprivileged user (see scripts/test/full.sh), not as root");
  work = mkdtempSync(path.join(os.tmpdir(), "pc-ssh-reuse-test-"));
  server = await startSshd(path.join(work, "sshd"));
}, 30_000);

afterEach(() => {
  closeIdleSshSessions();
});

afterAll(async () => {
  closeIdleSshSessions();
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("SSH session reuse", () => {
  it("a git workspace lifecycle reuses sessions and ends exactly as with reuse off", async () => {
    const seed = runSeed();
    try {
      const { dir, files } = gitWorkspace("lifecycle", createRandom(seed).next);
      const twin = `${dir}-twin`;
      cpSync(dir, twin, { recursive: true, verbatimSymlinks: true });
      closeIdleSshSessions();
      const on = await withReuse(undefined, () => counted(() => lifecycle(dir, places.remote("on"), files)));
      closeIdleSshSessions();
      const off = await withReuse("0", () => counted(() => lifecycle(twin, places.remote("off"), files)));

      expect(on.value.gitBacked).toBe(true);
      expect(on.value.afterPrepare).toEqual(off.value.afterPrepare);
      expect(on.value.restored).toEqual(off.value.restored);
      expect(on.value.terminal).toEqual(off.value.terminal);
      expect(on.value.phases).toEqual(off.value.phases);
      // The agent's commit and edits came back.
      expect(on.value.restored.log).toContain("agent commit");
      expect(on.value.restored.files["agent-new.txt"]).toBeDefined();

      // Without reuse: a session per step (bundle import, tree push, deleted-path removal,
      // the agent's command, bundle export, size probe, tree pull), each closed after use.
      expect(off.delta.reused).toBe(0);
      expect(off.delta.opened).toBeGreaterThanOrEqual(7);
      expect(off.logins).toBe(off.delta.opened);
      expect(off.idle).toBe(0);
      // With reuse: the same calls, most of them on a kept session; the server saw as many
      // logins as the pool opened sessions (at most the three the restore runs at once).
      const calls = on.delta.opened + on.delta.reused;
      expect(calls).toBe(off.delta.opened);
      expect(on.delta.opened).toBeLessThanOrEqual(3);
      expect(on.delta.reused).toBeGreaterThanOrEqual(calls - 3);
      expect(on.logins).toBe(on.delta.opened);
      expect(on.delta.dropped).toBe(0);
      expect(on.idle).toBeGreaterThan(0);
      // The prepare's first command took the session opened ahead of it (one of `opened`);
      // without reuse nothing is opened ahead.
      expect(on.delta.openedAhead).toBe(1);
      expect(off.delta.openedAhead).toBe(0);
    } catch (error) {
      error.message = `${error.message} (seed ${seed})`;
      throw error;
    }
  }, 120_000);

  it("a baseline restore downloads inside the workspace, on its file system, and leaves nothing behind", async () => {
    const seed = runSeed();
    const { dir, files } = gitWorkspace("staging", createRandom(seed).next);
    const remoteDir = places.remote("staging");
    const { gitBacked } = await prepareWorkspaceForSshExecution({ spec: server.spec, localDir: dir, remoteDir });
    const baselineSnapshot = await captureDirectorySnapshot(dir, { exclude: GIT_BASELINE_EXCLUDE });
    writeFileSync(path.join(remoteDir, files[6]), "remote edit\n");
    const tmpBefore = readdirSync(os.tmpdir()).filter((name) => name.startsWith("paperclip-ssh-sync-back-"));
    const seen = new Set();
    await restoreWorkspaceFromSshExecution({
      spec: server.spec,
      localDir: dir,
      remoteDir,
      baselineSnapshot,
      restoreGitHistory: gitBacked,
      onProgress: (line) => {
        if (line.includes("Restoring"))
          for (const name of readdirSync(dir))
            if (name.startsWith(".paperclip-")) seen.add(name.replace(/-\d.*$/, "-…"));
      },
    });
    expect([...seen]).toEqual([".paperclip-sandbox-restore-…"]);
    expect(readdirSync(dir).filter((name) => name.startsWith(".paperclip-"))).toEqual([]);
    expect(readdirSync(os.tmpdir()).filter((name) => name.startsWith("paperclip-ssh-sync-back-"))).toEqual(tmpBefore);
    expect(readFileSync(path.join(dir, files[6]), "utf8")).toBe("remote edit\n");
  }, 60_000);

  it("concurrent callers get sessions of their own, kept for the next calls", async () => {
    closeIdleSshSessions();
    const first = await counted(() =>
      Promise.all([1, 2, 3].map((i) => runSshCommand(server.config, `sleep 1; echo ${i}`))),
    );
    expect(first.value.map((r) => r.stdout.trim())).toEqual(["1", "2", "3"]);
    expect(first.delta).toMatchObject({ opened: 3, reused: 0, returned: 3 });
    expect(first.idle).toBe(3);
    // Three idle sessions on the server side.
    expect(server.connectionPids().length).toBeGreaterThanOrEqual(3);
    const second = await counted(() => Promise.all([4, 5].map((i) => runSshCommand(server.config, `echo ${i}`))));
    expect(second.value.map((r) => r.stdout.trim())).toEqual(["4", "5"]);
    expect(second.delta).toMatchObject({ opened: 0, reused: 2, returned: 2 });
    expect(second.logins).toBe(0);
  }, 60_000);

  it("keeps a session after a command that failed cleanly, drops it after a timeout or an abort", async () => {
    closeIdleSshSessions();
    await runSshCommand(server.config, "true");
    // A non-zero exit is the command's result: the session is fine.
    const failed = await counted(() => runSshCommand(server.config, "echo no >&2; exit 3").catch((e) => e));
    expect(failed.value.code).toBe(3);
    expect(failed.value.message).toBe("no");
    expect(failed.delta).toMatchObject({ reused: 1, returned: 1, dropped: 0 });
    // A timeout leaves the channel mid-command: the session is disconnected, not kept.
    const timedOut = await counted(() => runSshCommand(server.config, "sleep 5", { timeoutMs: 300 }).catch((e) => e));
    expect(timedOut.value.killed).toBe(true);
    expect(timedOut.delta).toMatchObject({ reused: 1, returned: 0, dropped: 1 });
    expect(timedOut.idle).toBe(0);
    // An aborted pull (of a 4 GB sparse file, so it is still running when the abort comes).
    const big = places.remote("big");
    mkdirSync(big, { recursive: true });
    execFileSync("truncate", ["-s", "4G", path.join(big, "zeros.bin")]);
    const controller = new AbortController();
    const local = places.local("aborted-pull");
    const aborted = await counted(async () => {
      const leased = () => sshPoolStats().opened + sshPoolStats().reused;
      const before = leased();
      const pull = syncDirectoryFromSsh({
        spec: server.spec,
        remoteDir: big,
        localDir: local,
        signal: controller.signal,
      }).catch((e) => e);
      // Abort once the pull holds its session (and the remote tar is streaming).
      while (leased() === before) await new Promise((resolve) => setTimeout(resolve, 10));
      await new Promise((resolve) => setTimeout(resolve, 100));
      controller.abort();
      return await pull;
    });
    expect(aborted.value.name).toBe("AbortError");
    expect(aborted.delta.returned).toBe(0);
    expect(aborted.delta.dropped).toBe(1);
    // The next call works on a new session.
    const next = await counted(() => runSshCommand(server.config, "echo ok"));
    expect(next.value.stdout.trim()).toBe("ok");
    expect(next.delta).toMatchObject({ opened: 1, reused: 0 });
  }, 60_000);

  it("a session the server closed meanwhile does not fail the next call", async () => {
    closeIdleSshSessions();
    await Promise.all([runSshCommand(server.config, "true"), runSshCommand(server.config, "true")]);
    expect(sshPoolStats().idle).toBe(2);
    // The server side of every idle session goes away (as after an sshd restart).
    expect(server.killConnections()).toBeGreaterThanOrEqual(2);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const after = await counted(() => runSshCommand(server.config, "echo still here"));
    expect(after.value.stdout.trim()).toBe("still here");
    // The newest idle session was tried, found dead and replaced by a new connection.
    expect(after.delta).toMatchObject({ retried: 1, opened: 1, reused: 0 });
    expect(after.logins).toBe(1);
    // A transfer on the other dead one works too.
    const local = places.local("after-kill");
    const remoteDir = places.remote("after-kill");
    mkdirSync(remoteDir, { recursive: true });
    writeFileSync(path.join(remoteDir, "a.txt"), "a\n");
    const pulled = await counted(() => syncDirectoryFromSsh({ spec: server.spec, remoteDir, localDir: local }));
    expect(contentState(local)).toEqual(contentState(remoteDir));
    expect(pulled.delta.retried + pulled.delta.reused).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it("idle sessions close by themselves", async () => {
    closeIdleSshSessions();
    await runSshCommand(server.config, "true");
    expect(sshPoolStats().idle).toBe(1);
    const expiredBefore = sshPoolStats().expired;
    const until = Date.now() + 30_000;
    while (sshPoolStats().idle > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 250));
    expect(sshPoolStats().idle).toBe(0);
    expect(sshPoolStats().expired).toBe(expiredBefore + 1);
  }, 40_000);

  it.each([
    // A remote that is no git repository: the export fails, the tree would pull fine.
    ["no-git", true],
    // A remote directory that does not exist: both fail, refused as a workspace gone (the
    // export's check is the one).
    ["missing", false],
  ])(
    "an overlapped restore fails as the sequential steps do when the history export fails (%s)",
    async (name, create) => {
      const results = {};
      for (const reuse of [undefined, "0"]) {
        const remoteDir = places.remote(`${name}-${reuse ?? "on"}`);
        if (create) {
          mkdirSync(remoteDir, { recursive: true });
          writeFileSync(path.join(remoteDir, "x.txt"), "x\n");
        }
        const localDir = places.local("no-git-local");
        git(localDir, ["init", "-q", "-b", "main"]);
        writeFileSync(path.join(localDir, "x.txt"), "x\n");
        git(localDir, ["add", "-A"]);
        git(localDir, ["commit", "-q", "-m", "one"]);
        const baselineSnapshot = await captureDirectorySnapshot(localDir, { exclude: GIT_BASELINE_EXCLUDE });
        const lines = [];
        const error = await withReuse(reuse, () =>
          restoreWorkspaceFromSshExecution({
            spec: server.spec,
            localDir,
            remoteDir,
            baselineSnapshot,
            restoreGitHistory: true,
            onProgress: (line) => {
              lines.push(line);
            },
          }).catch((e) => e),
        );
        results[reuse ?? "on"] = {
          message: error.message.split(remoteDir).join("<remote>"),
          code: error.code,
          lines,
          files: contentState(localDir),
          refs: git(localDir, ["for-each-ref"]),
        };
      }
      expect(results.on.message).toMatch(
        name === "missing" ? /^The remote workspace <remote> is missing/ : /not a git repository|fatal|No such file/,
      );
      expect(results.on.code).toBe(
        name === "missing" ? "ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE" : "ERR_PAPERCLIP_NATIVE_SSH_REMOTE_FAILED",
      );
      expect(results.on).toEqual(results["0"]);
      // Nothing of the tree pull was shown.
      expect(results.on.lines.some((line) => line.includes("Restoring"))).toBe(false);
    },
    60_000,
  );
});
