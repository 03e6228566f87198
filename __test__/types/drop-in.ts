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
  resolveReferencedSourceIgnore: typeof upSandbox.resolveReferencedSourceIgnore;
}[] = [ourSandbox, ours];

export const git: {
  GIT_ARCHIVE_EXCLUDES: typeof upGit.GIT_ARCHIVE_EXCLUDES;
  PROJECT_REPOSITORIES_DIR: typeof upGit.PROJECT_REPOSITORIES_DIR;
  WORKSPACE_GIT_SCAN_SATURATED_CODE: typeof upGit.WORKSPACE_GIT_SCAN_SATURATED_CODE;
  REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT: typeof upGit.REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT;
  REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES: typeof upGit.REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES;
  ReferencedSourceIgnoreScanLimitExceededError: typeof upGit.ReferencedSourceIgnoreScanLimitExceededError;
  setExpensiveWorkspaceGitExecutor: typeof upGit.setExpensiveWorkspaceGitExecutor;
  readReferencedSourceGitIgnoredPaths: typeof upGit.readReferencedSourceGitIgnoredPaths;
  readGitWorkspaceSnapshot: typeof upGit.readGitWorkspaceSnapshot;
}[] = [ourGit, ours];

// The executor seam and the scan/snapshot shapes are interchangeable both ways: a host's
// upstream-typed executor registers with us, and our results feed upstream-typed code.
export const executorIn: Parameters<typeof ourGit.setExpensiveWorkspaceGitExecutor>[0] =
  {} as upGit.ExpensiveWorkspaceGitExecutor;
export const executorOut: Parameters<typeof upGit.setExpensiveWorkspaceGitExecutor>[0] =
  {} as ourGit.ExpensiveWorkspaceGitExecutor;
export const scanIn: upGit.ReferencedSourceGitIgnoreScan = {} as ourGit.ReferencedSourceGitIgnoreScan;
export const scanOut: ourGit.ReferencedSourceGitIgnoreScan = {} as upGit.ReferencedSourceGitIgnoreScan;
export const gitSnapshotIn: upGit.GitWorkspaceSnapshot = {} as ourGit.GitWorkspaceSnapshot;
export const gitSnapshotOut: ourGit.GitWorkspaceSnapshot = {} as upGit.GitWorkspaceSnapshot;
export const limitError: InstanceType<typeof upGit.ReferencedSourceIgnoreScanLimitExceededError> =
  new ourGit.ReferencedSourceIgnoreScanLimitExceededError("x");

// The resolution union must be interchangeable both ways.
export const resolutionIn: upSandbox.ReferencedSourceIgnoreResolution =
  {} as ourSandbox.ReferencedSourceIgnoreResolution;
export const resolutionOut: ourSandbox.ReferencedSourceIgnoreResolution =
  {} as upSandbox.ReferencedSourceIgnoreResolution;

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
export const mergeInput: Parameters<typeof ourMerge.mergeDirectoryWithBaseline>[0] = {} as Parameters<
  typeof upMerge.mergeDirectoryWithBaseline
>[0];

export const execute: {
  referencedSourceContentSignature: typeof upExecute.referencedSourceContentSignature;
}[] = [ourExecute, ours];

// Snapshots are interchangeable both ways.
export const snapshotIn: upMerge.DirectorySnapshot = {} as ourMerge.DirectorySnapshot;
export const snapshotOut: ourMerge.DirectorySnapshot = {} as upMerge.DirectorySnapshot;

import * as upProgress from "@paperclipai/adapter-utils/runtime-progress";
import * as ourProgress from "@paperclipai/adapter-utils-native/runtime-progress";

export const tar: {
  createTarballFromDirectory: typeof upSandbox.createTarballFromDirectory;
}[] = [ourSandbox, ours];

export const progress: {
  createRuntimeProgressReporter: typeof upProgress.createRuntimeProgressReporter;
}[] = [ourProgress, ours];

// Reporters, options and sinks are interchangeable both ways.
export const reporterIn: upProgress.RuntimeProgressReporter = {} as ourProgress.RuntimeProgressReporter;
export const reporterOut: ourProgress.RuntimeProgressReporter = {} as upProgress.RuntimeProgressReporter;
export const optionsIn: upProgress.RuntimeProgressReporterOptions = {} as ourProgress.RuntimeProgressReporterOptions;
export const optionsOut: ourProgress.RuntimeProgressReporterOptions = {} as upProgress.RuntimeProgressReporterOptions;
export const statusIn: upProgress.RuntimeStatusUpdate = {} as ourProgress.RuntimeStatusUpdate;
export const statusOut: ourProgress.RuntimeStatusUpdate = {} as upProgress.RuntimeStatusUpdate;

// An upstream reporter drives our streaming API's progress.
export async function streamingWithUpstreamReporter(reporter: upProgress.RuntimeProgressReporter): Promise<number> {
  const stream = await ours.createTarballStreamFromDirectory({
    localDir: ".",
    gzip: 1,
    chunkSize: 1 << 20,
    precomputeSize: true,
    progress: reporter,
  });
  let total = 0;
  for await (const chunk of stream) total += chunk.byteLength;
  const summary = await ours.packDirectoryToFile({ localDir: ".", archivePath: "x.tar", progress: reporter });
  const extracted = await ours.extractTarballToDirectory({
    source: "x.tar",
    localDir: "out",
    signal: AbortSignal.timeout(1000),
  });
  return (
    total +
    summary.bytes +
    extracted.entries +
    ours.archiveTransferTimeoutMs({ archiveBytes: total, providerTimeoutMs: 300_000 })
  );
}

import * as upSsh from "@paperclipai/adapter-utils/ssh";
import * as ourSsh from "@paperclipai/adapter-utils-native/ssh";

export const ssh: {
  runSshCommand: typeof upSsh.runSshCommand;
  syncDirectoryToSsh: typeof upSsh.syncDirectoryToSsh;
  syncDirectoryFromSsh: typeof upSsh.syncDirectoryFromSsh;
  prepareWorkspaceForSshExecution: typeof upSsh.prepareWorkspaceForSshExecution;
  restoreWorkspaceFromSshExecution: typeof upSsh.restoreWorkspaceFromSshExecution;
}[] = [ourSsh, ours];

// Configs, specs and results are interchangeable both ways.
export const configIn: upSsh.SshConnectionConfig = {} as ourSsh.SshConnectionConfig;
export const configOut: ourSsh.SshConnectionConfig = {} as upSsh.SshConnectionConfig;
export const specIn: upSsh.SshRemoteExecutionSpec = {} as ourSsh.SshRemoteExecutionSpec;
export const specOut: ourSsh.SshRemoteExecutionSpec = {} as upSsh.SshRemoteExecutionSpec;
export const resultIn: upSsh.SshCommandResult = {} as ourSsh.SshCommandResult;
export const resultOut: ourSsh.SshCommandResult = {} as upSsh.SshCommandResult;

import * as upCommand from "@paperclipai/adapter-utils/command-managed-runtime";
import * as ourCommand from "@paperclipai/adapter-utils-native/command-managed-runtime";

export const command: {
  createCommandManagedRuntimeClient: typeof upCommand.createCommandManagedRuntimeClient;
  assertPostUploadCommandsConfined: typeof upCommand.assertPostUploadCommandsConfined;
  prepareCommandManagedRuntime: typeof upCommand.prepareCommandManagedRuntime;
}[] = [ourCommand, ours];

export const confinement: {
  assertSyncOperationsConfined: typeof upSandbox.assertSyncOperationsConfined;
  prepareSandboxManagedRuntime: typeof upSandbox.prepareSandboxManagedRuntime;
}[] = [ourSandbox, ours];

// Prepared runtimes are interchangeable both ways.
export const preparedIn: upSandbox.PreparedSandboxManagedRuntime = {} as ourSandbox.PreparedSandboxManagedRuntime;
export const preparedOut: ourSandbox.PreparedSandboxManagedRuntime = {} as upSandbox.PreparedSandboxManagedRuntime;

// An upstream-typed runner is accepted by ours, and our client is an upstream client.
export const runnerIn: ourCommand.CommandManagedRuntimeRunner = {} as upCommand.CommandManagedRuntimeRunner;
export const clientOut: upSandbox.SandboxManagedRuntimeClient = {} as ourCommand.CommandManagedRuntimeClient;

import * as upRemote from "@paperclipai/adapter-utils/remote-managed-runtime";
import * as ourRemote from "@paperclipai/adapter-utils-native/remote-managed-runtime";

export const remote: {
  prepareRemoteManagedRuntime: typeof upRemote.prepareRemoteManagedRuntime;
  buildRemoteExecutionSessionIdentity: typeof upRemote.buildRemoteExecutionSessionIdentity;
  remoteExecutionSessionMatches: typeof upRemote.remoteExecutionSessionMatches;
}[] = [ourRemote];
