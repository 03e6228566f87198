// Moving the local branch so it contains a commit imported from a remote run (an SSH host
// or a sandbox), shared by both lanes: fast-forward, a graft of unrelated history, or a
// merge commit, by compare-and-swap on the head ref. Only the wording of the commits and
// errors differs between the lanes (`SSH` or `remote`), as it does upstream.
import { GIT_SYNC_COMMIT_IDENTITY_ARGS, runLocalGit } from "./local-git.js";

const QUICK = { timeout: 10_000, maxBuffer: 16 * 1024 };
/** How often a head update that lost a race with another writer is tried again. */
const INTEGRATE_ATTEMPTS = 5;

/** The words each lane puts into its commits and errors. */
export const INTEGRATION_LABELS = Object.freeze({
  ssh: Object.freeze({ sync: "Paperclip SSH sync", histories: "SSH git histories", tree: "SSH workspace restore" }),
  sandbox: Object.freeze({
    sync: "Paperclip remote git sync",
    histories: "remote git histories",
    tree: "workspace restore",
  }),
});

const short = (commit) => commit.slice(0, 12);

/**
 * The commit the local head should move to so that it contains `imported`, or `null` when
 * it already does: `imported` itself (fast-forward), a graft of its tree onto `current`
 * (unrelated histories), or a merge commit of the two (`git merge-tree`; a conflict fails).
 */
async function integratedCommit(localDir, current, imported, labels) {
  let base = "";
  let unrelated = false;
  try {
    base = (await runLocalGit(localDir, ["merge-base", current, imported], QUICK)).stdout.trim();
  } catch (error) {
    // Exit 1 is git's "no common ancestor"; any other failure must not rewrite the head,
    // so it falls through to merge-tree, which fails with it.
    unrelated = error?.code === 1;
  }
  if (base === imported) return null;
  if (base === current) return imported;
  if (unrelated) {
    const tree = (await runLocalGit(localDir, ["rev-parse", `${imported}^{tree}`], QUICK)).stdout.trim();
    const body = (
      await runLocalGit(localDir, ["log", "-1", "--format=%B", imported], { timeout: 10_000, maxBuffer: 256 * 1024 })
    ).stdout.trim();
    const message = `${body}\n\n(${labels.sync} graft ${short(imported)}: imported history shares no ancestor with ${short(current)})`;
    const graft = await runLocalGit(
      localDir,
      [...GIT_SYNC_COMMIT_IDENTITY_ARGS, "commit-tree", tree, "-p", current, "-m", message],
      { timeout: 60_000, maxBuffer: 64 * 1024 },
    );
    return graft.stdout.trim();
  }
  let merged;
  try {
    merged = await runLocalGit(localDir, ["merge-tree", "--write-tree", current, imported], {
      timeout: 60_000,
      maxBuffer: 256 * 1024,
    });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(
      `Failed to merge concurrent ${labels.histories} for ${short(current)} and ${short(imported)}: ${reason}`,
    );
  }
  const tree = merged.stdout.trim().split("\n")[0]?.trim() ?? "";
  if (tree === "") throw new Error(`Failed to compute a merged git tree for ${labels.tree}.`);
  const commit = await runLocalGit(
    localDir,
    [
      ...GIT_SYNC_COMMIT_IDENTITY_ARGS,
      "commit-tree",
      tree,
      "-p",
      current,
      "-p",
      imported,
      "-m",
      `${labels.sync} merge ${short(imported)}`,
    ],
    { timeout: 60_000, maxBuffer: 64 * 1024 },
  );
  return commit.stdout.trim();
}

/**
 * Moves the local branch (or detached HEAD) of `localDir` so it contains `imported`.
 * `readHead(localDir)` gives `{ headCommit, branchName }` or `null` (not a repository this
 * lane integrates into: nothing happens); `labels` is one of {@link INTEGRATION_LABELS}.
 * A concurrent writer that moved the head first makes it start over from the new head (up
 * to five attempts; the last lost race rejects with git's error).
 */
export async function integrateImportedHead(localDir, imported, { readHead, labels }) {
  for (let attempt = 1; ; attempt += 1) {
    const state = await readHead(localDir);
    if (!state || !state.headCommit || state.headCommit === imported) return;
    const current = state.headCommit;
    const next = await integratedCommit(localDir, current, imported, labels);
    if (next === null) return;
    const headRef = state.branchName ? `refs/heads/${state.branchName}` : "HEAD";
    try {
      await runLocalGit(localDir, ["update-ref", headRef, next, current], QUICK);
      return;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const lostRace = message.includes("cannot lock ref") && message.includes("expected");
      if (!lostRace || attempt >= INTEGRATE_ATTEMPTS) throw error;
    }
  }
}
