// The SSH workspace lifecycle (prepareWorkspaceForSshExecution /
// restoreWorkspaceFromSshExecution) against a real OpenSSH sshd on 127.0.0.1, ours next to
// upstream's on twin workspaces: the same remote repository and tree after a prepare, the
// same local commits (ids included: commit dates are pinned) and tree after a restore, for
// git workspaces (fast-forward, merge of a concurrent local commit, graft of unrelated
// history) and plain directories. Also: upstream's progress lines for the bundle
// transfers, no `ssh` or `tar` child process on this host (upstream's run is the control:
// the sampler sees its `ssh`), a wrong host key refused before anything changes, an abort
// that leaves no temporary ref or bundle behind. Run as an unprivileged user in CI.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/ssh";
import { captureDirectorySnapshot as upstreamCapture } from "@paperclipai/adapter-utils/workspace-restore-merge";
import { sanitizeGitRemoteUrl } from "@paperclipai/adapter-utils/git-workspace-sync";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { prepareWorkspaceForSshExecution, restoreWorkspaceFromSshExecution, runSshCommand } from "../lib/ssh.js";
import { credentialFreeRemoteUrl } from "../lib/local-git.js";
import { captureDirectorySnapshot } from "../lib/workspace-restore-merge.js";
import { contentState } from "./helpers/git-state.js";
import { descendantsOf, generateKey, scratchPlaces, startSshd } from "./helpers/sshd.js";

// Pinned commit dates: the merge and graft commits both implementations write (with the
// process environment) get the same ids.
const PINNED_DATE = "2026-01-02T03:04:05Z";
process.env.GIT_AUTHOR_DATE = PINNED_DATE;
process.env.GIT_COMMITTER_DATE = PINNED_DATE;

const impls = {
  ours: {
    prepare: prepareWorkspaceForSshExecution,
    restore: restoreWorkspaceFromSshExecution,
    capture: captureDirectorySnapshot,
  },
  upstream: {
    prepare: upstream.prepareWorkspaceForSshExecution,
    restore: upstream.restoreWorkspaceFromSshExecution,
    capture: upstreamCapture,
  },
};

let server;
let work;

const places = scratchPlaces(
  () => work,
  () => server.workspace,
);
const scratch = places.local;
const remotePath = places.remote;

/** `git` with a fixed identity; returns trimmed stdout. */
function git(dir, args) {
  return execFileSync("git", ["-C", dir, "-c", "user.name=Test", "-c", "user.email=test@example.com", ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  }).trimEnd();
}

/** Runs a script on the remote (this machine through sshd), with pinned commit dates. */
async function remote(script) {
  const result = await runSshCommand(server.config, script, {
    env: { GIT_AUTHOR_DATE: PINNED_DATE, GIT_COMMITTER_DATE: PINNED_DATE },
    timeoutMs: 30_000,
    maxBuffer: 1024 * 1024,
  });
  return result.stdout.trim();
}

/** What a git repository says about itself: HEAD, branch, status, origin, commit graph. */
function repoState(dir) {
  let origin = null;
  try {
    origin = git(dir, ["remote", "get-url", "origin"]);
  } catch {
    /* none */
  }
  return {
    head: git(dir, ["rev-parse", "HEAD"]),
    branch: git(dir, ["rev-parse", "--abbrev-ref", "HEAD"]),
    status: git(dir, ["status", "--porcelain=v1", "--untracked-files=all"]),
    origin,
    log: git(dir, ["log", "--format=%H %P %s", "HEAD"]),
    refs: git(dir, ["for-each-ref", "--format=%(refname)", "refs/paperclip"]),
  };
}

/** A local git workspace: a commit on `main`, then a dirty edit, an untracked file, a deleted tracked file and an AppleDouble file. */
function gitWorkspace(name) {
  const dir = scratch(name);
  git(dir, ["init", "-q", "-b", "main"]);
  git(dir, ["remote", "add", "origin", "https://user:secret@example.com/org/repo.git?token=x#frag"]);
  mkdirSync(path.join(dir, "src"));
  writeFileSync(path.join(dir, "tracked.txt"), "base\n");
  writeFileSync(path.join(dir, "src", "main.js"), "console.log(1);\n");
  writeFileSync(path.join(dir, "gone.txt"), "to be deleted\n");
  git(dir, ["add", "-A"]);
  git(dir, ["commit", "-q", "-m", "initial"]);
  writeFileSync(path.join(dir, "tracked.txt"), "dirty local\n");
  writeFileSync(path.join(dir, "untracked.txt"), "from local\n");
  writeFileSync(path.join(dir, "._tracked.txt"), "AppleDouble, stays local\n");
  rmSync(path.join(dir, "gone.txt"));
  return dir;
}

/** A copy of `dir` for the other implementation (same objects, same commit ids). */
function twin(dir) {
  const copy = `${dir}-twin`;
  cpSync(dir, copy, { recursive: true, verbatimSymlinks: true });
  return copy;
}

/** The parent of `pid` (from /proc), or 0 once it is gone. */
function parentOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return 0;
  }
}

/** True when `root` is an ancestor of `pid` (walked up now, so a just-forked process counts). */
function isUnder(pid, root) {
  for (let at = parentOf(pid); at > 1; at = parentOf(at)) if (at === root) return true;
  return false;
}

/**
 * Names of the processes started under this one while `fn` ran (sampled from /proc), not
 * counting the test's own sshd and what it runs for the remote side.
 */
async function childCommandsDuring(fn) {
  const seen = new Map();
  let running = true;
  const sampler = (async () => {
    while (running) {
      for (const pid of descendantsOf(process.pid)) {
        if (pid === server.pid || isUnder(pid, server.pid)) continue;
        if (seen.has(pid)) continue;
        try {
          seen.set(pid, readFileSync(`/proc/${pid}/comm`, "utf8").trim());
        } catch {
          /* gone */
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  })();
  try {
    await fn();
  } finally {
    running = false;
    await sampler;
  }
  return new Set(seen.values());
}

function leftoverTempDirs() {
  return readdirSync(os.tmpdir()).filter(
    (name) => name.startsWith("paperclip-ssh-bundle-") || name.startsWith("paperclip-ssh-sync-back-"),
  );
}

beforeAll(async () => {
  if (process.getuid?.() === 0)
    throw new Error("run the SSH suites as an unprivileged user (see scripts/test/full.sh), not as root");
  work = mkdtempSync(path.join(os.tmpdir(), "pc-ssh-workspace-test-"));
  server = await startSshd(path.join(work, "sshd"));
}, 30_000);

afterAll(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("prepareWorkspaceForSshExecution / restoreWorkspaceFromSshExecution", () => {
  it("carries a git workspace there and back exactly as upstream does", async () => {
    const local = { ours: gitWorkspace("git-rt"), upstream: null };
    local.upstream = twin(local.ours);
    const remoteDir = { ours: remotePath("git-rt-ours"), upstream: remotePath("git-rt-upstream") };
    const prepared = {};
    for (const name of ["ours", "upstream"]) {
      prepared[name] = await impls[name].prepare({
        spec: server.spec,
        localDir: local[name],
        remoteDir: remoteDir[name],
      });
    }
    expect(prepared.ours).toEqual({ gitBacked: true });
    expect(prepared.ours).toEqual(prepared.upstream);
    const remoteState = (name) => ({ ...repoState(remoteDir[name]), files: contentState(remoteDir[name]) });
    expect(remoteState("ours")).toEqual(remoteState("upstream"));
    // What the run sees: the dirty edit, the untracked file, the deletion; the origin
    // without credentials; the AppleDouble file stayed local.
    const there = remoteState("ours");
    expect(there.status).toContain(" M tracked.txt");
    expect(there.status).toContain("?? untracked.txt");
    expect(there.status).toContain(" D gone.txt");
    expect(there.origin).toBe("https://example.com/org/repo.git");
    expect(there.files["._tracked.txt"]).toBeUndefined();

    // The run commits, edits and adds on the remote.
    for (const name of ["ours", "upstream"]) {
      await remote(
        `cd '${remoteDir[name]}' && git -c user.name=Remote -c user.email=r@example.com commit -qam "remote update" && printf 'remote dirty\\n' > tracked.txt && printf 'remote extra\\n' > remote-only.txt`,
      );
    }
    for (const name of ["ours", "upstream"]) {
      await impls[name].restore({ spec: server.spec, localDir: local[name], remoteDir: remoteDir[name] });
    }
    const localState = (name) => ({ ...repoState(local[name]), files: contentState(local[name]) });
    expect(localState("ours")).toEqual(localState("upstream"));
    const back = localState("ours");
    expect(back.log.split("\n")[0]).toMatch(/ remote update$/);
    expect(back.refs).toBe(""); // no temporary ref left behind
    expect(readFileSync(path.join(local.ours, "remote-only.txt"), "utf8")).toBe("remote extra\n");
    expect(readFileSync(path.join(local.ours, "tracked.txt"), "utf8")).toBe("remote dirty\n");
  });

  it("merges a concurrent local commit and grafts unrelated history as upstream does (baseline restores)", async () => {
    for (const scenario of ["merge", "graft"]) {
      const local = { ours: gitWorkspace(`baseline-${scenario}`), upstream: null };
      git(local.ours, ["add", "-A"]);
      git(local.ours, ["commit", "-q", "-m", "local before run"]);
      local.upstream = twin(local.ours);
      const remoteDir = { ours: remotePath(`bl-${scenario}-ours`), upstream: remotePath(`bl-${scenario}-upstream`) };
      const baseline = {};
      for (const name of ["ours", "upstream"]) {
        await impls[name].prepare({ spec: server.spec, localDir: local[name], remoteDir: remoteDir[name] });
        baseline[name] = await impls[name].capture(local[name], { exclude: [".git", ".paperclip-runtime"] });
        // The run's remote work.
        const orphan = scenario === "graft" ? "git checkout -q --orphan fresh && " : "";
        await remote(
          `cd '${remoteDir[name]}' && ${orphan}printf 'remote change\\n' > src/main.js && git add -A && git -c user.name=Remote -c user.email=r@example.com commit -qm "remote work"`,
        );
        // Meanwhile, somebody commits locally.
        writeFileSync(path.join(local[name], "local-concurrent.txt"), "local\n");
        git(local[name], ["add", "local-concurrent.txt"]);
        git(local[name], ["commit", "-q", "-m", "local concurrent"]);
      }
      for (const name of ["ours", "upstream"]) {
        await impls[name].restore({
          spec: server.spec,
          localDir: local[name],
          remoteDir: remoteDir[name],
          baselineSnapshot: baseline[name],
          restoreGitHistory: true,
        });
      }
      const state = (name) => ({ ...repoState(local[name]), files: contentState(local[name]) });
      // Upstream's restore deletes the committed `._tracked.txt`, which no tar of the lane
      // carries (the remote's checkout holds it, the pull leaves it out): ours keeps it
      // (docs/differences.md, "Nothing the agent did not change"). All else is upstream's.
      const [mine, theirs] = [state("ours"), state("upstream")];
      expect(theirs.files["._tracked.txt"], scenario).toBeUndefined();
      expect(theirs.status, scenario).toContain(" D ._tracked.txt");
      expect(mine.files["._tracked.txt"], scenario).toBe(
        "file 644 ec57e4cdd2d11b7d99f6517de50e2c218146123f6911cbf86de82c8522bfdfb9",
      );
      const withoutAppleDouble = ({ files, status, ...rest }) => ({
        ...rest,
        files: Object.fromEntries(Object.entries(files).filter(([key]) => key !== "._tracked.txt")),
        status: status
          .split("\n")
          .filter((line) => !line.endsWith("._tracked.txt"))
          .join("\n"),
      });
      expect(withoutAppleDouble(mine), scenario).toEqual(withoutAppleDouble(theirs));
      const [top] = state("ours").log.split("\n");
      const parents = top
        .split(" ")
        .slice(1, 3)
        .filter((part) => /^[0-9a-f]{40}$/.test(part));
      if (scenario === "merge") {
        expect(top).toMatch(/ Paperclip SSH sync merge [0-9a-f]{12}$/);
        expect(parents).toHaveLength(2);
      } else {
        expect(top).toMatch(/ remote work$/); // the graft keeps the imported message
        expect(git(local.ours, ["log", "-1", "--format=%B"])).toContain("imported history shares no ancestor with");
        expect(parents).toHaveLength(1);
      }
      expect(readFileSync(path.join(local.ours, "src", "main.js"), "utf8")).toBe("remote change\n");
      expect(readFileSync(path.join(local.ours, "local-concurrent.txt"), "utf8")).toBe("local\n");
    }
  });

  it("clears and fills a plain remote directory, sparing .paperclip-runtime, and restores it, as upstream does", async () => {
    const local = { ours: scratch("plain"), upstream: null };
    mkdirSync(path.join(local.ours, "a", "b"), { recursive: true });
    writeFileSync(path.join(local.ours, "a", "b", "c.txt"), "c\n");
    writeFileSync(path.join(local.ours, "top.txt"), "top\n");
    local.upstream = twin(local.ours);
    const remoteDir = { ours: remotePath("plain-ours"), upstream: remotePath("plain-upstream") };
    for (const name of ["ours", "upstream"]) {
      mkdirSync(path.join(remoteDir[name], ".paperclip-runtime"), { recursive: true });
      writeFileSync(path.join(remoteDir[name], ".paperclip-runtime", "keep"), "runtime\n");
      writeFileSync(path.join(remoteDir[name], "stale.txt"), "stale\n");
      expect(
        await impls[name].prepare({ spec: server.spec, localDir: local[name], remoteDir: remoteDir[name] }),
      ).toEqual({ gitBacked: false });
    }
    expect(contentState(remoteDir.ours, [])).toEqual(contentState(remoteDir.upstream, []));
    expect(existsSync(path.join(remoteDir.ours, "stale.txt"))).toBe(false);
    expect(existsSync(path.join(remoteDir.ours, ".paperclip-runtime", "keep"))).toBe(true);
    for (const name of ["ours", "upstream"]) {
      writeFileSync(path.join(remoteDir[name], "made-remotely.txt"), "remote\n");
      rmSync(path.join(remoteDir[name], "top.txt"));
      await impls[name].restore({ spec: server.spec, localDir: local[name], remoteDir: remoteDir[name] });
    }
    expect(contentState(local.ours, [])).toEqual(contentState(local.upstream, []));
    expect(existsSync(path.join(local.ours, "top.txt"))).toBe(false);
    expect(existsSync(path.join(local.ours, ".paperclip-runtime"))).toBe(false);
  });

  it("restores a workspace holding a virtualenv's absolute links as upstream does (baseline restores, delta on and off)", async () => {
    for (const delta of ["1", "0"]) {
      const saved = process.env.PAPERCLIP_NATIVE_SSH_DELTA;
      process.env.PAPERCLIP_NATIVE_SSH_DELTA = delta;
      try {
        const local = { ours: scratch(`venv-${delta}`), upstream: null };
        mkdirSync(path.join(local.ours, ".venv", "bin"), { recursive: true });
        symlinkSync("/usr/bin/python3", path.join(local.ours, ".venv", "bin", "python3"));
        writeFileSync(path.join(local.ours, "main.py"), "print(1)\n");
        local.upstream = twin(local.ours);
        const remoteDir = { ours: remotePath(`venv-${delta}-ours`), upstream: remotePath(`venv-${delta}-upstream`) };
        for (const name of ["ours", "upstream"]) {
          await impls[name].prepare({ spec: server.spec, localDir: local[name], remoteDir: remoteDir[name] });
          const baselineSnapshot = await impls[name].capture(local[name], { exclude: [".git", ".paperclip-runtime"] });
          writeFileSync(path.join(remoteDir[name], "main.py"), "print(2)\n");
          await impls[name].restore({
            spec: server.spec,
            localDir: local[name],
            remoteDir: remoteDir[name],
            baselineSnapshot,
          });
        }
        expect(contentState(local.ours, []), `delta ${delta}`).toEqual(contentState(local.upstream, []));
        expect(readlinkSync(path.join(local.ours, ".venv", "bin", "python3"))).toBe("/usr/bin/python3");
        expect(readFileSync(path.join(local.ours, "main.py"), "utf8")).toBe("print(2)\n");
      } finally {
        if (saved === undefined) delete process.env.PAPERCLIP_NATIVE_SSH_DELTA;
        else process.env.PAPERCLIP_NATIVE_SSH_DELTA = saved;
      }
    }
  });

  it("reports upstream's bundle progress lines and starts no ssh or tar process (upstream's does)", async () => {
    const local = gitWorkspace("progress");
    writeFileSync(path.join(local, "big.bin"), Buffer.alloc(512 * 1024, 7));
    git(local, ["add", "big.bin"]);
    git(local, ["commit", "-q", "-m", "big"]);
    const remoteDir = remotePath("progress");
    const lines = [];
    const onProgress = (line) => {
      lines.push(line.trimEnd());
    };
    const commands = await childCommandsDuring(async () => {
      await prepareWorkspaceForSshExecution({ spec: server.spec, localDir: local, remoteDir, onProgress });
      await restoreWorkspaceFromSshExecution({ spec: server.spec, localDir: local, remoteDir, onProgress });
    });
    expect([...commands].filter((name) => name === "ssh" || name === "tar")).toEqual([]);
    const imports = lines.filter((line) => line.includes("Importing git history to ssh"));
    expect(imports.length).toBeGreaterThan(0);
    for (const line of imports) {
      expect(line).not.toContain("workspace");
      expect(line).toMatch(/: \d+% \([\d.]+\/[\d.]+ MB\)$/);
    }
    const last = imports.at(-1).match(/: (\d+)% \(([\d.]+)\/([\d.]+) MB\)$/);
    expect(Number(last[1])).toBe(100);
    expect(last[2]).toBe(last[3]);
    expect(lines.some((line) => line.includes("Syncing workspace to ssh"))).toBe(true);
    const exports = lines.filter((line) => line.includes("Exporting git history from ssh"));
    expect(exports.length).toBeGreaterThan(0);
    expect(exports.at(-1)).toMatch(/: [\d.]+ MB$/);

    // The control: the same sampler sees upstream's ssh children.
    const upstreamCommands = await childCommandsDuring(() =>
      upstream.prepareWorkspaceForSshExecution({
        spec: server.spec,
        localDir: local,
        remoteDir: remotePath("progress-upstream"),
      }),
    );
    expect(upstreamCommands.has("ssh")).toBe(true);
  });

  it("removes exactly the deleted tracked paths remotely (upstream trims them and can remove another file)", async () => {
    const local = scratch("deleted-names");
    git(local, ["init", "-q", "-b", "main"]);
    for (const name of [" lead", "lead", "trail ", "trail", "tab\tname"])
      writeFileSync(path.join(local, name), `${name}\n`);
    git(local, ["add", "-A"]);
    git(local, ["commit", "-q", "-m", "names"]);
    rmSync(path.join(local, " lead"));
    rmSync(path.join(local, "trail "));
    const remoteDir = remotePath("deleted-names");
    await prepareWorkspaceForSshExecution({ spec: server.spec, localDir: local, remoteDir });
    expect(Object.keys(contentState(remoteDir)).sort()).toEqual([".paperclip-runtime", "lead", "tab\tname", "trail"]);
  });

  it("refuses a wrong host key before any change, here or there", async () => {
    const local = gitWorkspace("hostkey");
    const before = repoState(local);
    const remoteDir = remotePath("hostkey");
    const otherKey = generateKey(path.join(scratch("other-key"), "key"));
    const spec = { ...server.spec, knownHosts: `[127.0.0.1]:${server.port} ${otherKey}\n` };
    const tempBefore = leftoverTempDirs();
    await expect(prepareWorkspaceForSshExecution({ spec, localDir: local, remoteDir })).rejects.toMatchObject({
      code: "ERR_PAPERCLIP_NATIVE_SSH_HOST_KEY_CHANGED",
    });
    await expect(restoreWorkspaceFromSshExecution({ spec, localDir: local, remoteDir })).rejects.toMatchObject({
      code: "ERR_PAPERCLIP_NATIVE_SSH_HOST_KEY_CHANGED",
    });
    expect(existsSync(remoteDir)).toBe(false);
    expect(repoState(local)).toEqual(before);
    expect(leftoverTempDirs()).toEqual(tempBefore);
  });

  it("aborts a bundle transfer with an AbortError and leaves no ref or bundle behind", async () => {
    const local = gitWorkspace("abort");
    // Incompressible history, so the bundle takes a while on the channel.
    const noise = Buffer.alloc(24 * 1024 * 1024);
    for (let i = 0; i < noise.length; i += 64) createHash("sha512").update(String(i)).digest().copy(noise, i);
    writeFileSync(path.join(local, "noise.bin"), noise);
    git(local, ["add", "noise.bin"]);
    git(local, ["commit", "-q", "-m", "noise"]);
    const before = repoState(local);
    const tempBefore = leftoverTempDirs();
    const controller = new AbortController();
    const onProgress = (line) => {
      if (line.includes("Importing git history")) controller.abort();
    };
    const remoteDir = remotePath("abort");
    await expect(
      prepareWorkspaceForSshExecution({
        spec: server.spec,
        localDir: local,
        remoteDir,
        onProgress,
        signal: controller.signal,
      }),
    ).rejects.toMatchObject({ name: "AbortError" });
    expect(repoState(local)).toEqual(before);
    expect(leftoverTempDirs()).toEqual(tempBefore);
    // The remote got no commit and no file: its script saw a truncated bundle and stopped
    // (at most an empty `git init` is left, as after upstream's killed ssh), and removed
    // the partial bundle. It does so on its own time after the channel closed: wait for it.
    // (Or, aborted early enough, the script never ran: then there is no remote directory.)
    const remoteFiles = () =>
      (existsSync(remoteDir) ? Object.keys(contentState(remoteDir, [".git"])) : []).filter(
        (name) => name !== ".paperclip-runtime",
      );
    for (let waited = 0; remoteFiles().length > 0 && waited < 10_000; waited += 50) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(remoteFiles()).toEqual([]);
    if (existsSync(path.join(remoteDir, ".git")))
      expect(() => git(remoteDir, ["rev-parse", "--verify", "-q", "HEAD"])).toThrow();
  });

  it("carries origin without credentials exactly as upstream's sanitizeGitRemoteUrl", () => {
    const urls = [
      "https://user:pw@example.com/a/b.git",
      "https://example.com/a.git?x=1#y",
      "http://tok@host:8080/r",
      "ssh://git:pw@host/r.git?q#f",
      "git://host/r",
      "git+ssh://git@host:22/r.git",
      "git@github.com:org/repo.git",
      "github.com:org/repo",
      "/srv/git/repo.git",
      "file:///srv/repo",
      "",
      "   ",
      " https://h/r ",
      "ftp://h/r",
      "user@host:path with space",
      "HTTPS://EXAMPLE.com/R",
      "https://h/p%20q",
      "ssh://[::1]/r",
    ];
    for (const url of urls) expect(credentialFreeRemoteUrl(url), url).toBe(sanitizeGitRemoteUrl(url));
  });
});
