// Delta uploads of a workspace tree to an SSH host that keeps it between runs (docs: "SSH",
// delta uploads). Internal: used by ./ssh-workspace.js for both prepares (a git workspace's
// tree with `.git` excluded, after its history import).
//
// A manifest on this host records, for every regular file last sent to a remote directory,
// the file's `stat` as the packer saw it before reading it and the remote copy's `stat`
// (size, mtime, ctime, inode, mode) right after the remote `tar` wrote it. Before the next
// upload one remote command lists the remote tree (`find -printf`, gzip'd); a file is left
// alone only when both its local `stat` and its remote `stat` are still the recorded ones
// (a remote edit that kept size and mtime still moved the ctime); everything else is sent,
// entries the remote has and the host does not are removed, and the directories around
// them get their mode and mtime back. The remote tree then equals what upstream's clear
// and full upload leave. Without a manifest, when the remote cannot answer (no GNU `find`
// or `tar`), or on any doubt, the full upload runs (with upstream's command lines), and is
// counted (`sshDeltaStats`). The manifest never overrides the remote's own listing.
//
// A run directory `<base>/.paperclip-runtime/runs/<runId>/workspace` (the managed runtime's)
// starts from the previous run's directory of the same host, base and local workspace when
// that run was restored: the remote moves it into place (its `.paperclip-runtime` removed,
// as a new directory has none), then the delta runs against it.
import { createHash, randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { resolveInstanceRoot } from "./instance-root.js";
import { codes, native, runCancellable } from "./native.js";
import { shellQuote, transferTarget } from "./ssh-common.js";
import { listingOrFallback, stageDelta } from "./lifecycle/stage.js";
import { runRemoteScript as exec, sshRemote } from "./ssh-remote.js";
import {
  HEADER,
  extractionMask,
  headerOf,
  INLINE_REMOVALS_MAX,
  lightHeader,
  listingPipeline,
  restoredMarker,
  newManifest,
  parseListing,
  parseMembers,
  planDelta,
  planRestoreDelta,
  readManifest,
  remoteIdentity,
  rowsAfterDelta,
  rowsAfterFull,
  RUNTIME_DIR,
  sentListing,
  walkLocalTree,
  writeAtomically,
  writeManifest,
  countFallback,
  manifestLocation,
} from "./tree-delta.js";
/** A managed run's workspace directory: `<base>/.paperclip-runtime/runs/<runId>/workspace`. */
const RUN_DIR = /^(.*)\/\.paperclip-runtime\/runs\/[^/]+\/workspace$/;

const stats = { delta: 0, full: 0, seeded: 0, sent: 0, removed: 0, fallbacks: {} };
const pulls = { delta: 0, full: 0, fallbacks: {} };
const histories = { import: { delta: 0, full: 0, fallback: 0 }, export: { delta: 0, full: 0, fallback: 0 } };

/** Counts a git history import of the SSH prepare: `delta`, `full`, or `fallback` (a delta the remote refused, then full). */
export function countHistoryImport(kind) {
  histories.import[kind] += 1;
}

/** Counts a git history export of the SSH restore: `delta`, `full`, or `fallback` (a thin bundle this host could not take, then full). */
export function countHistoryExport(kind) {
  histories.export[kind] += 1;
}

/**
 * What the delta uploads did in this process: uploads done as deltas, full uploads, run
 * directories started from the previous run's, and the full uploads' reasons.
 */
export function sshDeltaStats() {
  return {
    delta: stats.delta,
    full: stats.full,
    seeded: stats.seeded,
    sent: stats.sent,
    removed: stats.removed,
    fallbacks: { ...stats.fallbacks },
    restore: { delta: pulls.delta, full: pulls.full, fallbacks: { ...pulls.fallbacks } },
    history: { import: { ...histories.import }, export: { ...histories.export } },
  };
}

/** True unless `PAPERCLIP_NATIVE_SSH_DELTA=0` (read at every call). */
export function sshDeltaEnabled() {
  return process.env.PAPERCLIP_NATIVE_SSH_DELTA !== "0";
}

/** Below this many bytes of measured throughput per second the upload is gzip'd (about 200 Mbit/s). */
const COMPRESS_BELOW_BYTES_PER_SECOND = 25e6;
/** A link measurement is kept this long (in this process and on disk). */
const LINK_MEASUREMENT_TTL_MS = 15 * 60_000;
/** Uploads smaller than this are never measured for: gzip'd when the remote has it and the link is not known to be fast. */
const SMALL_UPLOAD = 4 * 1024 * 1024;
const CALIBRATION_BYTES = 1024 * 1024;
const links = new Map();

/** The host's link measurement file (beside the manifests). */
function linkFile(spec) {
  const key = createHash("sha256")
    .update(JSON.stringify([spec.host, Number(spec.port), spec.username]))
    .digest("hex");
  return path.join(resolveInstanceRoot(process.env), "cache", "ssh-delta", `link-${key}.json`);
}

/** `{ bytesPerSecond, gzip }` measured for the host: one command that swallows 1 MiB of incompressible bytes, against the quicker of two that do nothing. */
async function measureLink(target, spec, signal) {
  const key = linkFile(spec);
  const known = links.get(key) ?? (await fs.readFile(key, "utf8").then(JSON.parse, () => null));
  if (known && Date.now() - known.at < LINK_MEASUREMENT_TTL_MS) {
    links.set(key, known);
    return known;
  }
  const timed = async (script, stdin) => {
    const started = process.hrtime.bigint();
    const out = await exec(target, script, signal, stdin);
    return { ms: Number(process.hrtime.bigint() - started) / 1e6, out };
  };
  await exec(target, "true", signal); // the session's login, not part of either time
  // The quicker of two idle commands (a busy host slows one now and then).
  const idle = Math.min((await timed("true")).ms, (await timed("true")).ms);
  const { ms, out } = await timed(
    "if command -v gzip >/dev/null 2>&1; then echo gzip; fi; cat >/dev/null",
    randomBytes(CALIBRATION_BYTES),
  );
  const measured = {
    bytesPerSecond: CALIBRATION_BYTES / (Math.max(ms - idle, 1) / 1000),
    gzip: out.toString().trim() === "gzip",
    at: Date.now(),
  };
  links.set(key, measured);
  await writeAtomically(key, JSON.stringify(measured)).catch(() => undefined);
  return measured;
}

/**
 * Whether an upload of about `bytes` goes gzip'd (level 1) on the wire: `off` and `gzip`
 * from `PAPERCLIP_NATIVE_SSH_COMPRESS`; by default (`auto`) when the remote has gzip and
 * the link's measured throughput is below what gzip sustains here (25 MB/s), so never on
 * a loopback-fast link. A small upload (under 4 MiB) is not worth a measurement: it goes
 * gzip'd when the remote has gzip (`hasGzip`, when known) and no measurement says the link
 * is fast, and with upstream's command line when nothing is known.
 */
export async function wireCompression({ spec, connection, bytes, hasGzip }) {
  const setting = process.env.PAPERCLIP_NATIVE_SSH_COMPRESS ?? "auto";
  if (setting === "off" || setting === "0") return false;
  const target = transferTarget(spec, connection);
  if (bytes < SMALL_UPLOAD) {
    if (setting === "gzip") return hasGzip !== false;
    const known = links.get(linkFile(spec));
    return (
      hasGzip === true && bytes >= 64 * 1024 && !(known && known.bytesPerSecond >= COMPRESS_BELOW_BYTES_PER_SECOND)
    );
  }
  const link = await measureLink(target, spec, connection.signal).catch((error) => {
    if (error?.name === "AbortError") throw error;
    return null;
  });
  if (!link?.gzip) return false;
  return setting === "gzip" || link.bytesPerSecond < COMPRESS_BELOW_BYTES_PER_SECOND;
}

/** `PAPERCLIP_NATIVE_SSH_DELTA_TRACE=1`: each step's milliseconds on stderr (diagnostics). */
export function trace(label, started) {
  if (process.env.PAPERCLIP_NATIVE_SSH_DELTA_TRACE === "1")
    process.stderr.write(`[ssh-delta] ${label} ${(performance.now() - started).toFixed(0)} ms\n`);
}

const countFull = (reason) => countFallback(stats, reason);

/** The family of a remote directory: a managed run's base, or the directory itself. */
function familyOf(remoteDir) {
  return RUN_DIR.exec(remoteDir)?.[1] ?? remoteDir;
}

/** Where the manifest of (host, family, local workspace) lives. */
function manifestPath(spec, remoteDir, localDir) {
  return manifestLocation("ssh-delta", [spec.host, Number(spec.port), spec.username, familyOf(remoteDir)], localDir);
}

/**
 * The manifest of (host, family, local workspace) as read now: `{ file, local, manifest }`
 * (`manifest` null when there is none). A caller that read it already passes it on
 * (`loaded`), so one prepare or restore parses it once.
 */
async function loadManifest(spec, remoteDir, localDir) {
  const { file, local } = await manifestPath(spec, remoteDir, localDir);
  return { file, local, manifest: await readManifest(file) };
}

/**
 * The permission bits the SSH host's extraction cleared from the modes this host sent, as
 * the prepare's manifest recorded them (tree-delta.js `extractionMask`); `null` without one.
 */
export async function recordedExtractionMask(spec, remoteDir, localDir) {
  const { local, manifest } = await loadManifest(spec, remoteDir, localDir);
  return manifest?.remoteDir === remoteDir && manifest.localDir === local ? extractionMask(manifest) : null;
}

/**
 * Marks the manifest of a run directory restored (its work is back on this host), with the
 * remote's HEAD brought back (history both sides now hold: a git import's base): a small
 * marker file beside the manifest, naming the manifest's write by its token, written
 * atomically (the manifest itself is not written again).
 */
export async function markRestored(spec, remoteDir, localDir, importedHead = null) {
  if (!sshDeltaEnabled()) return;
  const { file } = await manifestPath(spec, remoteDir, localDir);
  const manifest = await readManifest(file);
  if (!manifest || manifest.remoteDir !== remoteDir || manifest.restored || typeof manifest.token !== "string") return;
  await writeAtomically(restoredMarker(file), JSON.stringify({ token: manifest.token, importedHead })).catch(
    () => undefined,
  );
}

/**
 * True when `error` came from the remote's answer (the command failed, or said too much), so
 * the full path may still work; false for a connection that failed (a connect timeout, a
 * refused or lost connection): falling back would only connect again, so the call fails with
 * it, as upstream's first failing step ends its call.
 */
function remoteAnswered(error) {
  return error?.code === codes.SSH_REMOTE_FAILED || error?.code === codes.MAX_BUFFER;
}

/**
 * Where a delta to `remoteDir` starts, by the manifest: `null` for `remoteDir` itself, the
 * previous run's directory for a managed run's new one (once that run was restored), or
 * `undefined` when there is nothing to start from (the full upload).
 */
function seedOf(manifest, local, remoteDir) {
  if (!manifest || manifest.localDir !== local) return undefined;
  if (manifest.remoteDir === remoteDir) return null;
  if (!manifest.restored || familyOf(manifest.remoteDir) !== familyOf(remoteDir) || !RUN_DIR.test(remoteDir))
    return undefined;
  return manifest.remoteDir;
}

/** A remote member inside a nested `.git` or `.paperclip-runtime` (below the top level). */
function nestedExcluded(member) {
  const parts = member.split("/");
  return parts.slice(1).some((part) => part === ".git" || part === RUNTIME_DIR);
}

/**
 * Whether the next {@link stageTree} of `localDir` to `remoteDir` will try a delta, and from
 * what: `null` (the full upload), else `{ seed, git }`: the previous run's directory to start
 * from (or `null`), and what the manifest recorded of the git history sent (`{ head,
 * importedHead }`, or `null`). A hint for the git import (ssh-workspace.js), which verifies
 * it on the remote before relying on it.
 */
export async function deltaCandidate({ spec, remoteDir, localDir }) {
  if (!sshDeltaEnabled()) return null;
  const loaded = await loadManifest(spec, remoteDir, localDir);
  const { manifest, local } = loaded;
  const seed = seedOf(manifest, local, remoteDir);
  if (seed === undefined) return null;
  const git = manifest.git && typeof manifest.git === "object" ? manifest.git : null;
  return { seed, git, loaded };
}

/**
 * Stages `localDir` (minus `exclude`) into `remoteDir` as the prepare does: the remote
 * directory ends holding exactly the local tree and its own `.paperclip-runtime` (and, with
 * `.git` excluded, its repository, neither listed nor touched). `fullUpload({ record, gzip })`
 * is the upstream path (clear or clean, then the full upload; resolves the packer's member
 * records when `record`). `manifestExtra` is kept in the manifest (the git history sent);
 * remote entries in `keep` are not removed (the caller does). Resolves `{ mode: "delta" |
 * "full", reason? }`. `loaded`: the manifest as {@link deltaCandidate} read it.
 */
export async function stageTree(args) {
  if (!sshDeltaEnabled()) {
    countFull("off");
    await args.fullUpload({ record: false, gzip: false });
    return { mode: "full", reason: "off" };
  }
  return await stageDelta(TREE_DELTA, await openTreeDelta(args));
}

/**
 * One prepare's tree delta: its arguments, the remote (ssh-remote.js), the walk of the local
 * tree (started at once: it runs while the manifest is read and the remote lists its tree),
 * the manifest, the names the listing prunes and where the delta starts ({@link seedOf}).
 */
async function openTreeDelta(args) {
  const { spec, connection, localDir, remoteDir, exclude, keep = [], manifestExtra = {}, loaded = null } = args;
  const started = performance.now();
  const walking = walkLocalTree(localDir, exclude, connection.signal);
  const { file, local, manifest } = await Promise.resolve(loaded ?? loadManifest(spec, remoteDir, localDir)).catch(
    async (error) => {
      await walking.catch(() => undefined);
      throw error;
    },
  );
  trace("manifest read", started);
  // A git workspace's tree (`.git` excluded): the remote's `.git` is not listed either.
  const gitTree = exclude.includes(".git");
  return {
    ...args,
    keep,
    manifestExtra,
    started,
    walking,
    file,
    local,
    manifest,
    gitTree,
    prune: gitTree ? [RUNTIME_DIR, ".git"] : [RUNTIME_DIR],
    seed: seedOf(manifest, local, remoteDir),
    remote: sshRemote(spec, connection, {}),
  };
}

/**
 * Whether the remote can take a delta: its listing (a managed run's new directory first
 * moved into place from the previous run's, `seed`) and the local walk, as `{ listing,
 * locals, header }`, or `{ fallback }` (the reason for the full upload). A connection that
 * failed or an abort rejects.
 */
async function treeDeltaReady(run) {
  const { remoteDir, seed, prune, remote } = run;
  if (seed === undefined) return { fallback: "no-manifest" };
  const q = shellQuote(remoteDir);
  const probe = [
    "set -e",
    ...(seed
      ? [
          `if [ ! -e ${q} ] && [ -d ${shellQuote(seed)} ]; then mkdir -p ${shellQuote(path.posix.dirname(remoteDir))} && mv ${shellQuote(seed)} ${q} && rm -rf ${shellQuote(`${remoteDir}/${RUNTIME_DIR}`)} && mkdir ${shellQuote(`${remoteDir}/${RUNTIME_DIR}`)}; fi`,
        ]
      : []),
    `if [ ! -d ${q} ]; then echo 'pcdelta absent'; exit 0; fi`,
    `cd ${q}`,
    ...HEADER,
    listingPipeline("", prune),
  ].join("\n");
  const answer = await listingOrFallback(
    () => remote.list(probe),
    (error) => error?.name === "AbortError" || !remoteAnswered(error),
  );
  if (answer.fallback) return answer;
  const { listing } = answer;
  trace("remote listed", run.started);
  // Upstream's `git clean -fdx -e .paperclip-runtime` spares nested repositories and nested
  // runtime directories, and its tar never sends them: the full path reproduces that.
  if (run.gitTree && [...listing.entries.keys()].some(nestedExcluded)) return { fallback: "nested-git" };
  const locals = parseMembers(await run.walking);
  trace("local walked", run.started);
  return { listing, locals, header: headerOf(listing.header) };
}

/**
 * The delta: the remote entries the host no longer has removed (on the command line, or
 * named on stdin when they are many), the changed members uploaded (`uploadDelta`, gzip'd
 * when the link asks) and extracted by one command that lists them again, then the manifest.
 */
async function applyTreeDelta(run, { listing, locals, header }) {
  const { spec, connection, remoteDir, remote, manifest, prune } = run;
  if (run.seed) stats.seeded += 1;
  const plan = planDelta(locals, listing.entries, manifest, header, new Set(run.keep));
  const q = shellQuote(remoteDir);
  const removals = [...plan.remove].map((member) => shellQuote(member)).join(" ");
  const inline = removals.length <= INLINE_REMOVALS_MAX;
  if (!inline) {
    const names = Buffer.from([...plan.remove].map((m) => `${m}\0`).join(""), "utf8");
    await remote.run(`cd ${q} && xargs -0 rm -rf --`, { stdin: names });
  }
  const sendBytes = locals.reduce((sum, entry) => sum + (plan.send.has(entry.member) ? entry.size + 512 : 0), 0);
  const gzip = await wireCompression({ spec, connection, bytes: sendBytes, hasGzip: header.compressor === "gzip" });
  // What was sent, listed again for the manifest.
  const relist = sentListing([...plan.send], header, prune);
  const apply = [
    "set -e",
    `cd ${q}`,
    ...(inline && plan.remove.size > 0 ? [`rm -rf -- ${removals}`] : []),
    // Nothing to send: the removals alone (no walk to pack nothing).
    plan.send.size === 0 ? ":" : gzip ? "gzip -dc | tar -xf -" : "tar -xf -",
    ...lightHeader(header.compressor),
    relist.script,
  ].join("\n");
  const { stdout, members } =
    plan.send.size > 0
      ? await run.uploadDelta({ command: `sh -c ${shellQuote(apply)}`, only: [...plan.send], gzip })
      : { stdout: await remote.run(apply), members: [] };
  stats.sent += plan.send.size;
  stats.removed += plan.remove.size;
  trace(`delta applied (${plan.send.size} sent, ${plan.remove.size} removed)`, run.started);
  const post = parseListing(stdout, { dotted: relist.dotted });
  stats.delta += 1;
  // The first listing's time: whatever changed on the remote after it (this upload too) is
  // listed again by the restore's and the next prepare's listings.
  writeManifest(
    run.file,
    newManifest({
      localDir: run.local,
      remoteDir,
      remote: remoteIdentity(header, manifest?.remote),
      restored: false,
      listedAt: header.now,
      compressor: header.compressor,
      files: rowsAfterDelta(locals, members, listing.entries, post.entries),
      ...run.manifestExtra,
    }),
  );
  trace("manifest made", run.started);
  return { mode: "delta", sent: plan.send.size, removed: plan.remove.size };
}

/** Upstream's full upload, gzip'd when the link asks for it (by the tree's estimated size); resolves the packer's member records. */
async function fullTreeUpload(run) {
  const { spec, connection, localDir, exclude } = run;
  const estimate = await runCancellable(connection.signal, (id) =>
    native.sshUploadEstimate(localDir, exclude, false, id),
  );
  const gzip = await wireCompression({ spec, connection, bytes: estimate });
  const { members } = await run.fullUpload({ record: true, gzip });
  return members;
}

/** After a full upload: lists the remote tree and records every file whose remote copy matches what was packed. */
async function recordFull({ remote, file, local, remoteDir, prune, manifestExtra }, members) {
  const q = shellQuote(remoteDir);
  const listing = await remote.list([`cd ${q}`, ...HEADER, listingPipeline("", prune)].join("\n"));
  if (!listing.entries) return;
  const { now, compressor } = headerOf(listing.header);
  writeManifest(
    file,
    newManifest({
      localDir: local,
      remoteDir,
      remote: remoteIdentity(headerOf(listing.header)),
      restored: false,
      listedAt: now,
      compressor,
      files: rowsAfterFull(members, listing.entries),
      ...manifestExtra,
    }),
  );
}

/** The SSH tree delta's steps (lifecycle/stage.js). */
const TREE_DELTA = {
  ready: treeDeltaReady,
  apply: applyTreeDelta,
  upload: fullTreeUpload,
  recordFull,
  countFull,
  // The walk started for a delta: nothing of it outlives the call.
  settle: (run) => run.walking.catch(() => undefined),
};

/**
 * The delta of a baseline restore (the managed runtime's), or `null` for upstream's full
 * pull (counted): when the remote directory is the one this host last sent, unrestored,
 * and every exclude is a plain name, one remote listing tells which entries changed since
 * the prepare (tree-delta.js `planRestoreDelta`, whose plan this resolves: what to pull,
 * the baseline to merge against). `remote`: the restore's (lifecycle/remote.js, guarded:
 * a workspace gone rejects with its coded refusal); `loaded`: the manifest as
 * {@link deltaCandidate} read it; `localWalk`: the walk of `localDir` that the caller
 * started with {@link walkLocalTree} and the baseline's excludes, `null` when the delta is
 * off (`PAPERCLIP_NATIVE_SSH_DELTA=0`, read once by the caller).
 */
export async function planRestore({ remote, spec, remoteDir, localDir, baseline, loaded = null, localWalk }) {
  if (!localWalk) return null;
  const started = performance.now();
  const { local, manifest } = loaded ?? (await loadManifest(spec, remoteDir, localDir));
  // A listing whose connection failed fails the restore (the plan would fall back to the full
  // pull, which would only connect again).
  let lost = null;
  const plan = await planRestoreDelta({
    manifest,
    local,
    remoteDir,
    baseline,
    localWalk,
    remote: {
      list: (script, options) =>
        remote.list(script, options).catch((error) => {
          if (error?.name !== "AbortError" && error?.code !== codes.REMOTE_WORKSPACE_GONE && !remoteAnswered(error))
            lost = error;
          throw error;
        }),
    },
  });
  if (lost) throw lost;
  trace("restore: planned", started);
  if (plan.fallback) return countPull(plan.fallback);
  pulls.delta += 1;
  return plan;
}

function countPull(reason) {
  pulls.full += 1;
  pulls.fallbacks[reason] = (pulls.fallbacks[reason] ?? 0) + 1;
  return null;
}
