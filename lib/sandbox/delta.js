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
import { promises as fs } from "node:fs";
import path from "node:path";
import { resolveInstanceRoot } from "../merge-lock.js";
import {
  HEADER,
  headerOf,
  INLINE_REMOVALS_MAX,
  lightHeader,
  listingPipeline,
  newManifest,
  parseListing,
  parseMembers,
  planDelta,
  readManifest,
  rowsAfterDelta,
  rowsAfterFull,
  sentListing,
  settled,
  walkLocalTree,
  writeManifest,
} from "../tree-delta.js";
import { OUR_CLIENT } from "./client-features.js";
import { shellQuote } from "./shell.js";

/** A top-level name upstream's clear spares that the listing can prune as it is: no glob, no slash. */
const PLAIN_NAME = /^[^/*?[\\]+$/;
/** The in-flight upload archives upstream's clear spares. */
const UPLOAD_SCRATCH = ".paperclip-upload-*";

const stats = { delta: 0, full: 0, sent: 0, removed: 0, fallbacks: {} };

/**
 * What the sandbox lane's delta uploads did in this process: uploads done as deltas, full
 * uploads (and their reasons), members sent and entries removed by the deltas.
 */
export function sandboxDeltaStats() {
  return {
    delta: stats.delta,
    full: stats.full,
    sent: stats.sent,
    removed: stats.removed,
    fallbacks: { ...stats.fallbacks },
  };
}

/**
 * `PAPERCLIP_NATIVE_SANDBOX_DELTA` (read at every prepare): `0`/`off` never; `1`/`on` always
 * (a manifest after every full upload); `auto` (the default) a delta wherever a manifest
 * exists, and a manifest after a full upload only when the runner's link measured slower
 * than gzip (so a fast runner sees exactly upstream's commands).
 */
export function sandboxDeltaSetting() {
  const value = process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA ?? "auto";
  if (value === "0" || value === "off") return "off";
  if (value === "1" || value === "on") return "on";
  return "auto";
}

function countFull(reason) {
  stats.full += 1;
  stats.fallbacks[reason] = (stats.fallbacks[reason] ?? 0) + 1;
}

/**
 * Where the manifest of (provider, remote directory, local workspace) lives. Not keyed by
 * the sandbox's lease: a provider may lease the same kept sandbox anew for each run, and a
 * manifest read against another sandbox matches none of its files (inodes and ctimes).
 */
async function manifestFile(spec, remoteDir, localDir) {
  const local = await fs.realpath(localDir).catch(() => path.resolve(localDir));
  const key = createHash("sha256")
    .update(JSON.stringify(["sandbox", spec.provider ?? null, remoteDir, local]))
    .digest("hex");
  return { file: path.join(resolveInstanceRoot(process.env), "cache", "sandbox-delta", `${key}.json`), local };
}

/**
 * Runs a listing script on the sandbox and parses what it printed (`parseListing`'s
 * `options`); the output is binary, so it comes back as base64 text, decoded here.
 */
async function listRemote(features, script, options) {
  const { stdout } = await features.exec(`{\n${script}\n} | base64`);
  return parseListing(Buffer.from(stdout, "base64"), options);
}

/**
 * Stages the plain workspace tree of a prepare: by a delta when the sandbox kept what the
 * last prepare sent, else by `fullUpload()` (upstream's clear and full upload), then records
 * what the sandbox holds for the next prepare when the setting asks for it.
 * - `client`: the prepare's client; only ours (base64 or duplex uploads) takes deltas.
 * - `spec`, `localDir`, `remoteDir`, `exclude` (the archive's excludes), `preserved` (the
 *   top-level names upstream's clear spares), `signal`.
 * - `stageDelta({ pack, command })`: uploads the archive `pack` describes (a
 *   `PACKED_SOURCE` pack) and runs `command` after it, as the full upload's stage does;
 *   `command` receives the remote archive's path.
 */
export async function stageSandboxTree({
  client,
  spec,
  localDir,
  remoteDir,
  exclude,
  preserved,
  signal,
  fullUpload,
  stageDelta,
}) {
  const setting = sandboxDeltaSetting();
  const features = client[OUR_CLIENT];
  if (setting === "off" || !features?.streamsPackedSources || typeof features.exec !== "function") {
    // Off, or a client whose uploads are not ours (a provider's native syncIn).
    const reason = setting === "off" ? "off" : "client";
    countFull(reason);
    await fullUpload();
    return { mode: "full", reason };
  }
  // The walk of what the archive holds starts at once: a delta compares it with the
  // listing, a full upload records it (taken before the pack reads a file). Not on a runner
  // this process measured fast, where `auto` records nothing: there it starts only for a
  // delta, once a manifest is found.
  const link = features.link();
  const knownFast = setting === "auto" && link.bytesPerSecond != null && !link.slow();
  let walking = null;
  const walk = () => {
    walking ??= walkLocalTree(localDir, exclude, signal, { dotMembers: false });
  };
  if (!knownFast) walk();
  const { file, local } = await manifestFile(spec, remoteDir, localDir);
  const prune = [...preserved, UPLOAD_SCRATCH];
  const q = shellQuote(remoteDir);
  const full = async (reason) => {
    countFull(reason);
    try {
      await settled(file);
      await fs.rm(file, { force: true }).catch(() => undefined);
      await fullUpload();
      // Only a walk taken before the pack can vouch for what was sent.
      if (walking && (setting === "on" || link.slow())) await recordFull();
      return { mode: "full", reason };
    } finally {
      // Nothing of the walk outlives the call.
      await walking?.catch(() => undefined);
    }
  };
  /** After a full upload: lists the sandbox tree and records every file that arrived as it was walked. */
  const recordFull = async () => {
    const locals = await walking.then(parseMembers, () => null);
    if (!locals) return;
    const listing = await listRemote(features, [`cd ${q}`, ...HEADER, listingPipeline("", prune)].join("\n")).catch(
      () => null,
    );
    if (!listing?.entries) return;
    const { now, compressor } = headerOf(listing.header);
    writeManifest(
      file,
      newManifest({
        localDir: local,
        remoteDir,
        listedAt: now,
        compressor,
        link: link.bytesPerSecond,
        files: rowsAfterFull(locals, listing.entries),
      }),
    );
  };

  if (!preserved.every((name) => PLAIN_NAME.test(name))) return await full("preserved-pattern");
  const manifest = await readManifest(file);
  if (!manifest || manifest.remoteDir !== remoteDir || manifest.localDir !== local) return await full("no-manifest");
  walk();
  // A delta moves too little to measure the link by: the last run's figure stands for it
  // until an upload of this process measures one (the restore's compression asks it).
  link.remember(manifest.link);
  let listing;
  try {
    listing = await listRemote(
      features,
      [
        `if [ ! -d ${q} ]; then echo 'pcdelta absent'; exit 0; fi`,
        `cd ${q}`,
        ...HEADER,
        listingPipeline("", prune),
      ].join("\n"),
    );
  } catch (error) {
    if (error?.name === "AbortError") {
      await walking?.catch(() => undefined);
      throw error;
    }
    return await full("remote-cannot-answer");
  }
  if (!listing.entries) return await full(listing.header[1] === "absent" ? "remote-absent" : "remote-cannot-answer");
  let locals;
  try {
    locals = parseMembers(await walking);
  } catch (error) {
    // The archive's own walk reports what is wrong with the tree (or the abort).
    if (error?.name === "AbortError") throw error;
    return await full("walk-failed");
  }
  const header = headerOf(listing.header);
  const plan = planDelta(locals, listing.entries, manifest, header);
  const removals = [...plan.remove].map((member) => shellQuote(member)).join(" ");
  if (removals.length > INLINE_REMOVALS_MAX) return await full("too-many-removals");
  const only = [...plan.send];
  await stageDelta({
    pack: { localDir, exclude, only, signal },
    command: (remoteTar) =>
      [
        `cd ${q}`,
        ...(plan.remove.size > 0 ? [`rm -rf -- ${removals}`] : []),
        `tar -xf ${shellQuote(remoteTar)}`,
        `rm -f ${shellQuote(remoteTar)}`,
      ].join(" && "),
  });
  stats.delta += 1;
  stats.sent += plan.send.size;
  stats.removed += plan.remove.size;
  // What was sent, listed again for the manifest: by name when the names are short enough,
  // else every entry changed since the first listing.
  const relist = sentListing(only, header, prune);
  const post = await listRemote(features, [`cd ${q}`, ...lightHeader(header.compressor), relist.script].join("\n"), {
    dotted: relist.dotted,
  }).catch(() => null);
  // Without it the previous manifest stays: its rows of what was sent no longer match the
  // sandbox, so those files go again next time.
  if (!post?.entries) return { mode: "delta", sent: plan.send.size, removed: plan.remove.size };
  const sent = locals.filter((entry) => plan.send.has(entry.member));
  writeManifest(
    file,
    newManifest({
      localDir: local,
      remoteDir,
      listedAt: header.now,
      compressor: header.compressor,
      link: link.bytesPerSecond,
      files: rowsAfterDelta(locals, sent, listing.entries, post.entries),
    }),
  );
  return { mode: "delta", sent: plan.send.size, removed: plan.remove.size };
}
