// Drop-in for the exclude/escape part of `@paperclipai/adapter-utils/sandbox-managed-runtime`,
// and its `mirrorDirectory`.
import { randomUUID } from "node:crypto";
// `promises` is looked up like upstream's, so tests that mock `fs.promises.chmod`/`rename`
// observe the same calls.
import { constants as fsConstants, promises as fs } from "node:fs";
import path from "node:path";
import { native, runCancellable } from "./native.js";

export const REFERENCED_SOURCE_IGNORE_FAILURE_REASONS = {
  scanFailed: "git-ignore-scan-failed",
  limitExceeded: "git-ignore-scan-limit-exceeded",
  toplevelNotDescendant: "git-toplevel-not-descendant",
};

export function escapeTarExcludeLiteral(entry) {
  return native.escapeTarExcludeLiteral(entry);
}

export function referencedSourceIgnoreExcludeEntries(resolution) {
  return resolution.kind === "git" ? resolution.ignoredPaths.map((entry) => native.escapeTarExcludeLiteral(entry)) : [];
}

export function mergeExcludes(...groups) {
  return native.mergeExcludeGroups(groups);
}

/** A tree listing: relative path → kind (1 dir, 2 file, 3 symlink, 4 other). */
async function listTree(root) {
  const listing = await runCancellable(undefined, () => native.listTree(path.normalize(root)));
  const out = new Map();
  if (listing.kinds.length === 0) return out;
  const paths = listing.paths.split("\u0000");
  for (let i = 0; i < paths.length; i += 1) out.set(paths[i], listing.kinds[i]);
  return out;
}

const LIST_DIR = 1;

function symlinkedAncestorError(targetPath) {
  const error = new Error(`ERR_PAPERCLIP_NATIVE_SYMLINKED_ANCESTOR: refusing to write through the symlinked directory '${targetPath}'`);
  error.code = "ERR_PAPERCLIP_NATIVE_SYMLINKED_ANCESTOR";
  error.path = targetPath;
  return error;
}

/**
 * Copies one source entry over the target as upstream does: a directory is created
 * (`mkdir -p`); anything else replaces what is at the target; a file is copied to a staged
 * sibling `<target>.paperclip-copy.<uuid>` (reflink first), given the source mode, then
 * renamed into place, and the staged sibling is removed whatever happens.
 */
async function mirrorEntry(sourceDir, targetDir, relative, hasChildren) {
  const sourcePath = path.join(sourceDir, relative);
  const targetPath = path.join(targetDir, relative);
  const stats = await fs.lstat(sourcePath);
  if (stats.isDirectory()) {
    // `mkdir -p` accepts a symlink to a directory and the children would then be written
    // through it, outside the target: refuse that one case (SPEC §5).
    if (hasChildren) {
      const existing = await fs.lstat(targetPath).catch(() => null);
      if (existing?.isSymbolicLink() && (await fs.stat(targetPath).catch(() => null))?.isDirectory()) {
        throw symlinkedAncestorError(targetPath);
      }
    }
    await fs.mkdir(targetPath, { recursive: true });
    return;
  }
  await fs.mkdir(path.dirname(targetPath), { recursive: true });
  await fs.rm(targetPath, { recursive: true, force: true }).catch(() => undefined);
  if (stats.isSymbolicLink()) {
    await fs.symlink(await fs.readlink(sourcePath), targetPath);
    return;
  }
  const stagedPath = `${targetPath}.paperclip-copy.${randomUUID()}`;
  try {
    await fs.copyFile(sourcePath, stagedPath, fsConstants.COPYFILE_FICLONE)
      .catch(() => fs.copyFile(sourcePath, stagedPath));
    await fs.chmod(stagedPath, stats.mode);
    await fs.rename(stagedPath, targetPath);
  } finally {
    await fs.rm(stagedPath, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * Makes `targetDir` a copy of `sourceDir` (upstream's semantics): target entries absent
 * from the source are removed, longest path first, unless they are, or lie below, a
 * `preserveAbsent` path; then every source entry is copied in `localeCompare` order. Both
 * trees are listed natively without following symlinks.
 */
export async function mirrorDirectory(sourceDir, targetDir, options = {}) {
  await fs.mkdir(targetDir, { recursive: true });
  const preserveAbsent = [...new Set(options.preserveAbsent ?? [])];
  const preserved = (relative) => preserveAbsent.some((candidate) => native.isRelativePathOrDescendant(relative, candidate));
  const source = await listTree(sourceDir);
  const target = await listTree(targetDir);
  const doomed = [...target.keys()].filter((relative) => !source.has(relative) && !preserved(relative));
  doomed.sort((left, right) => right.length - left.length);
  for (const relative of doomed) {
    await fs.rm(path.join(targetDir, relative), { recursive: true, force: true }).catch(() => undefined);
  }
  const parents = new Set();
  for (const relative of source.keys()) {
    const slash = relative.lastIndexOf("/");
    if (slash > 0) parents.add(relative.slice(0, slash));
  }
  const compare = new Intl.Collator().compare;
  for (const relative of [...source.keys()].sort(compare)) {
    await mirrorEntry(sourceDir, targetDir, relative, source.get(relative) === LIST_DIR && parents.has(relative));
  }
}
