// Delta uploads of the sandbox lane's workspace tree (docs/sandbox.md, "Delta uploads"): to a
// sandbox that keeps the workspace directory between runs, a prepare sends only the entries
// that changed and removes the ones the host no longer has, instead of upstream's clear of
// the directory and upload of the whole archive. The manifest, the listing and the plan are
// the SSH lane's (../tree-delta.js); what differs is the transport: the listing comes back
// as base64 text on a runner command's stdout, and the changed members go as a tar archive
// through the client's upload, extracted by the same kind of post-upload command upstream's
// archive is.
//
// The remote tree after a delta equals upstream's clear and full upload: its top-level
// names spared by upstream's clear (`.paperclip-runtime`, the `preserveAbsentOnRestore`
// names, in-flight `.paperclip-upload-*` archives) are neither listed nor touched, every
// other entry the host does not send is removed, and a file is left alone only when both
// its host `stat` and its sandbox `stat` (ctime and inode included) are the ones recorded
// when it was sent. Without a manifest, when the sandbox cannot answer (no GNU find or tar,
// a listing that does not parse), or on any doubt, upstream's full upload runs, and is
// counted (`sandboxDeltaStats`).
import { createHash } from "node:crypto";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { listingOrFallback, stageDelta } from "../lifecycle/stage.js";
import { abortError } from "../native.js";
import { createTarballStreamFromDirectory } from "../tar-stream.js";
import {
  CLOCKED_HEADER,
  endsTheCall,
  extractionMask,
  headerOf,
  INLINE_REMOVALS_MAX,
  lightHeader,
  listingPipeline,
  newManifest,
  listingFields,
  parseListing,
  parseMembers,
  planDelta,
  planRestoreDelta,
  pullArguments,
  readManifest,
  rowsAfterDelta,
  rowsAfterFull,
  rowsAfterRestore,
  sentListing,
  touchCommands,
  touchedAsAsked,
  walkLocalTree,
  writeManifest,
  countFallback,
  manifestLocation,
} from "../tree-delta.js";
import { runLocalGit } from "../local-git.js";
import { SLICE_BYTES } from "./base64-transfer.js";
import { OUR_CLIENT } from "./client-features.js";
import { shellQuote } from "./shell.js";

/** A top-level name upstream's clear spares that the listing can prune as it is: no glob, no slash. */
const PLAIN_NAME = /^[^/*?[\\]+$/;
/** The in-flight upload archives upstream's clear spares. */
export const UPLOAD_SCRATCH = ".paperclip-upload-*";

/** A delta archive up to this size goes on the stdin of the one command that extracts it (a chunked write's slice). */
export const INLINE_UPLOAD_MAX = SLICE_BYTES;
/** Inline archives and pulls from this size on go gzip'd (when the sandbox has gzip and the link is not known fast). */
export const GZIP_FROM = 64 * 1024;

const stats = { delta: 0, full: 0, sent: 0, removed: 0, touched: 0, fallbacks: {} };
const pulls = { delta: 0, full: 0, pulled: 0, recorded: 0, inline: 0, fallbacks: {} };
const histories = { delta: 0, full: 0, objects: 0, checkedOut: 0, sent: 0, removed: 0, fallbacks: {} };

/**
 * What the sandbox lane's deltas did in this process: uploads done as deltas, full uploads
 * (and their reasons), members sent, entries removed and files only given the host's time
 * (`touched`: the sandbox already held their bytes) by the deltas of plain workspaces;
 * `git`, the prepares of git workspaces done as deltas, their full uploads (and reasons),
 * the git objects they sent, the files the sandbox checked out of its own history, the
 * working-tree files sent and the entries removed; and `restore`, the restores done as
 * deltas, the full pulls (and their reasons), the members the deltas pulled, the pulled
 * files recorded as the host now holds them (`recorded`) and the deltas whose members came
 * back with the listing, without a pull command (`inline`).
 */
export function sandboxDeltaStats() {
  return {
    delta: stats.delta,
    full: stats.full,
    sent: stats.sent,
    removed: stats.removed,
    touched: stats.touched,
    fallbacks: { ...stats.fallbacks },
    git: { ...histories, fallbacks: { ...histories.fallbacks } },
    restore: {
      delta: pulls.delta,
      full: pulls.full,
      pulled: pulls.pulled,
      recorded: pulls.recorded,
      inline: pulls.inline,
      fallbacks: { ...pulls.fallbacks },
    },
  };
}

/**
 * `PAPERCLIP_NATIVE_SANDBOX_DELTA` (read at every prepare and restore): `0`/`off` never
 * (upstream's commands only); `1`/`on` and `auto` (the default) a delta wherever a manifest
 * exists and a manifest after every full upload, on every link: a repeat run's delta costs
 * one listing command more than nothing, where the full upload costs every byte of the tree
 * and four commands at least (docs/sandbox.md, "Delta uploads").
 */
export function sandboxDeltaSetting() {
  const value = process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA ?? "auto";
  if (value === "0" || value === "off") return "off";
  if (value === "1" || value === "on") return "on";
  return "auto";
}

/**
 * The client's delta features when a delta may run at all: `{ features }`, or `{ reason }`
 * for upstream's path (`off`: the setting; `client`: transfers that are not ours, a
 * provider's native `syncIn`/`syncOut`).
 */
export function deltaClient(client) {
  const features = client[OUR_CLIENT];
  if (sandboxDeltaSetting() === "off") return { reason: "off" };
  if (!features?.streamsPackedSources || typeof features.exec !== "function") return { reason: "client" };
  return { features };
}

const countFull = (reason) => countFallback(stats, reason);

/** Counts a git workspace's prepare: a full upload and its `reason`, or a delta's figures. */
export function countGitPrepare({ reason, objects = 0, checkedOut = 0, sent = 0, removed = 0 }) {
  if (reason) {
    histories.full += 1;
    histories.fallbacks[reason] = (histories.fallbacks[reason] ?? 0) + 1;
    return;
  }
  histories.delta += 1;
  histories.objects += objects;
  histories.checkedOut += checkedOut;
  histories.sent += sent;
  histories.removed += removed;
}

/**
 * Where the manifest of (provider, remote directory, local workspace) lives. Not keyed by
 * the sandbox's lease: a provider may lease the same kept sandbox anew for each run, and a
 * manifest read against another sandbox matches none of its files (inodes and ctimes).
 */
export function manifestFile(spec, remoteDir, localDir) {
  return manifestLocation("sandbox-delta", ["sandbox", spec.provider ?? null, remoteDir], localDir);
}

/**
 * Runs a listing script on the sandbox and parses what it printed (`parseListing`'s
 * `options`); the output is binary, so it comes back as base64 text, decoded here.
 */
export async function listRemote(features, script, options, stdin) {
  const { stdout } = await features.exec(`{\n${script}\n} | base64`, stdin === undefined ? {} : { stdin });
  try {
    return parseListing(Buffer.from(stdout, "base64"), options);
  } catch {
    // A listing cut short mid-stream (its gzip member unfinished): no listing.
    return { header: [], entries: null };
  }
}

/** The tar archive of `only` (members of `localDir` minus `exclude`), in memory: a small delta's. */
export async function packed(pack) {
  const chunks = [];
  for await (const chunk of await createTarballStreamFromDirectory(pack)) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** A link this process measured faster than gzip. */
export const knownFast = (link) => link.bytesPerSecond != null && !link.slow();

/** The listing of a plain tree's delta: the sandbox directory (`pcdelta absent` when there is none) but its `prune` top-level names. */
function listTree(features, remoteDir, prune) {
  const q = shellQuote(remoteDir);
  return listRemote(
    features,
    [
      `if [ ! -d ${q} ]; then echo 'pcdelta absent'; exit 0; fi`,
      `cd ${q}`,
      ...CLOCKED_HEADER,
      listingPipeline("", prune),
    ].join("\n"),
  );
}

/**
 * What a prepare's delta asks first, started as the prepare begins so the sandbox answers
 * while this host takes its git snapshot and baseline: the manifest of (spec, remoteDir,
 * localDir) and, when there is one, the sandbox's listing as that manifest's kind asks it
 * (a plain tree's, without `preserved` and in-flight uploads; a git workspace's, through
 * `listGit(features, remoteDir, heads)`, git-delta.js's). Resolves `{ file, local, manifest,
 * kind, prune, heads, listing }` (`listing`: a promise of the parsed listing, or of the
 * error its command ended with; `null` without a manifest or for a pattern among
 * `preserved`), or `null` when the setting is off or the client's transfers are not ours.
 * Never rejects; its listing settles before a stage that takes it returns.
 */
export function startEarlyListing({ client, spec, remoteDir, localDir, preserved, listGit }) {
  const { features } = deltaClient(client);
  if (!features) return null;
  const early = (async () => {
    const { file, local } = await manifestFile(spec, remoteDir, localDir);
    const manifest = await readManifest(file);
    const kind = manifest?.kind === "git" ? "git" : "tree";
    const prune = [...preserved, UPLOAD_SCRATCH];
    const heads = kind === "git" && Array.isArray(manifest.git?.heads) ? manifest.git.heads : [];
    const usable =
      manifest &&
      manifest.remoteDir === remoteDir &&
      manifest.localDir === local &&
      (kind === "git" || preserved.every((name) => PLAIN_NAME.test(name)));
    const listing = usable
      ? (kind === "git" ? listGit(features, remoteDir, heads) : listTree(features, remoteDir, prune)).catch(
          (error) => error,
        )
      : null;
    return { file, local, manifest, kind, prune: prune.join("\0"), heads, listing };
  })().catch(() => null);
  return early;
}

/** Settles an early listing (startEarlyListing) whatever became of it. */
export async function settleEarlyListing(early) {
  await (
    await early
  )?.listing;
}

/**
 * Stages the plain workspace tree of a prepare: by a delta when the sandbox kept what the
 * last prepare sent, else by `fullUpload()` (upstream's clear and full upload), then records
 * what the sandbox holds for the next prepare (unless the setting is off).
 * - `client`: the prepare's client; only ours (base64 or duplex uploads) takes deltas.
 * - `spec`, `localDir`, `remoteDir`, `exclude` (the archive's excludes), `preserved` (the
 *   top-level names upstream's clear spares), `signal`; `ensureDirs`: remote directories a
 *   delta creates when missing (the ones the full upload's staging creates).
 * - `stageDelta({ pack, command })`: uploads the archive `pack` describes (a
 *   `PACKED_SOURCE` pack) and runs `command` after it, as the full upload's stage does;
 *   `command` receives the remote archive's path. A large delta's path.
 * - `stageInline({ bytes, upload })`: runs `upload()` (one command: the archive on its
 *   stdin, extracted, what it wrote listed; resolves `{ listed, bytes }`) with the
 *   prepare's status and progress lines (`bytes`, the archive's size as planned), and
 *   resolves `listed`. A small delta's path.
 * - `early`: what {@link startEarlyListing} started as the prepare began, or `null`.
 * - `mark`: the file ({@link deltaMark}'s word) touched once the upload is in place.
 *
 * The steps, run by ../lifecycle/stage.js `stageDelta`, each a function below over one
 * prepare's context (`openTreeDelta`): whether the sandbox can take a delta
 * (`treeDeltaReady`), the delta (`applyTreeDelta`: inline or by an upload, then its rows), or
 * the full upload and its rows (`recordFullTree`).
 */
export async function stageSandboxTree(args) {
  const { features, reason } = deltaClient(args.client);
  if (!features) {
    countFull(reason);
    await args.fullUpload();
    return { mode: "full", reason };
  }
  const run = await openTreeDelta({ ...args, ensureDirs: args.ensureDirs ?? [], early: args.early ?? null }, features);
  const plain = args.preserved.every((name) => PLAIN_NAME.test(name));
  return await stageDelta(TREE_DELTA, run, plain ? null : "preserved-pattern");
}

/**
 * One plain prepare's context: its arguments, the client's `features` and link, the walk of
 * what the archive holds (started at once: a delta compares it with the listing, a full
 * upload records it, taken before the pack reads a file), the names a listing prunes, the
 * early listing when it asked the same, and the manifest's location.
 */
async function openTreeDelta(args, features) {
  const { localDir, exclude, signal, preserved, spec, remoteDir } = args;
  const walking = walkLocalTree(localDir, exclude, signal, { dotMembers: false });
  const prune = [...preserved, UPLOAD_SCRATCH];
  const asked = await args.early;
  const taken = asked?.kind === "tree" && asked.prune === prune.join("\0") ? asked : null;
  const { file, local } = taken ?? (await manifestFile(spec, remoteDir, localDir));
  return { ...args, features, link: features.link(), walking, prune, taken, file, local, q: shellQuote(remoteDir) };
}

/** After a full upload: lists the sandbox tree and records every file that arrived as it was walked. */
async function recordFullTree(run) {
  const locals = await run.walking.then(parseMembers, () => null);
  if (!locals) return;
  const listing = await listRemote(
    run.features,
    [`cd ${run.q}`, touchMark(run.mark), ...CLOCKED_HEADER, listingPipeline("", run.prune)].join("\n"),
  ).catch(() => null);
  if (!listing?.entries) return;
  writeManifest(
    run.file,
    newManifest({
      localDir: run.local,
      remoteDir: run.remoteDir,
      ...listingFields(headerOf(listing.header)),
      link: run.link.bytesPerSecond,
      files: rowsAfterFull(locals, listing.entries),
    }),
  );
}

/**
 * Whether the sandbox can take a delta: the manifest, the sandbox's listing, this host's
 * walk, and the plan (touches named when they fit, else sent). Resolves `{ fallback }` or
 * `{ manifest, listing, locals, header, plan, touches }`. A listing that ends the call
 * rejects (after the walk settles).
 */
async function treeDeltaReady(run) {
  const { taken, features, remoteDir, local, prune } = run;
  const manifest = taken ? taken.manifest : await readManifest(run.file);
  if (!manifest || manifest.kind === "git" || manifest.remoteDir !== remoteDir || manifest.localDir !== local)
    return { fallback: "no-manifest" };
  // A delta moves too little to measure the link by: the last run's figure stands for it
  // until an upload of this process measures one (the restore's compression asks it).
  run.link.remember(manifest.link);
  const answer = await listingOrFallback(
    () => (taken?.listing ? taken.listing : listTree(features, remoteDir, prune)),
    endsTheCall,
  );
  if (answer.fallback) return answer;
  const { listing } = answer;
  let locals;
  try {
    locals = parseMembers(await run.walking);
  } catch (error) {
    // The archive's own walk reports what is wrong with the tree (or the abort).
    if (error?.name === "AbortError") throw error;
    return { fallback: "walk-failed" };
  }
  const header = headerOf(listing.header);
  let plan = planDelta(locals, listing.entries, manifest, header, new Set(), { touch: true });
  let touches = touchCommands(plan.touch, locals);
  if (touches.reduce((sum, command) => sum + command.length + 1, 0) > INLINE_REMOVALS_MAX) {
    // Too many to name: sent instead.
    plan = planDelta(locals, listing.entries, manifest, header);
    touches = [];
  }
  const removals = [...plan.remove].map((member) => shellQuote(member)).join(" ");
  if (removals.length > INLINE_REMOVALS_MAX) return { fallback: "too-many-removals" };
  return { manifest, listing, locals, header, plan, touches, removals };
}

/**
 * The delta: the removals, the archive of what changed and the touches, inline or through an
 * upload, then the rows of what the sandbox now holds. Falls back to the full upload when the
 * inline command or a touch fails.
 */
async function applyTreeDelta(run, ready, full) {
  const { plan, locals, header, removals } = ready;
  const only = [...plan.send];
  const touched = [...plan.touch];
  const step = {
    only,
    // What was sent and touched, listed again for the manifest: by name when the names are
    // short enough, else every entry changed since the first listing.
    relist: sentListing([...only, ...touched], header, run.prune),
    removal: plan.remove.size > 0 ? [`rm -rf -- ${removals}`] : [],
    sendBytes: locals.reduce(
      (sum, entry) => sum + (plan.send.has(entry.member) ? 512 + Math.ceil(entry.size / 512) * 512 : 0),
      1024,
    ),
  };
  if (run.signal?.aborted) throw abortError(run.signal);
  let post;
  if (only.length === 0 || step.sendBytes <= INLINE_UPLOAD_MAX) {
    post = await sendTreeInline(run, ready, step);
    // The header comes after the extraction (`set -e`): without it, whether the archive
    // went in is not known (the command's status is its `base64`'s), so the full upload runs.
    if (post.header[1] !== "ok") return await full("delta-failed");
  } else post = await sendTreeByUpload(run, ready, step);
  // A touch that did not give a file the host's time (a `touch` without `-d @`): the
  // sandbox's tree is not what the full upload gives, so the full upload runs.
  if (touched.length > 0 && !touchedAsAsked(touched, locals, post?.entries)) return await full("touch-failed");
  stats.delta += 1;
  stats.sent += plan.send.size;
  stats.removed += plan.remove.size;
  stats.touched += plan.touch.size;
  // Without the listing after it the previous manifest stays: its rows of what was sent no
  // longer match the sandbox, so those files go again next time.
  if (post?.entries) recordTreeDelta(run, ready, post);
  return { mode: "delta", sent: plan.send.size, removed: plan.remove.size };
}

/** A small delta: one command takes the archive on its stdin, extracts it and lists what it wrote (no staged file, no separate extraction or listing). */
async function sendTreeInline(run, { header, touches }, { only, relist, removal, sendBytes }) {
  const { localDir, exclude, signal, q } = run;
  const gzip = header.compressor === "gzip" && sendBytes >= GZIP_FROM && !knownFast(run.link);
  return await run.stageInline({
    bytes: sendBytes,
    upload: async () => {
      const archive = only.length > 0 ? await packed({ localDir, exclude, only, signal }) : null;
      const stdin = archive ? (gzip ? gzipSync(archive, { level: 1 }) : archive).toString("base64") : undefined;
      const script = [
        "set -e",
        ...run.ensureDirs.map((dir) => `mkdir -p ${shellQuote(dir)}`),
        `cd ${q}`,
        ...removal,
        ...(archive ? [gzip ? "base64 -d | gzip -dc | tar -xf -" : "base64 -d | tar -xf -"] : []),
        ...touches,
        touchMark(run.mark),
        ...lightHeader(header.compressor),
        relist.script,
      ].join("\n");
      const listed = await listRemote(run.features, script, { dotted: relist.dotted }, stdin);
      return { listed, bytes: archive?.length ?? 0 };
    },
  });
}

/** A large delta: the archive through the client's upload, extracted by the command after it, then listed. Resolves the listing, or `null`. */
async function sendTreeByUpload(run, { header, touches }, { only, relist, removal }) {
  const { localDir, exclude, signal, q } = run;
  await run.stageDelta({
    pack: { localDir, exclude, only, signal },
    command: (remoteTar) =>
      [
        `cd ${q}`,
        ...removal,
        `tar -xf ${shellQuote(remoteTar)}`,
        ...touches,
        `rm -f ${shellQuote(remoteTar)}`,
        touchMark(run.mark),
      ].join(" && "),
  });
  return await listRemote(run.features, [`cd ${q}`, ...lightHeader(header.compressor), relist.script].join("\n"), {
    dotted: relist.dotted,
  }).catch(() => null);
}

/** The manifest after a delta: rows of what was sent and touched, the rest kept. */
function recordTreeDelta(run, { manifest, listing, locals, header, plan }, post) {
  const sent = locals.filter((entry) => plan.send.has(entry.member) || plan.touch.has(entry.member));
  writeManifest(
    run.file,
    newManifest({
      localDir: run.local,
      remoteDir: run.remoteDir,
      ...listingFields(header, manifest.remote),
      link: run.link.bytesPerSecond,
      files: rowsAfterDelta(locals, sent, listing.entries, post.entries),
    }),
  );
}

/** The sandbox plain tree delta's steps (../lifecycle/stage.js). */
const TREE_DELTA = {
  ready: treeDeltaReady,
  apply: applyTreeDelta,
  // Only the walk taken before the pack can vouch for what was sent (recordFullTree).
  upload: (run) => run.fullUpload(),
  recordFull: recordFullTree,
  countFull,
  // Nothing of the walk outlives the call.
  settle: (run) => run.walking.catch(() => undefined),
};

function countPull(reason) {
  countFallback(pulls, reason);
  return null;
}

/**
 * Whether a restore may try a delta, and on what: `{ features, localWalk }`, the walk of
 * `localDir` (minus `exclude`, the baseline's) started at once, or `null` (the full pull,
 * counted) when the setting is off or the client's transfers are not ours.
 */
export function startRestoreDelta(client, localDir, exclude, signal) {
  const { features, reason } = deltaClient(client);
  if (!features) return countPull(reason);
  const localWalk = walkLocalTree(localDir, [...new Set(exclude)], signal, { dotMembers: false });
  return { features, localWalk };
}

/**
 * The delta of a sandbox restore (tree-delta.js `planRestoreDelta`: one listing of what
 * changed since the prepare, with the listing's `notes`), or `{ fallback, notes }` for
 * upstream's full pull (counted). `remote`: the restore's (../lifecycle/remote.js, guarded:
 * a workspace gone rejects with its coded refusal, never falls back to the full pull);
 * `features` and `localWalk`: what {@link startRestoreDelta} returned (the walk is settled
 * when this resolves). `head`: a git workspace's commit, the one its prepare cloned (its
 * manifest is then git-delta.js's; `null` for a plain tree); `before` and `lead`: what the
 * listing's command does first (`planRestoreDelta`'s); `mark`: the prepare's mark
 * ({@link deltaMark}'s word): the listing's command brings back what changed after it (the
 * plan's `inline`) when that is small.
 */
export async function planSandboxRestore({
  remote,
  features,
  localWalk,
  spec,
  remoteDir,
  localDir,
  baseline,
  head = null,
  before,
  lead,
  mark,
}) {
  const git = head != null;
  // The directories the depth-1 clone checked out (read while the manifest is found).
  const cloned = git ? headDirectories(localDir, head).catch(() => null) : null;
  const { file, local } = await manifestFile(spec, remoteDir, localDir).catch(async (error) => {
    await localWalk.catch(() => undefined);
    throw error;
  });
  const read = await readManifest(file);
  // A git workspace's manifest (git-delta.js) for a git workspace only, and the other way round.
  const manifest = read && (read.kind === "git") === git ? read : null;
  const checkedOut = git ? await cloned : null;
  if (git && manifest && !checkedOut) {
    await localWalk.catch(() => undefined);
    countPull("head-unreadable");
    return { fallback: "head-unreadable", notes: [] };
  }
  const plan = await planRestoreDelta({
    manifest,
    local,
    remoteDir,
    baseline,
    localWalk,
    remote,
    unsent: git ? unsentDirectories(baseline, checkedOut) : null,
    before,
    lead,
    inline: { max: LISTING_PULL_MAX, mark },
  });
  if (plan.fallback) {
    countPull(plan.fallback);
    return plan;
  }
  // gzip'd when the sandbox has it and the link is not known fast.
  return { ...plan, gzip: manifest.compressor === "gzip" && !knownFast(features.link()) };
}

/**
 * The directories of a git workspace's baseline that its prepare never put in the sandbox:
 * those with no file or link below them that are not directories of HEAD's tree either
 * (`checkedOut`, from {@link headDirectories}). The depth-1 clone checks out HEAD's tree,
 * directories of its files the host deleted or excludes included (the overlay removes the
 * files, not their directories); the overlay adds only files and the directories above them.
 */
export function unsentDirectories(baseline, checkedOut = new Set()) {
  const entries = baseline.entries instanceof Map ? baseline.entries : new Map(Object.entries(baseline.entries ?? {}));
  const holding = new Set(checkedOut);
  for (const [member, entry] of entries) {
    if (entry?.kind === "dir") continue;
    for (let at = member.lastIndexOf("/"); at > 0; at = member.lastIndexOf("/", at - 1)) {
      const parent = member.slice(0, at);
      if (holding.has(parent)) break;
      holding.add(parent);
    }
  }
  return new Set(
    [...entries].filter(([member, entry]) => entry?.kind === "dir" && !holding.has(member)).map(([m]) => m),
  );
}

/**
 * The directories (and submodule paths) of commit `head`'s tree in the repository at
 * `localDir`: those a checkout of `head` creates.
 */
export async function headDirectories(localDir, head) {
  const { stdout } = await runLocalGit(localDir, ["ls-tree", "-r", "-t", "-z", head], {
    timeout: 30_000,
    maxBuffer: 1 << 28,
  });
  const dirs = new Set();
  for (const record of stdout.split("\0")) {
    // "<mode> <type> <object>\t<path>"
    const tab = record.indexOf("\t");
    if (tab < 0) continue;
    const type = record.slice(0, tab).split(" ")[1];
    if (type === "tree" || type === "commit") dirs.add(record.slice(tab + 1));
  }
  return dirs;
}

/** Commits a git workspace's manifest remembers the sandbox holding (the newest first). */
const HEADS_KEPT = 4;

/** The commits of a git manifest's `git.heads`: `head` first, then `heads`, without repeats, at most {@link HEADS_KEPT}. */
export function keptHeads(head, heads = []) {
  return [...new Set([head, ...heads])].filter((id) => /^[0-9a-f]{40,64}$/.test(id)).slice(0, HEADS_KEPT);
}

/** A delta pull's archive up to this size comes back on the stdout of the command that makes it. */
const INLINE_PULL_MAX = SLICE_BYTES;

/**
 * The restore's listing carries the changed files up to this size of archive (its answer
 * also holds the listing, and a git workspace's bundle: kept well below what a provider's
 * stdout takes); more goes by the pull's own command.
 */
const LISTING_PULL_MAX = 1024 * 1024;

/**
 * The file a prepare touches in the sandbox once its upload is in place, as a shell word (in
 * the sandbox's temporary directory, named for the remote directory: never in the tree the
 * run compares): a restore's listing archives only what changed after it (tree-delta.js
 * `planRestoreDelta`'s `inline`), not what the prepare itself wrote. Without it (a
 * temporary directory cleared, another lease), the listing archives all it lists.
 */
export const deltaMark = (remoteDir) =>
  `"\${TMPDIR:-/tmp}"/paperclip-delta-mark-${createHash("sha256").update(remoteDir).digest("hex").slice(0, 16)}`;

/** The command that touches `mark` ({@link deltaMark}'s word): never fails the command it ends. */
export const touchMark = (mark) => `{ touch ${mark} 2>/dev/null || :; }`;

/**
 * The one command of a delta restore's pull: archives the plan's members into `remoteTar`
 * (gzip'd when `gzip`), then prints `pcpull inline` and the archive as base64 when it is
 * at most {@link INLINE_PULL_MAX} bytes (and removes it), else `pcpull file <size>` (the
 * caller reads the file, then removes it).
 */
export function pullScript(plan, remoteDir, remoteTar, gzip) {
  const tar = shellQuote(remoteTar);
  return [
    "set -e",
    `mkdir -p ${shellQuote(path.posix.dirname(remoteTar))}`,
    `cd ${shellQuote(remoteDir)}`,
    `tar ${pullArguments(plan).join(" ")} > ${tar}`,
    ...(gzip ? [`gzip -1 -n -f -c ${tar} > ${tar}.gz`, `mv -f ${tar}.gz ${tar}`] : []),
    `S=$(wc -c < ${tar})`,
    `if [ "$S" -le ${INLINE_PULL_MAX} ]; then echo 'pcpull inline'; base64 < ${tar}; rm -f ${tar}; else echo "pcpull file $S"; fi`,
  ].join("\n");
}

/** Counts a delta restore whose members came back with its listing (no pull command). */
export function countRestoreInline() {
  pulls.inline += 1;
}

/** Counts a restore done as a delta, and the members (and trees) it pulled. */
export function countRestoreDelta(plan) {
  pulls.delta += 1;
  pulls.pulled += plan.members.length + plan.trees.length;
}

/**
 * After a delta restore's merge: records in the manifest each pulled file the host now
 * holds with exactly the pulled bytes (tree-delta.js `rowsAfterRestore`), so the next
 * prepare gives it the host's time instead of sending it again; for a git workspace, with
 * the files' blob ids, and `importedHead` (the sandbox's HEAD the restore brought back) among
 * the commits the sandbox holds. Never fails the restore.
 */
export async function recordRestore({ spec, remoteDir, localDir, plan, extractedDir, importedHead = null }) {
  try {
    const { file, local } = await manifestFile(spec, remoteDir, localDir);
    const manifest = await readManifest(file);
    if (!manifest || manifest.remoteDir !== remoteDir || manifest.localDir !== local) return;
    const git = manifest.kind === "git";
    const rows = await rowsAfterRestore(plan.listed ?? new Map(), extractedDir, local, { blobIds: git });
    const count = Object.keys(rows).length;
    const heads = git && importedHead ? keptHeads(importedHead, manifest.git.heads) : null;
    if (count === 0 && !heads) return;
    writeManifest(
      file,
      newManifest({
        ...manifest,
        ...(heads ? { git: { ...manifest.git, heads } } : {}),
        files: { ...manifest.files, ...rows },
      }),
    );
    pulls.recorded += count;
  } catch {
    // Without the rows, those files go again next time.
  }
}

/**
 * The permission bits the sandbox's extraction cleared from the modes this host sent, as the
 * prepare's manifest recorded them (tree-delta.js `extractionMask`); `null` without one.
 */
export async function recordedExtractionMask(spec, remoteDir, localDir) {
  const { file, local } = await manifestFile(spec, remoteDir, localDir);
  const manifest = await readManifest(file);
  return manifest?.remoteDir === remoteDir && manifest.localDir === local ? extractionMask(manifest) : null;
}

/** Counts a restore that runs whole: `reason`, why (a delta's pull that failed, a workspace the delta does not cover). */
export function countRestoreFallback(reason) {
  return countPull(reason);
}
