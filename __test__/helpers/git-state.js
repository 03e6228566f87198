// What the sandbox-lane tests compare of a repository and a work tree, in one place.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { treeState } from "./tar.js";

/** The environment of the tests' own git commands: no GIT_* of the caller, no system config, fixed commit dates. */
export const PINNED_GIT_ENV = {
  ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("GIT_"))),
  GIT_AUTHOR_DATE: "2026-01-02T03:04:05Z",
  GIT_COMMITTER_DATE: "2026-01-02T03:04:05Z",
  GIT_CONFIG_NOSYSTEM: "1",
};

/**
 * `git -C dir …args` as the tests run it (one identity, `main` for a new repository, the
 * pinned environment): the same commits on both sides of a comparison. Returns stdout.
 */
export function pinnedGit(dir, args) {
  return execFileSync(
    "git",
    ["-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", ...args],
    { env: PINNED_GIT_ENV, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
  );
}

/**
 * A project repository inside a workspace (`<root>/.paperclip-repositories/proj`): one
 * committed file, and an uncommitted one (`dirty.txt`). Returns its directory.
 */
export function writeNestedRepository(root) {
  const repo = path.join(root, ".paperclip-repositories", "proj");
  mkdirSync(repo, { recursive: true });
  writeFileSync(path.join(repo, "README.md"), "nested\n");
  pinnedGit(repo, ["init", "-q"]);
  pinnedGit(repo, ["add", "-A"]);
  pinnedGit(repo, ["commit", "-q", "-m", "nested initial"]);
  writeFileSync(path.join(repo, "dirty.txt"), "dirty\n");
  return repo;
}

const read = (dir, args) =>
  execFileSync("git", ["-C", dir, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

/**
 * What matters of a repository: head, branch, refs, remotes, shallow boundary, status and
 * `git fsck` (a failing command reads as `exit N`). With `objects`, also the history, every
 * object and a strict fsck.
 */
export function repositoryState(dir, { objects = false } = {}) {
  const safe = (args) => {
    try {
      return read(dir, args).trim();
    } catch (error) {
      return `exit ${error.status}`;
    }
  };
  const shallowFile = path.join(dir, ".git", "shallow");
  const state = {
    head: safe(["rev-parse", "HEAD"]),
    branch: safe(["symbolic-ref", "-q", "HEAD"]),
    refs: safe(["for-each-ref", "--format=%(refname) %(objectname)"]),
    remotes: safe(["remote", "-v"]),
    shallow: existsSync(shallowFile) ? readFileSync(shallowFile, "utf8") : null,
    status: safe(["status", "--porcelain=v1", "--untracked-files=all"]),
    fsck: safe(["fsck", "--no-progress", ...(objects ? ["--strict"] : [])]),
  };
  if (objects) {
    state.history = safe(["rev-list", "HEAD"]);
    state.objects = safe(["cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)"])
      .split("\n")
      .sort()
      .join("\n");
  }
  return state;
}

/** `treeState(root)` without mtimes and without the insides of `.git` directories. */
export function treeWithoutGit(root) {
  const out = {};
  for (const [key, value] of Object.entries(treeState(root))) {
    if (/(^|\/)\.git\//.test(key)) continue;
    out[key] = { ...value, mtime: undefined };
  }
  return out;
}

/**
 * Files, directories and links under `root` with modes and content digests, no mtimes (FIFOs,
 * sockets and devices: their kind and mode); the relative paths in `skip` (default `.git`) are
 * left out with everything under them.
 */
export function contentState(root, skip = [".git"]) {
  const out = {};
  const visit = (dir, prefix) => {
    for (const name of readdirSync(dir).sort()) {
      const rel = prefix ? `${prefix}/${name}` : name;
      if (skip.includes(rel)) continue;
      const full = path.join(dir, name);
      const stat = lstatSync(full);
      if (stat.isDirectory()) {
        out[rel] = `dir ${(stat.mode & 0o7777).toString(8)}`;
        visit(full, rel);
      } else if (stat.isSymbolicLink()) {
        out[rel] = `link ${readlinkSync(full)}`;
      } else if (stat.isFile()) {
        out[rel] =
          `file ${(stat.mode & 0o7777).toString(8)} ${createHash("sha256").update(readFileSync(full)).digest("hex")}`;
      } else {
        // A FIFO, socket or device: its kind and mode (reading a FIFO would wait forever).
        out[rel] = `special ${stat.mode.toString(8)}`;
      }
    }
  };
  visit(root, "");
  return out;
}
