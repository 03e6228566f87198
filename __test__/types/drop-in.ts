// Type test: every drop-in export must be assignable to the upstream declaration.
// Checked by `tsc -p __test__/types` (run from __test__/types.test.js).
import * as upExclude from "@paperclipai/adapter-utils/exclude-patterns";
import * as upSandbox from "@paperclipai/adapter-utils/sandbox-managed-runtime";
import * as upGit from "@paperclipai/adapter-utils/git-workspace-sync";
import * as ours from "@paperclipai/adapter-utils-native";
import * as ourExclude from "@paperclipai/adapter-utils-native/exclude-patterns";
import * as ourSandbox from "@paperclipai/adapter-utils-native/sandbox-managed-runtime";
import * as ourGit from "@paperclipai/adapter-utils-native/git-workspace-sync";

export const exclude: {
  isRelativePathOrDescendant: typeof upExclude.isRelativePathOrDescendant;
  excludePatternMatches: typeof upExclude.excludePatternMatches;
  shouldExcludePath: typeof upExclude.shouldExcludePath;
}[] = [ourExclude, ours];

export const sandbox: {
  escapeTarExcludeLiteral: typeof upSandbox.escapeTarExcludeLiteral;
  referencedSourceIgnoreExcludeEntries: typeof upSandbox.referencedSourceIgnoreExcludeEntries;
  mergeExcludes: typeof upSandbox.mergeExcludes;
  mirrorDirectory: typeof upSandbox.mirrorDirectory;
  REFERENCED_SOURCE_IGNORE_FAILURE_REASONS: typeof upSandbox.REFERENCED_SOURCE_IGNORE_FAILURE_REASONS;
}[] = [ourSandbox, ours];

export const git: {
  GIT_ARCHIVE_EXCLUDES: typeof upGit.GIT_ARCHIVE_EXCLUDES;
}[] = [ourGit, ours];

// The resolution union must be interchangeable both ways.
export const resolutionIn: upSandbox.ReferencedSourceIgnoreResolution = {} as ourSandbox.ReferencedSourceIgnoreResolution;
export const resolutionOut: ourSandbox.ReferencedSourceIgnoreResolution = {} as upSandbox.ReferencedSourceIgnoreResolution;

import * as upMerge from "@paperclipai/adapter-utils/workspace-restore-merge";
import * as upExecute from "@paperclipai/adapter-utils/acpx-engine/execute";
import * as ourMerge from "@paperclipai/adapter-utils-native/workspace-restore-merge";
import * as ourExecute from "@paperclipai/adapter-utils-native/acpx-engine/execute";

export const merge: {
  captureDirectorySnapshot: typeof upMerge.captureDirectorySnapshot;
  serializeDirectorySnapshot: typeof upMerge.serializeDirectorySnapshot;
  parseDirectorySnapshot: typeof upMerge.parseDirectorySnapshot;
  directorySnapshotSha256: typeof upMerge.directorySnapshotSha256;
  directoryEntryMatchesBaseline: typeof upMerge.directoryEntryMatchesBaseline;
  classifyWorkspaceRestoreFailure: typeof upMerge.classifyWorkspaceRestoreFailure;
  describeWorkspaceRestoreFailure: typeof upMerge.describeWorkspaceRestoreFailure;
  WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE: typeof upMerge.WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE;
  withDirectoryMergeLock: typeof upMerge.withDirectoryMergeLock;
  mergeDirectoryWithBaseline: typeof upMerge.mergeDirectoryWithBaseline;
}[] = [ourMerge, ours];

// A caller may pass upstream's merge input unchanged, or ours with the opt-in options.
export const mergeInput: Parameters<typeof ourMerge.mergeDirectoryWithBaseline>[0] = {} as Parameters<typeof upMerge.mergeDirectoryWithBaseline>[0];

export const execute: {
  referencedSourceContentSignature: typeof upExecute.referencedSourceContentSignature;
}[] = [ourExecute, ours];

// Snapshots are interchangeable both ways.
export const snapshotIn: upMerge.DirectorySnapshot = {} as ourMerge.DirectorySnapshot;
export const snapshotOut: ourMerge.DirectorySnapshot = {} as upMerge.DirectorySnapshot;
