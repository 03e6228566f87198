// The sandbox lane under faults, with real parts (a runner that really runs every command on
// this host, base64 slices, the duplex channel, a provider's native syncIn/syncOut): a
// sandbox workspace removed, renamed or re-created empty between the prepare and the
// restore; a runner call that never settles, throws, exits non-zero, or cuts or pads its
// output on the Nth call. Each case asserts how the call ends (its code, and within its
// deadline plus a margin where it waits), the host workspace entry for entry as before the
// call (no staging left in it), and that the next run, with a healthy runner, restores the
// right tree. Upstream empties the host workspace when the sandbox's is gone, and waits
// forever on a runner call that never settles (docs/reliability.md).
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import * as upstream from "@paperclipai/adapter-utils/command-managed-runtime";
import { prepareCommandManagedRuntime } from "../lib/command-managed-runtime.js";
import { RUNNER_GRACE_MS } from "../lib/sandbox/runner-deadline.js";
import { pinnedGit, repositoryState, treeWithoutGit, writeNestedRepository } from "./helpers/git-state.js";
import { nativeSyncRunner, spawnRunner } from "./helpers/sandbox-runner.js";
import { treeState } from "./helpers/tar.js";
import { VANISHED_WORKSPACE_FAULTS } from "./helpers/vanished-workspace.js";

const scratch = mkdtempSync(path.join(os.tmpdir(), "pc-sandbox-faults-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let counter = 0;
const fresh = (label) => {
  const dir = path.join(scratch, `${label}-${(counter += 1)}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};

// Each test gets its own Paperclip home (the delta manifests) and temp directory, and the
// delta setting it asks for.
const saved = {};
beforeEach(() => {
  for (const key of ["PAPERCLIP_HOME", "TMPDIR", "PAPERCLIP_NATIVE_SANDBOX_DELTA"]) saved[key] = process.env[key];
  process.env.PAPERCLIP_HOME = fresh("home");
  process.env.TMPDIR = fresh("tmp");
});
afterEach(() => {
  for (const [key, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
});

/** A workspace: files in directories, a link, and with `big` a file of three 3 MiB slices; with `gitBacked`, committed then changed. */
function workspace({ gitBacked = false, big = false, nested = false } = {}) {
  const dir = fresh("ws");
  writeFileSync(path.join(dir, "a.txt"), "a\n");
  mkdirSync(path.join(dir, "src", "deep"), { recursive: true });
  writeFileSync(path.join(dir, "src", "main.js"), "console.log(1);\n");
  writeFileSync(path.join(dir, "src", "deep", "b.txt"), "b\n");
  if (big) writeFileSync(path.join(dir, "big.bin"), Buffer.alloc(7 * 1024 * 1024 + 11, 7));
  if (gitBacked) {
    pinnedGit(dir, ["init", "-q"]);
    pinnedGit(dir, ["add", "-A"]);
    pinnedGit(dir, ["commit", "-q", "-m", "init"]);
    writeFileSync(path.join(dir, "a.txt"), "dirty\n");
    writeFileSync(path.join(dir, "untracked.txt"), "new\n");
  }
  if (nested) writeNestedRepository(dir);
  return dir;
}

const TRANSPORTS = {
  base64: () => spawnRunner().runner,
  duplex: () => spawnRunner({ duplex: true }).runner,
  native: () => nativeSyncRunner().runner,
};

/**
 * What a test compares of the host workspace: every entry (modes, bytes, times), and the
 * repository's state. The indexes' times are left out: a `git status` of the tests' may
 * write an index again, with the same bytes.
 */
function hostState(dir, gitBacked) {
  const repository = gitBacked ? repositoryState(dir) : null;
  const tree = treeState(dir);
  for (const [member, entry] of Object.entries(tree)) if (/(^|\/)\.git\/index$/.test(member)) entry.mtime = undefined;
  return { repository, tree };
}

const prepare = (runner, local, remote, extra = {}) =>
  prepareCommandManagedRuntime({
    runner,
    spec: { remoteCwd: remote, timeoutMs: 30_000, ...extra.spec },
    adapterKey: "t",
    workspaceLocalDir: local,
    ...extra.input,
  });

/**
 * The next run with a healthy runner of the same transport, into `remote` (which the fault
 * left as it left it): the agent adds a file, and the restore brings back exactly the
 * workspace plus that file.
 */
async function nextRunRestores(transport, local, remote, gitBacked) {
  const before = treeWithoutGit(local);
  const prepared = await prepare(TRANSPORTS[transport](), local, remote);
  writeFileSync(path.join(remote, "after-fault.txt"), "the next run's work\n");
  await prepared.restoreWorkspace(() => {});
  const after = treeWithoutGit(local);
  expect(after["after-fault.txt"]).toMatchObject({ kind: "file", size: 20 });
  delete after["after-fault.txt"];
  expect(after).toEqual(before);
  if (gitBacked) expect(repositoryState(local).status).toContain("?? after-fault.txt");
}

describe("a sandbox workspace gone before the restore: refused, the host workspace untouched", () => {
  const FAULTS = VANISHED_WORKSPACE_FAULTS;
  for (const gitBacked of [false, true]) {
    for (const transport of Object.keys(TRANSPORTS)) {
      // The delta lane is our client's own transfers: a provider's syncIn/syncOut never takes it.
      for (const delta of transport === "native" ? ["auto"] : ["auto", "off"]) {
        for (const [fault, apply] of Object.entries(FAULTS)) {
          it(`${gitBacked ? "git" : "plain"} workspace, ${transport}, delta ${delta}: ${fault}`, async () => {
            process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = delta;
            const local = workspace({ gitBacked });
            const remote = path.join(fresh("sandbox"), "workspace");
            const prepared = await prepare(TRANSPORTS[transport](), local, remote);
            writeFileSync(path.join(remote, "agent.txt"), "agent work\n");
            apply(remote);
            const before = hostState(local, gitBacked);
            const started = performance.now();
            const error = await prepared.restoreWorkspace(() => {}).catch((e) => e);
            expect(performance.now() - started).toBeLessThan(30_000);
            expect(error).toBeInstanceOf(Error);
            expect(error.code).toBe("ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE");
            expect(error.reason).toBe(fault === "re-created empty" ? "emptied" : "missing");
            expect(error.remoteDir).toBe(remote);
            expect(hostState(local, gitBacked)).toEqual(before);
            await nextRunRestores(transport, local, remote, gitBacked);
          });
        }
      }
    }
  }

  it("with a project repository inside: the repository's restore, which runs first, is refused too", async () => {
    const local = workspace({ gitBacked: true, nested: true });
    const remote = path.join(fresh("sandbox"), "workspace");
    const prepared = await prepare(TRANSPORTS.base64(), local, remote);
    rmSync(remote, { recursive: true, force: true });
    const before = hostState(local, true);
    const nestedBefore = repositoryState(path.join(local, ".paperclip-repositories", "proj"));
    const error = await prepared.restoreWorkspace(() => {}).catch((e) => e);
    expect(error.code).toBe("ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE");
    expect(hostState(local, true)).toEqual(before);
    expect(repositoryState(path.join(local, ".paperclip-repositories", "proj"))).toEqual(nestedBefore);
  });
});

describe("a workspace the agent emptied itself (the prepare's runtime directory left): upstream's result", () => {
  for (const gitBacked of [false, true]) {
    for (const delta of ["auto", "off"]) {
      it(`${gitBacked ? "git" : "plain"} workspace, delta ${delta}`, async () => {
        process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = delta;
        const results = [];
        for (const lib of [{ prepareCommandManagedRuntime }, upstream]) {
          const local = workspace({ gitBacked });
          const remote = path.join(fresh("sandbox"), "workspace");
          const prepared = await lib.prepareCommandManagedRuntime({
            runner: spawnRunner().runner,
            spec: { remoteCwd: remote, timeoutMs: 30_000 },
            adapterKey: "t",
            workspaceLocalDir: local,
          });
          // Every entry of the tree (the repository stays: without it the restore's history
          // export fails, in both libraries).
          for (const name of readdirSync(remote)) {
            if (name !== ".paperclip-runtime" && name !== ".git")
              rmSync(path.join(remote, name), { recursive: true, force: true });
          }
          await prepared.restoreWorkspace(() => {});
          results.push(treeWithoutGit(local));
        }
        expect(results[0]).toEqual(results[1]);
        // Every file of the workspace went with the agent's emptying.
        expect(Object.values(results[0]).filter((entry) => entry.kind === "file")).toEqual([]);
      });
    }
  }
});

/**
 * A runner of `transport` whose `execute` (or channel opening, or syncIn/syncOut) misbehaves
 * as `fault` says on the `nth` call for which `matches(script)` holds: `hang` (never settles),
 * `throw` (rejects), `exit` (exits 1 with a message on stderr), `truncate` (half its stdout),
 * `pad` (its stdout and more). `fault.at` is when the faulty call began.
 */
function faultyRunner(transport, { kind, nth = 1, matches = () => true, on = "execute" }) {
  const runner = TRANSPORTS[transport]();
  const fault = { at: null };
  let seen = 0;
  const wrap = (original, describe) =>
    async function (input) {
      if (!matches(describe(input)) || (seen += 1) !== nth) return original.call(this, input);
      fault.at = performance.now();
      if (kind === "hang") return new Promise(() => {});
      if (kind === "throw") throw new Error("injected runner failure");
      if (kind === "exit")
        return {
          exitCode: 1,
          signal: null,
          timedOut: false,
          stdout: "",
          stderr: "injected",
          pid: null,
          startedAt: null,
        };
      const result = await original.call(this, input);
      const stdout = String(result.stdout ?? "");
      return {
        ...result,
        // Padded with more base64 text (three bytes more of the slice).
        stdout: kind === "truncate" ? stdout.slice(0, Math.floor(stdout.length / 2)) : `${stdout.trimEnd()}QUFB\n`,
      };
    };
  if (on === "execute") runner.execute = wrap(runner.execute, (input) => input.args?.[1] ?? "");
  else runner[on] = wrap(runner[on], (input) => JSON.stringify(input ?? null));
  return { runner, fault };
}

describe("a runner call that never settles ends at the deadline we enforce, coded", () => {
  const TIMEOUT_MS = 4_000;
  /** How much later than its deadline a timed-out call may end here (a loaded 2-core machine). */
  const MARGIN_MS = 3_000;
  const CASES = [
    // [name, transport, delta, phase, fault]
    [
      "the second upload slice",
      "base64",
      "off",
      "prepare",
      { kind: "hang", nth: 2, matches: (s) => s.includes("base64 -d >>") },
    ],
    [
      "the second read of the restore archive",
      "base64",
      "off",
      "restore",
      { kind: "hang", nth: 2, matches: (s) => /^dd if=.*workspace-download\.tar/.test(s) },
    ],
    [
      "the restore's listing (delta)",
      "base64",
      "auto",
      "restore",
      { kind: "hang", nth: 1, matches: (s) => s.includes("pcdelta") && s.includes("-newerct") },
    ],
    [
      "the restore archive's command",
      "base64",
      "off",
      "restore",
      { kind: "hang", nth: 1, matches: (s) => s.includes("workspace-download.tar") && s.includes("set -- *") },
    ],
    [
      "the opening of a duplex upload channel",
      "duplex",
      "off",
      "prepare",
      { kind: "hang", nth: 1, on: "openDuplexChannel" },
    ],
    ["a provider's syncIn", "native", "auto", "prepare", { kind: "hang", nth: 1, on: "syncIn" }],
  ];
  for (const [name, transport, delta, phase, fault] of CASES) {
    for (const gitBacked of [false, true]) {
      if (gitBacked && name.includes("duplex")) continue;
      it(`${name} (${transport}, ${gitBacked ? "git" : "plain"} workspace)`, async () => {
        process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = delta;
        const local = workspace({ gitBacked, big: true });
        const remote = path.join(fresh("sandbox"), "workspace");
        const made = faultyRunner(transport, fault);
        const before = hostState(local, gitBacked);
        let error;
        if (phase === "prepare") {
          error = await prepare(made.runner, local, remote, { spec: { timeoutMs: TIMEOUT_MS } }).catch((e) => e);
        } else {
          const prepared = await prepare(made.runner, local, remote, { spec: { timeoutMs: TIMEOUT_MS } });
          writeFileSync(path.join(remote, "agent.txt"), "agent work\n");
          error = await prepared.restoreWorkspace(() => {}).catch((e) => e);
        }
        const ended = performance.now();
        // The faulty call was reached (else the error says what ended the call first).
        expect({ reached: made.fault.at !== null, error: error?.message }).toMatchObject({ reached: true });
        expect(error).toBeInstanceOf(Error);
        expect(error.code).toBe("ERR_PAPERCLIP_NATIVE_SANDBOX_TIMEOUT");
        // A command's deadline is its timeout; a provider's syncIn adds its post-upload
        // commands' timeouts to its files' transfer deadline.
        if (fault.on === "syncIn") {
          expect(error.timeoutMs % TIMEOUT_MS).toBe(0);
          expect(error.timeoutMs).toBeGreaterThan(TIMEOUT_MS);
        } else expect(error.timeoutMs).toBe(TIMEOUT_MS);
        expect(ended - made.fault.at).toBeGreaterThanOrEqual(error.timeoutMs);
        expect(ended - made.fault.at).toBeLessThan(error.timeoutMs + RUNNER_GRACE_MS + MARGIN_MS);
        expect(hostState(local, gitBacked)).toEqual(before);
        expect(readdirSync(process.env.TMPDIR).filter((n) => !n.startsWith("paperclip-delta-mark-"))).toEqual([]);
        await nextRunRestores(transport, local, remote, gitBacked);
      });
    }
  }
});

describe("a runner that throws, exits non-zero, cuts or pads its output: refused, coded, host untouched", () => {
  const CASES = [
    // [name, delta, phase, fault, code]
    [
      "throws on the restore archive's command",
      "off",
      "restore",
      { kind: "throw", matches: (s) => s.includes("set -- *") },
      undefined,
    ],
    [
      "exits non-zero on the restore archive's command",
      "off",
      "restore",
      { kind: "exit", matches: (s) => s.includes("set -- *") },
      "ERR_PAPERCLIP_NATIVE_SANDBOX_COMMAND_FAILED",
    ],
    [
      "cuts the second read of the restore archive",
      "off",
      "restore",
      { kind: "truncate", nth: 2, matches: (s) => /^dd if=.*workspace-download/.test(s) },
      "ERR_PAPERCLIP_NATIVE_SANDBOX_TRANSFER_FAILED",
    ],
    [
      "pads the second read of the restore archive",
      "off",
      "restore",
      { kind: "pad", nth: 2, matches: (s) => /^dd if=.*workspace-download/.test(s) },
      "ERR_PAPERCLIP_NATIVE_SANDBOX_TRANSFER_FAILED",
    ],
    [
      "exits non-zero on the second upload slice",
      "off",
      "prepare",
      { kind: "exit", nth: 2, matches: (s) => s.includes("base64 -d >>") },
      "ERR_PAPERCLIP_NATIVE_SANDBOX_COMMAND_FAILED",
    ],
    [
      "throws on the upload's rename",
      "off",
      "prepare",
      { kind: "throw", matches: (s) => /^mv -f .*paperclip-upload/.test(s) },
      undefined,
    ],
  ];
  for (const [name, delta, phase, fault, code] of CASES) {
    it(`${name}`, async () => {
      process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = delta;
      const local = workspace({ big: true });
      const remote = path.join(fresh("sandbox"), "workspace");
      const made = faultyRunner("base64", fault);
      const before = hostState(local, false);
      let error;
      if (phase === "prepare") error = await prepare(made.runner, local, remote).catch((e) => e);
      else {
        const prepared = await prepare(made.runner, local, remote);
        writeFileSync(path.join(remote, "agent.txt"), "agent work\n");
        error = await prepared.restoreWorkspace(() => {}).catch((e) => e);
      }
      expect(made.fault.at).not.toBeNull();
      expect(error).toBeInstanceOf(Error);
      if (code) expect(error.code).toBe(code);
      // A runner's own error comes through as it threw it.
      else expect(error.message).toBe("injected runner failure");
      expect(hostState(local, false)).toEqual(before);
      expect(readdirSync(process.env.TMPDIR).filter((n) => !n.startsWith("paperclip-delta-mark-"))).toEqual([]);
      await nextRunRestores("base64", local, remote, false);
    });
  }
});

describe("a duplex channel that fails: coded errors, host untouched", () => {
  const TIMEOUT_MS = 4_000;
  /**
   * A duplex runner whose first channel for an upload (`phase: "prepare"`) or a read of the
   * restore archive (`"restore"`) runs `script` in place of ours, or (`closes`) reports its
   * transport closed as soon as it is written to.
   */
  function duplexFault({ phase, script, closes = false }) {
    const runner = TRANSPORTS.duplex();
    const open = runner.openDuplexChannel;
    let faulted = false;
    runner.openDuplexChannel = async (input) => {
      const reads = input.command[2].includes("while IFS= read -r n");
      if (faulted || reads !== (phase === "restore")) return open(input);
      faulted = true;
      if (script) return open({ command: [input.command[0], "-c", script] });
      const channel = await open(input);
      let onExit = () => undefined;
      return {
        ...channel,
        onExit(listener) {
          onExit = listener;
          channel.onExit(listener);
        },
        write(data) {
          channel.write(data);
          if (closes) setImmediate(() => onExit({ exitCode: null, transportClosed: true }));
        },
      };
    };
    return runner;
  }
  const CASES = [
    [
      "the upload's command exits 3",
      { phase: "prepare", script: "exit 3" },
      "ERR_PAPERCLIP_NATIVE_SANDBOX_TRANSFER_FAILED",
      /failed with exit code 3$/,
    ],
    [
      "the upload's channel closes first",
      { phase: "prepare", closes: true },
      "ERR_PAPERCLIP_NATIVE_SANDBOX_TRANSFER_FAILED",
      /the channel closed before the command exited/,
    ],
    [
      "the upload's channel goes silent",
      { phase: "prepare", script: "sleep 60" },
      "ERR_PAPERCLIP_NATIVE_SANDBOX_TIMEOUT",
      /timed out after 4000 ms without progress/,
    ],
    [
      "the restore read's command exits 1",
      { phase: "restore", script: "exit 1" },
      "ERR_PAPERCLIP_NATIVE_SANDBOX_TRANSFER_FAILED",
      /failed with exit code 1$/,
    ],
    [
      "the restore read's channel gives no size",
      { phase: "restore", script: "echo not-a-size; sleep 60" },
      "ERR_PAPERCLIP_NATIVE_SANDBOX_TRANSFER_FAILED",
      /Could not determine remote file size/,
    ],
  ];
  for (const [name, fault, code, message] of CASES) {
    it(`${name}`, async () => {
      process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = "off";
      const local = workspace({ big: true });
      const remote = path.join(fresh("sandbox"), "workspace");
      const runner = duplexFault(fault);
      const before = hostState(local, false);
      let started = performance.now();
      let error;
      if (fault.phase === "prepare")
        error = await prepare(runner, local, remote, { spec: { timeoutMs: TIMEOUT_MS } }).catch((e) => e);
      else {
        const prepared = await prepare(runner, local, remote, { spec: { timeoutMs: TIMEOUT_MS } });
        writeFileSync(path.join(remote, "agent.txt"), "agent work\n");
        started = performance.now();
        error = await prepared.restoreWorkspace(() => {}).catch((e) => e);
      }
      // The failing call, with what ran before it in the same prepare or restore.
      expect(performance.now() - started).toBeLessThan(TIMEOUT_MS + RUNNER_GRACE_MS + 5_000);
      expect(error).toBeInstanceOf(Error);
      expect(error.code).toBe(code);
      expect(error.message).toMatch(message);
      expect(hostState(local, false)).toEqual(before);
      await nextRunRestores("duplex", local, remote, false);
    });
  }
});
