// Ignore resolution at the JS level: hardening proofs, bounds at their exact
// edges, failures, the executor seam (compared with upstream's), deadlines, cancellation
// and bounded concurrency.
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { execFileSync } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import * as upstreamGit from "@paperclipai/adapter-utils/git-workspace-sync";
import * as upstreamSandbox from "@paperclipai/adapter-utils/sandbox-managed-runtime";
import * as ours from "@paperclipai/adapter-utils-native/git-workspace-sync";
import * as oursSandbox from "@paperclipai/adapter-utils-native/sandbox-managed-runtime";
import * as oursRoot from "@paperclipai/adapter-utils-native";
import { createSlots, runBounded } from "../lib/native.js";
import { nativeScanSlots, scanDeadlines, UPSTREAM_DEADLINES } from "../lib/ignore-scan.js";
import { git, setupGitEnv } from "./helpers/repos.js";

const REASONS = oursSandbox.REFERENCED_SOURCE_IGNORE_FAILURE_REASONS;
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-ignore-js-"));
const home = path.join(work, "home");
const env = setupGitEnv(home);
const savedHome = process.env.HOME;
let counter = 0;

beforeAll(() => {
  mkdirSync(home, { recursive: true });
  process.env.HOME = home;
});
afterAll(() => {
  process.env.HOME = savedHome;
  rmSync(work, { recursive: true, force: true });
});
afterEach(() => {
  ours.setExpensiveWorkspaceGitExecutor(null);
  upstreamGit.setExpensiveWorkspaceGitExecutor(null);
  vi.useRealTimers();
});

/** A fresh repository with one commit; `files` maps relative paths to contents. */
function makeRepo(files = {}, { commit = true } = {}) {
  const repo = path.join(work, `repo-${(counter += 1)}`);
  mkdirSync(repo, { recursive: true });
  git(repo, ["init", "-q"], env);
  for (const [rel, body] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(repo, rel)), { recursive: true });
    writeFileSync(path.join(repo, rel), body);
  }
  if (commit) {
    git(repo, ["add", "-A"], env);
    git(repo, ["commit", "-qm", "init", "--allow-empty"], env);
  }
  return repo;
}

/** Every path under `root` with its size, mode, mtime, ctime and inode. */
function statTree(root) {
  const out = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      const st = lstatSync(full, { bigint: true });
      out.push(`${path.relative(root, full)} ${st.size} ${st.mode} ${st.mtimeNs} ${st.ctimeNs} ${st.ino}`);
      if (st.isDirectory()) walk(full);
    }
  };
  walk(root);
  return out;
}

/** Both implementations' resolution of `dir`, with the same executor registered on each. */
async function bothResolutions(dir, executor) {
  if (executor) {
    ours.setExpensiveWorkspaceGitExecutor(executor);
    upstreamGit.setExpensiveWorkspaceGitExecutor(executor);
  }
  const [mine, theirs] = await Promise.all([
    oursSandbox.resolveReferencedSourceIgnore(dir),
    upstreamSandbox.resolveReferencedSourceIgnore(dir),
  ]);
  return { mine, theirs };
}

describe("exports", () => {
  it("has upstream's constants, and the root re-exports the subpath's functions", () => {
    for (const name of [
      "WORKSPACE_GIT_SCAN_SATURATED_CODE",
      "REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT",
      "REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES",
      "PROJECT_REPOSITORIES_DIR",
      "GIT_ARCHIVE_EXCLUDES",
    ]) {
      expect(ours[name], name).toEqual(upstreamGit[name]);
    }
    for (const name of [
      "readReferencedSourceGitIgnoredPaths",
      "setExpensiveWorkspaceGitExecutor",
      "readGitWorkspaceSnapshot",
      "ReferencedSourceIgnoreScanLimitExceededError",
    ]) {
      expect(oursRoot[name], name).toBe(ours[name]);
    }
    expect(oursRoot.resolveReferencedSourceIgnore).toBe(oursSandbox.resolveReferencedSourceIgnore);
    const error = new ours.ReferencedSourceIgnoreScanLimitExceededError("m");
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe("ReferencedSourceIgnoreScanLimitExceededError");
    expect(error.message).toBe("m");
  });
});

describe("in-process scan", () => {
  it("reads the toplevel and ignored paths like upstream, from the top and from a subdirectory", async () => {
    const repo = makeRepo({ ".gitignore": "secret.env\nbuild/\n*.log\n!keep.log\n", "packages/app/index.ts": "x" });
    for (const rel of [
      "secret.env",
      "build/out.js",
      "packages/app/build/x",
      "packages/app/debug.log",
      "packages/app/keep.log",
      "packages/app/secret.env",
    ]) {
      mkdirSync(path.dirname(path.join(repo, rel)), { recursive: true });
      writeFileSync(path.join(repo, rel), "x");
    }
    const mine = await ours.readReferencedSourceGitIgnoredPaths(repo);
    expect(mine).toEqual(await upstreamGit.readReferencedSourceGitIgnoredPaths(repo));
    expect(mine.ignoredPaths).toEqual([
      "build",
      "packages/app/build",
      "packages/app/debug.log",
      "packages/app/secret.env",
      "secret.env",
    ]);
    const app = path.join(repo, "packages", "app");
    expect(await ours.readReferencedSourceGitIgnoredPaths(app)).toEqual(
      await upstreamGit.readReferencedSourceGitIgnoredPaths(app),
    );
    const { mine: resolved, theirs } = await bothResolutions(app);
    expect(resolved).toEqual({ kind: "git", ignoredPaths: ["build", "debug.log", "secret.env"] });
    expect(resolved).toEqual(theirs);
  });

  it("returns null / other outside a repository, like upstream", async () => {
    const plain = path.join(work, "plain");
    mkdirSync(plain, { recursive: true });
    expect(await ours.readReferencedSourceGitIgnoredPaths(plain)).toBeNull();
    const { mine, theirs } = await bothResolutions(plain);
    expect(mine).toEqual({ kind: "other" });
    expect(theirs).toEqual(mine);
  });

  it("fails like upstream on a missing directory, a file, and a git directory", async () => {
    const repo = makeRepo({ "f.txt": "x" });
    for (const dir of [path.join(work, "missing"), path.join(repo, "f.txt"), path.join(repo, ".git")]) {
      await expect(ours.readReferencedSourceGitIgnoredPaths(dir)).rejects.toThrow();
      await expect(upstreamGit.readReferencedSourceGitIgnoredPaths(dir)).rejects.toThrow();
      const { mine, theirs } = await bothResolutions(dir);
      expect(mine).toEqual({ kind: "failed", reason: REASONS.scanFailed });
      expect(theirs).toEqual(mine);
    }
  });

  it('treats an empty directory argument as the current directory, as `git -C ""` does', async () => {
    expect(await ours.readReferencedSourceGitIgnoredPaths("")).toEqual(
      await upstreamGit.readReferencedSourceGitIgnoredPaths(""),
    );
    const { mine, theirs } = await bothResolutions("");
    expect(mine).toEqual(theirs);
  });

  it("fails closed with git-ignore-scan-failed on a corrupt index, without leaking the path", async () => {
    const repo = makeRepo({ "a.txt": "a", ".gitignore": "*.log\n" });
    writeFileSync(path.join(repo, ".git", "index"), "not a valid index\n");
    await expect(ours.readReferencedSourceGitIgnoredPaths(repo)).rejects.toThrow();
    const { mine, theirs } = await bothResolutions(repo);
    expect(mine).toEqual({ kind: "failed", reason: REASONS.scanFailed });
    expect(theirs).toEqual(mine);
  });

  it("drops the entry equal to a wholly ignored project directory, as upstream", async () => {
    const repo = makeRepo({ ".gitignore": "vendor/\n", "a.txt": "a" });
    mkdirSync(path.join(repo, "vendor", "lib"), { recursive: true });
    writeFileSync(path.join(repo, "vendor", "lib", "x.js"), "x");
    const { mine, theirs } = await bothResolutions(path.join(repo, "vendor"));
    expect(mine).toEqual({ kind: "git", ignoredPaths: [] });
    expect(theirs).toEqual(mine);
  });

  it("sorts with localeCompare in the process locale, and keeps names' spaces", async () => {
    const names = [
      "a",
      "z",
      "å",
      "ä",
      "ö",
      "A.log",
      "a.log",
      "a-b",
      "a.b",
      "é",
      " lead",
      "trail ",
      "#hash",
      "!bang",
      "10",
      "9",
    ];
    const repo = makeRepo({ ".gitignore": "*\n!.gitignore\n" });
    for (const name of names) writeFileSync(path.join(repo, name), "x");
    const mine = await ours.readReferencedSourceGitIgnoredPaths(repo);
    expect(mine.ignoredPaths).toEqual([...names].sort((a, b) => a.localeCompare(b)));
    expect(mine).toEqual(await upstreamGit.readReferencedSourceGitIgnoredPaths(repo));
    // Under another locale the order changes, and still matches upstream's.
    const probe = path.join(path.dirname(fileURLToPath(import.meta.url)), "helpers", "ignore-locale-probe.mjs");
    const run = (lang) =>
      JSON.parse(
        execFileSync(process.execPath, [probe, repo], {
          env: { ...process.env, LANG: lang, LC_ALL: lang },
          encoding: "utf8",
        }),
      );
    const sv = run("sv_SE.UTF-8");
    const c = run("C.UTF-8");
    expect(sv.ours).toEqual(sv.upstream);
    expect(c.ours).toEqual(c.upstream);
    expect(sv.ours.scan.ignoredPaths).not.toEqual(c.ours.scan.ignoredPaths);
    expect(sv.ours.snapshot.ignoredPaths).toEqual(sv.ours.scan.ignoredPaths);
  });
});

describe("hardening", () => {
  it("changes nothing in the repository: every file, mode, mtime, ctime and inode is unchanged", async () => {
    const repo = makeRepo({ ".gitignore": "*.log\nbuild/\n", "src/a.txt": "a", "src/b.txt": "b" });
    writeFileSync(path.join(repo, "src", "a.txt"), "modified"); // a stale index entry git would refresh
    writeFileSync(path.join(repo, "x.log"), "x");
    mkdirSync(path.join(repo, "build"));
    writeFileSync(path.join(repo, "build", "o"), "o");
    await new Promise((r) => setTimeout(r, 20));
    const before = statTree(repo);
    await ours.readReferencedSourceGitIgnoredPaths(repo);
    await oursSandbox.resolveReferencedSourceIgnore(path.join(repo, "src"));
    expect(statTree(repo)).toEqual(before);
  });

  it("runs no program: hostile fsmonitor, hooksPath, filters, pager and a fake git on PATH leave no marker", async () => {
    const repo = makeRepo({ ".gitignore": "*.log\n", "a.txt": "a", ".gitattributes": "* filter=evil diff=evil\n" });
    writeFileSync(path.join(repo, "x.log"), "x");
    const marker = path.join(work, "pwned");
    const evil = `sh -c 'touch ${marker}'`;
    git(repo, ["config", "core.fsmonitor", evil], env);
    git(repo, ["config", "filter.evil.clean", evil], env);
    git(repo, ["config", "filter.evil.smudge", evil], env);
    git(repo, ["config", "filter.evil.process", evil], env);
    git(repo, ["config", "diff.evil.textconv", evil], env);
    git(repo, ["config", "core.pager", evil], env);
    git(repo, ["config", "core.untrackedCache", "true"], env);
    const hooks = path.join(work, "evil-hooks");
    mkdirSync(hooks, { recursive: true });
    for (const hook of [
      "post-index-change",
      "pre-commit",
      "post-checkout",
      "fsmonitor-watchman",
      "reference-transaction",
    ]) {
      writeFileSync(path.join(hooks, hook), `#!/bin/sh\ntouch ${marker}\n`);
      chmodSync(path.join(hooks, hook), 0o755);
    }
    git(repo, ["config", "core.hooksPath", hooks], env);
    // A `git` on PATH that leaves the marker: the in-process scan must never start it.
    const fakeBin = path.join(work, "fake-bin");
    mkdirSync(fakeBin, { recursive: true });
    writeFileSync(path.join(fakeBin, "git"), `#!/bin/sh\ntouch ${marker}\nexit 1\n`);
    chmodSync(path.join(fakeBin, "git"), 0o755);
    const savedPath = process.env.PATH;
    process.env.PATH = `${fakeBin}:${savedPath}`;
    try {
      expect(await ours.readReferencedSourceGitIgnoredPaths(repo)).toMatchObject({ ignoredPaths: ["x.log"] });
      expect(await oursSandbox.resolveReferencedSourceIgnore(repo)).toEqual({ kind: "git", ignoredPaths: ["x.log"] });
    } finally {
      process.env.PATH = savedPath;
    }
    expect(existsSync(marker)).toBe(false);
  });

  it("ignores GIT_* variables and a poisoned global or system configuration", async () => {
    const repo = makeRepo({ ".gitignore": "*.log\n", "a.txt": "a" });
    writeFileSync(path.join(repo, "x.log"), "x");
    const other = makeRepo({ ".gitignore": "*\n" });
    const bad = path.join(work, "bad-gitconfig");
    writeFileSync(bad, "this is not valid git config syntax [[[\n[core]\n\texcludesFile = /etc/passwd\n");
    const saved = { ...process.env };
    Object.assign(process.env, {
      GIT_CONFIG_GLOBAL: bad,
      GIT_CONFIG_SYSTEM: bad,
      GIT_DIR: path.join(other, ".git"),
      GIT_WORK_TREE: other,
      GIT_INDEX_FILE: "/nonexistent",
      GIT_CONFIG_COUNT: "1",
      GIT_CONFIG_KEY_0: "core.excludesFile",
      GIT_CONFIG_VALUE_0: bad,
    });
    try {
      expect(await ours.readReferencedSourceGitIgnoredPaths(repo)).toEqual({ toplevel: repo, ignoredPaths: ["x.log"] });
      expect(await upstreamGit.readReferencedSourceGitIgnoredPaths(repo)).toEqual({
        toplevel: repo,
        ignoredPaths: ["x.log"],
      });
    } finally {
      for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
      Object.assign(process.env, saved);
    }
  });
});

describe("bounds", () => {
  /** A repository with `count` ignored files at its root whose names sum to `bytes` UTF-8 bytes. */
  function repoWithIgnored(count, bytes) {
    const repo = makeRepo({ ".gitignore": "*.ig\n" });
    const base = Math.floor(bytes / count);
    const longer = bytes - base * count;
    for (let i = 0; i < count; i += 1) writeFileSync(path.join(repo, ignoredName(i, i < longer ? base + 1 : base)), "");
    return repo;
  }

  function ignoredName(i, length) {
    const stem = String(i).padStart(6, "0");
    return `${stem}${"n".repeat(length - stem.length - 3)}.ig`;
  }

  it("accepts exactly 10 000 entries and fails closed at 10 001, as upstream", async () => {
    const repo = repoWithIgnored(10_000, 10_000 * 12);
    const scan = await ours.readReferencedSourceGitIgnoredPaths(repo);
    expect(scan.ignoredPaths).toHaveLength(10_000);
    expect(scan).toEqual(await upstreamGit.readReferencedSourceGitIgnoredPaths(repo));
    writeFileSync(path.join(repo, "one-more.ig"), "");
    const error = await ours.readReferencedSourceGitIgnoredPaths(repo).catch((e) => e);
    expect(error).toBeInstanceOf(ours.ReferencedSourceIgnoreScanLimitExceededError);
    expect(error.message).toBe("referenced project ignore scan found more than 10000 ignored entries");
    const { mine, theirs } = await bothResolutions(repo);
    expect(mine).toEqual({ kind: "failed", reason: REASONS.limitExceeded });
    expect(theirs).toEqual(mine);
  }, 60_000);

  it("accepts exactly 2 MiB of path bytes and fails closed one byte over, as upstream", async () => {
    const bound = ours.REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES;
    const count = Math.ceil(bound / 250);
    const repo = repoWithIgnored(count, bound);
    const scan = await ours.readReferencedSourceGitIgnoredPaths(repo);
    expect(scan.ignoredPaths.reduce((sum, p) => sum + Buffer.byteLength(p), 0)).toBe(bound);
    expect(scan).toEqual(await upstreamGit.readReferencedSourceGitIgnoredPaths(repo));
    // One byte more: the last (shortest) name grows by one character.
    const last = count - 1;
    const length = Buffer.byteLength(ignoredName(last, Math.floor(bound / count)));
    renameSync(path.join(repo, ignoredName(last, length)), path.join(repo, ignoredName(last, length + 1)));
    const error = await ours.readReferencedSourceGitIgnoredPaths(repo).catch((e) => e);
    expect(error).toBeInstanceOf(ours.ReferencedSourceIgnoreScanLimitExceededError);
    expect(error.message).toBe(`referenced project ignore scan exceeded ${bound} UTF-8 bytes of ignored paths`);
    const { mine, theirs } = await bothResolutions(repo);
    expect(mine).toEqual({ kind: "failed", reason: REASONS.limitExceeded });
    expect(theirs).toEqual(mine);
  }, 60_000);

  it("fails as a plain scan failure when the raw listing exceeds upstream's 4 MiB output allowance", async () => {
    // 9 000 entries of ~490 bytes: under the count bound, over both the byte bound and the raw
    // allowance; upstream's maxBuffer overflow comes first, so the reason is scanFailed.
    const repo = makeRepo({ ".gitignore": "*.ig\n" });
    const dirName = (d) => `d${String(d).padStart(3, "0")}${"x".repeat(240)}`;
    for (let d = 0; d < 30; d += 1) {
      mkdirSync(path.join(repo, dirName(d)));
      writeFileSync(path.join(repo, dirName(d), "tracked.txt"), "t");
      for (let i = 0; i < 300; i += 1)
        writeFileSync(path.join(repo, dirName(d), `${String(i).padStart(4, "0")}${"y".repeat(240)}.ig`), "");
    }
    git(repo, ["add", "-A"], env);
    const { mine, theirs } = await bothResolutions(repo);
    expect(mine).toEqual({ kind: "failed", reason: REASONS.scanFailed });
    expect(theirs).toEqual(mine);
  }, 60_000);
});

describe("executor seam", () => {
  /** A recording executor that runs the real git (as a host scheduler would). */
  function recorder(calls, transform) {
    return async (input) => {
      calls.push(input);
      if (transform) {
        const out = await transform(input);
        if (out !== undefined) return out;
      }
      return await upstreamGit.runLocalGit(input.localDir, [...input.args], {
        timeout: input.timeout,
        maxBuffer: input.maxBuffer,
        env: input.env,
      });
    };
  }

  it("sends upstream's exact inputs (args, operations, timeouts, maxBuffer, hardened env) for both scan steps", async () => {
    const repo = makeRepo({ ".gitignore": "build/\n", "a.txt": "a" });
    mkdirSync(path.join(repo, "build"));
    writeFileSync(path.join(repo, "build", "o"), "o");
    const mineCalls = [];
    const theirCalls = [];
    ours.setExpensiveWorkspaceGitExecutor(recorder(mineCalls));
    upstreamGit.setExpensiveWorkspaceGitExecutor(recorder(theirCalls));
    process.env.GIT_TRACE_SETUP = "1"; // must be dropped from the hardened env
    try {
      expect(await ours.readReferencedSourceGitIgnoredPaths(repo)).toEqual(
        await upstreamGit.readReferencedSourceGitIgnoredPaths(repo),
      );
    } finally {
      delete process.env.GIT_TRACE_SETUP;
    }
    expect(mineCalls.map((c) => c.operation)).toEqual([
      "referenced_source.toplevel",
      "referenced_source.ignored_files",
    ]);
    expect(mineCalls).toEqual(theirCalls);
    expect(Object.keys(mineCalls[0]).sort()).toEqual(Object.keys(theirCalls[0]).sort());
    expect(mineCalls[0].env.GIT_TRACE_SETUP).toBeUndefined();
  });

  it("sends readGitWorkspaceSnapshot's four lanes through the executor with upstream's inputs, and matches its result", async () => {
    const repo = makeRepo({ ".gitignore": "dependencies/\n*.secret\n", "tracked.txt": "t", "gone.txt": "g" });
    mkdirSync(path.join(repo, "dependencies", "nested"), { recursive: true });
    writeFileSync(path.join(repo, "dependencies", "nested", "p"), "p");
    writeFileSync(path.join(repo, " padded untracked "), "u");
    writeFileSync(path.join(repo, "token.secret"), "s");
    writeFileSync(path.join(repo, "tracked.txt"), "changed");
    rmSync(path.join(repo, "gone.txt"));
    const mineCalls = [];
    const theirCalls = [];
    ours.setExpensiveWorkspaceGitExecutor(recorder(mineCalls));
    upstreamGit.setExpensiveWorkspaceGitExecutor(recorder(theirCalls));
    const mine = await ours.readGitWorkspaceSnapshot(repo);
    expect(mine).toEqual(await upstreamGit.readGitWorkspaceSnapshot(repo));
    expect(mine).toMatchObject({
      overlayPaths: [" padded untracked ", "tracked.txt"],
      deletedPaths: ["gone.txt"],
      ignoredPaths: ["dependencies", "token.secret"],
    });
    const byOp = (calls) => [...calls].sort((a, b) => a.operation.localeCompare(b.operation));
    expect(byOp(mineCalls)).toEqual(byOp(theirCalls));
    expect(mineCalls).toHaveLength(4);
  });

  it("reads managed project repositories and rejects what upstream rejects", async () => {
    const repo = makeRepo({ ".gitignore": ".paperclip-repositories/\n", "a.txt": "a" });
    const sub = path.join(repo, ".paperclip-repositories", "proj_1");
    mkdirSync(sub, { recursive: true });
    git(sub, ["init", "-q"], env);
    writeFileSync(path.join(sub, ".gitignore"), "*.log\n");
    writeFileSync(path.join(sub, "x.log"), "x");
    writeFileSync(path.join(sub, "new.txt"), "n");
    git(sub, ["add", ".gitignore"], env);
    git(sub, ["commit", "-qm", "s"], env);
    expect(await ours.readGitWorkspaceSnapshot(repo)).toEqual(await upstreamGit.readGitWorkspaceSnapshot(repo));
    expect(await ours.readGitWorkspaceSnapshot(path.join(repo, ".paperclip-repositories"))).toBeNull();
    mkdirSync(path.join(repo, ".paperclip-repositories", "bad name"));
    await expect(ours.readGitWorkspaceSnapshot(repo)).rejects.toThrow("Invalid project repository directory");
    await expect(upstreamGit.readGitWorkspaceSnapshot(repo)).rejects.toThrow("Invalid project repository directory");
  });

  it("parses injected output with upstream's bounds in upstream's order", async () => {
    const repo = makeRepo({ "a.txt": "a" });
    const max = ours.REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT;
    const bytes = ours.REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES;
    const outputs = [
      Array.from({ length: max }, (_, i) => `e-${i}/`).join("\0"),
      `${Array.from({ length: max + 1 }, (_, i) => `e-${i}`).join("\0")}\0`,
      `${"a".repeat(bytes)}\0\0//\0`,
      `${"a".repeat(bytes)}\0b\0`,
      `${"é".repeat(bytes / 2)}\0`,
      `${["a".repeat(bytes / 2 + 1), "b".repeat(bytes / 2 + 1), ...Array.from({ length: max + 10 }, (_, i) => `t-${i}`)].join("\0")}\0`,
      " lead\0trail \0a///\0\0z\0A\0é\0e\u0301\0\ud800\0",
      "",
    ];
    for (const stdout of outputs) {
      const executor = async (input) =>
        input.operation === "referenced_source.ignored_files"
          ? { stdout, stderr: "" }
          : upstreamGit.runLocalGit(input.localDir, [...input.args], { env: input.env });
      ours.setExpensiveWorkspaceGitExecutor(executor);
      upstreamGit.setExpensiveWorkspaceGitExecutor(executor);
      const mine = await ours.readReferencedSourceGitIgnoredPaths(repo).then(
        (v) => ({ v }),
        (e) => ({ e }),
      );
      const theirs = await upstreamGit.readReferencedSourceGitIgnoredPaths(repo).then(
        (v) => ({ v }),
        (e) => ({ e }),
      );
      const where = `output of ${stdout.length} chars`;
      expect(mine.v, where).toEqual(theirs.v);
      expect(mine.e?.message, where).toBe(theirs.e?.message);
      expect(mine.e === undefined || mine.e instanceof ours.ReferencedSourceIgnoreScanLimitExceededError, where).toBe(
        theirs.e === undefined || theirs.e instanceof upstreamGit.ReferencedSourceIgnoreScanLimitExceededError,
      );
      expect(await oursSandbox.resolveReferencedSourceIgnore(repo), where).toEqual(
        await upstreamSandbox.resolveReferencedSourceIgnore(repo),
      );
    }
  });

  it("classifies executor failures like upstream: only a completed exit 128 saying so is 'not a repository'", async () => {
    const stderr = "fatal: not a git repository (or any of the parent directories): .git";
    const cases = [
      Object.assign(new Error("x"), {
        code: "workspace_git_scan_failed",
        details: { exitCode: 128, signal: null, stderr },
      }),
      Object.assign(new Error("x"), {
        code: "workspace_git_scan_failed",
        details: { exitCode: null, signal: "SIGTERM", stderr },
      }),
      Object.assign(new Error("x"), {
        code: "workspace_git_scan_timeout",
        details: { exitCode: 128, signal: null, stderr },
      }),
      Object.assign(new Error("x"), {
        code: "workspace_git_scan_failed",
        details: { exitCode: 128, signal: null, stderr: "other" },
      }),
      Object.assign(new Error("x"), { code: "workspace_git_scan_failed" }),
      Object.assign(new Error("Command failed"), { stderr }),
      new Error("fatal: Not A Git Repository"),
      "not a git repository",
      Object.assign(new Error("boom /srv/alice/project pid 4242"), { stderr: "fatal: bad object /home/alice" }),
      null,
    ];
    for (const failure of cases) {
      const executor = async () => {
        throw failure;
      };
      ours.setExpensiveWorkspaceGitExecutor(executor);
      upstreamGit.setExpensiveWorkspaceGitExecutor(executor);
      const mine = await ours.readReferencedSourceGitIgnoredPaths("/plain-workspace").then(
        (v) => ({ v }),
        (e) => ({ e }),
      );
      const theirs = await upstreamGit.readReferencedSourceGitIgnoredPaths("/plain-workspace").then(
        (v) => ({ v }),
        (e) => ({ e }),
      );
      expect(mine, String(failure?.code ?? failure)).toEqual(theirs);
      if ("e" in mine) expect(mine.e).toBe(failure);
      const { mine: resolved, theirs: theirResolved } = await bothResolutions("/plain-workspace");
      expect(resolved).toEqual(theirResolved);
      expect(JSON.stringify(resolved)).not.toMatch(/alice|4242|plain-workspace/);
    }
  });

  it("fails closed on a non-descendant or empty toplevel, with fixed reasons only", async () => {
    const local = path.join(work, "referenced");
    mkdirSync(local, { recursive: true });
    for (const stdout of [
      "/srv/alice/project\n",
      "C:\\Users\\alice\\project\n",
      `${path.dirname(local)}/other\n`,
      "  \n",
      `${local}/..\n`,
      `${local}\n`,
    ]) {
      const { mine, theirs } = await bothResolutions(local, async (input) => ({
        stdout: input.operation === "referenced_source.toplevel" ? stdout : "x\0",
        stderr: "",
      }));
      expect(mine, JSON.stringify(stdout)).toEqual(theirs);
    }
  });

  it("retries only a saturated queue, after 1 s and 2 s on the JS timers (fake timers)", async () => {
    const repo = "/fixture/referenced-project";
    for (const failures of [0, 1, 2, 3]) {
      let calls = 0;
      ours.setExpensiveWorkspaceGitExecutor(async (input) => {
        if (input.operation === "referenced_source.toplevel") return { stdout: `${repo}\n`, stderr: "" };
        calls += 1;
        if (calls <= failures)
          throw Object.assign(new Error("queue full"), { code: ours.WORKSPACE_GIT_SCAN_SATURATED_CODE });
        return { stdout: "x\0", stderr: "" };
      });
      vi.useFakeTimers();
      const pending = oursSandbox.resolveReferencedSourceIgnore(repo);
      await vi.advanceTimersByTimeAsync(999);
      expect(calls).toBe(Math.min(failures + 1, 1));
      await vi.advanceTimersByTimeAsync(1);
      await vi.advanceTimersByTimeAsync(2_000);
      const resolution = await pending;
      vi.useRealTimers();
      expect(calls).toBe(Math.min(failures + 1, 3));
      expect(resolution).toEqual(
        failures >= 3 ? { kind: "failed", reason: REASONS.scanFailed } : { kind: "git", ignoredPaths: ["x"] },
      );
    }
  });

  it("never retries other codes", async () => {
    for (const code of [
      "workspace_git_scan_timeout",
      "workspace_git_scan_output_limit",
      "workspace_git_scan_cancelled",
      "workspace_git_scan_failed",
      "EAGAIN",
    ]) {
      let calls = 0;
      ours.setExpensiveWorkspaceGitExecutor(async () => {
        calls += 1;
        throw Object.assign(new Error("no"), { code });
      });
      expect(await oursSandbox.resolveReferencedSourceIgnore("/x")).toEqual({
        kind: "failed",
        reason: REASONS.scanFailed,
      });
      expect(calls, code).toBe(1);
    }
  });
});

describe("deadlines, cancellation and concurrency", () => {
  it("an aborted signal rejects with an AbortError (before and during a scan)", async () => {
    const repo = makeRepo({ ".gitignore": "*.log\n" });
    const controller = new AbortController();
    controller.abort();
    await expect(ours.readReferencedSourceGitIgnoredPaths(repo, { signal: controller.signal })).rejects.toMatchObject({
      name: "AbortError",
      code: "ABORT_ERR",
    });
    await expect(oursSandbox.resolveReferencedSourceIgnore(repo, { signal: controller.signal })).rejects.toMatchObject({
      name: "AbortError",
    });
    // During a scan of a large tree.
    for (let d = 0; d < 40; d += 1) {
      mkdirSync(path.join(repo, `d${d}`));
      for (let i = 0; i < 100; i += 1) writeFileSync(path.join(repo, `d${d}`, `f${i}.log`), "");
    }
    const live = new AbortController();
    const pending = ours.readReferencedSourceGitIgnoredPaths(repo, { signal: live.signal });
    live.abort();
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
    // Still works afterwards (git lists a directory of ignored files and its files too).
    const scan = await ours.readReferencedSourceGitIgnoredPaths(repo);
    expect(scan.ignoredPaths).toHaveLength(4040);
    expect(scan).toEqual(await upstreamGit.readReferencedSourceGitIgnoredPaths(repo));
  });

  it("aborting a retry wait rejects at once", async () => {
    ours.setExpensiveWorkspaceGitExecutor(async () => {
      throw Object.assign(new Error("queue full"), { code: ours.WORKSPACE_GIT_SCAN_SATURATED_CODE });
    });
    const controller = new AbortController();
    const pending = oursSandbox.resolveReferencedSourceIgnore("/x", { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    const started = Date.now();
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
    expect(Date.now() - started).toBeLessThan(900);
  });

  it("a deadline rejects with its own error, stops the native work, and frees the slot only when it stopped", async () => {
    const slots = createSlots(1);
    let finish;
    const native = new Promise((resolve) => {
      finish = resolve;
    });
    vi.useFakeTimers();
    const pending = runBounded(
      { slots, timeoutMs: 15_000, onTimeout: () => Object.assign(new Error("late"), { code: "T" }) },
      () => native,
    );
    const outcome = pending.catch((e) => e);
    await vi.advanceTimersByTimeAsync(14_999);
    expect(slots.active).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(await outcome).toMatchObject({ code: "T" });
    expect(slots.active).toBe(1); // the native call has not returned yet
    finish("done");
    await vi.advanceTimersByTimeAsync(0);
    expect(slots.active).toBe(0);
  });

  it("a scan past its deadline rejects with a timeout and resolves to git-ignore-scan-failed", async () => {
    const repo = makeRepo({ ".gitignore": "*.log\n" });
    for (let d = 0; d < 60; d += 1) {
      mkdirSync(path.join(repo, `d${d}`));
      writeFileSync(path.join(repo, `d${d}`, "t.txt"), "");
      for (let i = 0; i < 100; i += 1) writeFileSync(path.join(repo, `d${d}`, `f${i}.log`), "");
    }
    git(repo, ["add", "-A"], env);
    try {
      scanDeadlines.list = 1;
      await expect(ours.readReferencedSourceGitIgnoredPaths(repo)).rejects.toMatchObject({
        code: "ERR_PAPERCLIP_NATIVE_GIT_IGNORE_SCAN_TIMEOUT",
      });
      expect(await oursSandbox.resolveReferencedSourceIgnore(repo)).toEqual({
        kind: "failed",
        reason: REASONS.scanFailed,
      });
    } finally {
      Object.assign(scanDeadlines, UPSTREAM_DEADLINES);
    }
    // The stopped scans released their slots; a normal scan still works.
    expect((await ours.readReferencedSourceGitIgnoredPaths(repo)).ignoredPaths).toHaveLength(6000);
    await new Promise((r) => setTimeout(r, 50));
    expect(nativeScanSlots.active).toBe(0);
  });

  it("runs at most four in-process scans at once and queues the rest (FIFO)", async () => {
    const slots = createSlots(4);
    const order = [];
    const gates = [];
    const tasks = Array.from({ length: 10 }, (_, i) =>
      runBounded({ slots, timeoutMs: 60_000, onTimeout: () => new Error("t") }, () => {
        order.push(i);
        return new Promise((resolve) => gates.push(() => resolve(i)));
      }),
    );
    await new Promise((r) => setImmediate(r));
    expect(slots.active).toBe(4);
    expect(slots.queued).toBe(6);
    while (gates.length > 0) {
      gates.shift()();
      await new Promise((r) => setImmediate(r));
      expect(slots.active).toBeLessThanOrEqual(4);
    }
    expect(await Promise.all(tasks)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(slots.active).toBe(0);
  });

  it("many concurrent real scans all give upstream's answer", async () => {
    const repos = Array.from({ length: 12 }, (_, i) =>
      makeRepo({ ".gitignore": `*.log\nb${i}/\n`, "a.txt": "a" }, { commit: false }),
    );
    for (const [i, repo] of repos.entries()) {
      writeFileSync(path.join(repo, `x${i}.log`), "");
      mkdirSync(path.join(repo, `b${i}`));
      writeFileSync(path.join(repo, `b${i}`, "f"), "");
    }
    const pending = Promise.all(repos.map((r) => ours.readReferencedSourceGitIgnoredPaths(r)));
    await Promise.resolve();
    expect(nativeScanSlots.active).toBe(4);
    expect(nativeScanSlots.queued).toBe(8);
    const mine = await pending;
    expect(nativeScanSlots.active).toBe(0);
    const theirs = await Promise.all(repos.map((r) => upstreamGit.readReferencedSourceGitIgnoredPaths(r)));
    expect(mine).toEqual(theirs);
  });
});
