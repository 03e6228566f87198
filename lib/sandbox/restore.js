// `restoreWorkspace()` of a prepared sandbox runtime (prepare.js), the lifecycle's restore
// (../lifecycle/restore.js) with this lane's steps: each project repository's nested restore,
// then the git delta bundle exported from the sandbox and fetched here, the sandbox tree read
// slice by slice into the safe extractor (the workspace's own links vouching for theirs), and
// the merge against the baseline, with the imported history moved in inside the merge lock.
// Upstream's steps, commands and progress lines.
import { promises as fs } from "node:fs";
import path from "node:path";
import { GIT_ARCHIVE_EXCLUDES } from "../git-workspace-sync.js";
import { codes } from "../native.js";
import { extractTarballToDirectory } from "../tar-stream.js";
import { restoreRun } from "../lifecycle/restore.js";
import { carryWritten } from "../lifecycle/remote-start.js";
import { endsTheCall } from "../tree-delta.js";
import { asBuffer } from "./base64-transfer.js";
import { OUR_CLIENT } from "./client-features.js";
import { sandboxRemote } from "./remote.js";
import { assertSyncOperationsConfined } from "./confinement.js";
import {
  countRestoreDelta,
  countRestoreFallback,
  countRestoreInline,
  deltaMark,
  planSandboxRestore,
  pullScript,
  recordedExtractionMask,
  recordRestore,
  startRestoreDelta,
} from "./delta.js";
import {
  deleteRef,
  deltaBundleScript,
  exportedNotesCommand,
  fetchBundle,
  integrateImportedHead,
  isMissingPrerequisite,
  newExportRef,
  newImportedRef,
  readExportedNotes,
  resetIndexToHead,
} from "./git-history.js";
import { shellQuote } from "./shell.js";
import {
  emitStatus,
  HEAVY_EXCLUDES,
  remoteArchiveCommand,
  syncedBytes,
  transferProgress,
  withTempDir,
} from "./steps.js";

/** The extraction's refusals of what the sandbox sent: never retried. */
const REFUSALS = new Set([codes.UNSAFE_ARCHIVE_ENTRY, codes.ARCHIVE_LIMIT_EXCEEDED]);

/**
 * Brings the sandbox workspace (history, then tree) back and merges it. `run` is what the
 * prepare settled: `{ input, signal, limits, stopIfAborted, repositories, baseline,
 * gitSnapshot, workspaceRemoteDir, runtimeRootDir, workspaceRestoreExclude, remoteStart,
 * nativeSyncOut, nextOperationId, mergeExcludes, guard, prepareNested }` (`remoteStart`:
 * what the remote started from, ../lifecycle/remote-start.js `describeRemoteStart`'s input, which the
 * merge judges the agent's work against; `guard`: the sandbox workspace the first command of
 * each step checks before it reads anything, ../lifecycle/workspace-guard.js; `prepareNested(input,
 * guard)` prepares a project repository's own runtime, whose restore runs first).
 *
 * The lifecycle's restore (../lifecycle/restore.js) with the sandbox lane's steps, each a
 * function below over one restore's context (`{ run, sink, baseline, start, guard, remote }`)
 * and what the steps found (`state`): the project repositories' own restores; the history's
 * export and import; the tree's pull (a provider's `syncOut`, the delta's plan, or the whole
 * archive); the merge's baseline and callbacks; the delta's record; the clean-up.
 */
export async function restoreSandboxWorkspace(run, sink) {
  run.stopIfAborted();
  const { input } = run;
  let delta = null;
  await withTempDir("paperclip-sandbox-restore-", (tempDir) => {
    /** A step of this lane, given the lifecycle's context with the lane's own. */
    const lane = (step) => (context, state) => step({ run, sink, tempDir, delta, ...context }, state);
    return restoreRun({
      remote: sandboxRemote(input.client, input.spec),
      guard: run.guard,
      localDir: input.workspaceLocalDir,
      runBaseline: run.baseline,
      sink,
      // Through our client: only what the run changed comes back (delta.js), the walk of the
      // host tree it compares with the listing started at once. Not for project
      // repositories (each restores on its own first).
      startWalk: () => {
        delta = run.nativeSyncOut
          ? countRestoreFallback("client")
          : run.repositories.length > 0
            ? countRestoreFallback("repositories")
            : startRestoreDelta(input.client, input.workspaceLocalDir, run.baseline.exclude ?? [], run.signal);
        return delta?.localWalk ?? null;
      },
      mask: () => recordedExtractionMask(input.spec, run.workspaceRemoteDir, input.workspaceLocalDir),
      remoteStart: () => run.remoteStart,
      // A provider's `syncOut` writes into the temp dir.
      stageInside: !run.nativeSyncOut,
      stagingFallback: () => path.join(tempDir, "workspace"),
      before: lane(restoreRepositories),
      bring: lane(bringRemoteWork),
      mergeBaseline: lane(mergeBaseline),
      // The imported history moves in inside the merge's lock, the index is reset after.
      beforeApply: (_context, state) =>
        state.importedHead ? () => integrateImportedHead(input.workspaceLocalDir, state.importedHead) : undefined,
      afterApply: (_context, state) =>
        run.gitSnapshot ? () => resetIndexToHead(input.workspaceLocalDir, state.remoteStatus === "clean") : undefined,
      record: lane(recordPlan),
      finish: lane(finishRestore),
    });
  });
}

/**
 * The sandbox lane's `bring` step: the history (`bringHistory`, which may take the delta's
 * plan), then the tree into `state.stagingDir`: through a provider's `syncOut`, the delta's
 * pull of what the plan names, or upstream's whole archive.
 */
async function bringRemoteWork(restore, state) {
  const { run } = restore;
  const { input } = run;
  Object.assign(state, { planned: false, importedRef: null, importedHead: null, remoteStatus: "dirty" });
  if (run.gitSnapshot) await bringHistory(restore, state, restore.tempDir);
  run.stopIfAborted();
  await emitStatus(input.onRuntimeProgress, "restore", "Restoring workspace from environment");
  const extractedDir = state.stagingDir;
  if (run.nativeSyncOut) await pullThroughSyncOut(restore, extractedDir);
  const remoteTar = path.posix.join(run.runtimeRootDir, "workspace-download.tar");
  if (restore.delta && !state.planned) await takePlan(restore, state, {});
  if (state.plan) await pullPlanned(restore, state, extractedDir, remoteTar);
  if (!run.nativeSyncOut && !state.plan) await pullWholeTree(restore, extractedDir, remoteTar);
  run.stopIfAborted();
}

/** Each project repository's own runtime, prepared against the sandbox and restored first; what it wrote is carried to the workspace's run baseline. */
async function restoreRepositories({ run, sink, baseline, guard }) {
  const { input, workspaceRemoteDir, mergeExcludes } = run;
  for (const repository of run.repositories) {
    const prefix = `${repository.path}/`;
    const localDir = path.join(input.workspaceLocalDir, repository.path);
    if ((await fs.realpath(localDir)) !== path.join(await fs.realpath(input.workspaceLocalDir), repository.path)) {
      throw new Error("Project repository escaped its workspace");
    }
    const nestedExclude = mergeExcludes(
      repository.snapshot.ignoredPaths,
      baseline.exclude.flatMap((entry) =>
        entry.startsWith(prefix) ? [entry.slice(prefix.length)] : entry.startsWith("*/") ? [entry] : [],
      ),
    );
    const nestedBaseline = {
      exclude: mergeExcludes(HEAVY_EXCLUDES, [...GIT_ARCHIVE_EXCLUDES], [".paperclip-runtime"], nestedExclude),
      entries: new Map(
        [...baseline.entries]
          .filter(([entry]) => entry.startsWith(prefix))
          .map(([entry, value]) => [entry.slice(prefix.length), value]),
      ),
    };
    const nested = await run.prepareNested(
      {
        spec: { ...input.spec, remoteCwd: path.posix.join(workspaceRemoteDir, repository.path) },
        client: input.client,
        adapterKey: input.adapterKey,
        workspaceLocalDir: localDir,
        workspaceInboundMode: "adopt_remote",
        workspaceGitSnapshot: repository.snapshot,
        workspaceExclude: nestedExclude,
        workspaceBaseline: nestedBaseline,
        onRuntimeProgress: input.onRuntimeProgress,
        signal: run.signal,
        limits: run.limits,
      },
      guard,
    );
    await nested.restoreWorkspace(sink);
    carryWritten(nestedBaseline, localDir, run.baseline, input.workspaceLocalDir, prefix);
  }
}

/** Takes the delta's listing (`options`: what its command runs first) into `state.plan` (`null`: the full pull); resolves the plan as planned. */
async function takePlan({ run, baseline, remote, delta }, state, options) {
  const planned = await planSandboxRestore({
    remote,
    features: delta.features,
    localWalk: delta.localWalk,
    spec: run.input.spec,
    remoteDir: run.workspaceRemoteDir,
    localDir: run.input.workspaceLocalDir,
    baseline,
    head: run.gitSnapshot?.headCommit ?? null,
    mark: deltaMark(run.workspaceRemoteDir),
    ...options,
  });
  state.planned = true;
  state.plan = planned.fallback ? null : planned;
  return planned;
}

/**
 * The history: the sandbox exports what the run committed as a bundle (upstream's script),
 * which comes here and is fetched into `state.importedRef` (`state.importedHead`), with the
 * sandbox's working-tree status. With the delta, the listing's command exports it first and
 * says what it wrote (the status, the bundle itself when it is small): one command for both.
 */
async function bringHistory(restore, state, tempDir) {
  const { run, sink, remote } = restore;
  const { input, gitSnapshot, runtimeRootDir } = run;
  await emitStatus(input.onRuntimeProgress, "export", "Exporting git changes from environment");
  state.importedRef = newImportedRef();
  const files = {
    remoteBundle: path.posix.join(runtimeRootDir, "git-delta.bundle"),
    remoteStatusPath: path.posix.join(runtimeRootDir, "workspace-status.txt"),
    localBundle: path.join(tempDir, "git-delta.bundle"),
    tempDir,
  };
  const exportRef = newExportRef();
  const exportScript = (full) =>
    deltaBundleScript({
      remoteDir: run.workspaceRemoteDir,
      baseSha: gitSnapshot.headCommit,
      exportRef,
      bundlePath: files.remoteBundle,
      statusPath: full ? undefined : files.remoteStatusPath,
      full,
    });
  const exportProgress = () =>
    transferProgress(sink, "Exporting git history", "from", undefined, {
      sink: input.onRuntimeProgress,
      phase: "export",
    });
  const importBundle = () =>
    fetchBundle(input.workspaceLocalDir, files.localBundle, exportRef, state.importedRef, gitSnapshot.headCommit);
  /** Upstream's export: the script, the bundle, the working tree's status, each a command. */
  const exportAndImport = async (full) => {
    await remote.run(exportScript(full));
    await readBundle(run, files, exportProgress());
    if (!full) state.remoteStatus = await readRemoteStatus(input.client, files.remoteStatusPath);
    return importBundle();
  };
  let exported = null;
  if (restore.delta) {
    const planned = await takePlan(restore, state, {
      before: exportScript(false).split("\n"),
      lead: exportedNotesCommand(files.remoteBundle, files.remoteStatusPath),
    });
    exported = readExportedNotes(planned.notes);
  }
  try {
    if (exported) {
      state.remoteStatus = exported.status;
      const progress = exportProgress();
      if (exported.bundle) {
        await fs.writeFile(files.localBundle, exported.bundle);
        await progress.finish(exported.bundle.length, exported.bundle.length);
      } else await readBundle(run, files, progress);
      state.importedHead = await importBundle();
    } else state.importedHead = await exportAndImport(false);
  } catch (error) {
    if (!isMissingPrerequisite(error)) throw error;
    state.importedHead = await exportAndImport(true);
  }
}

/** Brings the exported bundle here (and removes it in the sandbox). */
async function readBundle({ input, nativeSyncOut, nextOperationId, runtimeRootDir }, files, progress) {
  const { remoteBundle, localBundle, tempDir } = files;
  if (nativeSyncOut) {
    const operations = [
      {
        operationId: nextOperationId(),
        files: [{ sourcePath: remoteBundle, targetPath: localBundle, kind: "file" }],
      },
    ];
    assertSyncOperationsConfined(operations, { sourceRoots: [runtimeRootDir], targetRoots: [tempDir] });
    const sent = syncedBytes(await input.client.syncOut(operations));
    await progress.finish(sent, sent);
  } else {
    const bytes = await readRemoteToFile(input.client, remoteBundle, localBundle, progress.options).catch(
      async (error) => {
        await progress.fail();
        throw error;
      },
    );
    await progress.finish(bytes, bytes);
  }
  await input.client.remove(remoteBundle).catch(() => undefined);
}

/** The sandbox working tree's status the export wrote (`"clean"` or `"dirty"`; `"dirty"` when unreadable), removed after. */
async function readRemoteStatus(client, remoteStatusPath) {
  const status = await Promise.resolve()
    .then(() => client.readFile(remoteStatusPath))
    .then((bytes) => asBuffer(bytes).toString("utf8").trim())
    .catch(() => "dirty");
  await client.remove(remoteStatusPath).catch(() => undefined);
  return status === "clean" ? "clean" : "dirty";
}

/**
 * The tree through a provider's `syncOut`. A provider's pull is not ours to guard: when it
 * fails, or brings nothing back while the baseline holds entries (the merge would delete
 * them all), the workspace is checked then, before anything else (a gone workspace's
 * refusal in place of the provider's failure).
 */
async function pullThroughSyncOut({ run, sink, baseline, guard, remote }, extractedDir) {
  const { input, workspaceRemoteDir } = run;
  const operations = [
    {
      operationId: run.nextOperationId(),
      files: [
        {
          sourcePath: workspaceRemoteDir,
          targetPath: extractedDir,
          kind: "directory",
          exclude: run.workspaceRestoreExclude,
        },
      ],
    },
  ];
  assertSyncOperationsConfined(operations, { sourceRoots: [workspaceRemoteDir], targetRoots: [extractedDir] });
  await fs.mkdir(extractedDir, { recursive: true });
  const progress = transferProgress(sink, "Restoring", "from", "workspace", {
    sink: input.onRuntimeProgress,
    phase: "restore",
  });
  const sent = await input.client.syncOut(operations).then(syncedBytes, async (error) => {
    if (guard && !endsTheCall(error)) {
      const gone = await remote.run("").then(
        () => null,
        (refusal) => (refusal?.code === codes.REMOTE_WORKSPACE_GONE ? refusal : null),
      );
      if (gone) throw gone;
    }
    throw error;
  });
  await progress.finish(sent, sent);
  if (guard && baseline.entries.size > 0 && (await fs.readdir(extractedDir)).length === 0) await remote.run("");
}

/**
 * The delta's pull of what `state.plan` names. An abort, a runner past its deadline, and
 * what the sandbox sent that the extraction refuses (a member out of the tree, past the
 * limits) stop the restore as they stop the full pull; any other doubt about the pull (a
 * failed command, an archive cut short) empties the staging directory and leaves
 * `state.plan` null, for the whole tree to come back.
 */
async function pullPlanned({ run, sink }, state, extractedDir, remoteTar) {
  const { input } = run;
  const progress = transferProgress(sink, "Restoring", "from", "workspace", {
    sink: input.onRuntimeProgress,
    phase: "restore",
  });
  try {
    await fs.mkdir(extractedDir, { recursive: true });
    const bytes = await pullDelta({
      client: input.client,
      plan: state.plan,
      remoteDir: run.workspaceRemoteDir,
      remoteTar,
      extractedDir,
      options: progress.options,
      signal: run.signal,
      limits: run.limits,
      knownLinks: input.workspaceLocalDir,
    });
    await progress.finish(bytes, bytes);
    countRestoreDelta(state.plan);
  } catch (error) {
    if (endsTheCall(error) || REFUSALS.has(error?.code)) throw error;
    await input.client.remove(remoteTar).catch(() => undefined);
    await fs.rm(extractedDir, { recursive: true, force: true });
    await fs.mkdir(extractedDir, { recursive: true, mode: 0o700 });
    countRestoreFallback("pull-failed");
    state.plan = null;
  }
}

/** Upstream's pull: the sandbox archives its whole workspace, read slice by slice into the safe extractor. */
async function pullWholeTree({ run, sink, remote }, extractedDir, remoteTar) {
  const { input, workspaceRemoteDir } = run;
  const gzip = input.client[OUR_CLIENT]?.compressDownloads?.() === true;
  await remote.run(remoteArchiveCommand(workspaceRemoteDir, remoteTar, run.workspaceRestoreExclude, gzip));
  const progress = transferProgress(sink, "Restoring", "from", "workspace", {
    sink: input.onRuntimeProgress,
    phase: "restore",
  });
  await fs.mkdir(extractedDir, { recursive: true });
  let bytes;
  try {
    bytes = await readRemoteIntoDirectory(
      input.client,
      remoteTar,
      extractedDir,
      progress.options,
      run.signal,
      run.limits,
      input.workspaceLocalDir,
    );
  } catch (error) {
    await progress.fail();
    await input.client.remove(remoteTar).catch(() => undefined);
    throw error;
  }
  await progress.finish(bytes, bytes);
  await input.client.remove(remoteTar).catch(() => undefined);
}

/** A full pull's merge baseline: the project repositories restored themselves, so the workspace's merge leaves them out. */
function mergeBaseline({ run, baseline }) {
  const { repositories } = run;
  if (repositories.length === 0) return baseline;
  return {
    exclude: run.workspaceRestoreExclude,
    entries: new Map(
      [...baseline.entries].filter(
        ([entry]) =>
          !repositories.some((repository) => entry === repository.path || entry.startsWith(`${repository.path}/`)),
      ),
    ),
  };
}

/** After the merge of a delta's pull: the delta's record of what the host now holds. */
async function recordPlan({ run }, state) {
  const { input, gitSnapshot } = run;
  const { plan, importedHead: head } = state;
  if (!plan) return;
  await recordRestore({
    spec: input.spec,
    remoteDir: run.workspaceRemoteDir,
    localDir: input.workspaceLocalDir,
    plan,
    extractedDir: state.stagingDir,
    importedHead: gitSnapshot && head !== gitSnapshot.headCommit ? head : null,
  });
}

/** After the restore, whatever it reached: the imported ref gone (the lifecycle settles the walk and removes the staging directory). */
async function finishRestore({ run }, state) {
  const { input } = run;
  await emitStatus(input.onRuntimeProgress, "finalize", "Finalizing workspace");
  if (state.importedRef) await deleteRef(input.workspaceLocalDir, state.importedRef);
}

/**
 * A delta restore's pull into `extractedDir`: the archive the listing's command brought
 * (`plan.inline`) when it holds every member; else one command archives the plan's members
 * in the sandbox and prints the archive when it is small (delta.js `pullScript`), or the
 * archive is read slice by slice; either way into the safe extractor. Returns the archive's
 * size. Throws on any answer it does not expect.
 */
async function pullDelta({ client, plan, remoteDir, remoteTar, extractedDir, options, signal, limits, knownLinks }) {
  if (plan.members.length + plan.trees.length === 0) return 0;
  // What the listing's command archived, when it holds every member the plan pulls: only
  // those are kept (the rest, changed but the same as the baseline, is removed again).
  if (plan.inline && plan.trees.length === 0) {
    await extractTarballToDirectory({
      source: plan.inline,
      localDir: extractedDir,
      signal,
      knownLinks,
      skipUntransferable: true,
      ...(limits !== undefined ? { limits } : {}),
    });
    if (await keepOnly(extractedDir, plan.members)) {
      countRestoreInline();
      return plan.inline.length;
    }
    await emptyDirectory(extractedDir);
  }
  const { stdout } = await client[OUR_CLIENT].exec(
    `sh -c ${shellQuote(pullScript(plan, remoteDir, remoteTar, plan.gzip))}`,
  );
  const newline = stdout.indexOf("\n");
  const head = newline < 0 ? stdout : stdout.slice(0, newline);
  if (head === "pcpull inline") {
    const archive = Buffer.from(stdout.slice(newline + 1), "base64");
    await extractTarballToDirectory({
      source: archive,
      localDir: extractedDir,
      signal,
      knownLinks,
      skipUntransferable: true,
      ...(limits !== undefined ? { limits } : {}),
    });
    return archive.length;
  }
  if (!/^pcpull file \d+$/.test(head)) throw new Error("the sandbox's pull gave no archive");
  try {
    return await readRemoteIntoDirectory(client, remoteTar, extractedDir, options, signal, limits, knownLinks);
  } finally {
    await client.remove(remoteTar).catch(() => undefined);
  }
}

/**
 * Removes from `dir` every entry that is neither one of `members` nor a directory above
 * one; resolves whether every member was there (as a file or a link).
 */
async function keepOnly(dir, members) {
  const wanted = new Set(members);
  const above = new Set();
  for (const member of members) {
    for (let at = member.indexOf("/"); at > 0; at = member.indexOf("/", at + 1)) above.add(member.slice(0, at));
  }
  let found = 0;
  const visit = async (relative) => {
    const entries = await fs.readdir(relative ? path.join(dir, relative) : dir, { withFileTypes: true });
    for (const entry of entries) {
      const member = relative ? `${relative}/${entry.name}` : entry.name;
      if (wanted.has(member) && !entry.isDirectory()) found += 1;
      else if (above.has(member) && entry.isDirectory()) await visit(member);
      else await fs.rm(path.join(dir, member), { recursive: true, force: true });
    }
  };
  await visit("");
  return found === wanted.size;
}

/** Removes everything inside `dir`, keeping `dir`. */
async function emptyDirectory(dir) {
  for (const name of await fs.readdir(dir)) await fs.rm(path.join(dir, name), { recursive: true, force: true });
}

/** The remote file's bytes as slices: the client's `readStream` when it has one, else one `readFile`. */
async function* remoteSlices(client, remotePath, options) {
  if (typeof client.readStream === "function") {
    yield* client.readStream(remotePath, options);
    return;
  }
  const bytes = asBuffer(await client.readFile(remotePath, options));
  if (bytes.length > 0) yield bytes;
}

/** Reads a remote file into `localPath`, slice by slice; returns its size. */
async function readRemoteToFile(client, remotePath, localPath, options) {
  const handle = await fs.open(localPath, "w");
  let size = 0;
  try {
    for await (const slice of remoteSlices(client, remotePath, options)) {
      await handle.write(slice);
      size += slice.length;
    }
  } finally {
    await handle.close();
  }
  return size;
}

/**
 * Reads a remote tar archive slice by slice straight into the safe extractor (every member
 * that would land or point outside `localDir` is refused and nothing is left half-written,
 * but for the symbolic links `knownLinks`, the workspace, holds unchanged at the same path);
 * returns the archive's size.
 */
async function readRemoteIntoDirectory(client, remotePath, localDir, options, signal, limits, knownLinks) {
  let size = 0;
  const counted = (async function* count() {
    for await (const slice of remoteSlices(client, remotePath, options)) {
      size += slice.length;
      yield slice;
    }
  })();
  await extractTarballToDirectory({
    source: counted,
    localDir,
    signal,
    knownLinks,
    skipUntransferable: true,
    ...(limits !== undefined ? { limits } : {}),
  });
  return size;
}
