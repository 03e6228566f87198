// The git side of the sandbox lane on this host: the shallow HEAD export the sandbox
// receives, the delta bundle the sandbox sends back and its integration into the local
// branch, and the index reset after a restore. Local `git` runs as a child process with
// upstream's commands and limits (the remote keeps upstream's scripts), so the resulting
// repositories are upstream's: same refs, branch, origin, shallow boundary.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { PROJECT_REPOSITORIES_DIR, readGitWorkspaceSnapshot } from "../git-workspace-sync.js";
import { INTEGRATION_LABELS, integrateImportedHead as integrateInto } from "../git-integration.js";
import { originUrl, runLocalGit } from "../local-git.js";
import { shellQuote } from "./shell.js";

const QUICK = { timeout: 10_000, maxBuffer: 16 * 1024 };
const SLOW = { timeout: 60_000, maxBuffer: 1024 * 1024 };

/** Starts `git -C dir …args` with the given stdin and stdout ("ignore", "pipe" or a piped stream of another stage); `done` settles when it has exited (rejects with its stderr on a non-zero exit). */
function gitStage(dir, args, stdin, stdout) {
  const child = spawn("git", ["-C", dir, ...args], { stdio: [stdin, stdout, "pipe"] });
  // The child holds its own copy of a piped-in stream's descriptor: this process's goes.
  if (typeof stdin === "object") stdin.destroy();
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => {
    stderr = (stderr + d).slice(-16 * 1024);
  });
  // Settled once the process has exited and its stderr is read to the end.
  const exited = new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve({ code, signal }));
  });
  const drained = new Promise((resolve) => child.stderr.on("close", resolve));
  const done = Promise.all([exited, drained]).then(([{ code, signal }]) => {
    if (code !== 0)
      throw Object.assign(new Error(`Command failed: git -C ${dir} ${args.join(" ")}\n${stderr}`), {
        code,
        signal,
        stderr,
      });
  });
  return { child, done };
}

/**
 * Copies the objects of one commit (the commit, its tree, every blob and subtree; no
 * parents) from `localDir` into the fresh repository `cloneDir` and marks the commit as its
 * shallow boundary: what `git fetch --depth=1` leaves behind, without its work. The fetch's
 * `pack-objects` searches deltas among every object and ships a thin pack its receiving
 * `index-pack` must then resolve; a depth-1 history has no older versions to delta
 * against, so the pack is written without the search (`--window=0`) and indexed as is.
 * Three processes in one pipe: `rev-list --objects --no-walk` | `pack-objects` | `index-pack`.
 */
async function copyCommitObjects(localDir, cloneDir, commit) {
  const list = gitStage(localDir, ["rev-list", "--objects", "--no-walk", commit], "ignore", "pipe");
  const pack = gitStage(
    localDir,
    ["pack-objects", "--window=0", "--depth=0", "--stdout", "-q"],
    list.child.stdout,
    "pipe",
  );
  const index = gitStage(cloneDir, ["index-pack", "--stdin"], pack.child.stdout, "ignore");
  const timer = setTimeout(() => {
    for (const { child } of [list, pack, index]) child.kill("SIGTERM");
  }, SLOW.timeout);
  try {
    await Promise.all([list.done, pack.done, index.done]);
  } catch (error) {
    for (const { child } of [list, pack, index]) child.kill("SIGTERM");
    throw error;
  } finally {
    clearTimeout(timer);
  }
  await fs.writeFile(path.join(cloneDir, ".git", "shallow"), `${commit}\n`);
}

/**
 * Runs `fn(cloneDir)` with a depth-1 clone of the snapshot's HEAD checked out (on its
 * branch, or detached), `origin` carried over without credentials, and every nested
 * project repository cloned the same way into its path (then excluded in the parent's
 * `.git/info/exclude`). The clone's refs, branch, origin and shallow boundary are those a
 * `git fetch --depth=1` clone has; its objects come over without a delta search (see
 * `copyCommitObjects`). The clone is removed after; `localDir` gets no ref or object.
 */
export async function withShallowHeadClone(localDir, snapshot, fn) {
  const cloneDir = await fs.mkdtemp(path.join(os.tmpdir(), "paperclip-git-workspace-"));
  try {
    // The two are independent: run them at once.
    const [origin] = await Promise.all([
      originUrl(localDir),
      runLocalGit(cloneDir, ["init"], { timeout: 10_000, maxBuffer: 64 * 1024 }),
    ]);
    await Promise.all([
      origin ? runLocalGit(cloneDir, ["remote", "add", "origin", origin], QUICK).catch(() => undefined) : undefined,
      copyCommitObjects(localDir, cloneDir, snapshot.headCommit),
    ]);
    // The index and the tree become that commit's (upstream's further `reset --hard` to
    // the same commit changes nothing).
    const checkout = snapshot.branchName
      ? ["checkout", "--force", "-B", snapshot.branchName, snapshot.headCommit]
      : ["checkout", "--force", "--detach", snapshot.headCommit];
    await runLocalGit(cloneDir, checkout, SLOW);
    for (const repository of snapshot.repositories ?? []) {
      await withShallowHeadClone(path.join(localDir, repository.path), repository.snapshot, async (nested) => {
        await fs.cp(nested, path.join(cloneDir, repository.path), { recursive: true });
      });
    }
    if (snapshot.repositories?.length) {
      await fs.appendFile(path.join(cloneDir, ".git/info/exclude"), `\n/${PROJECT_REPOSITORIES_DIR}/\n`);
    }
    return await fn(cloneDir);
  } finally {
    await fs.rm(cloneDir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** A fresh local ref the imported sandbox head is fetched into. */
export const newImportedRef = () => `refs/paperclip/git-sync/imported/sandbox/${randomUUID()}`;
/** A fresh remote ref the sandbox exports its head under. */
export const newExportRef = () => `refs/paperclip/git-sync/export/sandbox/${randomUUID()}`;

/**
 * Deletes a local ref (best effort) and the directories under `.git/refs/paperclip/` it
 * leaves empty, so a restore that fails after fetching its bundle leaves `.git` as it was.
 */
export async function deleteRef(localDir, ref) {
  await runLocalGit(localDir, ["update-ref", "-d", ref], QUICK).catch(() => undefined);
  if (!ref.startsWith("refs/paperclip/")) return;
  try {
    const common = (await runLocalGit(localDir, ["rev-parse", "--git-common-dir"], QUICK)).stdout.trim();
    const gitDir = path.resolve(localDir, common);
    const parts = ref.split("/").slice(0, -1);
    // Innermost first (git itself may have removed some already); stops at the first
    // directory that is not empty.
    for (let depth = parts.length; depth >= 2; depth -= 1) {
      await fs.rmdir(path.join(gitDir, ...parts.slice(0, depth))).catch((error) => {
        if (error?.code !== "ENOENT") throw error;
      });
    }
  } catch {
    // best effort, as the delete itself
  }
}

/**
 * Fetches `exportRef` of the bundle file into `importedRef` and returns the imported head;
 * an empty bundle (nothing committed in the sandbox) returns `baseSha`.
 */
export async function fetchBundle(localDir, bundlePath, exportRef, importedRef, baseSha) {
  const size = (await fs.stat(bundlePath).catch(() => null))?.size ?? 0;
  if (size === 0) return baseSha;
  await runLocalGit(localDir, ["fetch", "--force", bundlePath, `${exportRef}:${importedRef}`], SLOW);
  return (await runLocalGit(localDir, ["rev-parse", importedRef], QUICK)).stdout.trim();
}

const MISSING_PREREQUISITE = [
  "did not send all necessary objects",
  "lacks these prerequisite commits",
  "revision walk setup failed",
];

/** The bundle import failed because this repository lacks the bundle's boundary commit. */
export function isMissingPrerequisite(error) {
  const message = error instanceof Error ? error.message : String(error);
  return MISSING_PREREQUISITE.some((marker) => message.includes(marker));
}

/**
 * The remote script that writes the sandbox's new commits as a bundle (relative to the
 * merge base of `baseSha` and HEAD when the sandbox holds `baseSha`, else, or when
 * `full`, a self-contained one; an empty file when there is nothing new) and, with
 * `statusPath`, `clean`/`dirty` for its working tree.
 */
export function deltaBundleScript({ remoteDir, baseSha, exportRef, bundlePath, statusPath, full }) {
  const git = `git -C ${shellQuote(remoteDir)}`;
  const bundle = shellQuote(bundlePath);
  const ref = shellQuote(exportRef);
  const lines = ["set -e", `mkdir -p ${shellQuote(path.posix.dirname(bundlePath))}`, `rm -f ${bundle}`];
  if (full) lines.push(`bundle_base=""`);
  else {
    lines.push(
      `if ${git} cat-file -e ${shellQuote(baseSha)}^{commit} 2>/dev/null; then`,
      `  bundle_base=$(${git} merge-base ${shellQuote(baseSha)} HEAD 2>/dev/null || true)`,
      "else",
      `  bundle_base=""`,
      "fi",
    );
  }
  lines.push(
    `if [ -n "$bundle_base" ]; then`,
    `  commit_count=$(${git} rev-list --count HEAD --not "$bundle_base")`,
    "else",
    `  commit_count=$(${git} rev-list --count HEAD)`,
    "fi",
    'if [ "$commit_count" -gt 0 ]; then',
    `  ${git} update-ref ${ref} HEAD`,
    `  if [ -n "$bundle_base" ]; then`,
    `    ${git} bundle create ${bundle} ${ref} --not "$bundle_base" >/dev/null`,
    "  else",
    `    ${git} bundle create ${bundle} ${ref} >/dev/null`,
    "  fi",
    "else",
    `  : > ${bundle}`,
    "fi",
  );
  if (statusPath) {
    const status = shellQuote(statusPath);
    lines.push(
      [
        `if [ -z "$(${git} status --porcelain=v1 --untracked-files=normal)" ]; then`,
        `  printf clean > ${status}`,
        "else",
        `  printf dirty > ${status}`,
        "fi",
      ].join("\n"),
    );
  }
  return lines.join("\n");
}

/** A bundle up to this size comes back inside the restore's listing (base64 in a note), a larger one as a file. */
const INLINE_BUNDLE_MAX = 1024 * 1024;

/**
 * The command (inside a delta restore's listing pipeline, after {@link deltaBundleScript}
 * ran) that reports what the export wrote: `pcdelta-note status <clean|dirty>`, then
 * `pcdelta-note bundle <base64>` with the bundle when it is small (and removes it), else
 * `pcdelta-note bundle-file <size>` (the caller reads the file).
 */
export function exportedNotesCommand(bundlePath, statusPath) {
  const bundle = shellQuote(bundlePath);
  const status = shellQuote(statusPath);
  return [
    `printf 'pcdelta-note status %s\\0\\0' "$(cat ${status} 2>/dev/null || echo dirty)"`,
    `rm -f ${status}`,
    `N=$(wc -c < ${bundle})`,
    `if [ "$N" -le ${INLINE_BUNDLE_MAX} ]; then printf 'pcdelta-note bundle '; base64 < ${bundle} | tr -d '\\n'; printf '\\0\\0'; rm -f ${bundle}; else printf 'pcdelta-note bundle-file %s\\0\\0' "$N"; fi`,
  ].join("; ");
}

/**
 * What {@link exportedNotesCommand} reported, from a listing's notes: `{ status, bundle }`
 * (`bundle`: the bytes, or `null` when the bundle was left as a file), or `null` when the
 * notes do not say (the listing did not run that far).
 */
export function readExportedNotes(notes = []) {
  const status = notes.find((note) => note.startsWith("status "))?.slice("status ".length);
  const inline = notes.find((note) => note.startsWith("bundle "));
  const file = notes.some((note) => /^bundle-file \d+$/.test(note));
  if (status === undefined || (!inline && !file)) return null;
  return {
    status: status === "clean" ? "clean" : "dirty",
    bundle: inline ? Buffer.from(inline.slice("bundle ".length), "base64") : null,
  };
}

/**
 * The work tree's `{ headCommit, branchName }` in one `git rev-parse` (upstream takes a whole
 * workspace snapshot here, nine git runs and an ignored-files walk, and uses these two
 * fields); `null` when `localDir` is not its repository's top level. When the short form
 * fails, the full snapshot decides, with upstream's error handling.
 */
async function readHead(localDir) {
  let lines;
  try {
    lines = (
      await runLocalGit(localDir, ["rev-parse", "--show-toplevel", "HEAD", "--abbrev-ref", "HEAD"], QUICK)
    ).stdout.split("\n");
  } catch {
    return readGitWorkspaceSnapshot(localDir);
  }
  const [toplevel, headCommit, branch] = lines.map((line) => line.trim());
  const [here, top] = await Promise.all([fs.realpath(localDir), fs.realpath(toplevel)]);
  if (here !== top) return null;
  return { headCommit, branchName: branch && branch !== "HEAD" ? branch : null };
}

/**
 * Moves the local branch (or detached HEAD) so it contains `imported` (fast-forward, graft
 * of unrelated history, or a merge commit), by compare-and-swap; a lost race starts over
 * from the new head, up to five attempts.
 */
export function integrateImportedHead(localDir, imported) {
  return integrateInto(localDir, imported, { readHead, labels: INTEGRATION_LABELS.sandbox });
}

/**
 * Resets the index to HEAD after a restore (the restored files stay as they are) and
 * checks nothing is left staged; with `checkClean`, warns when the working tree still
 * differs from HEAD although the sandbox's was clean.
 */
export async function resetIndexToHead(localDir, checkClean) {
  try {
    await runLocalGit(localDir, ["reset", "--quiet", "HEAD", "--", "."], SLOW);
  } catch (error) {
    const detail = [error?.message, error?.stderr, error?.stdout]
      .filter((v) => typeof v === "string" && v.trim() !== "")
      .join("\n");
    throw new Error(`Failed to reset local git index to HEAD after workspace restore: ${detail}`);
  }
  const staged = await runLocalGit(localDir, ["diff", "--cached", "--name-status", "HEAD", "--"], {
    timeout: 10_000,
    maxBuffer: 1024 * 1024,
  });
  if (staged.stdout.trim() !== "")
    throw new Error(`Workspace restore left staged git index changes after reset:\n${staged.stdout.trim()}`);
  if (!checkClean) return;
  const worktree = await runLocalGit(localDir, ["diff", "--name-status", "HEAD", "--"], {
    timeout: 10_000,
    maxBuffer: 1024 * 1024,
  });
  if (worktree.stdout.trim() !== "")
    console.warn("[paperclip] Workspace restore preserved local working tree changes after clean sandbox restore.");
}

/**
 * The tree of `commit` in `localDir` as `git ls-tree -r -t -l` gives it: `{ path, mode, type,
 * id, size }` per entry (every blob, subtree and submodule link, at any depth; `size` for
 * blobs), in git's order.
 */
export async function listCommitTree(localDir, commit) {
  const { stdout } = await runLocalGit(localDir, ["ls-tree", "-r", "-t", "-l", "-z", "--full-tree", commit], {
    timeout: SLOW.timeout,
    maxBuffer: 512 * 1024 * 1024,
  });
  const entries = [];
  for (const record of stdout.split("\0")) {
    if (record === "") continue;
    const match = /^(\d+) (\w+) ([0-9a-f]+) +(\S+)\t([\s\S]+)$/.exec(record);
    if (!match) throw new Error(`unexpected git ls-tree record: ${JSON.stringify(record.slice(0, 200))}`);
    const [, mode, type, id, size, entryPath] = match;
    entries.push({ path: entryPath, mode, type, id, size: size === "-" ? null : Number(size) });
  }
  return entries;
}

/**
 * Writes to `file` a pack of the objects a depth-1 clone of `commit` needs beyond what a
 * repository holding `bases` (commits, with their trees) has: the commit and every object of
 * its tree that none of the bases' trees holds (`rev-list --objects --no-walk`, so no history
 * is walked: the receiver is shallow). Resolves the number of objects packed.
 */
export async function writeObjectsBeyond(localDir, commit, bases, file) {
  const handle = await fs.open(file, "w");
  try {
    const list = gitStage(
      localDir,
      ["rev-list", "--objects", "--no-walk", commit, "--not", ...bases],
      "ignore",
      "pipe",
    );
    let objects = 0;
    const counted = new Promise((resolve) => {
      list.child.stdout.on("data", (chunk) => {
        for (const byte of chunk) if (byte === 10) objects += 1;
      });
      list.child.stdout.on("end", resolve);
    });
    const pack = gitStage(localDir, ["pack-objects", "--stdout", "-q"], "pipe", handle.fd);
    list.child.stdout.pipe(pack.child.stdin);
    const timer = setTimeout(() => {
      for (const { child } of [list, pack]) child.kill("SIGTERM");
    }, SLOW.timeout);
    try {
      await Promise.all([list.done, pack.done, counted]);
    } catch (error) {
      for (const { child } of [list, pack]) child.kill("SIGTERM");
      throw error;
    } finally {
      clearTimeout(timer);
    }
    return objects;
  } finally {
    await handle.close();
  }
}
