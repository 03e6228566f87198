// Drop-in for upstream's `remote-managed-runtime`: stages a run's workspace, assets and
// referenced projects on an SSH host and restores the workspace afterwards, composed of our
// SSH drop-ins (in-process SSH, no `ssh`/`tar` child on the host).
import path from "node:path";
import { GIT_ARCHIVE_EXCLUDES } from "./git-workspace-sync.js";
import { mergeExcludes, referencedSourceIgnoreExcludeEntries } from "./sandbox-managed-runtime.js";
import {
  prepareWorkspaceForSshExecution,
  restoreWorkspaceFromSshExecution,
  runSshCommand,
  syncDirectoryToSsh,
} from "./ssh.js";
import { openSshSessionAhead, shellQuote } from "./ssh-common.js";
import { LOCAL_GIT_STATE, readLocalGitState } from "./ssh-workspace.js";
import { captureDirectorySnapshot } from "./workspace-restore-merge.js";

// Heavy directories a referenced project never stages, at any depth (upstream's list).
const HEAVY_DIRECTORIES = [
  "node_modules",
  "vendor",
  "dist",
  "build",
  "out",
  "coverage",
  ".next",
  ".turbo",
  ".cache",
  ".git",
];
const REFERENCED_SOURCE_HEAVY_EXCLUDES = HEAVY_DIRECTORIES.flatMap((name) => [
  name,
  `${name}/*`,
  `*/${name}`,
  `*/${name}/*`,
]);

const RUNTIME_DIR = ".paperclip-runtime";
const READ_FILE_MAX_BUFFER = 1024 * 1024;

const objectOrEmpty = (value) => (value && typeof value === "object" && !Array.isArray(value) ? value : {});
const stringOrEmpty = (value) => (typeof value === "string" ? value : "");

/**
 * The identity of a remote execution session, as upstream: `{ transport: "ssh", host, port,
 * username, remoteCwd }` for `spec`, or null without one.
 */
export function buildRemoteExecutionSessionIdentity(spec) {
  if (!spec) return null;
  return { transport: "ssh", host: spec.host, port: spec.port, username: spec.username, remoteCwd: spec.remoteCwd };
}

/** Whether a saved session identity (untrusted JSON) is the one for `current`. */
export function remoteExecutionSessionMatches(saved, current) {
  const identity = buildRemoteExecutionSessionIdentity(current);
  if (!identity) return false;
  const other = objectOrEmpty(saved);
  return (
    stringOrEmpty(other.transport) === identity.transport &&
    stringOrEmpty(other.host) === identity.host &&
    (typeof other.port === "number" ? other.port : Number(other.port)) === identity.port &&
    stringOrEmpty(other.username) === identity.username &&
    stringOrEmpty(other.remoteCwd) === identity.remoteCwd
  );
}

function checkReferencedSource(localPath, projectId, ignoreResolution) {
  if (!path.posix.isAbsolute(localPath))
    throw new Error(`additional source localPath is not an absolute path: ${localPath}`);
  if (projectId.length === 0 || /[/\\]/.test(projectId) || projectId.includes("..")) {
    throw new Error(`additional source projectId is not a simple path segment: ${projectId}`);
  }
  if (ignoreResolution.kind === "failed")
    throw new Error(`referenced project ignore resolution failed: ${ignoreResolution.reason}`);
}

/**
 * Prepares a run on an SSH host (upstream's `prepareRemoteManagedRuntime`). With
 * `syncWorkspace` (default true) the workspace goes to
 * `<workspaceRemoteDir ?? spec.remoteCwd>/.paperclip-runtime/runs/<runId>/workspace`
 * (`prepareWorkspaceForSshExecution`) and its baseline snapshot of the same host tree is
 * captured while it is sent (upstream captures it after the upload); each asset is uploaded
 * to `<runtimeRootDir>/<key>` (a failed upload restores the workspace and rethrows); each
 * referenced project to `<runtimeRootDir>/project-<id>`
 * without its heavy directories and ignored paths (a failure warns and skips that project).
 * `restoreWorkspace(onProgress)` merges the remote workspace back and runs each asset's
 * `restore({ assetDir, readFile })` (`readFile` reads at most 1 MiB of base64 over SSH).
 */
export async function prepareRemoteManagedRuntime(input) {
  const { spec, onProgress } = input;
  const base = input.workspaceRemoteDir ?? spec.remoteCwd;
  const syncWorkspace = input.syncWorkspace !== false;
  const workspaceRemoteDir = syncWorkspace
    ? path.posix.join(base, RUNTIME_DIR, "runs", input.runId, "workspace")
    : base;
  const runtimeRootDir = path.posix.join(workspaceRemoteDir, RUNTIME_DIR, input.adapterKey);
  const assets = input.assets ?? [];
  const staged = syncWorkspace ? await stageRunWorkspace(input, workspaceRemoteDir) : null;
  const restoreStagedWorkspace = async (progress) => {
    if (!staged) return;
    await restoreWorkspaceFromSshExecution({
      spec,
      localDir: input.workspaceLocalDir,
      remoteDir: workspaceRemoteDir,
      baselineSnapshot: staged.baselineSnapshot,
      restoreGitHistory: staged.prepared.gitBacked,
      onProgress: progress,
    });
  };
  let assetDirs;
  try {
    assetDirs = await stageAssets(input, runtimeRootDir);
  } catch (error) {
    await restoreStagedWorkspace(onProgress);
    throw error;
  }
  const readFile = async (remotePath) => {
    const { stdout } = await runSshCommand(spec, `base64 < ${shellQuote(remotePath)}`, {
      maxBuffer: READ_FILE_MAX_BUFFER,
    });
    return Buffer.from(stdout.replace(/\s+/g, ""), "base64");
  };
  return {
    spec,
    workspaceLocalDir: input.workspaceLocalDir,
    workspaceRemoteDir,
    runtimeRootDir,
    assetDirs,
    additionalSourceDirs: await stageReferencedProjects(input, runtimeRootDir),
    restoreWorkspace: async (progress) => {
      await restoreStagedWorkspace(progress);
      for (const asset of assets) {
        if (!asset.restore) continue;
        await asset.restore({ assetDir: path.posix.join(runtimeRootDir, asset.key), readFile });
      }
    },
  };
}

/**
 * The run's workspace staged by `prepareWorkspaceForSshExecution`, with the baseline of the
 * host tree it sends: `{ prepared, baselineSnapshot }`.
 */
async function stageRunWorkspace(input, workspaceRemoteDir) {
  const { spec, onProgress } = input;
  // The workspace's first remote command logs in while the git state is read.
  openSshSessionAhead(spec, {});
  // The baseline is the host tree the prepare sends: captured while it is sent (upstream
  // captures it after; both read the same host files), with the exclusions of the kind the
  // prepare finds from the same git state (read once, handed on).
  const gitState = await readLocalGitState(input.workspaceLocalDir);
  const capturing = captureDirectorySnapshot(input.workspaceLocalDir, {
    exclude: gitState ? [...GIT_ARCHIVE_EXCLUDES, RUNTIME_DIR] : [RUNTIME_DIR],
  });
  capturing.catch(() => undefined);
  const prepared = await prepareWorkspaceForSshExecution({
    spec,
    localDir: input.workspaceLocalDir,
    remoteDir: workspaceRemoteDir,
    onProgress,
    [LOCAL_GIT_STATE]: gitState,
  });
  return { prepared, baselineSnapshot: await capturing };
}

/** Each asset uploaded to `<runtimeRootDir>/<key>`, one after the other; resolves the remote directories by key. */
async function stageAssets(input, runtimeRootDir) {
  const assetDirs = {};
  for (const asset of input.assets ?? []) {
    const remoteDir = path.posix.join(runtimeRootDir, asset.key);
    assetDirs[asset.key] = remoteDir;
    await syncDirectoryToSsh({
      spec: input.spec,
      localDir: asset.localDir,
      remoteDir,
      followSymlinks: asset.followSymlinks,
      exclude: asset.exclude,
      onProgress: input.onProgress,
      progressLabel: asset.key,
    });
  }
  return assetDirs;
}

/**
 * Each referenced project uploaded to `<runtimeRootDir>/project-<id>` without its heavy
 * directories and ignored paths; one that fails is warned about and skipped. Resolves the
 * remote directories by project id.
 */
async function stageReferencedProjects(input, runtimeRootDir) {
  const additionalSourceDirs = {};
  for (const { localPath, projectId, ignoreResolution } of input.additionalSources ?? []) {
    try {
      checkReferencedSource(localPath, projectId, ignoreResolution);
      const remoteDir = path.posix.join(runtimeRootDir, `project-${projectId}`);
      await syncDirectoryToSsh({
        spec: input.spec,
        localDir: localPath,
        remoteDir,
        exclude: mergeExcludes(
          REFERENCED_SOURCE_HEAVY_EXCLUDES,
          referencedSourceIgnoreExcludeEntries(ignoreResolution),
        ),
        onProgress: input.onProgress,
        progressLabel: `project-${projectId}`,
      });
      additionalSourceDirs[projectId] = remoteDir;
    } catch (error) {
      console.warn(`[paperclip] Failed to stage referenced project ${projectId}; skipping it. ${String(error)}`);
    }
  }
  return additionalSourceDirs;
}
