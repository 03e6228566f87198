// The sandbox lane's shallow HEAD clone (lib/sandbox/git-history.js withShallowHeadClone)
// against upstream's command sequence (git init, a temp ref, `fetch --depth=1`, `checkout
// -B`/`--detach`, `reset --hard`), on seeded repositories with history (several commits:
// edits, deletions, renames, modes, symlinks), on a branch and detached: the same work
// tree, refs, branch, origin, shallow boundary, one-commit history, clean status and fsck,
// and the workspace's own repository left exactly as it was. Rerun with DIFF_SEED=<seed>.
import {
  chmodSync,
  cpSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { withShallowHeadClone } from "../lib/sandbox/git-history.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { treeState } from "./helpers/tar.js";
import { pinnedGit, repositoryState } from "./helpers/git-state.js";

const seed = runSeed();
const scratch = mkdtempSync(path.join(os.tmpdir(), "pc-sandbox-git-history-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let counter = 0;
const fresh = (label) => path.join(scratch, `${label}-${(counter += 1)}`);

const git = pinnedGit;

/** A repository with `commits` commits of random edits; returns its HEAD. */
function writeRepository(rng, root, commits) {
  mkdirSync(root, { recursive: true });
  git(root, ["init", "-q"]);
  git(root, ["remote", "add", "origin", "https://user:secret@example.com/org/repo.git"]);
  const names = ["a.txt", "b.md", "dir/c.js", "dir/sub/d ünï.txt", "x.sh", "e"];
  for (let commit = 0; commit < commits; commit += 1) {
    for (const name of names) {
      const full = path.join(root, name);
      const present = lstatSync(full, { throwIfNoEntry: false }) !== undefined;
      const roll = rng.next();
      if (roll < 0.15 && present) unlinkSync(full);
      else if (roll < 0.25 && !present && name === "e") symlinkSync(rng.pick(["a.txt", "dir/c.js", "missing"]), full);
      else if (roll < 0.8 && !(name === "e" && present)) {
        mkdirSync(path.dirname(full), { recursive: true });
        writeFileSync(full, `${name} ${commit} ${rng.int(1e9)}\n`.repeat(1 + rng.int(200)));
        chmodSync(full, rng.pick([0o644, 0o755]));
      }
    }
    writeFileSync(path.join(root, `commit-${commit}.txt`), `${commit}\n`);
    if (commit > 0 && rng.chance(0.5)) git(root, ["mv", `commit-${commit - 1}.txt`, `renamed-${commit}.txt`]);
    git(root, ["add", "-A"]);
    git(root, ["commit", "-q", "-m", `commit ${commit}`]);
  }
  return git(root, ["rev-parse", "HEAD"]).trim();
}

/** Upstream's sequence for the same clone. */
function upstreamClone(localDir, clone, head, branch) {
  mkdirSync(clone);
  const ref = "refs/paperclip/git-sync/import/test";
  git(localDir, ["update-ref", ref, head]);
  git(clone, ["init", "-q"]);
  git(clone, ["remote", "add", "origin", "https://example.com/org/repo.git"]);
  git(clone, ["fetch", "-q", "--depth=1", localDir, ref]);
  git(
    clone,
    branch
      ? ["checkout", "-q", "--force", "-B", branch, "FETCH_HEAD"]
      : ["checkout", "-q", "--force", "--detach", "FETCH_HEAD"],
  );
  git(clone, ["reset", "-q", "--hard", head]);
  git(localDir, ["update-ref", "-d", ref]);
}

const gitState = (dir) => repositoryState(dir, { objects: true });

const workTree = (root) =>
  Object.fromEntries(
    Object.entries(treeState(root))
      .filter(([key]) => key !== ".git" && !key.startsWith(".git/"))
      .map(([key, value]) => [key, { ...value, mtime: undefined }]),
  );

describe("withShallowHeadClone against upstream's fetch --depth=1 clone", () => {
  for (const detached of [false, true]) {
    it(`a repository with history, ${detached ? "detached HEAD" : "on a branch"}: same clone, workspace repository untouched`, async () => {
      const rng = createRandom(seed + (detached ? 1 : 0));
      try {
        const local = fresh("repo");
        writeRepository(rng, local, 2 + rng.int(5));
        if (detached) git(local, ["checkout", "-q", "--detach", "HEAD~1"]);
        const headCommit = git(local, ["rev-parse", "HEAD"]).trim();
        const branchName = detached ? null : "main";
        // Upstream's clone from a copy: its temp ref must not touch the repository under test.
        const copy = fresh("copy");
        cpSync(local, copy, { recursive: true, verbatimSymlinks: true });
        const reference = fresh("upstream-clone");
        upstreamClone(copy, reference, headCommit, branchName);
        const localBefore = treeState(local);
        let seen = null;
        await withShallowHeadClone(local, { headCommit, branchName, repositories: [] }, async (clone) => {
          seen = { state: gitState(clone), tree: workTree(clone) };
        });
        const expected = gitState(reference);
        expect(seen.state).toEqual(expected);
        expect(seen.state.shallow).toBe(`${headCommit}\n`);
        expect(seen.state.history).toBe(headCommit);
        expect(seen.state.fsck).toBe("");
        expect(seen.tree).toEqual(workTree(reference));
        expect(treeState(local)).toEqual(localBefore);
      } catch (error) {
        error.message = `[DIFF_SEED=${seed}] ${error.message}`;
        throw error;
      }
    });
  }
});
