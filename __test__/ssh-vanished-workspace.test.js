// The SSH lane's restore when the remote workspace is gone (removed, renamed, or re-created
// empty between the prepare and the restore), against a real sshd: the restore rejects with
// ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE, the host workspace stays entry for entry as it
// was, and the next run restores the right tree; for plain and git workspaces, delta on and
// off, with a baseline (the managed runtime's restore) and without (the sync back). Upstream
// refuses a removed directory too (its `ssh … cd` fails) but restores a re-created empty one
// as an empty tree, deleting every file of the host workspace. A workspace the agent emptied
// itself (the prepare's runtime directory left) is restored as upstream restores it.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { captureDirectorySnapshot as upstreamCapture } from "@paperclipai/adapter-utils/workspace-restore-merge";
import * as upstream from "@paperclipai/adapter-utils/ssh";
import { afterEach, describe, expect, it } from "vitest";
import { prepareWorkspaceForSshExecution, restoreWorkspaceFromSshExecution } from "../lib/ssh.js";
import { captureDirectorySnapshot } from "../lib/workspace-restore-merge.js";
import { pinnedGit, repositoryState, treeWithoutGit } from "./helpers/git-state.js";
import { sshdSuite } from "./helpers/sshd-suite.js";
import { treeState } from "./helpers/tar.js";
import { VANISHED_WORKSPACE_FAULTS } from "./helpers/vanished-workspace.js";

const suite = sshdSuite("pc-ssh-vanished-");
let counter = 0;
const fresh = (label) => mkdtempSync(path.join(suite.work, `${label}-${(counter += 1)}-`));

const savedDelta = process.env.PAPERCLIP_NATIVE_SSH_DELTA;
afterEach(() => {
  if (savedDelta === undefined) delete process.env.PAPERCLIP_NATIVE_SSH_DELTA;
  else process.env.PAPERCLIP_NATIVE_SSH_DELTA = savedDelta;
});

function workspace(gitBacked) {
  const dir = fresh("ws");
  writeFileSync(path.join(dir, "a.txt"), "a\n");
  mkdirSync(path.join(dir, "src", "deep"), { recursive: true });
  writeFileSync(path.join(dir, "src", "deep", "b.txt"), "b\n");
  if (gitBacked) {
    pinnedGit(dir, ["init", "-q"]);
    pinnedGit(dir, ["add", "-A"]);
    pinnedGit(dir, ["commit", "-q", "-m", "init"]);
    writeFileSync(path.join(dir, "a.txt"), "dirty\n");
  }
  return dir;
}

/** The host workspace entry for entry (the indexes' times left out: the tests' `git status` may rewrite an index). */
function hostState(dir, gitBacked) {
  const repository = gitBacked ? repositoryState(dir) : null;
  const tree = treeState(dir);
  for (const [member, entry] of Object.entries(tree)) if (/(^|\/)\.git\/index$/.test(member)) entry.mtime = undefined;
  return { repository, tree };
}

const EXCLUDE = (gitBacked) => (gitBacked ? [".git", ".paperclip-runtime"] : [".paperclip-runtime"]);

/** One run's prepare (ours or upstream's), returning the restore to call after the agent's work. */
async function prepareRun(impl, local, remoteDir, gitBacked, { baseline = true } = {}) {
  const spec = { ...suite.server.spec, remoteCwd: remoteDir };
  await impl.prepare({ spec, localDir: local, remoteDir });
  const baselineSnapshot = baseline ? await impl.capture(local, { exclude: EXCLUDE(gitBacked) }) : undefined;
  return () =>
    impl.restore({
      spec,
      localDir: local,
      remoteDir,
      ...(baseline ? { baselineSnapshot, restoreGitHistory: gitBacked } : {}),
    });
}

const OURS = {
  prepare: prepareWorkspaceForSshExecution,
  restore: restoreWorkspaceFromSshExecution,
  capture: captureDirectorySnapshot,
};
const UPSTREAM = {
  prepare: upstream.prepareWorkspaceForSshExecution,
  restore: upstream.restoreWorkspaceFromSshExecution,
  capture: upstreamCapture,
};

const FAULTS = VANISHED_WORKSPACE_FAULTS;

describe("an SSH remote workspace gone before the restore: refused, the host workspace untouched", () => {
  for (const gitBacked of [false, true]) {
    for (const delta of ["1", "0"]) {
      for (const baseline of [true, false]) {
        for (const [fault, apply] of Object.entries(FAULTS)) {
          it(`${gitBacked ? "git" : "plain"}, delta ${delta === "1" ? "on" : "off"}, ${baseline ? "baseline restore" : "sync back"}: ${fault}`, async () => {
            process.env.PAPERCLIP_NATIVE_SSH_DELTA = delta;
            const local = workspace(gitBacked);
            const remote = path.join(fresh("remote"), "workspace");
            const restore = await prepareRun(OURS, local, remote, gitBacked, { baseline });
            writeFileSync(path.join(remote, "agent.txt"), "agent work\n");
            apply(remote);
            const before = hostState(local, gitBacked);
            const error = await restore().catch((e) => e);
            expect(error).toBeInstanceOf(Error);
            expect(error.code).toBe("ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE");
            expect(error.reason).toBe(fault === "re-created empty" ? "emptied" : "missing");
            expect(hostState(local, gitBacked)).toEqual(before);
            // The next run, into the same remote directory, restores the workspace and the agent's file.
            const expected = treeWithoutGit(local);
            const next = await prepareRun(OURS, local, remote, gitBacked);
            writeFileSync(path.join(remote, "after-fault.txt"), "the next run's work\n");
            await next();
            const after = treeWithoutGit(local);
            expect(after["after-fault.txt"]).toMatchObject({ kind: "file", size: 20 });
            delete after["after-fault.txt"];
            expect(after).toEqual(expected);
          });
        }
      }
    }
  }
});

describe("an SSH workspace the agent emptied itself (the prepare's runtime directory left): upstream's result", () => {
  for (const gitBacked of [false, true]) {
    for (const delta of ["1", "0"]) {
      it(`${gitBacked ? "git" : "plain"}, delta ${delta === "1" ? "on" : "off"}`, async () => {
        process.env.PAPERCLIP_NATIVE_SSH_DELTA = delta;
        const results = [];
        for (const impl of [OURS, UPSTREAM]) {
          const local = workspace(gitBacked);
          const remote = path.join(fresh("remote"), "workspace");
          const restore = await prepareRun(impl, local, remote, gitBacked);
          // Every entry of the tree (the repository stays: the history export needs it).
          mkdirSync(path.join(remote, ".paperclip-runtime"), { recursive: true });
          for (const name of readdirSync(remote)) {
            if (name !== ".paperclip-runtime" && name !== ".git")
              rmSync(path.join(remote, name), { recursive: true, force: true });
          }
          await restore();
          results.push(treeWithoutGit(local));
        }
        expect(results[0]).toEqual(results[1]);
        expect(Object.values(results[0]).filter((entry) => entry.kind === "file")).toEqual([]);
      });
    }
  }
});
