// Fault injection on the SSH lane with real parts (docs/reliability.md, "SSH faults"): an
// OpenSSH sshd in a network namespace joined to this host by a veth pair (helpers/netns.js),
// whose link is taken down (nothing passes), made to drop the server's replies (a blackhole
// route inside the namespace), or whose listener is stopped (SIGSTOP: the kernel still
// accepts connections, nothing sends a banner: a tarpit, a wedged sshd). Under each fault
// every kind of call (restoreWorkspaceFromSshExecution and prepareWorkspaceForSshExecution
// with the delta on and off, after a prepare and, for the prepare, without one;
// syncDirectoryFromSsh after an earlier pull; runSshCommand after a prepare and on its own)
// must end within its connect timeout plus a margin with ETIMEDOUT, leave the host
// workspace entry for entry as it was, with no staging left, and the next call, the link
// restored, must succeed with the right tree. Then pooled sessions on a link that dies:
// their keepalives go unanswered, the pool drops them before its idle limit, and no sshd
// session process is left on the server.
//
// Needs root (namespaces), sshd and the unprivileged user the SSH suites log in as
// ($SSH_TEST_USER, default pcnative, created by scripts/test/full.sh): it runs in npm test's
// root vitest pass (sshd runs as root inside the namespace, the login is that user's);
// elsewhere it is skipped, the reason in the suite's name.
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeIdleSshSessions, sshPoolStats } from "../lib/extras.js";
import {
  prepareWorkspaceForSshExecution,
  restoreWorkspaceFromSshExecution,
  runSshCommand,
  syncDirectoryFromSsh,
} from "../lib/ssh.js";
import { captureDirectorySnapshot } from "../lib/workspace-restore-merge.js";
import { createNetns, netnsSupport } from "./helpers/netns.js";
import { childrenOf, remoteState, startSshd } from "./helpers/sshd.js";

/** The calls' connect timeout, and what a call may take beyond it (local work, a loaded machine). */
const CONNECT_TIMEOUT_MS = 3000;
const MARGIN_MS = 3000;
const USER = process.env.SSH_TEST_USER ?? "pcnative";
/** The baseline excludes of a git-backed remote-managed runtime (upstream's). */
const GIT_BASELINE_EXCLUDE = [".git", ".git/*", ".paperclip-runtime"];
const PINNED_DATE = "2026-01-02T03:04:05Z";

function unsupported() {
  const netns = netnsSupport();
  if (netns) return netns;
  if (!existsSync("/usr/sbin/sshd")) return "needs sshd (openssh-server)";
  if (spawnSync("id", [USER]).status !== 0) return `needs the user ${USER} (scripts/test/full.sh creates it)`;
  // sshd as root refuses a locked account (useradd's '!' password); scripts/test/full.sh unlocks it.
  const shadow = spawnSync("getent", ["shadow", USER], { encoding: "utf8" }).stdout.split(":")[1] ?? "";
  if (shadow.startsWith("!")) return `the account ${USER} is locked (scripts/test/full.sh unlocks it)`;
  return null;
}
const skipReason = unsupported();

let work;
let link;
let server;
let healthy;
let uid;
let gid;
let counter = 0;
const savedEnv = {};

function setEnv(name, value) {
  if (!(name in savedEnv)) savedEnv[name] = process.env[name];
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

function git(dir, args) {
  return execFileSync("git", ["-C", dir, "-c", "user.name=Test", "-c", "user.email=test@example.com", ...args], {
    encoding: "utf8",
    env: { ...process.env, GIT_AUTHOR_DATE: PINNED_DATE, GIT_COMMITTER_DATE: PINNED_DATE },
    stdio: ["ignore", "pipe", "pipe"],
  }).trimEnd();
}

/** A new local directory and a new remote one (owned by the login user), numbered. */
function places(name) {
  counter += 1;
  const local = path.join(work, "local", `${name}-${counter}`);
  mkdirSync(local, { recursive: true });
  return { local, remote: path.join(server.workspace, `${name}-${counter}`), n: counter };
}

/** A spec of its own for case `n`: a `known_hosts` comment keys its pooled sessions apart. */
function specFor(base, n) {
  return { ...base, knownHosts: `${base.knownHosts}# case ${n}\n` };
}

/** A git workspace: a commit, then a dirty edit and an untracked file. */
function gitWorkspace(dir) {
  git(dir, ["init", "-q", "-b", "main"]);
  for (let i = 0; i < 12; i += 1) {
    mkdirSync(path.join(dir, `d${i % 3}`), { recursive: true });
    writeFileSync(path.join(dir, `d${i % 3}`, `f${i}.txt`), `${i} ${"x".repeat(i * 200)}\n`);
  }
  git(dir, ["add", "-A"]);
  git(dir, ["commit", "-q", "-m", "initial"]);
  writeFileSync(path.join(dir, "d0", "f0.txt"), "dirty local edit\n");
  writeFileSync(path.join(dir, "untracked.txt"), "untracked\n");
}

/** Writes `rel` in a remote directory as the login user would own it. */
function writeRemote(remoteDir, rel, content) {
  const file = path.join(remoteDir, rel);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  chownSync(file, uid, gid);
}

/** The host workspace as a user sees it: every entry (but `.git`), and the repository's state. */
function hostState(dir) {
  const isGit = existsSync(path.join(dir, ".git"));
  return {
    tree: remoteState(dir, [".git"]),
    git: isGit
      ? {
          head: git(dir, ["rev-parse", "HEAD"]),
          refs: git(dir, ["for-each-ref", "--format=%(refname) %(objectname)"]),
          status: git(dir, ["status", "--porcelain=v1", "--untracked-files=all"]),
        }
      : null,
  };
}

/** Our staging names at the top of `dir` (none may outlive a call). */
function staging(dir) {
  return readdirSync(dir).filter((name) => name.startsWith(".paperclip-") && name !== ".paperclip-runtime");
}

/** The tree of `dir` without `.git` and the runtime directory, as the SSH suites compare a remote with a local tree. */
function workTree(dir) {
  return remoteState(dir, [".git", ".paperclip-runtime"]);
}

const quiet = () => undefined;
const options = { connectTimeoutMs: CONNECT_TIMEOUT_MS };

/** A prepare of case `c`, and what the remote must hold after it. */
const prepareCall = (c) =>
  prepareWorkspaceForSshExecution({
    spec: c.spec,
    localDir: c.local,
    remoteDir: c.remote,
    onProgress: quiet,
    ...options,
  });
function prepareCheck(c) {
  expect(workTree(c.remote)).toEqual(workTree(c.local));
}

/**
 * The calls under test, each `{ name, setup, call, next }`: `setup(base)` makes its places
 * (and, where the case says so, a prepare or a pull before) and returns its context; `call`
 * is the call made under the fault, `next` the same call with the link restored, returning
 * what it must have brought (checked by `check`).
 */
const CALLS = {
  restore: {
    async setup(base) {
      const { local, remote, n } = places("restore");
      const spec = specFor(base, n);
      gitWorkspace(local);
      await prepareWorkspaceForSshExecution({ spec, localDir: local, remoteDir: remote, ...options });
      const baselineSnapshot = await captureDirectorySnapshot(local, { exclude: GIT_BASELINE_EXCLUDE });
      writeRemote(remote, "agent-new.txt", "written by the agent\n");
      return { spec, local, remote, baselineSnapshot };
    },
    call: (c) =>
      restoreWorkspaceFromSshExecution({
        spec: c.spec,
        localDir: c.local,
        remoteDir: c.remote,
        baselineSnapshot: c.baselineSnapshot,
        restoreGitHistory: true,
        onProgress: quiet,
        ...options,
      }),
    check(c, before) {
      const { "agent-new.txt": added, ...rest } = hostState(c.local).tree;
      expect(added).toMatch(/^file /);
      expect(rest).toEqual(before.tree);
    },
  },
  "prepare (first)": {
    async setup(base) {
      const { local, remote, n } = places("prepare-first");
      gitWorkspace(local);
      return { spec: specFor(base, n), local, remote };
    },
    call: prepareCall,
    check: prepareCheck,
  },
  "prepare (after a prepare)": {
    async setup(base) {
      const { local, remote, n } = places("prepare-again");
      const spec = specFor(base, n);
      gitWorkspace(local);
      await prepareWorkspaceForSshExecution({ spec, localDir: local, remoteDir: remote, ...options });
      writeFileSync(path.join(local, "d1", "f1.txt"), "changed since the last prepare\n");
      writeFileSync(path.join(local, "new-since.txt"), "new since the last prepare\n");
      return { spec, local, remote };
    },
    call: prepareCall,
    check: prepareCheck,
  },
  syncDirectoryFromSsh: {
    async setup(base) {
      const { local, remote, n } = places("pull");
      const spec = specFor(base, n);
      writeRemote(remote, "a.txt", "a\n");
      writeRemote(remote, "sub/b.txt", "b\n");
      execFileSync("chown", ["-R", `${uid}:${gid}`, remote]);
      // An earlier pull: a pooled session, and the local copy the fault must leave alone.
      await syncDirectoryFromSsh({ spec, remoteDir: remote, localDir: local, ...options });
      writeRemote(remote, "sub/c.txt", "c, new on the remote\n");
      return { spec, local, remote };
    },
    call: (c) =>
      syncDirectoryFromSsh({ spec: c.spec, remoteDir: c.remote, localDir: c.local, onProgress: quiet, ...options }),
    check(c) {
      expect(remoteState(c.local, [])).toEqual(remoteState(c.remote, []));
    },
  },
  "runSshCommand (after a prepare)": {
    async setup(base) {
      const { local, remote, n } = places("run-after");
      const spec = specFor(base, n);
      writeFileSync(path.join(local, "file.txt"), "plain\n");
      await prepareWorkspaceForSshExecution({ spec, localDir: local, remoteDir: remote, ...options });
      return { spec, local: null };
    },
    call: (c) => runSshCommand(c.spec, "echo ran", options),
    check(_c, _before, result) {
      expect(result.stdout).toBe("ran\n");
    },
  },
  "runSshCommand (on its own)": {
    async setup(base) {
      counter += 1;
      return { spec: specFor(base, counter), local: null };
    },
    call: (c) => runSshCommand(c.spec, "echo ran", options),
    check(_c, _before, result) {
      expect(result.stdout).toBe("ran\n");
    },
  },
};

/** The batches of calls: each runs with `PAPERCLIP_NATIVE_SSH_DELTA` as it says (the variable is the process's). */
const BATCHES = [
  {
    delta: "on",
    calls: [
      "restore",
      "prepare (first)",
      "prepare (after a prepare)",
      "syncDirectoryFromSsh",
      "runSshCommand (after a prepare)",
      "runSshCommand (on its own)",
    ],
  },
  { delta: "off", calls: ["restore", "prepare (after a prepare)"] },
];

/** The faults: how each is put on and lifted, and what a call under it fails with. */
const FAULTS = [
  {
    name: "the link down",
    on: () => link.linkDown(),
    off: () => link.restore(),
    message: /^ssh: connect to host \S+ port 22: Connection timed out/,
  },
  {
    name: "the server's replies dropped",
    on: () => link.dropReplies(),
    off: () => link.restore(),
    message: /^ssh: connect to host \S+ port 22: Connection timed out/,
  },
  {
    name: "a listener that never speaks (sshd stopped)",
    // Pooled sessions still work (their processes run): each call connects anew.
    on: () => {
      closeIdleSshSessions();
      process.kill(server.pid, "SIGSTOP");
    },
    off: () => process.kill(server.pid, "SIGCONT"),
    message: /^ssh: connect to host \S+ port 22: Connection timed out during banner exchange$/,
  },
];

/** Settles `promise`, with the time it took. */
async function timed(promise) {
  const started = performance.now();
  try {
    const value = await promise();
    return { value, ms: performance.now() - started };
  } catch (error) {
    return { error, ms: performance.now() - started };
  }
}

describe.skipIf(skipReason)(`SSH faults${skipReason ? ` (skipped: ${skipReason})` : ""}`, () => {
  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), "pc-faults-ssh-"));
    // The login user reads its authorized keys and writes the workspaces below.
    chmodSync(work, 0o755);
    setEnv("PAPERCLIP_HOME", path.join(work, "home"));
    uid = Number(execFileSync("id", ["-u", USER], { encoding: "utf8" }));
    gid = Number(execFileSync("id", ["-g", USER], { encoding: "utf8" }));
    link = createNetns();
    server = await startSshd(path.join(work, "sshd"), {
      user: USER,
      listenAddress: link.nsAddress,
      prefix: link.prefix,
    });
    healthy = await startSshd(path.join(work, "healthy"), { user: USER });
  }, 60_000);

  afterAll(async () => {
    closeIdleSshSessions();
    if (link?.fault()) link.restore();
    if (server) {
      process.kill(server.pid, "SIGCONT");
      await server.stop();
    }
    await healthy?.stop();
    link?.destroy();
    for (const [name, value] of Object.entries(savedEnv)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    if (work) rmSync(work, { recursive: true, force: true });
  });

  for (const fault of FAULTS) {
    for (const batch of BATCHES) {
      describe(`${fault.name}, delta ${batch.delta}`, () => {
        const results = new Map();
        beforeAll(async () => {
          setEnv("PAPERCLIP_NATIVE_SSH_DELTA", batch.delta === "off" ? "0" : undefined);
          const cases = await Promise.all(batch.calls.map((name) => CALLS[name].setup(server.spec)));
          const before = cases.map((c) => (c.local ? hostState(c.local) : null));
          fault.on();
          let faulted;
          try {
            // Every call at once: each has its own sessions and places, and its own clock.
            faulted = await Promise.all(cases.map((c, i) => timed(() => CALLS[batch.calls[i]].call(c))));
          } finally {
            fault.off();
          }
          const after = cases.map((c) => (c.local ? { state: hostState(c.local), staging: staging(c.local) } : null));
          const next = await Promise.all(cases.map((c, i) => timed(() => CALLS[batch.calls[i]].call(c))));
          batch.calls.forEach((name, i) => {
            results.set(name, { c: cases[i], before: before[i], faulted: faulted[i], after: after[i], next: next[i] });
          });
        }, 120_000);

        for (const name of batch.calls) {
          it(`${name}: ETIMEDOUT within its connect timeout, host untouched, the next call right`, () => {
            const { c, before, faulted, after, next } = results.get(name);
            // Ends on time, with a coded connect timeout.
            expect(faulted.error, `resolved after ${faulted.ms.toFixed(0)} ms`).toBeDefined();
            expect({ code: faulted.error.code, message: faulted.error.message }).toEqual({
              code: "ETIMEDOUT",
              message: expect.stringMatching(fault.message),
            });
            expect(faulted.ms, "ended before its connect timeout").toBeGreaterThanOrEqual(CONNECT_TIMEOUT_MS * 0.95);
            expect(faulted.ms, "ended within its connect timeout and the margin").toBeLessThanOrEqual(
              CONNECT_TIMEOUT_MS + MARGIN_MS,
            );
            // The host workspace as it was, no staging left.
            if (c.local) {
              expect(after.staging).toEqual([]);
              expect(after.state).toEqual(before);
            }
            // The next call, the link restored, succeeds with the right tree.
            expect(next.error, String(next.error?.stack ?? "")).toBeUndefined();
            CALLS[name].check(c, before, next.value);
          });
        }
      });
    }
  }

  describe("pooled sessions on a link that dies", () => {
    beforeAll(() => {
      // Keepalives every 2 s, one unanswered is enough (ServerAliveInterval 2, CountMax 1).
      setEnv("PAPERCLIP_NATIVE_SSH_KEEPALIVE_INTERVAL", "2");
      setEnv("PAPERCLIP_NATIVE_SSH_KEEPALIVE_COUNT_MAX", "1");
      setEnv("PAPERCLIP_NATIVE_SSH_DELTA", undefined);
    });

    /** Polls `what` every 100 ms for up to `ms`; resolves the milliseconds it took, or null. */
    async function within(ms, what) {
      const started = performance.now();
      while (performance.now() - started < ms) {
        if (what()) return performance.now() - started;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return null;
    }

    /** The per-connection sshd processes of the faulted server (children of its listener). */
    const sessions = () => childrenOf(server.pid);

    for (const fault of FAULTS.slice(0, 2)) {
      it(`are dropped when their keepalives go unanswered (${fault.name}), and no sshd session is left`, async () => {
        closeIdleSshSessions();
        expect(await within(5000, () => sessions().length === 0)).not.toBeNull();
        counter += 1;
        const spec = specFor(server.spec, counter);
        const other = specFor(healthy.spec, counter);
        await runSshCommand(spec, "true", options);
        await runSshCommand(other, "true", options);
        const base = sshPoolStats();
        expect(base.idle).toBe(2);
        expect(sessions().length).toBeGreaterThan(0);
        fault.on();
        let dropped;
        let atDrop;
        try {
          // Dropped after one unanswered keepalive: 2 to 4 s after going idle, well within the
          // pool's 10 s idle limit, which would close it anyway.
          dropped = await within(9000, () => sshPoolStats().dead > base.dead);
          atDrop = sshPoolStats();
          // The session on the healthy link kept answering: still pooled, and used.
          await runSshCommand(other, "true", options);
        } finally {
          fault.off();
        }
        // Our goodbye (SSH disconnect, FIN) waits behind the keepalive TCP retransmits; with
        // the link back it arrives and the server's session process ends.
        const gone = await within(20_000, () => sessions().length === 0);
        expect(dropped, "the pool dropped the dead session before its idle limit").not.toBeNull();
        expect(atDrop.dead - base.dead).toBe(1);
        expect(atDrop.expired - base.expired).toBe(0);
        expect(atDrop.idle).toBe(1);
        expect(sshPoolStats().reused - atDrop.reused).toBe(1);
        expect(gone, "no sshd session process left").not.toBeNull();
        // The link back: a new session.
        expect((await runSshCommand(spec, "echo back", options)).stdout).toBe("back\n");
      }, 60_000);
    }
  });
});
