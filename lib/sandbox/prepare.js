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
 * sandbox workspace (../workspace-guard.js), given to a project repository's nested prepare by
 * the restore that runs it (the workspace's own: a repository the agent removed is the
 * agent's change); by default the workspace this prepare stages.
 */
export async function prepareSandbox(input, sources, { guard: inheritedGuard } = {}) {
  const {
    createTarballFromDirectory,
    mergeExcludes,
    referencedSourceIgnoreExcludeEntries,
    resolveReferencedSourceIgnore,
  } = sources;
  // Our addition: `signal` stops the work between steps and inside every pack and extraction
  // (a remote command already running is left to its own timeout).
  const signal = checkSignal(input.signal);
  // When the prepare began, as a file time: a git delta vouches only for host files older.
  const startedNs = BigInt(Date.now()) * 1_000_000n;
  // Our addition: `limits` bounds the restore's extraction of what the sandbox sends back
  // (see `extractTarballToDirectory`); checked here so a bad value fails before any work.
  const limits = input.limits === undefined ? undefined : archiveLimits(input.limits);
  const stopIfAborted = () => {
    if (signal?.aborted) throw abortError(signal);
  };
  stopIfAborted();
  const workspaceRemoteDir = input.workspaceRemoteDir ?? input.spec.remoteCwd;
  const runtimeRootDir = path.posix.join(workspaceRemoteDir, ".paperclip-runtime", input.adapterKey);
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
  const stageWorkspace = syncWorkspace && mode !== "adopt_remote";
  const seedOnly = syncWorkspace && mode === "adopt_remote" && input.workspaceDurableSeed !== undefined;
  if (mode === "durable_seed" && !input.workspaceDurableSeed) throw new Error("workspace_durable_seed_missing");
  for (const asset of input.assets ?? []) assertAssetKey(asset.key);

  // A delta's first question (its manifest, the sandbox's listing) goes out now, answered
  // while this host takes the git snapshot and the baseline (delta.js startEarlyListing).
  const early =
    stageWorkspace && mode === "host_current" && !input.workspaceDurableSeed
      ? startEarlyListing({
          client: input.client,
          spec: input.spec,
          remoteDir: workspaceRemoteDir,
          localDir: input.workspaceLocalDir,
          preserved: [...new Set([".paperclip-runtime", ...(input.preserveAbsentOnRestore ?? [])])],
          listGit,
        })
      : null;
  try {
    return await prepareWithEarlyListing();
  } finally {
    await settleEarlyListing(early);
  }

  /** The rest of the prepare, `early` started. */
  async function prepareWithEarlyListing() {
    const span = (name, work) => (input.runtimeSpan ? input.runtimeSpan(name, work) : work());
    const gitSnapshot = syncWorkspace
      ? input.workspaceGitSnapshot !== undefined
        ? input.workspaceGitSnapshot
        : await span("snapshot.git", () => readGitWorkspaceSnapshot(input.workspaceLocalDir))
      : null;
    const directoryIgnore =
      syncWorkspace && !gitSnapshot ? await resolveReferencedSourceIgnore(input.workspaceLocalDir) : null;
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
    // What the remote starts the run from, for the restore's judgement of the agent's work
    // (../remote-start.js): this host's tree as the archive leaves it, or HEAD's checkout under
    // the overlay (for a project repository too, which its workspace's prepare staged so). A
    // durable seed or an adopted remote is not this host's tree: only what the pull leaves
    // out is known never to travel.
    const stagedHere = stageWorkspace ? mode !== "durable_seed" : Boolean(inheritedGuard);
    const remoteStart = !stagedHere
      ? { untransferred: workspaceRestoreExclude }
      : gitSnapshot
        ? {
            untransferred: [".paperclip-runtime", ...workspaceRestoreExclude],
            checkout: {
              localDir: input.workspaceLocalDir,
              head: gitSnapshot.headCommit,
              overlay: gitSnapshot.overlayPaths.filter((relative) => !shouldExcludePath(relative, archiveExclude)),
              removed: gitSnapshot.deletedPaths,
            },
          }
        : { untransferred: [...archiveExclude, ...workspaceRestoreExclude] };
    const baseline = syncWorkspace
      ? (input.workspaceBaseline ??
        (await span("snapshot.baseline", () =>
          captureDirectorySnapshot(input.workspaceLocalDir, { exclude: restoreExclude }),
        )))
      : null;

    const syncIn = input.client.syncIn;
    if (typeof syncIn !== "function") {
      throw new Error(
        "prepareSandboxManagedRuntime requires a client that exposes syncIn " +
          "(createCommandManagedRuntimeClient provides a native-or-fallback implementation).",
      );
    }
    const nativeSyncOut = typeof input.client.syncOut === "function";
    let operationSeq = 0;
    const nextOperationId = () => `sync-op-${(operationSeq += 1)}`;
    const additionalSourceDirs = {};
    const additionalSourceFailures = [];
    const projectBaseExclude = mergeExcludes(HEAVY_EXCLUDES, [".git"]);
    const withRunTimeout = (commands) =>
      commands.map((command) => ({ ...command, timeoutMs: command.timeoutMs ?? input.spec.timeoutMs }));
    const concurrent = input.client.allowConcurrentSyncOperations === true;

    await withTempDir("paperclip-sandbox-sync-", async (tempDir) => {
      const preserved = new Set([
        ".paperclip-runtime",
        ...(gitSnapshot ? [".git"] : []),
        ...(input.preserveAbsentOnRestore ?? []),
      ]);
      /** One confined `syncIn` operation and its closing progress line. */
      const stage = async ({ files, postUploadCommands, sourceRoots, targetRoots, label, phase, bytes }) => {
        const operations = [
          {
            operationId: nextOperationId(),
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
      const tasks = [];
      const required = [];

      // With our own client on the base64 or duplex transport, an archive need not exist on
      // disk: the mapping carries what to pack and the client packs it straight into the
      // upload. Durable seeds and native providers get real host files, as upstream's do.
      const streamPacks = input.client[OUR_CLIENT]?.streamsPackedSources === true;
      /** Packs `localDir` to `archivePath` (or only describes the pack); returns the mapping extras and the file size. */
      const packTo = async (archivePath, pack, keepFile) => {
        if (streamPacks && !keepFile) return { extras: { [PACKED_SOURCE]: { ...pack, signal } }, size: 0 };
        await createTarballFromDirectory({ ...pack, archivePath, signal });
        return { extras: {}, size: (await fs.stat(archivePath)).size };
      };
      const withMapping = (mapping, extras) => Object.assign(mapping, extras);

      if (stageWorkspace || seedOnly) {
        required.push(true);
        tasks.push(() =>
          span("stage.workspace", async () => {
            const files = [];
            const commands = [];
            let bytes = 0;
            const seeded = mode === "durable_seed";
            const persist = Boolean(input.workspaceDurableSeed);
            /** Everything from the git-history archive on; `cloneDir` when the clone is still there. */
            const packAndStage = async (cloneDir) => {
              await span("pack", async () => {
                if (gitSnapshot) {
                  await emitStatus(input.onRuntimeProgress, "git_sync", "Syncing git history to environment");
                  const gitTar = path.join(tempDir, "git-workspace.tar");
                  const remoteGitTar = path.posix.join(runtimeRootDir, "git-workspace-upload.tar");
                  let extras = {};
                  if (seeded) {
                    const seedArchive = input.workspaceDurableSeed?.gitArchivePath;
                    if (!seedArchive) throw new Error("workspace_durable_seed_git_missing");
                    await copySeed(seedArchive, gitTar, input.workspaceDurableSeed?.gitArchiveSha256);
                    bytes += (await fs.stat(gitTar)).size;
                  } else if (cloneDir) {
                    ({ extras } = await packTo(gitTar, { localDir: cloneDir, exclude: [".paperclip-runtime"] }, false));
                  } else {
                    await withShallowHeadClone(input.workspaceLocalDir, gitSnapshot, (clone) =>
                      createTarballFromDirectory({
                        localDir: clone,
                        archivePath: gitTar,
                        exclude: [".paperclip-runtime"],
                        signal,
                      }),
                    );
                    if (input.workspaceDurableSeed?.gitArchivePath)
                      await persistSeed(gitTar, input.workspaceDurableSeed.gitArchivePath);
                    bytes += (await fs.stat(gitTar)).size;
                  }
                  files.push(
                    withMapping(
                      {
                        sourcePath: gitTar,
                        targetPath: remoteGitTar,
                        kind: "file",
                        access: "rw",
                        writablePath: workspaceRemoteDir,
                      },
                      extras,
                    ),
                  );
                  commands.push({
                    command: workspaceExtractCommand(workspaceRemoteDir, remoteGitTar, [".paperclip-runtime"]),
                  });
                }
                await emitStatus(input.onRuntimeProgress, "config_sync", "Syncing workspace to environment");
                const workspaceTar = path.join(tempDir, "workspace.tar");
                let extras = {};
                if (seeded) {
                  await copySeed(
                    input.workspaceDurableSeed.workspaceArchivePath,
                    workspaceTar,
                    input.workspaceDurableSeed.workspaceArchiveSha256,
                  );
                  bytes += (await fs.stat(workspaceTar)).size;
                } else {
                  const archiveDir = gitSnapshot ? path.join(tempDir, "workspace-overlay") : input.workspaceLocalDir;
                  if (gitSnapshot)
                    await copyOverlay(input.workspaceLocalDir, archiveDir, gitSnapshot.overlayPaths, archiveExclude);
                  const packed = await packTo(
                    workspaceTar,
                    { localDir: archiveDir, exclude: gitSnapshot ? undefined : archiveExclude },
                    persist,
                  );
                  extras = packed.extras;
                  bytes += packed.size;
                  if (persist) await persistSeed(workspaceTar, input.workspaceDurableSeed.workspaceArchivePath);
                }
                const remoteTar = path.posix.join(runtimeRootDir, "workspace-upload.tar");
                files.push(
                  withMapping(
                    {
                      sourcePath: workspaceTar,
                      targetPath: remoteTar,
                      kind: "file",
                      access: "rw",
                      writablePath: workspaceRemoteDir,
                    },
                    extras,
                  ),
                );
                commands.push({
                  command: workspaceExtractCommand(workspaceRemoteDir, remoteTar, gitSnapshot ? null : [...preserved]),
                });
                if (gitSnapshot && gitSnapshot.deletedPaths.length > 0) {
                  commands.push({
                    command: `cd ${shellQuote(workspaceRemoteDir)} && rm -rf -- ${gitSnapshot.deletedPaths.map(shellQuote).join(" ")}`,
                  });
                }
              });
              if (!stageWorkspace) return;
              await stage({
                files,
                postUploadCommands: commands,
                sourceRoots: [tempDir],
                targetRoots: [runtimeRootDir],
                label: "workspace",
                phase: "config_sync",
                bytes,
              });
            };
            // Streaming the git-history archive needs the clone until the upload is done.
            const keepClone =
              gitSnapshot && !seeded && streamPacks && stageWorkspace && !input.workspaceDurableSeed?.gitArchivePath;
            /** A delta's payload through the client's upload, `command(remotePath)` run after it. */
            const stageDelta = async ({ pack, file, command }) => {
              await emitStatus(input.onRuntimeProgress, "config_sync", "Syncing workspace to environment");
              const remoteTar = path.posix.join(runtimeRootDir, file ? "git-delta-upload.bin" : "workspace-upload.tar");
              const mapping = {
                sourcePath: file ?? path.join(tempDir, "workspace.tar"),
                targetPath: remoteTar,
                kind: "file",
                access: "rw",
                writablePath: workspaceRemoteDir,
                ...(pack ? { [PACKED_SOURCE]: pack } : {}),
              };
              await stage({
                files: [mapping],
                postUploadCommands: [{ command: command(remoteTar) }],
                sourceRoots: [tempDir],
                targetRoots: [runtimeRootDir],
                label: "workspace",
                phase: "config_sync",
                bytes: file ? (await fs.stat(file)).size : 0,
              });
            };
            /** A small delta's one command (`upload()`), with the prepare's status and progress lines. */
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
            if (keepClone && !persist) {
              // A git workspace: only the history and files the sandbox lacks to a sandbox
              // that kept the last prepare's (git-delta.js).
              const gitStatus = async (stageStep, args) => {
                await emitStatus(input.onRuntimeProgress, "git_sync", "Syncing git history to environment");
                return stageStep(args);
              };
              await stageSandboxGit({
                client: input.client,
                spec: input.spec,
                localDir: input.workspaceLocalDir,
                remoteDir: workspaceRemoteDir,
                snapshot: gitSnapshot,
                exclude: archiveExclude,
                tempDir,
                startedNs,
                signal,
                ensureDirs: [runtimeRootDir],
                mark: deltaMark(workspaceRemoteDir),
                fullUpload: () =>
                  withShallowHeadClone(input.workspaceLocalDir, gitSnapshot, async (cloneDir) => {
                    const template = await cloneTemplate(cloneDir);
                    await packAndStage(cloneDir);
                    return template;
                  }),
                stageInline: (args) => gitStatus(stageInline, args),
                stageDelta: (args) => gitStatus(stageDelta, args),
                early,
              });
            } else if (keepClone)
              await withShallowHeadClone(input.workspaceLocalDir, gitSnapshot, (cloneDir) => packAndStage(cloneDir));
            else if (!gitSnapshot && !seeded && !persist && stageWorkspace) {
              // A plain tree: only what changed to a sandbox that kept the last one (delta.js).
              await stageSandboxTree({
                client: input.client,
                spec: input.spec,
                localDir: input.workspaceLocalDir,
                remoteDir: workspaceRemoteDir,
                exclude: archiveExclude,
                preserved: [...preserved],
                signal,
                ensureDirs: [runtimeRootDir],
                mark: deltaMark(workspaceRemoteDir),
                fullUpload: () => packAndStage(null),
                stageInline,
                stageDelta,
                early,
              });
            } else await packAndStage(null);
          }),
        );
      }

      for (const asset of input.assets ?? []) {
        required.push(true);
        tasks.push(() =>
          span(`stage.asset.${asset.key}`, async () => {
            await emitStatus(input.onRuntimeProgress, "config_sync", "Syncing runtime assets to environment");
            const assetDir = path.posix.join(runtimeRootDir, asset.key);
            const remoteTar = path.posix.join(runtimeRootDir, `${asset.key}-upload.tar`);
            const assetTar = path.join(tempDir, `${asset.key}.tar`);
            const packed = await packTo(
              assetTar,
              { localDir: asset.localDir, followSymlinks: asset.followSymlinks, exclude: asset.exclude },
              false,
            );
            const files = [
              withMapping(
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
              files.push({
                sourcePath: hostPath,
                targetPath: path.posix.join(runtimeRootDir, name),
                kind: "file",
                access: "ro",
              });
            }
            const command =
              asset.provision?.postUploadCommand?.({ assetTarPath: remoteTar, assetDir, runtimeRootDir }) ??
              assetExtractCommand(assetDir, remoteTar);
            await stage({
              files,
              postUploadCommands: [{ command }],
              sourceRoots: [tempDir],
              targetRoots: [runtimeRootDir],
              label: asset.key,
              phase: "config_sync",
              bytes: packed.size,
            });
          }),
        );
      }

      const sources = input.additionalSources ?? [];
      const failureSlots = sources.map(() => null);
      sources.forEach((source, index) => {
        required.push(false);
        tasks.push(() =>
          span(`stage.project.${source.projectId}`, async () => {
            const { localPath, projectId, ignoreResolution } = source;
            const label = `project-${projectId}`;
            try {
              if (!path.posix.isAbsolute(localPath))
                throw new Error(`additional source localPath is not an absolute path: ${localPath}`);
              if (
                projectId.length === 0 ||
                projectId.includes("/") ||
                projectId.includes("\\") ||
                projectId.includes("..")
              ) {
                throw new Error(`additional source projectId is not a simple path segment: ${projectId}`);
              }
              if (ignoreResolution.kind === "failed")
                throw new Error(`referenced project ignore resolution failed: ${ignoreResolution.reason}`);
              const remoteDir = path.posix.join(runtimeRootDir, label);
              const exclude = mergeExcludes(projectBaseExclude, referencedSourceIgnoreExcludeEntries(ignoreResolution));
              await emitStatus(input.onRuntimeProgress, "config_sync", "Syncing referenced project to environment");
              await stage({
                files: [{ sourcePath: localPath, targetPath: remoteDir, kind: "directory", exclude, access: "ro" }],
                sourceRoots: [localPath],
                targetRoots: [remoteDir],
                label,
                phase: "config_sync",
                bytes: 0,
              });
              additionalSourceDirs[projectId] = remoteDir;
            } catch (error) {
              failureSlots[index] = { projectId, error: error instanceof Error ? error.message : String(error) };
            }
          }),
        );
      });

      const settled = await scheduleSyncOperations(tasks, concurrent, SYNC_CONCURRENCY);
      for (const failure of failureSlots) if (failure) additionalSourceFailures.push(failure);
      for (let index = 0; index < settled.length; index += 1) {
        if (required[index] && settled[index].status === "rejected") throw settled[index].reason;
      }
    });

    const assetDirs = Object.fromEntries(
      (input.assets ?? []).map((asset) => [asset.key, path.posix.join(runtimeRootDir, asset.key)]),
    );

    /** Brings the sandbox workspace (history, then tree) back and merges it (restore.js). */
    const restoreWorkspaceTask = (sink) =>
      restoreSandboxWorkspace(
        {
          input,
          signal,
          limits,
          stopIfAborted,
          repositories,
          baseline,
          gitSnapshot,
          workspaceRemoteDir,
          runtimeRootDir,
          workspaceRestoreExclude,
          remoteStart,
          nativeSyncOut,
          nextOperationId,
          mergeExcludes,
          // The workspace this prepare staged (its `.paperclip-runtime` left in it), or only
          // checked to exist when the prepare staged nothing there.
          guard: inheritedGuard ?? { dir: workspaceRemoteDir, staged: stageWorkspace },
          prepareNested: (nested, guard) => prepareSandbox(nested, sources, { guard }),
        },
        sink,
      );

    return {
      spec: input.spec,
      workspaceLocalDir: input.workspaceLocalDir,
      workspaceRemoteDir,
      runtimeRootDir,
      assetDirs,
      additionalSourceDirs,
      additionalSourceFailures,
      workspaceSyncSnapshot: syncWorkspace && baseline ? { baseline, gitSnapshot } : null,
      restoreWorkspace: async (onProgress) => {
        const sink = onProgress ?? input.onProgress;
        const tasks = [];
        if (syncWorkspace) tasks.push(() => span("restore.workspace", () => restoreWorkspaceTask(sink)));
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
        const settled = await scheduleSyncOperations(tasks, concurrent, SYNC_CONCURRENCY);
        for (const result of settled) if (result.status === "rejected") throw result.reason;
      },
    };
  }
}
