// Drop-in for the exclude/escape part of `@paperclipai/adapter-utils/sandbox-managed-runtime`.
import { native } from "./native.js";

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
