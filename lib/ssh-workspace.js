// Drop-ins for upstream's SSH workspace lifecycle (docs/ssh.md): `prepareWorkspaceForSshExecution`
// stages a local workspace on the SSH host before a run, `restoreWorkspaceFromSshExecution`
// brings the run's work back. A git workspace travels as a git bundle of its HEAD (history)
// plus the working tree (the tar transfer); anything else as the tree alone.
//
// What changes against upstream is the transport: the bundles stream through the same
// in-process channel code as the tar transfers (`sshUploadFile` / `sshDownloadFile`, a
// pooled session each, strict host keys, inactivity timeout, AbortSignal), so no `ssh` or `tar`
// process is started on this host. Local `git` still runs as a child process, with
// upstream's commands; the remote runs upstream's scripts with upstream's quoting.
import { randomUUID } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { INTEGRATION_LABELS, integrateImportedHead as integrateInto } from "./git-integration.js";
import { originUrl, runLocalGit } from "./local-git.js";
import { abortError, native } from "./native.js";
import {
  CONNECT_BUDGET,
  openSshSessionAhead,
  runTransfer,
  shellQuote,
  sshSessionReuse,
  sshTarget,
  transferProgress,
  transferTarget,
} from "./ssh-common.js";
import { archiveLimits, checkSignal, invalidArgument } from "./arguments.js";
import {
  countHistoryExport,
  countHistoryImport,
  deltaCandidate,
  markRestored,
  planRestore,
  recordedExtractionMask,
  sshDeltaEnabled,
  stageTree,
  trace,
} from "./ssh-delta.js";
import { walkLocalTree } from "./tree-delta.js";
import { guardRemote } from "./lifecycle/remote.js";
import { restoreRun } from "./lifecycle/restore.js";
import { sshRemote } from "./ssh-remote.js";

/** The remote directory Paperclip keeps for itself: never synced, never cleared. */
const RUNTIME_DIR = ".paperclip-runtime";
/** The ref the remote exports its HEAD under while it writes the bundle. */
const EXPORT_REF = "refs/paperclip/ssh-sync/export";
/** Upstream's limits for its local git calls: quick lookups and object transfers. */
const QUICK = { timeout: 10_000, maxBuffer: 16 * 1024 };
const SLOW = { timeout: 60_000, maxBuffer: 1024 * 1024 };
/** Upstream's limits for its remote clean-up scripts. */
const REMOTE_SCRIPT = { timeoutMs: 30_000, maxBuffer: 256 * 1024 };

/** Checks the input shared by prepare and restore; resolves the remote directory. */
function lifecycleInput(input) {
  if (!input || typeof input !== "object") throw invalidArgument("input must be an object");
  if (!input.spec || typeof input.spec !== "object")
    throw invalidArgument("input.spec must be an SshRemoteExecutionSpec");
  if (typeof input.localDir !== "string" || input.localDir === "")
    throw invalidArgument("localDir must be a non-empty string");
  const remoteDir = input.remoteDir ?? input.spec.remoteCwd;
  if (typeof remoteDir !== "string" || remoteDir === "")
    throw invalidArgument("remoteDir (or spec.remoteCwd) must be a non-empty string");
  const signal = checkSignal(input.signal);
  // The connection options (cancellation, timeouts and the call's connect budget) every step
  // of the lifecycle passes on; `input.limits` is something else: the archive bounds of a
  // restore.
  const connection = {
    signal,
    connectTimeoutMs: input.connectTimeoutMs,
    inactivityTimeoutMs: input.inactivityTimeoutMs,
    [CONNECT_BUDGET]: input[CONNECT_BUDGET],
  };
  // Validated once here, so a bad config fails before any local git work.
  sshTarget(input.spec, connection);
  return { remoteDir, signal, connection };
}

/** Throws the signal's `AbortError` between steps. */
function throwIfAborted(signal) {
  if (signal?.aborted) throw abortError(signal);
}

/**
 * Where a caller that read {@link readLocalGitState} already (the managed runtime, for its
 * baseline's exclusions) hands it to {@link prepareWorkspaceOverSsh} on the input, so one
 * prepare reads it once (a symbol: no upstream input field can collide with it).
 */
export const LOCAL_GIT_STATE = Symbol("paperclip-native.localGitState");

/**
 * The local workspace's git state (HEAD, branch, deleted tracked files), or `null` when it
 * is not a git work tree with a commit (any git failure counts as "not git", as upstream).
 * Deleted paths are kept byte-exact (upstream trims them, which can name another file).
 */
export async function readLocalGitState(localDir) {
  try {
    const inside = await runLocalGit(localDir, ["rev-parse", "--is-inside-work-tree"], QUICK);
    if (inside.stdout.trim() !== "true") return null;
    const [head, branch, deleted] = await Promise.all([
      runLocalGit(localDir, ["rev-parse", "HEAD"], QUICK),
      runLocalGit(localDir, ["rev-parse", "--abbrev-ref", "HEAD"], QUICK),
      runLocalGit(localDir, ["ls-files", "--deleted", "-z"], { timeout: 10_000, maxBuffer: 256 * 1024 }),
    ]);
    const branchName = branch.stdout.trim();
    return {
      headCommit: head.stdout.trim(),
      branchName: branchName !== "" && branchName !== "HEAD" ? branchName : null,
      deletedPaths: deleted.stdout.split("\0").filter((entry) => entry !== ""),
    };
  } catch {
    return null;
  }
}

/** A private temporary directory for one bundle, removed (with the bundle) after `fn`. */
async function withBundleFile(fn) {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "paperclip-ssh-bundle-"));
  try {
    return await fn(path.join(dir, "workspace.bundle"));
  } finally {
    await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The message a delta import's remote script fails with when only a full import will do. */
const NEED_FULL_IMPORT = "pcgit-need-full";

/** The commits of `candidates` the local repository holds. */
async function localCommits(localDir, candidates) {
  const held = [];
  for (const commit of new Set(candidates)) {
    if (typeof commit !== "string" || !/^[0-9a-f]{40,64}$/.test(commit)) continue;
    const found = await runLocalGit(localDir, ["cat-file", "-e", `${commit}^{commit}`], QUICK).then(
      () => true,
      () => false,
    );
    if (found) held.push(commit);
  }
  return held;
}

/**
 * Imports the local HEAD into the remote repository (created when missing): a bundle of
 * HEAD streams into the remote script, which fetches it, checks the branch (or a detached
 * HEAD) out, resets and cleans the tree (sparing `.paperclip-runtime`) and carries the
 * credential-free `origin` over. Progress: `Importing git history to ssh`, exact percent.
 *
 * With `delta` (the tree's delta upload will follow, ssh-delta.js `deltaCandidate`), to a
 * remote that kept the previous import: the bundle holds only the commits the remote lacks
 * (`HEAD --not` the heads recorded as sent or brought back), a managed run's new directory
 * starts as the previous run's (its refs then cut to what a fresh import leaves), and the
 * remote tree is not cleaned (the delta removes what the host does not have). The remote
 * checks everything the delta assumes (the repository, the commits, the bundle's
 * prerequisites, no shallow history) before changing anything; any doubt and the full
 * import runs instead. Resolves `{ cleaned }`: whether the remote tree was cleaned.
 */
async function pushGitHistory({ spec, localDir, remoteDir, state, onProgress, connection, delta = null }) {
  const ref = `refs/paperclip/ssh-sync/import/${randomUUID()}`;
  const q = shellQuote;
  const git = `git -C ${q(remoteDir)}`;
  const target = transferTarget(spec, connection);
  const basis = delta ? await localCommits(localDir, [delta.git?.head, delta.git?.importedHead]) : [];
  return await withBundleFile(async (bundle) => {
    try {
      await runLocalGit(localDir, ["update-ref", ref, state.headCommit], QUICK);
      const origin = await originUrl(localDir);
      const checkout = state.branchName
        ? `${git} checkout --force -B ${q(state.branchName)} ${q(state.headCommit)} >/dev/null`
        : `${git} -c advice.detachedHead=false checkout --force --detach ${q(state.headCommit)} >/dev/null`;
      // Both scripts first take the bundle into a private file under `.paperclip-runtime`.
      const receiveBundle = [
        `mkdir -p ${q(path.posix.join(remoteDir, RUNTIME_DIR))}`,
        `tmp_bundle=$(mktemp ${q(path.posix.join(remoteDir, RUNTIME_DIR, "import-XXXXXX.bundle"))})`,
        `trap 'rm -f "$tmp_bundle"' EXIT`,
        `cat > "$tmp_bundle"`,
      ];
      const remoteOrigin = origin
        ? [
            `{ ${git} remote set-url origin ${q(origin)} >/dev/null 2>&1 || ${git} remote add origin ${q(origin)} >/dev/null 2>&1; } || true`,
          ]
        : [];
      // `quiet`: no `failed` line for a delta the remote refused (the full import follows);
      // any other failure still shows it.
      const send = async (script, { quiet = false } = {}) => {
        const { size } = await fs.stat(bundle);
        const progress = transferProgress({ onProgress, phase: "Importing git history", direction: "to", total: size });
        const shown = quiet && progress ? { ...progress, fail: async () => undefined } : progress;
        try {
          await runTransfer(shown, connection.signal, (id, onBytes) =>
            native.sshUploadFile(target, `sh -c ${q(script)}`, bundle, id, onBytes),
          );
        } catch (error) {
          if (shown !== progress && error?.message !== NEED_FULL_IMPORT) await progress.fail();
          throw error;
        }
      };
      if (delta) {
        // Nothing to bundle when the remote's recorded heads already hold HEAD.
        const missing =
          basis.length === 0
            ? null
            : (
                await runLocalGit(localDir, ["rev-list", "--count", state.headCommit, "--not", ...basis], QUICK)
              ).stdout.trim();
        if (missing === "0") await fs.writeFile(bundle, "");
        else
          await runLocalGit(
            localDir,
            ["bundle", "create", bundle, ref, ...(basis.length > 0 ? ["--not", ...basis] : [])],
            SLOW,
          );
        const script = deltaImportScript({
          remoteDir,
          state,
          ref,
          basis,
          headHeld: missing === "0",
          seed: delta.seed,
          checkout,
          receiveBundle,
          remoteOrigin,
        });
        try {
          await send(script, { quiet: true });
          countHistoryImport("delta");
          return { cleaned: false };
        } catch (error) {
          if (error?.name === "AbortError" || error?.message !== NEED_FULL_IMPORT) throw error;
          countHistoryImport("fallback");
        }
      }
      await runLocalGit(localDir, ["bundle", "create", bundle, ref], SLOW);
      await send(
        [
          "set -e",
          ...receiveBundle,
          `if [ ! -d ${q(path.posix.join(remoteDir, ".git"))} ]; then git init ${q(remoteDir)} >/dev/null; fi`,
          ...remoteOrigin,
          `${git} fetch --force "$tmp_bundle" '${ref}:${ref}' >/dev/null`,
          checkout,
          `${git} reset --hard ${q(state.headCommit)} >/dev/null`,
          `${git} clean -fdx -e ${RUNTIME_DIR} >/dev/null`,
          `${git} update-ref -d ${q(ref)} >/dev/null 2>&1 || true`,
        ].join("\n"),
      );
      countHistoryImport("full");
      return { cleaned: true };
    } finally {
      await runLocalGit(localDir, ["update-ref", "-d", ref], QUICK).catch(() => undefined);
    }
  });
}

/**
 * The remote script of a delta import (pushGitHistory): the bundle of what the remote lacks
 * beyond `basis` (nothing when `headHeld`), checked against what the delta assumes (the
 * repository, the commits, no shallow history; any doubt exits with NEED_FULL_IMPORT and
 * undoes a seeded start), fetched, checked out and reset; a managed run's new directory
 * starts as the previous run's (`seed`), its refs cut to what a fresh import leaves.
 */
function deltaImportScript({ remoteDir, state, ref, basis, headHeld, seed, checkout, receiveBundle, remoteOrigin }) {
  const q = shellQuote;
  const git = `git -C ${q(remoteDir)}`;
  const keep = state.branchName ? `refs/heads/${state.branchName}` : null;
  return [
    "set -e",
    "seeded=",
    ...(seed
      ? [
          `if [ ! -e ${q(remoteDir)} ] && [ -d ${q(seed)} ]; then mkdir -p ${q(path.posix.dirname(remoteDir))} && mv ${q(seed)} ${q(remoteDir)} && rm -rf ${q(path.posix.join(remoteDir, RUNTIME_DIR))}; seeded=1; fi`,
        ]
      : []),
    `need_full() { if [ -n "$seeded" ]; then rm -rf ${q(remoteDir)}; fi; echo ${NEED_FULL_IMPORT} >&2; exit 86; }`,
    ...receiveBundle,
    ...(basis.length > 0
      ? [
          `[ -d ${q(path.posix.join(remoteDir, ".git"))} ] || need_full`,
          `[ "$(${git} rev-parse --is-shallow-repository)" = false ] || need_full`,
          ...basis.map((commit) => `${git} cat-file -e ${q(`${commit}^{commit}`)} 2>/dev/null || need_full`),
        ]
      : [`if [ ! -d ${q(path.posix.join(remoteDir, ".git"))} ]; then git init ${q(remoteDir)} >/dev/null; fi`]),
    ...remoteOrigin,
    headHeld
      ? `${git} cat-file -e ${q(`${state.headCommit}^{commit}`)} 2>/dev/null || need_full`
      : `${git} fetch --force "$tmp_bundle" '${ref}:${ref}' >/dev/null 2>&1 || need_full`,
    // The previous upload replaced files under the index's cached stat: refreshed, the
    // checkout and reset rewrite only what differs from HEAD (else every file, and the
    // tree's delta would send them all again).
    `${git} update-index -q --refresh >/dev/null 2>&1 || true`,
    checkout,
    `${git} reset --hard ${q(state.headCommit)} >/dev/null`,
    `${git} update-ref -d ${q(ref)} >/dev/null 2>&1 || true`,
    // A fresh import's repository holds one ref: the branch checked out (none detached).
    ...(seed
      ? [
          `if [ -n "$seeded" ]; then ${git} for-each-ref --format='%(refname)' | while IFS= read -r name; do` +
            ` if [ "$name" != ${q(keep ?? "")} ]; then ${git} update-ref -d "$name"; fi; done; fi`,
        ]
      : []),
  ].join("\n");
}

/**
 * Exports the remote HEAD as a bundle into the local repository under `ref` and returns the
 * imported commit; with `reset`, the local work tree is reset to it and the ref dropped.
 * Progress: `Exporting git history from ssh`, bytes received (the size is unknown up front).
 *
 * With `base` (a commit this host holds that the prepare sent, ssh-delta.js), the remote
 * bundles only what it has beyond `base`, or nothing when its HEAD is still `base`; it falls
 * back to the whole history by itself when it does not hold `base` (or is shallow), and a
 * thin bundle this host cannot take is fetched again whole. `remote`: the restore's
 * (lifecycle/remote.js, guarded: a workspace gone rejects with its coded refusal).
 */
async function pullGitHistory({ remote, localDir, remoteDir, ref, reset, onProgress, signal, base = null }) {
  const q = shellQuote;
  const git = `git -C ${q(remoteDir)}`;
  const script = (thin) =>
    [
      "set -e",
      `${git} update-ref ${EXPORT_REF} HEAD`,
      `mkdir -p ${q(path.posix.join(remoteDir, RUNTIME_DIR))}`,
      `tmp_bundle=$(mktemp ${q(path.posix.join(remoteDir, RUNTIME_DIR, "export-XXXXXX.bundle"))})`,
      `cleanup() { rm -f "$tmp_bundle"; ${git} update-ref -d ${EXPORT_REF} >/dev/null 2>&1 || true; }`,
      "trap cleanup EXIT",
      ...(thin
        ? [
            "base=",
            `if ${git} cat-file -e ${q(`${base}^{commit}`)} 2>/dev/null && [ "$(${git} rev-parse --is-shallow-repository)" = false ]; then base=${q(base)}; fi`,
            `if [ -n "$base" ] && [ "$(${git} rev-parse ${EXPORT_REF})" = "$base" ]; then : > "$tmp_bundle"`,
            `elif [ -n "$base" ] && [ "$(${git} rev-list --count ${EXPORT_REF} --not "$base")" != 0 ]; then ${git} bundle create "$tmp_bundle" ${EXPORT_REF} --not "$base" >/dev/null`,
            `else ${git} bundle create "$tmp_bundle" ${EXPORT_REF} >/dev/null; fi`,
          ]
        : [`${git} bundle create "$tmp_bundle" ${EXPORT_REF} >/dev/null`]),
      'cat "$tmp_bundle"',
    ].join("\n");
  // Resolves false when a thin bundle arrived that this host cannot take.
  const fetchInto = async (thin) =>
    await withBundleFile(async (bundle) => {
      const progress = transferProgress({ onProgress, phase: "Exporting git history", direction: "from", total: null });
      await remote.download(script(thin), bundle, { progress });
      // An empty bundle: the remote HEAD is still `base`.
      if (thin && (await fs.stat(bundle)).size === 0) {
        await runLocalGit(localDir, ["update-ref", ref, base], QUICK);
        return true;
      }
      const fetched = runLocalGit(localDir, ["fetch", "--force", bundle, `${EXPORT_REF}:${ref}`], SLOW);
      if (!thin) await fetched;
      return await fetched.then(
        () => true,
        () => false,
      );
    });
  try {
    const thin = base != null && (await localCommits(localDir, [base])).length === 1;
    countHistoryExport(thin ? "delta" : "full");
    if (!(await fetchInto(thin))) {
      // A thin bundle whose prerequisites this host lacks (a shallow or pruned history):
      // the whole history.
      countHistoryExport("fallback");
      throwIfAborted(signal);
      await fetchInto(false);
    }
    if (reset) await runLocalGit(localDir, ["reset", "--hard", ref], SLOW);
    return (await runLocalGit(localDir, ["rev-parse", ref], QUICK)).stdout.trim();
  } finally {
    if (reset) await runLocalGit(localDir, ["update-ref", "-d", ref], QUICK).catch(() => undefined);
  }
}

/**
 * True when a tree pull with these excludes cannot see what the remote history export
 * writes while it runs (the export ref under `.git`, its bundle under `.paperclip-runtime`),
 * so the two may run at once. Off with `PAPERCLIP_NATIVE_SSH_REUSE=0` (the one-session-per-
 * call, one-step-at-a-time lane).
 */
function pullMayOverlapExport(exclude) {
  return sshSessionReuse() && Array.isArray(exclude) && exclude.includes(".git") && exclude.includes(RUNTIME_DIR);
}

/**
 * Runs `first()` and `second({ signal, onProgress })` at once with what running them one
 * after the other shows: `second`'s progress lines are held until `first` succeeded (then
 * replayed in order, and later ones pass straight on); when `first` fails, `second` is
 * stopped, its lines are dropped and `first`'s error is thrown; an abort between the two is
 * the `AbortError` the sequential steps throw; then `second`'s own error. Both have settled
 * before this returns or throws. Resolves `[firstValue, secondValue]`.
 */
async function overlapInOrder({ signal, onProgress, first, second }) {
  const controller = new AbortController();
  const forward = () => controller.abort(signal.reason);
  signal?.addEventListener("abort", forward, { once: true });
  const held = [];
  let released = false;
  let chain = Promise.resolve();
  const sink =
    typeof onProgress === "function"
      ? (line) => {
          if (!released) {
            held.push(line);
            return undefined;
          }
          chain = chain.then(() => onProgress(line));
          return chain;
        }
      : undefined;
  const secondDone = Promise.resolve()
    .then(() => second({ signal: controller.signal, onProgress: sink }))
    .then(
      (value) => ({ ok: true, value }),
      (error) => ({ ok: false, error }),
    );
  try {
    let firstValue;
    try {
      firstValue = await first();
    } catch (error) {
      controller.abort();
      await secondDone;
      throw error;
    }
    if (signal?.aborted) {
      await secondDone;
      throw abortError(signal);
    }
    released = true;
    for (const line of held) chain = chain.then(() => onProgress(line));
    const outcome = await secondDone;
    await chain;
    if (!outcome.ok) throw signal?.aborted ? abortError(signal) : outcome.error;
    return [firstValue, outcome.value];
  } finally {
    signal?.removeEventListener("abort", forward);
  }
}

/**
 * The checkouts this process's prepares left on SSH hosts (HEAD and the paths removed after
 * the upload), by host, remote and local directory: what the restore judges a git
 * workspace's remote against (lifecycle/remote-start.js). A restore in another process falls back to
 * the HEAD the delta's manifest recorded. The most recent few kept.
 */
const preparedCheckouts = new Map();
const PREPARED_CHECKOUTS_KEPT = 256;
const checkoutKey = (spec, remoteDir, localDir) =>
  [spec.host, spec.port, spec.username, remoteDir, path.resolve(localDir)].join("\0");

function rememberCheckout(spec, remoteDir, localDir, checkout) {
  const key = checkoutKey(spec, remoteDir, localDir);
  preparedCheckouts.delete(key);
  preparedCheckouts.set(key, checkout);
  for (const old of preparedCheckouts.keys()) {
    if (preparedCheckouts.size <= PREPARED_CHECKOUTS_KEPT) break;
    preparedCheckouts.delete(old);
  }
}

/** Moves the local head so it contains `imported` (see lib/git-integration.js). */
function integrateImportedHead(localDir, imported) {
  return integrateInto(localDir, imported, { readHead: readLocalGitState, labels: INTEGRATION_LABELS.ssh });
}

/**
 * Stages `localDir` on the SSH host in `remoteDir` (default `spec.remoteCwd`) before a run,
 * as upstream does. A git work tree with a commit: its HEAD is imported as git history (the
 * bundle streams over the in-process channel), then the working tree is pushed over it
 * (excluding `.git` and `.paperclip-runtime`) and the locally deleted tracked files are
 * removed remotely; resolves `{ gitBacked: true }`. Otherwise the remote directory is
 * cleared (sparing `.paperclip-runtime`) and the tree pushed; `{ gitBacked: false }`.
 * To a host that kept what the last prepare sent (ssh-delta.js), either kind sends only what
 * changed: the commits the remote lacks and the files that differ; the remote ends as
 * upstream's full import and upload leave it.
 * `transfers` holds ssh.js's `runSshCommand`, `uploadTree`, `syncDirectoryFromSsh` and `pullTree`
 * (ssh.js passes them in, so this module does not import it back). The steps run one after
 * the other (unlike the restore's export and pull): the import checks out, resets and cleans
 * the remote tree the push writes into, and the removal of deleted paths follows both.
 */
export async function prepareWorkspaceOverSsh(input, transfers) {
  const { runSshCommand } = transfers;
  const { remoteDir, signal, connection } = lifecycleInput(input);
  const { spec, localDir, onProgress } = input;
  // The first remote command's session logs in while the local work below runs.
  if (!signal?.aborted) openSshSessionAhead(spec, connection);
  const state = LOCAL_GIT_STATE in input ? input[LOCAL_GIT_STATE] : await readLocalGitState(localDir);
  throwIfAborted(signal);
  if (state) {
    // To a host that kept the previous import: only the history it lacks, and no clean (the
    // tree's delta removes what the host does not have); else upstream's import.
    const delta = await deltaCandidate({ spec, remoteDir, localDir });
    const { cleaned } = await pushGitHistory({ spec, localDir, remoteDir, state, onProgress, connection, delta });
    throwIfAborted(signal);
    await stageWorkspaceTree(input, transfers, connection, remoteDir, {
      exclude: [".git", RUNTIME_DIR],
      manifestExtra: { git: { head: state.headCommit } },
      loaded: delta?.loaded,
      // Upstream removes the locally deleted tracked files after its upload (below).
      keep: state.deletedPaths,
      // Upstream's clean, when the import skipped it.
      beforeFullUpload: cleaned ? null : `git -C ${shellQuote(remoteDir)} clean -fdx -e ${RUNTIME_DIR} >/dev/null`,
    });
    if (state.deletedPaths.length > 0) {
      throwIfAborted(signal);
      const paths = state.deletedPaths.map(shellQuote).join(" ");
      await runSshCommand(spec, `cd ${shellQuote(remoteDir)} && rm -rf -- ${paths}`, {
        ...connection,
        ...REMOTE_SCRIPT,
      });
    }
    rememberCheckout(spec, remoteDir, localDir, { head: state.headCommit, deleted: state.deletedPaths });
    return { gitBacked: true };
  }
  // Upstream's clear and full upload, or (to a host that kept the tree) only what changed.
  await stageWorkspaceTree(input, transfers, connection, remoteDir, {
    exclude: [RUNTIME_DIR],
    // The clear also leaves the runtime directory (upstream's spares one that is there): what
    // tells the restore this is the workspace a prepare staged (lifecycle/workspace-guard.js).
    beforeFullUpload: [
      "set -e",
      `mkdir -p ${shellQuote(path.posix.join(remoteDir, RUNTIME_DIR))}`,
      `find ${shellQuote(remoteDir)} -mindepth 1 -maxdepth 1 ! -name ${shellQuote(RUNTIME_DIR)} -exec rm -rf -- {} +`,
    ].join("\n"),
  });
  return { gitBacked: false };
}

/**
 * Pushes the workspace tree (minus `exclude`) by ssh-delta.js `stageTree`: only what changed
 * to a host that kept it, else upstream's full upload: `beforeFullUpload` (upstream's clear or
 * clean, when there is one to run) then its tar command line (`gzip -dc |` before the remote
 * tar when the link asks for compression, ssh-delta.js `wireCompression`).
 */
async function stageWorkspaceTree(input, transfers, connection, remoteDir, options) {
  const { runSshCommand, uploadTree } = transfers;
  const { spec, localDir, onProgress } = input;
  const { exclude, manifestExtra, keep, beforeFullUpload, loaded } = options;
  const tree = { ...connection, spec, localDir, remoteDir, exclude, onProgress, progressLabel: "workspace" };
  await stageTree({
    spec,
    connection,
    localDir,
    remoteDir,
    exclude,
    manifestExtra,
    keep,
    loaded,
    fullUpload: async ({ record, gzip }) => {
      if (beforeFullUpload) {
        await runSshCommand(spec, beforeFullUpload, { ...connection, ...REMOTE_SCRIPT });
        throwIfAborted(connection.signal);
      }
      const q = shellQuote(remoteDir);
      const extract = gzip ? `gzip -dc | tar -xf - -C ${q}` : `tar -xf - -C ${q}`;
      return await uploadTree(tree, { command: `sh -c ${shellQuote(`mkdir -p ${q} && ${extract}`)}`, record, gzip });
    },
    uploadDelta: ({ command, only, gzip }) =>
      uploadTree(tree, { command, only, record: true, collectStdout: 256 * 1024 * 1024, gzip }),
  });
}

/**
 * The restore with a baseline (restoreWorkspaceOverSsh), the lifecycle's
 * (lifecycle/restore.js) with the SSH lane's steps: the remote tree, or with the delta only
 * what the run changed (ssh-delta.js), pulled into the staging directory, the history
 * exported beside it when asked, and merged against the baseline judged by what the remote
 * was given (lifecycle/remote-start.js); the manifest then marks the run's work as back. `lane`: the
 * restore's remote directory, signal, workspace guard, archive bounds and remote.
 */
async function restoreAgainstBaseline(input, lane) {
  const { remoteDir, signal, remote } = lane;
  const { spec, localDir, onProgress, baselineSnapshot } = input;
  const started = performance.now();
  const ref = input.restoreGitHistory ? `refs/paperclip/ssh-sync/imported/${randomUUID()}` : null;
  // What the prepare recorded: the history it sent (the remote's export leaves it out) and
  // the tree.
  let candidate;
  let imported = null;
  await restoreRun({
    remote,
    guard: lane.guard,
    localDir,
    runBaseline: baselineSnapshot,
    sink: onProgress,
    // The delta's walk of the host tree starts at once (planRestore compares it with the
    // remote's listing); none with the delta off.
    startWalk: () =>
      sshDeltaEnabled() ? walkLocalTree(localDir, [...new Set(baselineSnapshot.exclude ?? [])], signal) : null,
    stagingFallback: () => fs.mkdtemp(path.join(os.tmpdir(), "paperclip-ssh-sync-back-")),
    mask: () => recordedExtractionMask(spec, remoteDir, localDir),
    // The host's tree as the upload's and the pull's excludes leave it (the upload sends the
    // whole working tree), over a git workspace's checkout of the prepare's HEAD (which
    // holds the directories of the files the prepare removed).
    remoteStart: async () => {
      candidate = await deltaCandidate({ spec, remoteDir, localDir });
      const prepared = ref ? (preparedCheckouts.get(checkoutKey(spec, remoteDir, localDir)) ?? null) : null;
      const head = prepared?.head ?? (ref ? (candidate?.git?.head ?? null) : null);
      return {
        untransferred: [...(baselineSnapshot.exclude ?? []), RUNTIME_DIR, ...(ref ? [".git"] : [])],
        checkout: head ? { localDir, head, wholeTree: true, removed: prepared?.deleted ?? [] } : null,
      };
    },
    bring: async (context, state) => {
      imported = await bringRemoteWork({ input, lane, context, state, candidate, ref });
      trace("restore: pulled", started);
    },
    // History moves inside the lock; the working tree still comes from the remote files, so
    // the agent's uncommitted edits arrive.
    beforeApply: () => (imported ? () => integrateImportedHead(localDir, imported) : undefined),
    // The run's work is back on this host: its remote directory may start the next run's.
    record: async () => {
      trace("restore: merged", started);
      await markRestored(spec, remoteDir, localDir, imported).catch(() => undefined);
      trace("restore: manifest marked", started);
    },
    finish: async () => {
      if (ref) await runLocalGit(localDir, ["update-ref", "-d", ref], QUICK).catch(() => undefined);
    },
  });
}

/**
 * The SSH lane's `bring` step: the delta's plan (to a host that kept what was sent, only
 * what the run changed comes back, merged against the baseline cut to it), then the tree's
 * pull into the staging directory and, when asked, the history's export into `ref`, at once
 * when they cannot see each other. Resolves the imported commit (`null` without `ref`).
 */
async function bringRemoteWork({ input, lane, context, state, candidate, ref }) {
  const { remoteDir, signal, archive } = lane;
  const { spec, localDir, onProgress, baselineSnapshot } = input;
  const { remote } = context;
  const base = ref ? (candidate?.git?.head ?? null) : null;
  const plan = await planRestore({
    remote,
    spec,
    remoteDir,
    localDir,
    baseline: context.baseline,
    loaded: candidate?.loaded,
    localWalk: state.walk,
  });
  state.plan = plan;
  const pullTree = (over) => {
    // The workspace's own links out of the tree come back as they went (knownLinks).
    const tree = {
      ...archive,
      remoteDir,
      localDir: state.stagingDir,
      knownLinks: localDir,
      exclude: baselineSnapshot.exclude,
      onProgress,
      progressLabel: "workspace",
      ...over,
    };
    if (!plan) return remote.pull(tree);
    return plan.members.length + plan.trees.length > 0 ? remote.pull(tree, { delta: plan }) : undefined;
  };
  const exportHistory = () =>
    pullGitHistory({ remote, localDir, remoteDir, ref, reset: false, onProgress, signal, base });
  if (ref && pullMayOverlapExport(baselineSnapshot.exclude)) {
    // Both only read the remote tree and write different local places (the repository's
    // refs, a private staging directory): the export and the pull run at once, and what
    // they show (progress, errors) is what the sequential steps show.
    const [imported] = await overlapInOrder({ signal, onProgress, first: exportHistory, second: pullTree });
    throwIfAborted(signal);
    return imported;
  }
  const imported = ref ? await exportHistory() : null;
  throwIfAborted(signal);
  await pullTree({});
  throwIfAborted(signal);
  return imported;
}

/**
 * Brings a run's work back from `remoteDir` (default `spec.remoteCwd`) into `localDir`, as
 * upstream does.
 * - With `baselineSnapshot`: the remote tree is downloaded into a private staging directory
 *   (inside `localDir`, see `restoreStaging`) and three-way merged into `localDir` against the baseline (`mergeDirectoryWithBaseline`,
 *   under its lock); with `restoreGitHistory`, the remote HEAD is first exported and, inside
 *   the lock, the local head is moved to contain it (fast-forward, graft of unrelated
 *   history, or a merge commit; a conflicting merge fails).
 * - Without: a git work tree gets the remote HEAD (reset to it) and then the remote tree
 *   (`.git` kept); anything else just the remote tree, replacing its contents.
 * `transfers` as for {@link prepareWorkspaceOverSsh}.
 */
export async function restoreWorkspaceOverSsh(input, transfers) {
  const { remoteDir, signal, connection } = lifecycleInput(input);
  const { spec, localDir, onProgress, baselineSnapshot } = input;
  if (!signal?.aborted) openSshSessionAhead(spec, connection);
  // The remote workspace checked by the first command of every step: missing, or with no
  // entry at all (the prepare leaves its runtime directory there), it is gone and nothing
  // is restored (lifecycle/workspace-guard.js).
  const guard = { dir: remoteDir, staged: true };
  const remote = sshRemote(spec, connection, transfers);
  // Ours: the extraction's bounds, checked before any work and passed to every pull.
  const archive = { limits: archiveLimits(input.limits) };
  if (baselineSnapshot) {
    await restoreAgainstBaseline(input, { remoteDir, signal, guard, archive, remote });
    return;
  }
  // Without a baseline (upstream's restore): the remote tree straight over the host's.
  const guarded = guardRemote(remote, guard);
  const pullWorkspace = (over) =>
    guarded.pull({ ...archive, remoteDir, localDir, onProgress, progressLabel: "workspace", ...over });
  const state = await readLocalGitState(localDir);
  throwIfAborted(signal);
  if (state) {
    const ref = `refs/paperclip/ssh-sync/imported/${randomUUID()}`;
    const base = (await deltaCandidate({ spec, remoteDir, localDir }))?.git?.head ?? null;
    await pullGitHistory({ remote: guarded, localDir, remoteDir, ref, reset: true, onProgress, signal, base });
    throwIfAborted(signal);
    await pullWorkspace({ exclude: [".git", RUNTIME_DIR], preserveLocalEntries: [".git"] });
    return;
  }
  await pullWorkspace({ exclude: [RUNTIME_DIR] });
}
