// Stand-ins for modules of upstream's releases after 2026.916.1, written from
// ../shared/reference/upstream-next.md (never from upstream's code): a copy of the installed
// 2026.916.1 `dist/` whose modules get the newer releases' exports, behaviour and markers.
//
// - exclude-patterns: `excludePatternMatches` unescapes a literal pattern before matching
//   (`excludePatternMatches("report[1].csv", "report\\[1].csv")` is true, false in 2026.916.1);
//   new `unescapeTarExcludeLiteral`, `escapeTarExcludeLiteral`, `WORKSPACE_HEAVY_DIR_NAMES`;
// - workspace-restore-merge: the SQLite lock's `node:sqlite` and `.lock.sqlite`, and
//   `class DirectoryMergeConflict` (code DIRECTORY_MERGE_CONFLICT, `.paths`);
// - ssh: `prepareWorkspaceForSshExecution` also returns `transferExclude`; new
//   `removeRemoteDirectory`;
// - git-workspace-sync: a streaming executor (`onStdout`), `disposeGitWorkspaceSnapshot`,
//   `workspaceSnapshotTimeoutMs`.
// runtime-progress (no change found upstream) is left as it is.
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

/** The modules `withNewerModules` changes, and the marker each then carries. */
export const NEWER_MODULE_MARKERS = Object.freeze({
  "exclude-patterns": "unescapeTarExcludeLiteral",
  "workspace-restore-merge": "node:sqlite",
  ssh: "transferExclude",
  "git-workspace-sync": "onStdout",
});

function rewrite(file, from, to) {
  const text = readFileSync(file, "utf8");
  if (!text.includes(from)) throw new Error(`${file} has no ${from}`);
  writeFileSync(file, text.replace(from, to));
}

/** Rewrites the upstream package at `pkgDir` (a copy of 2026.916.1) into the newer releases' stand-in. */
export function withNewerModules(pkgDir) {
  const dist = (module) => path.join(pkgDir, "dist", `${module}.js`);

  rewrite(dist("exclude-patterns"), "export function excludePatternMatches(", "function matchesBeforeUnescaping(");
  appendFileSync(
    dist("exclude-patterns"),
    `
export const WORKSPACE_HEAVY_DIR_NAMES = ["node_modules", ".venv", "target"];
const TAR_METACHARACTERS = /[*?[\\]\\\\]/g;
export function escapeTarExcludeLiteral(literal) {
  return literal.replace(TAR_METACHARACTERS, (ch) => "\\\\" + ch);
}
export function unescapeTarExcludeLiteral(pattern) {
  return pattern.replace(/\\\\([*?[\\]\\\\])/g, "$1");
}
export function excludePatternMatches(relative, pattern) {
  if (/\\\\[*?[\\]\\\\]/.test(pattern)) {
    const literal = unescapeTarExcludeLiteral(pattern);
    return relative === literal || relative.startsWith(literal + "/");
  }
  return matchesBeforeUnescaping(relative, pattern);
}
`,
  );

  appendFileSync(
    dist("workspace-restore-merge"),
    `
import { DatabaseSync } from "node:sqlite";
export const DIRECTORY_MERGE_LOCK_DATABASE_SUFFIX = ".lock.sqlite";
export class DirectoryMergeConflict extends Error {
  constructor(paths) {
    super("Directory contents changed concurrently");
    this.code = "DIRECTORY_MERGE_CONFLICT";
    this.paths = paths;
  }
}
export function openDirectoryMergeLockDatabase(file) {
  return new DatabaseSync(file, { allowExtension: false });
}
`,
  );

  rewrite(
    dist("ssh"),
    "export async function prepareWorkspaceForSshExecution(",
    "async function prepareWithoutTransferExclude(",
  );
  appendFileSync(
    dist("ssh"),
    `
export async function prepareWorkspaceForSshExecution(input) {
  const prepared = await prepareWithoutTransferExclude(input);
  return { ...prepared, transferExclude: [".paperclip-runtime", ...(input.workspaceExclude ?? [])] };
}
export async function removeRemoteDirectory(_input) {}
`,
  );

  appendFileSync(
    dist("git-workspace-sync"),
    `
export function disposeGitWorkspaceSnapshot(_snapshot) {}
export function workspaceSnapshotTimeoutMs() { return 60_000; }
export function streamingGitExecutor({ onStdout, signal }) { return { onStdout, signal }; }
`,
  );
}
