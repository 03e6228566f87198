import type { RuntimeProgressSink } from "./runtime-progress.js";
import type { ReferencedSourceIgnoreResolution } from "./sandbox-managed-runtime.js";
import type { SshRemoteExecutionSpec } from "./ssh.js";

/** What an asset's `restore` gets: its remote directory and a reader for small remote files. */
export interface RemoteManagedRuntimeAssetRestoreContext {
  assetDir: string;
  /** Reads a remote file (at most 1 MiB of base64 output over SSH). */
  readFile(remotePath: string): Promise<Buffer>;
}
/** A directory uploaded to `<runtimeRootDir>/<key>` (upstream's `RemoteManagedRuntimeAsset`). */
export interface RemoteManagedRuntimeAsset {
  key: string;
  localDir: string;
  followSymlinks?: boolean;
  exclude?: string[];
  restore?: (ctx: RemoteManagedRuntimeAssetRestoreContext) => Promise<void>;
}
/** A referenced project staged read-only as `<runtimeRootDir>/project-<projectId>`. */
export interface RemoteManagedRuntimeAdditionalSource {
  localPath: string;
  projectId: string;
  ignoreResolution: ReferencedSourceIgnoreResolution;
}
/** The prepared run (upstream's `PreparedRemoteManagedRuntime`). */
export interface PreparedRemoteManagedRuntime {
  spec: SshRemoteExecutionSpec;
  workspaceLocalDir: string;
  workspaceRemoteDir: string;
  runtimeRootDir: string;
  assetDirs: Record<string, string>;
  /** Remote directory of each referenced project that staged, by `projectId`. */
  additionalSourceDirs: Record<string, string>;
  /** Merges the remote workspace back, then runs each asset's `restore`. */
  restoreWorkspace(onProgress?: RuntimeProgressSink): Promise<void>;
}
/** The identity of a remote execution session, or null without a spec. */
export declare function buildRemoteExecutionSessionIdentity(spec: SshRemoteExecutionSpec | null): {
  readonly transport: "ssh";
  readonly host: string;
  readonly port: number;
  readonly username: string;
  readonly remoteCwd: string;
} | null;
/** Whether a saved session identity (untrusted JSON) is the one for `current`. */
export declare function remoteExecutionSessionMatches(saved: unknown, current: SshRemoteExecutionSpec | null): boolean;
/**
 * Stages a run on an SSH host (workspace under `.paperclip-runtime/runs/<runId>/workspace`,
 * assets, referenced projects) with our in-process SSH drop-ins; see docs/ssh.md.
 */
export declare function prepareRemoteManagedRuntime(input: {
  spec: SshRemoteExecutionSpec;
  runId: string;
  adapterKey: string;
  workspaceLocalDir: string;
  workspaceRemoteDir?: string;
  syncWorkspace?: boolean;
  assets?: RemoteManagedRuntimeAsset[];
  additionalSources?: RemoteManagedRuntimeAdditionalSource[];
  onProgress?: RuntimeProgressSink;
}): Promise<PreparedRemoteManagedRuntime>;
