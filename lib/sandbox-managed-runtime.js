// Drop-in for the exclude/escape and host-tar part of `@paperclipai/adapter-utils/sandbox-managed-runtime`.
// `createTarballFromDirectory` writes the archive in-process (no `tar` child process).
import { native, runCancellable } from "./native.js";
import { checkSignal, packInput, requireString } from "./tar-common.js";

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

export async function createTarballFromDirectory(input) {
  const signal = checkSignal(input.signal);
  const archivePath = requireString(input.archivePath, "archivePath");
  const pack = await packInput({ ...input, gzip: undefined });
  await runCancellable(signal, (cancelId) => native.tarPackFile(pack, archivePath, cancelId, undefined));
}
