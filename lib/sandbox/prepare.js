// `prepareSandboxManagedRuntime`: stages a workspace (git history + working-tree overlay,
// or a plain tree), runtime assets and referenced projects into a sandbox through the
// client's `syncIn`, and returns the prepared runtime whose `restoreWorkspace()` brings
// the run's work back (git delta bundle + the tree, merged against the baseline). Upstream's
// orchestration, remote commands, progress lines and statuses; what changes is the work on
// this host: archives are packed in-process (no `tar` child), the restore archive is read
// slice by slice straight into the safe extractor (hostile members refused, nothing
// applied before the merge), and nothing is buffered whole when the client streams. The
// restore is restore.js; what both use, steps.js.
import { createHash, randomUUID } from "node:crypto";
import { createReadStream, promises as fs } from "node:fs";
import path from "node:path";
import { archiveLimits, checkSignal } from "../arguments.js";
import { shouldExcludePath } from "../exclude-patterns.js";
import { GIT_ARCHIVE_EXCLUDES, readGitWorkspaceSnapshot } from "../git-workspace-sync.js";
import { abortError } from "../native.js";
import { captureDirectorySnapshot } from "../workspace-restore-merge.js";
import { asBuffer } from "./base64-transfer.js";
import { OUR_CLIENT, PACKED_SOURCE } from "./client-features.js";
import { assertSyncOperationsConfined } from "./confinement.js";
import { deltaMark, settleEarlyListing, stageSandboxTree, startEarlyListing } from "./delta.js";
import { listGit, stageSandboxGit } from "./git-delta.js";
import { withShallowHeadClone } from "./git-history.js";
import { restoreSandboxWorkspace } from "./restore.js";
import { scheduleSyncOperations, SYNC_CONCURRENCY } from "./schedule.js";
import { shellQuote } from "./shell.js";
import { emitStatus, HEAVY_EXCLUDES, syncedBytes, transferProgress, withTempDir } from "./steps.js";

/** Asset keys that would share a remote archive path with the workspace's archives. */
const RESERVED_ASSET_KEYS = new Set(["workspace", "git-workspace"]);

function assertAssetKey(key) {
  if (key.length === 0 || key.includes("/") || key.includes("\\") || key.includes("..")) {
    throw new Error(`sandbox runtime asset key is not a simple path segment: ${key}`);
  }
  if (RESERVED_ASSET_KEYS.has(key)) {
    throw new Error(`sandbox runtime asset key collides with a reserved runtime archive name: ${key}`);
  }
}

/** `find -name` terms that spare each name. */
function spareNames(names) {
  return names.map((name) => `! -name ${shellQuote(name)}`).join(" ");
}

/**
 * Extracts an uploaded archive into the workspace and removes it; `wipeExcept` (when
 * given) first removes every top-level entry but those names and in-flight
 * `.paperclip-upload-*` scratch archives.
 */
function workspaceExtractCommand(remoteDir, remoteTar, wipeExcept) {
  const dir = shellQuote(remoteDir);
  const wipe = wipeExcept
    ? ` && find ${dir} -mindepth 1 -maxdepth 1 ${spareNames([...wipeExcept, ".paperclip-upload-*"])} -exec rm -rf -- {} +`
    : "";
  return `mkdir -p ${dir}${wipe} && tar -xf ${shellQuote(remoteTar)} -C ${dir} && rm -f ${shellQuote(remoteTar)}`;
}

function assetExtractCommand(assetDir, assetTar) {
  return `rm -rf ${shellQuote(assetDir)} && mkdir -p ${shellQuote(assetDir)} && tar -xf ${shellQuote(assetTar)} -C ${shellQuote(assetDir)} && rm -f ${shellQuote(assetTar)}`;
}

async function sha256File(file) {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk);
  return hash.digest("hex");
}

/** Copies a durable seed archive (a regular file, digest checked when given) to `target`. */
async function copySeed(source, target, sha256) {
  const stat = await fs.lstat(source);
  if (stat.isSymbolicLink() || !stat.isFile()) throw new Error("workspace_durable_seed_invalid");
  if (sha256 && (await sha256File(source)) !== sha256) throw new Error("workspace_durable_seed_digest_mismatch");
  await fs.copyFile(source, target);
}

/** Saves `source` as the durable seed `target` (private parent, 0600, staged + renamed). */
async function persistSeed(source, target) {
  const parent = path.dirname(target);
  await fs.mkdir(parent, { recursive: true, mode: 0o700 });
  const stat = await fs.lstat(parent);
  if (stat.isSymbolicLink() || !stat.isDirectory()) throw new Error("workspace_durable_seed_root_invalid");
  const staged = path.join(parent, `.${path.basename(target)}.${randomUUID()}.tmp`);
  try {
    await fs.copyFile(source, staged);
    await fs.chmod(staged, 0o600);
    await fs.rename(staged, target);
  } finally {
    await fs.rm(staged, { force: true }).catch(() => undefined);
  }
}

/** What a git delta rebuilds the sandbox's `.git` with (git-delta.js): the clone's configuration and exclude file. */
async function cloneTemplate(cloneDir) {
  const [config, exclude] = await Promise.all([
    fs.readFile(path.join(cloneDir, ".git", "config"), "utf8"),
    fs.readFile(path.join(cloneDir, ".git", "info", "exclude"), "utf8").catch(() => null),
  ]);
  return { config, exclude };
}

/** Copies the selected overlay paths (minus excluded ones, minus vanished ones) into `targetDir`. */
async function copyOverlay(sourceDir, targetDir, relativePaths, exclude) {
  await fs.mkdir(targetDir, { recursive: true });
  for (const relative of relativePaths) {
    if (shouldExcludePath(relative, exclude)) continue;
    const source = path.join(sourceDir, relative);
    const stat = await fs.lstat(source).catch(() => null);
    if (!stat) continue;
    const target = path.join(targetDir, relative);
    if (stat.isDirectory()) {
      await fs.mkdir(target, { recursive: true });
      continue;
    }
    await fs.mkdir(path.dirname(target), { recursive: true });
    await fs.rm(target, { recursive: true, force: true }).catch(() => undefined);
    if (stat.isSymbolicLink()) {
      await fs.symlink(await fs.readlink(source), target);
      continue;
    }
    await fs.copyFile(source, target, fs.constants?.COPYFILE_FICLONE ?? 0).catch(() => fs.copyFile(source, target));
    await fs.chmod(target, stat.mode);
  }
}

/**
 * Upstream's `prepareSandboxManagedRuntime` (see sandbox-managed-runtime.d.ts). `sources`
 * holds sandbox-managed-runtime.js's `createTarballFromDirectory`, `mergeExcludes`,
 * `referencedSourceIgnoreExcludeEntries` and `resolveReferencedSourceIgnore` (that module
 * passes them in, so this one does not import it back). `guard`: the restore's check of the
 * sandbox workspace (../lifecycle/workspace-guard.js), given to a project repository's nested prepare by
 * the restore that runs it (the workspace's own: a repository the agent removed is the
 * agent's change); by default the workspace this prepare stages.
 *
 * The steps, each a function below: the checked input (`openPrepare`); the views of the tree
 * (`treeViews`: the snapshot, the excludes, what the remote starts from, the baseline); the
 * staging of the workspace, the assets and the referenced projects (`stageAll`); the
 * prepared runtime (`preparedRuntime`).
 */
export async function prepareSandbox(input, sources, { guard: inheritedGuard } = {}) {
  const prep = await openPrepare(input, sources, inheritedGuard);
  // A delta's first question (its manifest, the sandbox's listing) goes out now, answered
  // while this host takes the git snapshot and the baseline (delta.js startEarlyListing).
  const early =
    prep.stageWorkspace && prep.mode === "host_current" && !input.workspaceDurableSeed
      ? startEarlyListing({
          client: input.client,
          spec: input.spec,
          remoteDir: prep.workspaceRemoteDir,
          localDir: input.workspaceLocalDir,
          preserved: [...new Set([".paperclip-runtime", ...(input.preserveAbsentOnRestore ?? [])])],
          listGit,
        })
      : null;
  try {
    const views = await treeViews(prep);
    const staged = await stageAll(prep, views, early);
    return preparedRuntime(prep, views, staged);
  } finally {
    await settleEarlyListing(early);
  }
}

/**
 * The prepare's checked input and what follows from it alone: `signal` (ours: stops the work
 * between steps and inside every pack and extraction; a remote command already running is
 * left to its own timeout), `startedNs` (when the prepare began, as a file time: a git delta
 * vouches only for host files older), `limits` (ours: bounds the restore's extraction, checked
 * here so a bad value fails before any work), the remote directories, whether the workspace
 * is synced and staged, and `span(name, work)` (the caller's runtime span, when given).
 */
async function openPrepare(input, sources, inheritedGuard) {
  const signal = checkSignal(input.signal);
  const startedNs = BigInt(Date.now()) * 1_000_000n;
  const limits = input.limits === undefined ? undefined : archiveLimits(input.limits);
  const stopIfAborted = () => {
    if (signal?.aborted) throw abortError(signal);
  };
  stopIfAborted();
  const workspaceRemoteDir = input.workspaceRemoteDir ?? input.spec.remoteCwd;
  const syncWorkspace =
    input.syncWorkspace !== false &&
    (await fs.access(input.workspaceLocalDir).then(
      () => true,
      (error) => {
        if (error.code === "ENOENT") return false;
        throw error;
      },
    ));
  const mode = input.workspaceInboundMode ?? "host_current";
  if (mode === "durable_seed" && !input.workspaceDurableSeed) throw new Error("workspace_durable_seed_missing");
  for (const asset of input.assets ?? []) assertAssetKey(asset.key);
  return {
    input,
    sources,
    inheritedGuard,
    signal,
    startedNs,
    limits,
    stopIfAborted,
    workspaceRemoteDir,
    runtimeRootDir: path.posix.join(workspaceRemoteDir, ".paperclip-runtime", input.adapterKey),
    syncWorkspace,
    mode,
    stageWorkspace: syncWorkspace && mode !== "adopt_remote",
    seedOnly: syncWorkspace && mode === "adopt_remote" && input.workspaceDurableSeed !== undefined,
    span: (name, work) => (input.runtimeSpan ? input.runtimeSpan(name, work) : work()),
  };
}

/**
 * The views of the workspace's tree the prepare and the restore share: the git snapshot, the
 * archive's and the restore's excludes, the project repositories, the names a full upload
 * spares (`preserved`), what the remote starts the run from (`remoteStart`, for the restore's
 * judgement of the agent's work, ../lifecycle/remote-start.js) and the baseline.
 */
async function treeViews(prep) {
  const { input, sources, syncWorkspace, span } = prep;
  const { mergeExcludes } = sources;
  const gitSnapshot = syncWorkspace
    ? input.workspaceGitSnapshot !== undefined
      ? input.workspaceGitSnapshot
      : await span("snapshot.git", () => readGitWorkspaceSnapshot(input.workspaceLocalDir))
    : null;
  const directoryIgnore =
    syncWorkspace && !gitSnapshot ? await sources.resolveReferencedSourceIgnore(input.workspaceLocalDir) : null;
  if (directoryIgnore?.kind === "failed") throw new Error(`Workspace ignore scan failed: ${directoryIgnore.reason}`);
  const ignored =
    gitSnapshot?.ignoredPaths ?? (directoryIgnore?.kind === "git" ? directoryIgnore.ignoredPaths : undefined);
  const archiveExclude = mergeExcludes(HEAVY_EXCLUDES, [...GIT_ARCHIVE_EXCLUDES], input.workspaceExclude, ignored);
  const restoreExclude = mergeExcludes(
    HEAVY_EXCLUDES,
    [...GIT_ARCHIVE_EXCLUDES],
    [".paperclip-runtime"],
    input.preserveAbsentOnRestore,
    input.workspaceExclude,
    ignored,
  );
  const repositories = gitSnapshot?.repositories ?? [];
  const workspaceRestoreExclude = mergeExcludes(
    restoreExclude,
    repositories.map((repository) => repository.path),
  );
  const baseline = syncWorkspace
    ? (input.workspaceBaseline ??
      (await span("snapshot.baseline", () =>
        captureDirectorySnapshot(input.workspaceLocalDir, { exclude: restoreExclude }),
      )))
    : null;
  return {
    gitSnapshot,
    archiveExclude,
    repositories,
    workspaceRestoreExclude,
    remoteStart: remoteStartOf(prep, gitSnapshot, archiveExclude, workspaceRestoreExclude),
    baseline,
    preserved: new Set([
      ".paperclip-runtime",
      ...(gitSnapshot ? [".git"] : []),
      ...(input.preserveAbsentOnRestore ?? []),
    ]),
  };
}

/**
 * What the remote starts the run from (../lifecycle/remote-start.js `describeRemoteStart`'s input):
 * this host's tree as the archive leaves it, or HEAD's checkout under the overlay (for a
 * project repository too, which its workspace's prepare staged so). A durable seed or an
 * adopted remote is not this host's tree: only what the pull leaves out is known never to
 * travel.
 */
function remoteStartOf({ input, stageWorkspace, mode, inheritedGuard }, gitSnapshot, archiveExclude, restoreExclude) {
  const stagedHere = stageWorkspace ? mode !== "durable_seed" : Boolean(inheritedGuard);
  if (!stagedHere) return { untransferred: restoreExclude };
  if (!gitSnapshot) return { untransferred: [...archiveExclude, ...restoreExclude] };
  return {
    untransferred: [".paperclip-runtime", ...restoreExclude],
    checkout: {
      localDir: input.workspaceLocalDir,
      head: gitSnapshot.headCommit,
      overlay: gitSnapshot.overlayPaths.filter((relative) => !shouldExcludePath(relative, archiveExclude)),
      removed: gitSnapshot.deletedPaths,
    },
  };
}

/**
 * Stages the workspace, the assets and the referenced projects through the client's
 * `syncIn`, scheduled as the client allows. Resolves what the runtime keeps of it:
 * `nextOperationId`, `nativeSyncOut`, `concurrent`, the projects' remote directories and
 * failures.
 */
async function stageAll(prep, views, early) {
  const { input, span } = prep;
  const syncIn = input.client.syncIn;
  if (typeof syncIn !== "function") {
    throw new Error(
      "prepareSandboxManagedRuntime requires a client that exposes syncIn " +
        "(createCommandManagedRuntimeClient provides a native-or-fallback implementation).",
    );
  }
  let operationSeq = 0;
  const staged = {
    syncIn,
    nextOperationId: () => `sync-op-${(operationSeq += 1)}`,
    nativeSyncOut: typeof input.client.syncOut === "function",
    concurrent: input.client.allowConcurrentSyncOperations === true,
    additionalSourceDirs: {},
    additionalSourceFailures: [],
  };
  await withTempDir("paperclip-sandbox-sync-", async (tempDir) => {
    const uploads = uploader(prep, staged, tempDir);
    const tasks = [];
    const required = [];
    if (prep.stageWorkspace || prep.seedOnly) {
      required.push(true);
      tasks.push(() => span("stage.workspace", () => stageWorkspaceTree(prep, views, uploads, early)));
    }
    for (const asset of input.assets ?? []) {
      required.push(true);
      tasks.push(() => span(`stage.asset.${asset.key}`, () => stageAsset(prep, uploads, asset)));
    }
    const projects = input.additionalSources ?? [];
    const failureSlots = projects.map(() => null);
    projects.forEach((source, index) => {
      required.push(false);
      tasks.push(() =>
        span(`stage.project.${source.projectId}`, async () => {
          failureSlots[index] = await stageProject(prep, staged, uploads, source);
        }),
      );
    });
    const settled = await scheduleSyncOperations(tasks, staged.concurrent, SYNC_CONCURRENCY);
    for (const failure of failureSlots) if (failure) staged.additionalSourceFailures.push(failure);
    for (let index = 0; index < settled.length; index += 1) {
      if (required[index] && settled[index].status === "rejected") throw settled[index].reason;
    }
  });
  return staged;
}

/**
 * The uploads of one prepare, in `tempDir`: `stage(…)`, one confined `syncIn` operation and
 * its closing progress line; `packTo(archivePath, pack, keepFile)`, which packs a directory to
 * `archivePath` or, with our own client on the base64 or duplex transport, only describes the
 * pack (the client packs it straight into the upload; durable seeds and native providers get
 * real host files, as upstream's do), resolving the mapping's extras and the file's size.
 */
function uploader(prep, staged, tempDir) {
  const { input, signal, stopIfAborted } = prep;
  const { syncIn } = staged;
  const withRunTimeout = (commands) =>
    commands.map((command) => ({ ...command, timeoutMs: command.timeoutMs ?? input.spec.timeoutMs }));
  const stage = async ({ files, postUploadCommands, sourceRoots, targetRoots, label, phase, bytes }) => {
    const operations = [
      {
        operationId: staged.nextOperationId(),
        files,
        ...(postUploadCommands ? { postUploadCommands: withRunTimeout(postUploadCommands) } : {}),
      },
    ];
    assertSyncOperationsConfined(operations, { sourceRoots, targetRoots });
    stopIfAborted();
    const progress = transferProgress(input.onProgress, "Syncing", "to", label, {
      sink: input.onRuntimeProgress,
      phase,
    });
    let sentSoFar = 0;
    let knownTotal = bytes > 0 ? bytes : null;
    let result;
    try {
      result = input.client[OUR_CLIENT]
        ? await syncIn(operations, {
            onBytes: (done, total) => {
              sentSoFar = done;
              if (!(bytes > 0)) knownTotal = total;
            },
          })
        : await syncIn(operations);
    } catch (error) {
      await progress.fail(sentSoFar, knownTotal);
      throw error;
    }
    const sent = syncedBytes(result);
    const shown = sent > 0 ? sent : bytes;
    await progress.finish(shown, shown);
  };
  const streamPacks = input.client[OUR_CLIENT]?.streamsPackedSources === true;
  const packTo = async (archivePath, pack, keepFile) => {
    if (streamPacks && !keepFile) return { extras: { [PACKED_SOURCE]: { ...pack, signal } }, size: 0 };
    await prep.sources.createTarballFromDirectory({ ...pack, archivePath, signal });
    return { extras: {}, size: (await fs.stat(archivePath)).size };
  };
  return { tempDir, stage, packTo, streamPacks };
}

/**
 * The workspace: to a sandbox that kept the last prepare's tree, only what changed (a git
 * workspace's history and the files the sandbox lacks, git-delta.js; a plain tree's changes,
 * delta.js); else upstream's archives (`packAndStage`).
 */
async function stageWorkspaceTree(prep, views, uploads, early) {
  const { input, mode, stageWorkspace, runtimeRootDir, workspaceRemoteDir, signal } = prep;
  const { gitSnapshot, archiveExclude } = views;
  const seeded = mode === "durable_seed";
  const persist = Boolean(input.workspaceDurableSeed);
  // Streaming the git-history archive needs the clone until the upload is done.
  const keepClone =
    gitSnapshot && !seeded && uploads.streamPacks && stageWorkspace && !input.workspaceDurableSeed?.gitArchivePath;
  const { stageDelta, stageInline } = deltaStagers(prep, uploads);
  const common = {
    client: input.client,
    spec: input.spec,
    localDir: input.workspaceLocalDir,
    remoteDir: workspaceRemoteDir,
    exclude: archiveExclude,
    signal,
    ensureDirs: [runtimeRootDir],
    mark: deltaMark(workspaceRemoteDir),
    early,
  };
  if (keepClone && !persist) {
    const gitStatus = async (stageStep, args) => {
      await emitStatus(input.onRuntimeProgress, "git_sync", "Syncing git history to environment");
      return stageStep(args);
    };
    await stageSandboxGit({
      ...common,
      snapshot: gitSnapshot,
      tempDir: uploads.tempDir,
      startedNs: prep.startedNs,
      fullUpload: () =>
        withShallowHeadClone(input.workspaceLocalDir, gitSnapshot, async (cloneDir) => {
          const template = await cloneTemplate(cloneDir);
          await packAndStage(prep, views, uploads, cloneDir);
          return template;
        }),
      stageInline: (args) => gitStatus(stageInline, args),
      stageDelta: (args) => gitStatus(stageDelta, args),
    });
  } else if (keepClone)
    await withShallowHeadClone(input.workspaceLocalDir, gitSnapshot, (cloneDir) =>
      packAndStage(prep, views, uploads, cloneDir),
    );
  else if (!gitSnapshot && !seeded && !persist && stageWorkspace) {
    await stageSandboxTree({
      ...common,
      preserved: [...views.preserved],
      fullUpload: () => packAndStage(prep, views, uploads, null),
      stageInline,
      stageDelta,
    });
  } else await packAndStage(prep, views, uploads, null);
}

/**
 * How a delta's payload reaches the sandbox: `stageDelta`, through the client's upload with
 * `command(remotePath)` run after it; `stageInline`, a small delta's one command
 * (`upload()`), with the prepare's status and progress lines.
 */
function deltaStagers(prep, uploads) {
  const { input, runtimeRootDir, workspaceRemoteDir, stopIfAborted } = prep;
  const stageDelta = async ({ pack, file, command }) => {
    await emitStatus(input.onRuntimeProgress, "config_sync", "Syncing workspace to environment");
    const remoteTar = path.posix.join(runtimeRootDir, file ? "git-delta-upload.bin" : "workspace-upload.tar");
    const mapping = {
      sourcePath: file ?? path.join(uploads.tempDir, "workspace.tar"),
      targetPath: remoteTar,
      kind: "file",
      access: "rw",
      writablePath: workspaceRemoteDir,
      ...(pack ? { [PACKED_SOURCE]: pack } : {}),
    };
    await uploads.stage({
      files: [mapping],
      postUploadCommands: [{ command: command(remoteTar) }],
      sourceRoots: [uploads.tempDir],
      targetRoots: [runtimeRootDir],
      label: "workspace",
      phase: "config_sync",
      bytes: file ? (await fs.stat(file)).size : 0,
    });
  };
  const stageInline = async ({ bytes, upload }) => {
    await emitStatus(input.onRuntimeProgress, "config_sync", "Syncing workspace to environment");
    stopIfAborted();
    const progress = transferProgress(input.onProgress, "Syncing", "to", "workspace", {
      sink: input.onRuntimeProgress,
      phase: "config_sync",
    });
    let done;
    try {
      done = await upload();
    } catch (error) {
      await progress.fail(0, bytes);
      throw error;
    }
    await progress.finish(done.bytes, done.bytes);
    return done.listed;
  };
  return { stageDelta, stageInline };
}

/**
 * Upstream's workspace upload: the git-history archive (a git workspace's) and the workspace
 * archive, each extracted by a command after the upload, then the deleted paths removed;
 * `cloneDir` when the shallow clone is still there. A seed-only prepare packs (and persists
 * the seed) without staging.
 */
async function packAndStage(prep, views, uploads, cloneDir) {
  const job = { files: [], commands: [], bytes: 0 };
  await prep.span("pack", async () => {
    if (views.gitSnapshot) await packGitHistory(prep, views, uploads, job, cloneDir);
    await packWorkspaceArchive(prep, views, uploads, job);
  });
  if (!prep.stageWorkspace) return;
  await uploads.stage({
    files: job.files,
    postUploadCommands: job.commands,
    sourceRoots: [uploads.tempDir],
    targetRoots: [prep.runtimeRootDir],
    label: "workspace",
    phase: "config_sync",
    bytes: job.bytes,
  });
}

/** The git-history archive into `job`: a durable seed's, the clone's (streamed), or a fresh shallow clone's. */
async function packGitHistory(prep, views, uploads, job, cloneDir) {
  const { input, mode, runtimeRootDir, workspaceRemoteDir, signal } = prep;
  await emitStatus(input.onRuntimeProgress, "git_sync", "Syncing git history to environment");
  const gitTar = path.join(uploads.tempDir, "git-workspace.tar");
  const remoteGitTar = path.posix.join(runtimeRootDir, "git-workspace-upload.tar");
  let extras = {};
  if (mode === "durable_seed") {
    const seedArchive = input.workspaceDurableSeed?.gitArchivePath;
    if (!seedArchive) throw new Error("workspace_durable_seed_git_missing");
    await copySeed(seedArchive, gitTar, input.workspaceDurableSeed?.gitArchiveSha256);
    job.bytes += (await fs.stat(gitTar)).size;
  } else if (cloneDir) {
    ({ extras } = await uploads.packTo(gitTar, { localDir: cloneDir, exclude: [".paperclip-runtime"] }, false));
  } else {
    await withShallowHeadClone(input.workspaceLocalDir, views.gitSnapshot, (clone) =>
      prep.sources.createTarballFromDirectory({
        localDir: clone,
        archivePath: gitTar,
        exclude: [".paperclip-runtime"],
        signal,
      }),
    );
    if (input.workspaceDurableSeed?.gitArchivePath)
      await persistSeed(gitTar, input.workspaceDurableSeed.gitArchivePath);
    job.bytes += (await fs.stat(gitTar)).size;
  }
  job.files.push(
    Object.assign(
      { sourcePath: gitTar, targetPath: remoteGitTar, kind: "file", access: "rw", writablePath: workspaceRemoteDir },
      extras,
    ),
  );
  job.commands.push({
    command: workspaceExtractCommand(workspaceRemoteDir, remoteGitTar, [".paperclip-runtime"]),
  });
}

/** The workspace archive into `job`: a durable seed's, the overlay of a git workspace, or the plain tree. */
async function packWorkspaceArchive(prep, views, uploads, job) {
  const { input, mode, runtimeRootDir, workspaceRemoteDir } = prep;
  const { gitSnapshot, archiveExclude } = views;
  const persist = Boolean(input.workspaceDurableSeed);
  await emitStatus(input.onRuntimeProgress, "config_sync", "Syncing workspace to environment");
  const workspaceTar = path.join(uploads.tempDir, "workspace.tar");
  let extras = {};
  if (mode === "durable_seed") {
    await copySeed(
      input.workspaceDurableSeed.workspaceArchivePath,
      workspaceTar,
      input.workspaceDurableSeed.workspaceArchiveSha256,
    );
    job.bytes += (await fs.stat(workspaceTar)).size;
  } else {
    const archiveDir = gitSnapshot ? path.join(uploads.tempDir, "workspace-overlay") : input.workspaceLocalDir;
    if (gitSnapshot) await copyOverlay(input.workspaceLocalDir, archiveDir, gitSnapshot.overlayPaths, archiveExclude);
    const packed = await uploads.packTo(
      workspaceTar,
      { localDir: archiveDir, exclude: gitSnapshot ? undefined : archiveExclude },
      persist,
    );
    extras = packed.extras;
    job.bytes += packed.size;
    if (persist) await persistSeed(workspaceTar, input.workspaceDurableSeed.workspaceArchivePath);
  }
  const remoteTar = path.posix.join(runtimeRootDir, "workspace-upload.tar");
  job.files.push(
    Object.assign(
      { sourcePath: workspaceTar, targetPath: remoteTar, kind: "file", access: "rw", writablePath: workspaceRemoteDir },
      extras,
    ),
  );
  job.commands.push({
    command: workspaceExtractCommand(workspaceRemoteDir, remoteTar, gitSnapshot ? null : [...views.preserved]),
  });
  if (gitSnapshot && gitSnapshot.deletedPaths.length > 0) {
    job.commands.push({
      command: `cd ${shellQuote(workspaceRemoteDir)} && rm -rf -- ${gitSnapshot.deletedPaths.map(shellQuote).join(" ")}`,
    });
  }
}

/** One runtime asset: its packed directory and provisioned files, then its extraction (or the asset's own command). */
async function stageAsset(prep, uploads, asset) {
  const { input, runtimeRootDir } = prep;
  const { tempDir } = uploads;
  await emitStatus(input.onRuntimeProgress, "config_sync", "Syncing runtime assets to environment");
  const assetDir = path.posix.join(runtimeRootDir, asset.key);
  const remoteTar = path.posix.join(runtimeRootDir, `${asset.key}-upload.tar`);
  const assetTar = path.join(tempDir, `${asset.key}.tar`);
  const packed = await uploads.packTo(
    assetTar,
    { localDir: asset.localDir, followSymlinks: asset.followSymlinks, exclude: asset.exclude },
    false,
  );
  const files = [
    Object.assign(
      { sourcePath: assetTar, targetPath: remoteTar, kind: "file", access: "rw", writablePath: assetDir },
      packed.extras,
    ),
  ];
  for (const stageFile of asset.provision?.stageFiles ?? []) {
    const name = stageFile.name;
    if (/[\\/]|\.\.(\.|$)/.test(name) || name === "..") {
      throw new Error(`provision stageFile.name must be a simple basename, got: ${name}`);
    }
    const hostPath = path.join(tempDir, `${asset.key}.stage.${name}`);
    await fs.writeFile(
      hostPath,
      typeof stageFile.contents === "string" ? Buffer.from(stageFile.contents) : stageFile.contents,
    );
    files.push({ sourcePath: hostPath, targetPath: path.posix.join(runtimeRootDir, name), kind: "file", access: "ro" });
  }
  const command =
    asset.provision?.postUploadCommand?.({ assetTarPath: remoteTar, assetDir, runtimeRootDir }) ??
    assetExtractCommand(assetDir, remoteTar);
  await uploads.stage({
    files,
    postUploadCommands: [{ command }],
    sourceRoots: [tempDir],
    targetRoots: [runtimeRootDir],
    label: asset.key,
    phase: "config_sync",
    bytes: packed.size,
  });
}

/**
 * One referenced project, read-only in the sandbox: resolves `null` once staged (its remote
 * directory recorded), or its failure (`{ projectId, error }`), which never fails the prepare.
 */
async function stageProject(prep, staged, uploads, source) {
  const { input, runtimeRootDir, sources } = prep;
  const { localPath, projectId, ignoreResolution } = source;
  const label = `project-${projectId}`;
  try {
    if (!path.posix.isAbsolute(localPath))
      throw new Error(`additional source localPath is not an absolute path: ${localPath}`);
    if (projectId.length === 0 || projectId.includes("/") || projectId.includes("\\") || projectId.includes("..")) {
      throw new Error(`additional source projectId is not a simple path segment: ${projectId}`);
    }
    if (ignoreResolution.kind === "failed")
      throw new Error(`referenced project ignore resolution failed: ${ignoreResolution.reason}`);
    const remoteDir = path.posix.join(runtimeRootDir, label);
    const exclude = sources.mergeExcludes(
      sources.mergeExcludes(HEAVY_EXCLUDES, [".git"]),
      sources.referencedSourceIgnoreExcludeEntries(ignoreResolution),
    );
    await emitStatus(input.onRuntimeProgress, "config_sync", "Syncing referenced project to environment");
    await uploads.stage({
      files: [{ sourcePath: localPath, targetPath: remoteDir, kind: "directory", exclude, access: "ro" }],
      sourceRoots: [localPath],
      targetRoots: [remoteDir],
      label,
      phase: "config_sync",
      bytes: 0,
    });
    staged.additionalSourceDirs[projectId] = remoteDir;
    return null;
  } catch (error) {
    return { projectId, error: error instanceof Error ? error.message : String(error) };
  }
}

/** The prepared runtime upstream returns, whose `restoreWorkspace()` restores the workspace (restore.js) and the assets that ask. */
function preparedRuntime(prep, views, staged) {
  const { input, runtimeRootDir, workspaceRemoteDir, span } = prep;
  const { baseline, gitSnapshot } = views;
  const restoreWorkspaceTask = (sink) =>
    restoreSandboxWorkspace(
      {
        input,
        signal: prep.signal,
        limits: prep.limits,
        stopIfAborted: prep.stopIfAborted,
        repositories: views.repositories,
        baseline,
        gitSnapshot,
        workspaceRemoteDir,
        runtimeRootDir,
        workspaceRestoreExclude: views.workspaceRestoreExclude,
        remoteStart: views.remoteStart,
        nativeSyncOut: staged.nativeSyncOut,
        nextOperationId: staged.nextOperationId,
        mergeExcludes: prep.sources.mergeExcludes,
        // The workspace this prepare staged (its `.paperclip-runtime` left in it), or only
        // checked to exist when the prepare staged nothing there.
        guard: prep.inheritedGuard ?? { dir: workspaceRemoteDir, staged: prep.stageWorkspace },
        prepareNested: (nested, guard) => prepareSandbox(nested, prep.sources, { guard }),
      },
      sink,
    );
  return {
    spec: input.spec,
    workspaceLocalDir: input.workspaceLocalDir,
    workspaceRemoteDir,
    runtimeRootDir,
    assetDirs: Object.fromEntries(
      (input.assets ?? []).map((asset) => [asset.key, path.posix.join(runtimeRootDir, asset.key)]),
    ),
    additionalSourceDirs: staged.additionalSourceDirs,
    additionalSourceFailures: staged.additionalSourceFailures,
    workspaceSyncSnapshot: prep.syncWorkspace && baseline ? { baseline, gitSnapshot } : null,
    restoreWorkspace: async (onProgress) => {
      const sink = onProgress ?? input.onProgress;
      const tasks = [];
      if (prep.syncWorkspace) tasks.push(() => span("restore.workspace", () => restoreWorkspaceTask(sink)));
      for (const asset of input.assets ?? []) {
        if (!asset.restore) continue;
        const restore = asset.restore;
        const key = asset.key;
        tasks.push(() =>
          span(`restore.asset.${key}`, () =>
            withTempDir("paperclip-sandbox-restore-", (tempDir) =>
              restore({
                assetDir: path.posix.join(runtimeRootDir, key),
                readFile: async (remotePath) => asBuffer(await input.client.readFile(remotePath)),
                tempDir,
              }),
            ),
          ),
        );
      }
      const settled = await scheduleSyncOperations(tasks, staged.concurrent, SYNC_CONCURRENCY);
      for (const result of settled) if (result.status === "rejected") throw result.reason;
    },
  };
}
