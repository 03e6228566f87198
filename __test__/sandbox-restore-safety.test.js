// The sandbox is untrusted: a restore archive with hostile members is refused with a coded
// error and the host workspace (tree and git state) stays exactly as it was; a runner that
// fails or times out mid-transfer leaves a `failed at` progress line, no workspace change,
// no host temp file and no staged upload in the sandbox.
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it, onTestFinished } from "vitest";
import { prepareCommandManagedRuntime } from "../lib/command-managed-runtime.js";
import { spawnRunner, withInlinePull } from "./helpers/sandbox-runner.js";
import { RawArchive, treeState } from "./helpers/tar.js";

const scratch = mkdtempSync(path.join(os.tmpdir(), "pc-sandbox-safety-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let counter = 0;
const fresh = (label) => {
  const dir = path.join(scratch, `${label}-${(counter += 1)}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};

// Every host temp file the lane makes goes to os.tmpdir(): give each test a private one.
let tmp;
let savedTmp;
beforeEach(() => {
  tmp = fresh("tmp");
  savedTmp = process.env.TMPDIR;
  process.env.TMPDIR = tmp;
});
afterEach(() => {
  if (savedTmp === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmp;
});
/**
 * The host temp files left in `tmp`. The runner runs the sandbox's commands here, with the
 * same TMPDIR: the sandbox's delta mark (lib/sandbox/delta.js `deltaMark`), which a prepare
 * leaves in the sandbox on purpose, is not one of them.
 */
const hostTemps = () => readdirSync(tmp).filter((name) => !name.startsWith("paperclip-delta-mark-"));

const git = (dir, args) =>
  execFileSync(
    "git",
    ["-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", ...args],
    { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
  );
function gitState(dir) {
  return {
    head: git(dir, ["rev-parse", "HEAD"]).trim(),
    refs: git(dir, ["for-each-ref"]).trim(),
    status: git(dir, ["status", "--porcelain=v1", "--untracked-files=all"]),
    index: git(dir, ["ls-files", "-s"]),
  };
}

function workspace({ gitBacked }) {
  const dir = fresh("ws");
  writeFileSync(path.join(dir, "a.txt"), "a\n");
  mkdirSync(path.join(dir, "d"));
  writeFileSync(path.join(dir, "d", "b.txt"), "b\n");
  if (gitBacked) {
    git(dir, ["init", "-q"]);
    git(dir, ["add", "-A"]);
    git(dir, ["commit", "-q", "-m", "init"]);
    writeFileSync(path.join(dir, "a.txt"), "dirty\n");
  }
  return dir;
}

const outsideName = `pc-outside-${process.pid}`;
const HOSTILE = [
  [
    "a member climbing out with ..",
    () => new RawArchive().file("ok.txt", "fine").file("../escaped.txt", "evil").finish(),
    "ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY",
  ],
  [
    "an absolute member",
    () => new RawArchive().file(`/tmp/${outsideName}-abs`, "evil").finish(),
    "ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY",
  ],
  [
    "a write through an escaping symlink",
    () => new RawArchive().symlink("up", "..").file("up/escaped.txt", "evil").finish(),
    "ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY",
  ],
  [
    "an absolute symlink",
    () => new RawArchive().symlink("evil", "/etc").finish(),
    "ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY",
  ],
  [
    "a hard link to a host file",
    () => new RawArchive().hardLink("passwd", "/etc/passwd").finish(),
    "ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY",
  ],
  [
    "a truncated archive",
    () =>
      new RawArchive().file("a.txt", "overwritten").file("big.bin", Buffer.alloc(5000, 1)).finish().subarray(0, 2048),
    "ERR_PAPERCLIP_NATIVE_BAD_ARCHIVE",
  ],
];

/** A runner whose sandbox answers the restore (the full pull's archive, a delta's pull or listing) with `archive` instead of its real workspace. */
function hostileRunner(archive) {
  const made = spawnRunner();
  const execute = made.runner.execute;
  made.runner.execute = async (input) => {
    const result = await execute(input);
    const script = input.args?.[1] ?? "";
    const match = /of='([^']*workspace-download\.tar)'|tar -cf '([^']*workspace-download\.tar)'/.exec(
      script.replace(/'"'"'/g, "'"),
    );
    if (match && result.exitCode === 0) writeFileSync(match[1] ?? match[2], archive);
    // A delta restore's pull that prints its archive, or its listing that carries one: the
    // hostile one instead.
    if (script.includes("pcpull") && result.stdout.startsWith("pcpull inline\n"))
      return { ...result, stdout: `pcpull inline\n${archive.toString("base64")}\n` };
    const listing = script.includes("-newerct") ? withInlinePull(result.stdout, archive) : null;
    return listing ? { ...result, stdout: listing } : result;
  };
  return made.runner;
}

describe("restoreWorkspace refuses hostile archives from the sandbox", () => {
  for (const gitBacked of [false, true]) {
    for (const [name, archive, code] of HOSTILE) {
      it(`${name} (${gitBacked ? "git-backed" : "plain"} workspace): coded refusal, workspace untouched`, async () => {
        const local = workspace({ gitBacked });
        const remote = fresh("remote");
        const prepared = await prepareCommandManagedRuntime({
          runner: hostileRunner(archive()),
          spec: { remoteCwd: remote, timeoutMs: 30_000 },
          adapterKey: "t",
          workspaceLocalDir: local,
        });
        writeFileSync(path.join(remote, "agent.txt"), "agent work\n");
        // git status refreshes the index's stat data: read git first, then the tree.
        const beforeGit = gitBacked ? gitState(local) : null;
        const before = treeState(local);
        const lines = [];
        const error = await prepared
          .restoreWorkspace((line) => {
            lines.push(line);
          })
          .catch((e) => e);
        expect(error).toBeInstanceOf(Error);
        expect(error.code).toBe(code);
        expect(treeState(local)).toEqual(before);
        if (gitBacked) expect(gitState(local)).toEqual(beforeGit);
        expect(existsSync(path.join(path.dirname(local), "escaped.txt"))).toBe(false);
        expect(existsSync(`/tmp/${outsideName}-abs`)).toBe(false);
        expect(hostTemps()).toEqual([]);
        // The transfer itself completed: its line says so; the refusal is the extractor's.
        expect(lines.filter((line) => /Restoring workspace from environment: failed/.test(line))).toEqual([]);
      });
    }
  }
});

describe("restoreWorkspace and the workspace's own links out of the tree", () => {
  // A Python virtualenv's absolute links and a link out of the workspace went out with the
  // prepare and come back unchanged: restored as upstream restores them (placed, never
  // followed). A new absolute link from the sandbox is still refused (above).
  for (const gitBacked of [false, true]) {
    it(`come back and are restored with the sandbox's work (${gitBacked ? "git-backed" : "plain"} workspace)`, async () => {
      const local = workspace({ gitBacked });
      mkdirSync(path.join(local, ".venv", "bin"), { recursive: true });
      symlinkSync("/usr/bin/python3", path.join(local, ".venv", "bin", "python3"));
      symlinkSync("../../outside-target", path.join(local, ".venv", "up"));
      const remote = fresh("remote");
      const made = spawnRunner();
      const prepared = await prepareCommandManagedRuntime({
        runner: made.runner,
        spec: { remoteCwd: remote, timeoutMs: 30_000 },
        adapterKey: "t",
        workspaceLocalDir: local,
      });
      writeFileSync(path.join(remote, "agent.txt"), "agent work\n");
      await prepared.restoreWorkspace(() => {});
      expect(readlinkSync(path.join(local, ".venv", "bin", "python3"))).toBe("/usr/bin/python3");
      expect(readlinkSync(path.join(local, ".venv", "up"))).toBe("../../outside-target");
      expect(treeState(local)["agent.txt"]).toBeDefined();
      expect(hostTemps()).toEqual([]);
    });
  }

  it("a link the sandbox retargeted is refused; workspace untouched", async () => {
    const local = workspace({ gitBacked: false });
    symlinkSync("/usr/bin/python3", path.join(local, "python3"));
    const remote = fresh("remote");
    const made = spawnRunner();
    const prepared = await prepareCommandManagedRuntime({
      runner: made.runner,
      spec: { remoteCwd: remote, timeoutMs: 30_000 },
      adapterKey: "t",
      workspaceLocalDir: local,
    });
    rmSync(path.join(remote, "python3"));
    symlinkSync("/etc/passwd", path.join(remote, "python3"));
    const before = treeState(local);
    const error = await prepared.restoreWorkspace(() => {}).catch((e) => e);
    expect(error.code).toBe("ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY");
    expect(treeState(local)).toEqual(before);
  });
});

describe("restoreWorkspace bounds what the sandbox sends back (limits)", () => {
  const BOMBS = [
    [
      "entry count",
      { maxEntries: 20 },
      (remote) => {
        for (let i = 0; i < 40; i += 1) writeFileSync(path.join(remote, `f${i}.txt`), "x");
      },
      "maxEntries",
    ],
    [
      "total size",
      { maxBytes: 64 * 1024 },
      (remote) => {
        for (let i = 0; i < 4; i += 1) writeFileSync(path.join(remote, `f${i}.bin`), Buffer.alloc(32 * 1024, i));
      },
      "maxBytes",
    ],
    [
      "one huge member",
      { maxFileBytes: 1024 * 1024 },
      (remote) => {
        writeFileSync(path.join(remote, "huge.bin"), Buffer.alloc(4 * 1024 * 1024, 7));
      },
      "maxFileBytes",
    ],
  ];
  for (const [name, limits, grow, limit] of BOMBS) {
    it(`a bomb by ${name} is refused at its bound; workspace untouched`, async () => {
      const local = workspace({ gitBacked: false });
      const remote = fresh("remote");
      const made = spawnRunner();
      const prepared = await prepareCommandManagedRuntime({
        runner: made.runner,
        spec: { remoteCwd: remote, timeoutMs: 30_000 },
        adapterKey: "t",
        workspaceLocalDir: local,
        limits,
      });
      grow(remote);
      const before = treeState(local);
      const error = await prepared.restoreWorkspace(() => {}).catch((e) => e);
      expect(error).toBeInstanceOf(Error);
      expect(error.code).toBe("ERR_PAPERCLIP_NATIVE_ARCHIVE_LIMIT_EXCEEDED");
      expect(error.limit).toBe(limit);
      expect(treeState(local)).toEqual(before);
      expect(hostTemps()).toEqual([]);
    });
  }

  it("within its bounds the same restore applies the sandbox's work", async () => {
    const local = workspace({ gitBacked: false });
    const remote = fresh("remote");
    const made = spawnRunner();
    const prepared = await prepareCommandManagedRuntime({
      runner: made.runner,
      spec: { remoteCwd: remote, timeoutMs: 30_000 },
      adapterKey: "t",
      workspaceLocalDir: local,
      limits: { maxEntries: 100, maxBytes: 1 << 20 },
    });
    writeFileSync(path.join(remote, "agent.txt"), "agent work\n");
    await prepared.restoreWorkspace(() => {});
    expect(treeState(local)["agent.txt"]).toBeDefined();
  });

  it("a bad limits value fails the prepare before any work", async () => {
    const local = workspace({ gitBacked: false });
    const made = spawnRunner();
    const error = await prepareCommandManagedRuntime({
      runner: made.runner,
      spec: { remoteCwd: fresh("remote"), timeoutMs: 30_000 },
      adapterKey: "t",
      workspaceLocalDir: local,
      limits: { maxEntrys: 3 },
    }).catch((e) => e);
    expect(error.code).toBe("ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT");
  });
});

describe("a runner that fails or times out mid-transfer", () => {
  it("restore: the second 3 MiB read fails; failed-at line, workspace and git untouched, no temp files", async () => {
    // The full pull's reads (a delta's pull that fails falls back to it: sandbox-restore-delta.test.js).
    process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = "off";
    onTestFinished(() => {
      delete process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA;
    });
    const local = workspace({ gitBacked: true });
    const remote = fresh("remote");
    const made = spawnRunner();
    const prepared = await prepareCommandManagedRuntime({
      runner: made.runner,
      spec: { remoteCwd: remote, timeoutMs: 30_000 },
      adapterKey: "t",
      workspaceLocalDir: local,
    });
    writeFileSync(path.join(remote, "big.bin"), Buffer.alloc(8 * 1024 * 1024, 5));
    const execute = made.runner.execute;
    made.runner.execute = async (input) => {
      if (/^dd if=.*workspace-download\.tar.* skip=1 /.test(input.args?.[1] ?? "")) {
        return {
          exitCode: 255,
          signal: null,
          timedOut: false,
          stdout: "",
          stderr: "connection reset",
          pid: null,
          startedAt: null,
        };
      }
      return execute(input);
    };
    const beforeGit = gitState(local);
    const before = treeState(local);
    const lines = [];
    await expect(
      prepared.restoreWorkspace((line) => {
        lines.push(line);
      }),
    ).rejects.toThrow(/skip=1 count=1 2>\/dev\/null \| base64 failed with exit code 255:\nstderr: connection reset/);
    expect(treeState(local)).toEqual(before);
    expect(gitState(local)).toEqual(beforeGit);
    expect(hostTemps()).toEqual([]);
    expect(
      lines.some((line) => /Restoring workspace from environment: failed at \d+% \(3\.0\/\d+\.\d MB\)/.test(line)),
    ).toBe(true);
    // The remote archive was removed.
    expect(readdirSync(path.join(remote, ".paperclip-runtime", "t")).filter((n) => n.endsWith(".tar"))).toEqual([]);
  });

  it("prepare: an upload slice times out; failed-at line, no staged upload left, no temp files", async () => {
    const local = workspace({ gitBacked: false });
    writeFileSync(path.join(local, "big.bin"), Buffer.alloc(7 * 1024 * 1024, 9));
    const remote = fresh("remote");
    const made = spawnRunner();
    const execute = made.runner.execute;
    let slices = 0;
    made.runner.execute = async (input) => {
      if ((input.args?.[1] ?? "").startsWith("base64 -d >> ") && (slices += 1) === 2) {
        return {
          exitCode: null,
          signal: "SIGTERM",
          timedOut: true,
          stdout: "",
          stderr: "",
          pid: null,
          startedAt: null,
        };
      }
      return execute(input);
    };
    const lines = [];
    await expect(
      prepareCommandManagedRuntime({
        runner: made.runner,
        spec: { remoteCwd: remote, timeoutMs: 30_000 },
        adapterKey: "t",
        workspaceLocalDir: local,
        onProgress: (line) => {
          lines.push(line);
        },
      }),
    ).rejects.toThrow(
      /^base64 -d >> '.*workspace-upload\.tar\.paperclip-upload\.[0-9a-f-]+' failed with exit code null$/,
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^\[paperclip\] Syncing workspace to environment: failed at 4\d% \(3\.0\/7\.\d MB\)/),
    );
    expect(hostTemps()).toEqual([]);
    const leftovers = [];
    const walk = (dir) => {
      for (const name of readdirSync(dir, { withFileTypes: true })) {
        if (name.name.includes(".paperclip-upload.")) leftovers.push(name.name);
        if (name.isDirectory()) walk(path.join(dir, name.name));
      }
    };
    walk(remote);
    expect(leftovers).toEqual([]);
  });
});

describe("signal (our addition)", () => {
  it("aborting mid-upload rejects with an AbortError and leaves no staged upload and no temp file", async () => {
    const local = workspace({ gitBacked: false });
    writeFileSync(path.join(local, "big.bin"), Buffer.alloc(10 * 1024 * 1024, 1));
    const remote = fresh("remote");
    const made = spawnRunner();
    const controller = new AbortController();
    const execute = made.runner.execute;
    let slices = 0;
    made.runner.execute = async (input) => {
      if ((input.args?.[1] ?? "").startsWith("base64 -d >> ") && (slices += 1) === 2) controller.abort();
      return execute(input);
    };
    await expect(
      prepareCommandManagedRuntime({
        runner: made.runner,
        spec: { remoteCwd: remote, timeoutMs: 30_000 },
        adapterKey: "t",
        workspaceLocalDir: local,
        signal: controller.signal,
      }),
    ).rejects.toMatchObject({ name: "AbortError", code: "ABORT_ERR" });
    expect(slices).toBeLessThan(4);
    expect(hostTemps()).toEqual([]);
    const leftovers = [];
    const walk = (dir) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        if (entry.name.includes(".paperclip-upload.")) leftovers.push(entry.name);
        if (entry.isDirectory()) walk(path.join(dir, entry.name));
      }
    };
    walk(remote);
    expect(leftovers).toEqual([]);
  });

  it("a restore after the signal aborted rejects with an AbortError and changes nothing", async () => {
    const local = workspace({ gitBacked: true });
    const remote = fresh("remote");
    const controller = new AbortController();
    const prepared = await prepareCommandManagedRuntime({
      runner: spawnRunner().runner,
      spec: { remoteCwd: remote, timeoutMs: 30_000 },
      adapterKey: "t",
      workspaceLocalDir: local,
      signal: controller.signal,
    });
    writeFileSync(path.join(remote, "agent.txt"), "agent work\n");
    controller.abort();
    const beforeGit = gitState(local);
    const before = treeState(local);
    await expect(prepared.restoreWorkspace()).rejects.toMatchObject({ name: "AbortError" });
    expect(treeState(local)).toEqual(before);
    expect(gitState(local)).toEqual(beforeGit);
    expect(hostTemps()).toEqual([]);
  });
});
