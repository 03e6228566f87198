// Delta transfers of a workspace tree to a remote that keeps it between runs, the parts
// every lane shares (docs/ssh.md and docs/sandbox.md, delta uploads): the manifest store on
// this host, the remote listing (one `find -printf`, gzip'd when the remote has gzip) and
// its parser, the walk of the local tree, and the plan of what to send and remove. The SSH
// lane's use is ./ssh-delta.js, the sandbox lane's ./sandbox/delta.js; each runs its own
// remote commands and uploads.
import { createHash, randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import { resolveInstanceRoot } from "./instance-root.js";
import { codes, constants, native, runCancellable } from "./native.js";
import { shellQuote } from "./shell-quote.js";
import { packInput } from "./tar-common.js";

/** The remote directory Paperclip keeps for itself: never synced, never cleared. */
export const RUNTIME_DIR = ".paperclip-runtime";
const MANIFEST_VERSION = 1;
/** What every remote listing prints per entry: kind, size, mtime, ctime, inode, mode, path, link target. */
export const LISTING_FORMAT = "%y %s %T@ %C@ %i %m %P\\0%l\\0";

/**
 * How far before the filesystem time a listing read (CLOCKED_HEADER) a restore's listing
 * begins: a change made after it has a ctime at that time or later by the same clock (one
 * that is not stepped back), so only an equal time needs the margin; 0.1 s also takes a
 * clock stepped back that little.
 */
const CLOCK_MARGIN_S = 0.1;

/**
 * How far before a listing's `date` (whole seconds) what changed after it is listed: the
 * coarse clock of file times, and a filesystem that keeps whole or even seconds.
 */
const DATE_MARGIN_S = 2;

/**
 * Where a lane's manifest lives: `<instance root>/cache/<cache>/<key>.json`, the key the
 * SHA-256 of `identity` (what names the remote side) and the workspace's real path.
 * Resolves `{ file, local }` (`local`: that real path, or the resolved one).
 */
export async function manifestLocation(cache, identity, localDir) {
  const local = await fs.realpath(localDir).catch(() => path.resolve(localDir));
  const key = createHash("sha256")
    .update(JSON.stringify([...identity, local]))
    .digest("hex");
  return { file: path.join(resolveInstanceRoot(process.env), "cache", cache, `${key}.json`), local };
}

/** Counts a full transfer where the delta did not serve, and `reason`, on a lane's counter (`{ full, fallbacks }`). */
export function countFallback(counter, reason) {
  counter.full += 1;
  counter.fallbacks[reason] = (counter.fallbacks[reason] ?? 0) + 1;
}

/**
 * Whether a failed step of a delta ends the call instead of falling back to the full path:
 * an abort, a runner call past the deadline we enforce on it (the full path would only wait
 * on the same runner again), a remote workspace that is gone (the full path would pull it
 * as an empty tree).
 */
export function endsTheCall(error) {
  return (
    error?.name === "AbortError" || error?.code === codes.SANDBOX_TIMEOUT || error?.code === codes.REMOTE_WORKSPACE_GONE
  );
}

/** Above this many bytes of removal arguments a delta does not name them on its command line. */
export const INLINE_REMOVALS_MAX = 64 * 1024;
/** The sent members listed by name after a delta (else a walk of the tree) up to this much script. */
const SENT_LISTING_MAX = 8 * 1024;

/**
 * The listing, after a delta, of what it sent (for the next manifest): by name (no walk of
 * the tree) when the names are short enough, else every entry changed since the listing
 * before it (`header.now`, less a margin for the coarse clock of file times). Resolves
 * `{ script, dotted }`: the pipeline (after a header, which sets `$Z`) and how
 * `parseListing` reads what it prints.
 */
export function sentListing(sent, header, prune) {
  const names = sent.map((member) => shellQuote(`./${member}`));
  const dotted = names.reduce((sum, name) => sum + name.length + 1, 0) <= SENT_LISTING_MAX;
  const script =
    sent.length === 0
      ? `printf 'pcdelta-end 0\\0' | $Z`
      : dotted
        ? `{ find ${names.join(" ")} -maxdepth 0 -printf '${LISTING_FORMAT.replace("%P", "%p")}'; printf 'pcdelta-end %s\\0' "$?"; } | $Z`
        : listingPipeline(`-newerct @${header.now - DATE_MARGIN_S} `, prune);
  return { script, dotted };
}

/** A manifest as written: the version, then what the lane records (see `writeManifest`). */
export function newManifest(fields) {
  return { version: MANIFEST_VERSION, ...fields };
}

/**
 * Manifests this process last wrote or read, by file, with the identity of the file they
 * came from (inode, size, modification time: every write is a new file renamed into place):
 * a read of an unchanged file reuses the parsed object (a run's restore reads what its
 * prepare wrote). Frozen; the most recent few kept.
 */
const manifestCache = new Map();
const MANIFEST_CACHE_SIZE = 16;
const identity = (stat) => `${stat.ino}:${stat.size}:${stat.mtimeNs}`;

function rememberManifest(file, stat, manifest) {
  manifestCache.delete(file);
  manifestCache.set(file, { id: identity(stat), manifest });
  for (const key of manifestCache.keys()) {
    if (manifestCache.size <= MANIFEST_CACHE_SIZE) break;
    manifestCache.delete(key);
  }
}

/**
 * The manifest in `file` (`null` when there is none, or it is unreadable or of another
 * version): the one this process is writing there when a write is pending, else the file
 * (parsed once while it is unchanged), marked `restored` when its restored marker names it.
 */
export async function readManifest(file) {
  // A manifest this process is writing is the file's next content: read as it is.
  let manifest = pendingWrites.get(file)?.manifest ?? null;
  if (!manifest) {
    try {
      const stat = await fs.stat(file, { bigint: true });
      const cached = manifestCache.get(file);
      if (cached?.id === identity(stat)) manifest = cached.manifest;
      else {
        const parsed = JSON.parse(await fs.readFile(file, "utf8"));
        if (!(parsed?.version === MANIFEST_VERSION && parsed.files && typeof parsed.files === "object")) return null;
        // Read after the stat: a file replaced in between is read again next time.
        Object.freeze(parsed.files);
        rememberManifest(file, stat, Object.freeze(parsed));
        manifest = parsed;
      }
    } catch {
      return null;
    }
  }
  // Marked restored (markRestored): this very manifest's run came back to this host.
  const marker = await fs
    .readFile(restoredMarker(file), "utf8")
    .then(JSON.parse)
    .catch(() => null);
  if (manifest.restored || typeof manifest.token !== "string" || marker?.token !== manifest.token) return manifest;
  const importedHead = typeof marker.importedHead === "string" ? marker.importedHead : null;
  const git = importedHead && manifest.git ? { ...manifest.git, importedHead } : manifest.git;
  return Object.freeze({ ...manifest, restored: true, ...(git ? { git } : {}) });
}

/** The file that marks a manifest restored: `{ token, importedHead }`, the token the manifest's. */
export const restoredMarker = (file) => `${file}.restored`;

/** Manifests (and link measurements) not written for this long are removed. */
const MANIFEST_MAX_AGE_MS = 14 * 24 * 3600_000;

/**
 * Writes `text` to `file` atomically (private directory, temporary name, rename): the file
 * is whole or untouched. Resolves the written file's `stat` (bigint); now and then removes
 * files of the directory not written for {@link MANIFEST_MAX_AGE_MS}.
 */
export async function writeAtomically(file, text) {
  const dir = path.dirname(file);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.${Date.now()}.tmp`;
  let stat;
  try {
    await fs.writeFile(temporary, text, { mode: 0o600 });
    stat = await fs.stat(temporary, { bigint: true });
    await fs.rename(temporary, file);
  } catch (error) {
    await fs.rm(temporary, { force: true }).catch(() => undefined);
    throw error;
  }
  if (Math.random() < 0.05) {
    for (const name of await fs.readdir(dir).catch(() => [])) {
      const full = path.join(dir, name);
      const old = await fs.stat(full).catch(() => null);
      if (old && Date.now() - old.mtimeMs > MANIFEST_MAX_AGE_MS)
        await fs.rm(full, { force: true }).catch(() => undefined);
    }
  }
  return stat;
}

/**
 * Manifest writes under way, by file: `{ writing, manifest }`, the newest write's promise
 * and manifest. A write starts once the call that made the manifest has returned (a
 * prepare does not wait for its manifest: the run starts while it is written), the writes
 * of one file one after the other; this process reads the newest manifest as it will be
 * written, and a removal of the file waits for the writes. A write that does not happen (a
 * failure, the process ended first) leaves the file as it was: the next process finds no
 * manifest, or the one before, which the remote's listing contradicts wherever it differs.
 */
const pendingWrites = new Map();

/** Resolves once every manifest write of `file` started so far has ended (written or failed). */
export function settled(file) {
  return pendingWrites.get(file)?.writing ?? Promise.resolve();
}

/**
 * Writes a manifest (a token of its own: a restored marker names the write it marks) after
 * the current turn of the event loop, and keeps it for the next read (see `pendingWrites`).
 */
export function writeManifest(file, manifest) {
  const written = Object.freeze({ ...manifest, token: randomBytes(16).toString("hex") });
  Object.freeze(written.files);
  const writing = settled(file)
    .then(() => new Promise((resolve) => setImmediate(resolve)))
    .then(async () => rememberManifest(file, await writeAtomically(file, JSON.stringify(written)), written))
    .catch(() => undefined)
    .finally(() => {
      if (pendingWrites.get(file)?.writing === writing) pendingWrites.delete(file);
    });
  pendingWrites.set(file, { writing, manifest: written });
}

/**
 * The listing pipeline: every entry below `.` but the top-level `prune` names (by default
 * `.paperclip-runtime`), NUL-separated, then an end record with find's status; `lead`, a
 * command whose output (`pcdelta-note` records) comes first.
 */
export function listingPipeline(filter = "", prune = [RUNTIME_DIR], lead = "") {
  const pruned = prune.map((name) => `-path ${shellQuote(`./${name}`)} -prune -o `).join("");
  return `{ ${lead ? `${lead}; ` : ""}find . -mindepth 1 ${pruned}${filter}-printf '${LISTING_FORMAT}'; printf 'pcdelta-end %s\\0' "$?"; } | $Z`;
}

/**
 * The remote's answer: header fields, then the entries (paths as `%P`, or `./`-prefixed
 * when `dotted`), the directories whose children were all listed (`pcdelta-dir` records)
 * and what the script said besides its entries (`pcdelta-note <text>` records, in order).
 */
export function parseListing(buffer, { dotted = false } = {}) {
  const newline = buffer.indexOf(10);
  if (newline < 0) return { header: [], entries: null };
  const header = buffer.subarray(0, newline).toString("utf8").split(" ");
  if (header[1] !== "ok") return { header, entries: null };
  let body = buffer.subarray(newline + 1);
  if (header[5] === "gzip") body = gunzipSync(body);
  const fields = body.toString("utf8").split("\0");
  const entries = new Map();
  const enumerated = new Set();
  const notes = [];
  const undot = (value) => (value === "." ? "" : value.replace(/^\.\//, ""));
  let ended = false;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const record = fields[i];
    if (record.startsWith("pcdelta-end ")) {
      ended = record === "pcdelta-end 0";
      break;
    }
    if (record.startsWith("pcdelta-dir ")) {
      enumerated.add(undot(record.slice("pcdelta-dir ".length)));
      continue;
    }
    if (record.startsWith("pcdelta-note ")) {
      notes.push(record.slice("pcdelta-note ".length));
      continue;
    }
    const match = /^(\S) (\d+) (\S+) (\S+) (\d+) ([0-7]+) ([\s\S]*)$/.exec(record);
    if (!match) return { header, entries: null };
    const [, kind, size, mtime, ctime, ino, mode, path] = match;
    const member = dotted ? undot(path) : path;
    entries.set(member, {
      kind,
      size: Number(size),
      mtime,
      mtimeS: Math.floor(Number(mtime)),
      ctime,
      ino,
      mode: Number.parseInt(mode, 8),
      link: fields[i + 1],
    });
  }
  return { header, entries: ended ? entries : null, enumerated, notes };
}

/** What a listing's header probes first: GNU tar (else `pcdelta no-gnu-tar`), then gzip (`$Z`, `$z`). */
const PROBES = [
  `if ! tar --version 2>/dev/null | grep -q 'GNU tar'; then echo 'pcdelta no-gnu-tar'; exit 0; fi`,
  `if command -v gzip >/dev/null 2>&1; then Z='gzip -1'; z=gzip; else Z=cat; z=cat; fi`,
];

/** The header line every listing command prints first: `pcdelta ok <umask> <uid> <now> <gzip|cat>`. */
export const HEADER = [...PROBES, `printf 'pcdelta ok %s %s %s %s\\n' "$(umask)" "$(id -u)" "$(date +%s)" "$z"`];

/**
 * The sandbox lane's header: {@link HEADER}'s fields and a sixth, the time of the remote
 * directory's own filesystem as the listing begins (the ctime of the workspace's runtime
 * directory, touched first; `-` without one, or when it is a link). A restore lists what
 * changed after that time by the same clock (planRestoreDelta), whatever the remote's
 * `date` says and however coarse its file times are.
 */
export const CLOCKED_HEADER = [
  ...PROBES,
  `c=-; if [ -d ${RUNTIME_DIR} ] && [ ! -h ${RUNTIME_DIR} ] && touch -c ${RUNTIME_DIR} 2>/dev/null; then c=$(find ${RUNTIME_DIR} -maxdepth 0 -printf '%C@' 2>/dev/null) || c=-; fi`,
  `printf 'pcdelta ok %s %s %s %s %s\\n' "$(umask)" "$(id -u)" "$(date +%s)" "$z" "$c"`,
];

/**
 * The header of a listing on a remote already probed (`compressor` as the probe found it):
 * only the time is asked again (each `$(…)` is a process on a busy remote).
 */
export function lightHeader(compressor) {
  return [
    `Z=${compressor === "gzip" ? "'gzip -1'" : "cat"}`,
    `printf 'pcdelta ok - - %s ${compressor === "gzip" ? "gzip" : "cat"}\\n' "$(date +%s)"`,
  ];
}

/** Local member records from their JSON form. */
export function parseMembers(json) {
  return JSON.parse(json).map(([member, kind, size, mode, mtimeNs, ctimeNs, ino, dev, link]) => ({
    member,
    kind,
    size,
    mode,
    mtimeNs,
    ctimeNs,
    ino,
    dev,
    link,
  }));
}

/**
 * Starts the walk of the local tree that a delta compares with the remote's listing: the
 * members a pack of `root` minus `exclude` would write (the top level as `packInput` gives
 * it, so never our own staging names), named `./x` as the SSH lane's upload names them
 * (`dotMembers`, the default) or `x` as the sandbox lane's archive does, the `./` left off
 * the records either way. Runs while the manifest is read and the remote lists its tree.
 * Never rejects unobserved.
 */
export function walkLocalTree(root, exclude, signal, { dotMembers = true } = {}) {
  const walking = packInput({ localDir: root, exclude }).then((pack) =>
    runCancellable(signal, (id) => native.tarListMembers({ ...pack, dotMembers }, id)),
  );
  walking.catch(() => undefined);
  return walking;
}

/** Whole seconds (floored) of a nanosecond time as the native walk gives it (a decimal string). */
const seconds = (ns) =>
  // The common case without BigInt: a positive time past 1970-01-01T00:00:01.
  typeof ns === "string" && ns.length > 9 && ns[0] !== "-"
    ? Number(ns.slice(0, -9))
    : Number(BigInt(ns) / 1_000_000_000n) - (BigInt(ns) < 0n && BigInt(ns) % 1_000_000_000n !== 0n ? 1 : 0);

/** The mode the remote tar gives a member: as archived for root, under the umask otherwise. */
function expectedMode(mode, header) {
  return header.uid === 0 ? mode : mode & ~header.umask & 0o7777;
}

/** A manifest row: the local stat sent and the remote stat that resulted. */
function manifestRow(local, remote) {
  return [
    local.size,
    local.mtimeNs,
    local.ctimeNs,
    local.ino,
    local.dev,
    remote.size,
    remote.mtime,
    remote.ctime,
    remote.ino,
    remote.mode,
  ];
}

/** Whether a recorded row's local half (size, mtime, ctime, inode, device) still describes the local entry. */
export function localUnchanged(row, local) {
  return (
    Array.isArray(row) &&
    row[0] === local.size &&
    row[1] === local.mtimeNs &&
    row[2] === local.ctimeNs &&
    row[3] === local.ino &&
    row[4] === local.dev
  );
}

/** Whether a recorded row's remote half (size, mtime, ctime, inode, mode) still describes the listed remote entry. */
export function remoteUnchanged(row, remote) {
  return (
    Array.isArray(row) &&
    row[5] === remote.size &&
    row[6] === remote.mtime &&
    row[7] === remote.ctime &&
    row[8] === remote.ino &&
    row[9] === remote.mode
  );
}

/** Whether a recorded row still describes both sides. */
export function unchanged(row, local, remote) {
  return localUnchanged(row, local) && remoteUnchanged(row, remote);
}

/**
 * What to send and remove so the remote tree equals the local members: `send` (members to
 * pack), `remove` (remote paths to delete first, outermost only). Remote entries named in
 * `keep` are left for the caller to remove (the git prepare's own `rm` of deleted tracked
 * files, which stamps their directories as upstream's does). With `touch`, a file whose row
 * says both sides hold the same bytes but whose time differs goes to `touch` (see
 * {@link touchCommands}) instead of `send`.
 */
export function planDelta(locals, remote, manifest, header, keep = new Set(), { touch: touching = false } = {}) {
  const send = new Set();
  const remove = new Set();
  const touch = new Set();
  const localByName = new Map(locals.map((entry) => [entry.member, entry]));
  const touchParent = (member) => {
    const slash = member.lastIndexOf("/");
    if (slash > 0 && localByName.get(member.slice(0, slash))?.kind === "d") send.add(member.slice(0, slash));
  };
  for (const local of locals) {
    const theirs = remote.get(local.member);
    let same = false;
    if (theirs && theirs.kind === local.kind) {
      const mtimeOk = theirs.mtimeS === seconds(local.mtimeNs);
      if (local.kind === "d") same = mtimeOk && theirs.mode === expectedMode(local.mode, header);
      else if (local.kind === "l") same = mtimeOk && theirs.link === local.link;
      else if (local.kind === "f") {
        // The same bytes on both sides: the row recorded when they were sent (or restored).
        const recorded =
          theirs.size === local.size &&
          theirs.mode === expectedMode(local.mode, header) &&
          unchanged(manifest.files[local.member], local, theirs);
        same = mtimeOk && recorded;
        if (recorded && !mtimeOk && touching) {
          // Only the time differs (a restore's merge copies files under a time of its own).
          touch.add(local.member);
          continue;
        }
      }
    } else if (theirs) {
      remove.add(local.member);
    }
    if (!same) {
      send.add(local.member);
      if (local.kind !== "d") touchParent(local.member);
    }
  }
  // A directory removed because the host has another kind there takes its children along.
  const removedDirs = [...remove].filter((member) => remote.get(member)?.kind === "d");
  // The remote's extras, parents before their children (only they are sorted).
  const extras = [...remote.keys()].filter((member) => !localByName.has(member) && !keep.has(member)).sort();
  for (const member of extras) {
    if (removedDirs.some((dir) => member.startsWith(`${dir}/`))) continue;
    remove.add(member);
    if (remote.get(member).kind === "d") removedDirs.push(member);
    touchParent(member);
  }
  for (const member of remove) touchParent(member);
  return { send, remove, touch };
}

/**
 * The commands that give each of `members` (files the remote holds with the same bytes)
 * the time a pack of `locals` would give it: one `touch` per whole second, so a repeat run
 * does not send again what its last restore brought back (the host merge's copies have
 * their own times).
 */
export function touchCommands(members, locals) {
  const bySecond = new Map();
  const times = new Map(locals.map((entry) => [entry.member, entry.mtimeNs]));
  for (const member of members) {
    const second = seconds(times.get(member));
    if (!bySecond.has(second)) bySecond.set(second, []);
    bySecond.get(second).push(shellQuote(`./${member}`));
  }
  return [...bySecond].map(([second, names]) => `touch -c -m -d @${second} -- ${names.join(" ")}`);
}

/**
 * Whether every one of `members` is listed in `after` with the whole second of its
 * record in `locals` (a `touch` that did what it was asked).
 */
export function touchedAsAsked(members, locals, after) {
  const times = new Map(locals.map((entry) => [entry.member, entry.mtimeNs]));
  for (const member of members) {
    const theirs = after?.get(member);
    if (theirs?.kind !== "f" || theirs.mtimeS !== seconds(times.get(member))) return false;
  }
  return true;
}

/**
 * What a manifest keeps of a listing's `header` (its umask and uid, which say what modes the
 * remote's extraction gave the files: ./lifecycle/remote-start.js), or `previous` when this listing did
 * not ask (a light header).
 */
export function remoteIdentity(header, previous = null) {
  return Number.isInteger(header.uid) && Number.isInteger(header.umask)
    ? { umask: header.umask, uid: header.uid }
    : (previous ?? null);
}

/**
 * What a manifest records of the listing (`header`, {@link headerOf}) it is written after: the
 * remote's identity ({@link remoteIdentity}, `previous` when the listing did not ask), the
 * listing's times and the remote's compressor.
 */
export function listingFields(header, previous = null) {
  return {
    remote: remoteIdentity(header, previous),
    listedAt: header.now,
    clockedAt: header.clock,
    compressor: header.compressor,
  };
}

/**
 * The permission bits the remote's extraction may clear, from a manifest's `remote`: its
 * umask (a non-root tar applies it; so does a root one told not to keep modes, or another
 * tar), `null` when not recorded. A mode as sent, or as sent less these bits, is what the
 * transfer left (./lifecycle/remote-start.js).
 */
export function extractionMask(manifest) {
  const remote = manifest?.remote;
  if (!remote || !Number.isInteger(remote.umask)) return null;
  return remote.umask & 0o7777;
}

/** The remote header fields as numbers. */
export function headerOf(fields) {
  return {
    umask: Number.parseInt(fields[2], 8),
    uid: Number(fields[3]),
    now: Number(fields[4]),
    compressor: fields[5],
    // CLOCKED_HEADER's filesystem time, or null.
    clock: /^\d+(\.\d+)?$/.test(fields[6] ?? "") ? Number(fields[6]) : null,
  };
}

/**
 * The manifest rows after a full upload: every packed file (`records`, its local `stat`
 * taken before it was read) whose remote copy in `listing` has its size and mtime.
 */
export function rowsAfterFull(records, listing) {
  const files = {};
  for (const record of records) {
    if (record.kind !== "f") continue;
    const theirs = listing.get(record.member);
    if (theirs?.kind === "f" && theirs.size === record.size && theirs.mtimeS === seconds(record.mtimeNs))
      files[record.member] = manifestRow(record, theirs);
  }
  return files;
}

/**
 * The manifest rows after a delta: a sent file (`sent`, the records of what was packed) as
 * the listing after the upload (`after`) shows it, when its size is the packed one; a file
 * not sent as the listing before it (`before`) showed it, unless the listing after shows
 * that it moved since (then it is not recorded: the next prepare sends it).
 */
export function rowsAfterDelta(locals, sent, before, after) {
  const files = {};
  const packed = new Map(sent.map((record) => [record.member, record]));
  for (const entry of locals) {
    if (entry.kind !== "f") continue;
    const record = packed.get(entry.member);
    if (record) {
      const theirs = after?.get(entry.member);
      if (theirs?.kind === "f" && theirs.size === record.size) files[entry.member] = manifestRow(record, theirs);
    } else {
      const theirs = before.get(entry.member);
      // Planned but not packed (gone from the host since the walk): nothing to record.
      if (!theirs) continue;
      const moved = after?.get(entry.member);
      if (moved && (moved.ctime !== theirs.ctime || moved.ino !== theirs.ino)) continue;
      files[entry.member] = manifestRow(entry, theirs);
    }
  }
  return files;
}

/**
 * An exclude value the restore delta can apply to a listing: a plain name or path, no
 * wildcard (tar matches an unanchored one against every run of whole path components: `b`
 * excludes `a/b/c`, `a/b` excludes `x/a/b` and `a/b/c`, not `a/bc`).
 */
const PLAIN_NAME = /^(?!\/)(?!.*\/$)(?!.*\/\/)[^*?[\\]+$/;

/**
 * The plain names and paths a restore's excludes come to, or `null` when one is not plain.
 * `name/*`, `*\/name` and `*\/name/*` add nothing to `name` (tar matches an unanchored
 * exclude against every run of path components), so they are left out when `name` is
 * there: a git workspace's `.git`, `.git/*`, the sandbox lane's four patterns of each heavy
 * directory.
 */
export function plainExcludes(exclude) {
  const names = new Set(exclude.filter((name) => PLAIN_NAME.test(name)));
  const implied = (value) => {
    const inner = value.replace(/^\*\//, "").replace(/\/\*$/, "");
    return inner !== value && names.has(inner);
  };
  const rest = exclude.filter((value) => !names.has(value) && !implied(value));
  return rest.length === 0 ? [...names] : null;
}

/**
 * The plan of a delta restore, shared by both lanes (ssh-delta.js `planRestore`,
 * sandbox/delta.js `planSandboxRestore`): when `manifest` records `remoteDir` as this host (`local`) last sent
 * it, unrestored, and every exclude of `baseline` is a plain name, one remote listing
 * (`remote.list(script, options)`, lifecycle/remote.js: the restore's remote, which checks
 * the workspace first) tells which entries changed since the prepare (a file
 * whose remote or local `stat` moved since it was sent, a link or a directory the baseline
 * does not hold as it is, anything new) and which the remote deleted. Pulling only those
 * and merging them against the baseline cut to them (and their ancestors) gives what the
 * full pull and merge give: every other entry is, on the remote, what the prepare gave it,
 * which the lanes' merge leaves as the host holds it (lifecycle/remote-start.js). Resolves `{ members, trees, names, baseline, bytes, listed,
 * notes }` (the members to pull alone and the new directories to pull whole, sorted; the
 * plain names the excludes come to; the baseline to merge against; the listed bytes of the
 * members' files; the remote listing of each file among `members`, for
 * {@link rowsAfterRestore}; the listing's `pcdelta-note` records; `inline`, see below) or
 * `{ fallback, notes }`, the reason for the full pull. `localWalk`: the walk of the local
 * tree ({@link walkLocalTree}, the baseline's excludes), always settled before this
 * resolves. A listing that fails as {@link endsTheCall} says rejects this
 * call too; any other failure is a fallback.
 * `before`: script lines the listing command runs first (after its header),
 * `lead`: a command inside the listing's pipeline whose `pcdelta-note` records come first (a
 * git workspace's restore exports its history in the same command). `inline` (`{ max, mark
 * }`, or `null`): the listing's command also archives the files and links it found changed
 * (when the remote file `mark`, a shell word, exists: only those whose status changed after
 * its time) and prints that archive when it is at most `max` bytes; the plan's `inline` is
 * then its bytes (a tar archive of `./`-named members, the pull's excludes applied), else
 * `null`. The caller uses it in place of the pull when it holds every member the plan pulls.
 * `unsent`: baseline members the prepare never put on the remote (a git workspace's empty
 * directories: neither the clone nor the overlay holds them), gone unless listed, as the
 * full pull, which cannot bring them, leaves them.
 */
export async function planRestoreDelta({
  manifest,
  local,
  remoteDir,
  baseline,
  localWalk,
  remote,
  before = [],
  lead = "",
  inline = null,
  unsent = null,
}) {
  let notes = [];
  const fallback = async (reason) => {
    await localWalk.catch(() => undefined);
    return { fallback: reason, notes };
  };
  if (!manifest || manifest.remoteDir !== remoteDir || manifest.localDir !== local || manifest.restored)
    return await fallback("no-manifest");
  const exclude = [...new Set(baseline.exclude ?? [])];
  const plain = plainExcludes(exclude);
  if (!plain) return await fallback("excludes");
  const excluded = excluderOf(plain);
  const entries = baseline.entries instanceof Map ? baseline.entries : new Map(Object.entries(baseline.entries ?? {}));
  // What changed since the manifest's listing, and every child of a directory that changed
  // (what is gone): by the remote filesystem's own clock when the listing read it (less
  // CLOCK_MARGIN_S), else by the remote's `date` (less DATE_MARGIN_S); the whole tree when
  // the manifest has no time.
  const since = Number.isFinite(manifest.clockedAt)
    ? (Math.floor((manifest.clockedAt - CLOCK_MARGIN_S) * 1000) / 1000).toFixed(3)
    : Number.isFinite(manifest.listedAt)
      ? String(manifest.listedAt - DATE_MARGIN_S)
      : null;
  // The host side, made ready while the listing runs: the walk. What the remote did not
  // change since the listing is not pulled, whatever the host's copy is now or the mode the
  // remote holds it with: the lanes' merge leaves a path the agent did not change as the
  // host holds it (lifecycle/remote-start.js), so the full pull would change nothing there either.
  const hostSide = localWalk.then((json) => ({ locals: new Map(parseMembers(json).map((m) => [m.member, m])) }));
  hostSide.catch(() => undefined);
  const script = restoreListingScript({ remoteDir, plain, since, manifest, before, lead, inline });
  let listing;
  try {
    listing = await remote.list(script.join("\n"), { dotted: since != null });
  } catch (error) {
    await localWalk.catch(() => undefined);
    if (endsTheCall(error)) throw error;
    return { fallback: "remote-cannot-answer" };
  }
  notes = listing?.notes ?? [];
  if (!listing?.entries) return await fallback("remote-cannot-answer");
  let host;
  try {
    host = await hostSide;
  } catch (error) {
    if (error?.name === "AbortError") throw error;
    return { fallback: "walk-failed", notes };
  }
  const { changed, bytes } = changedEntries(listing, entries, manifest, host.locals, excluded);
  const isGone = goneTest(listing, since, unsent);
  const keep = new Set(changed);
  // The full pull never brings an excluded name back: a baseline entry of one is gone too.
  for (const member of entries.keys()) if (excluded(member) || isGone(member)) keep.add(member);
  for (const member of changed) {
    for (let at = member.lastIndexOf("/"); at > 0; at = member.lastIndexOf("/", at - 1)) keep.add(member.slice(0, at));
  }
  // The pull names each member on the remote command line.
  if (changed.reduce((sum, member) => sum + member.length + 8, 0) > INLINE_REMOVALS_MAX)
    return { fallback: "too-many-changes", notes };
  const cut = new Map([...entries].filter(([member]) => keep.has(member)));
  // A directory the baseline does not hold comes with its whole subtree: its children are
  // not all listed when it was moved into place (a rename moves the ctime of the directory
  // alone).
  const trees = new Set();
  for (const member of changed.sort()) {
    if (listing.entries.get(member)?.kind !== "d" || entries.get(member)?.kind === "dir") continue;
    if (!within(member, trees)) trees.add(member);
  }
  const members = changed.filter((member) => !within(member, trees));
  // The remote listing of each file pulled by name: what a restore's rows pair it with.
  const listed = new Map();
  for (const member of members) {
    const theirs = listing.entries.get(member);
    if (theirs?.kind === "f") listed.set(member, theirs);
  }
  const pulled = notes.find((note) => note.startsWith("pull "));
  return {
    members,
    trees: [...trees],
    names: plain,
    baseline: { ...baseline, exclude, entries: cut },
    bytes,
    listed,
    notes,
    inline: pulled === undefined ? null : Buffer.from(pulled.slice("pull ".length), "base64"),
  };
}

/**
 * Whether a member is left out by the plain excludes `plain`: some run of its components is
 * one (tar's match of one), or it is an AppleDouble name (`._*`, never pulled either). The
 * run ends at the member itself, or it ends at an ancestor, whose answer is remembered (a
 * listing and a baseline ask for every entry of the tree).
 */
function excluderOf(plain) {
  const singles = new Set(plain.filter((name) => !name.includes("/")));
  const paths = plain.filter((name) => name.includes("/"));
  const excludedDirs = new Map();
  const excluded = (member) => {
    const slash = member.lastIndexOf("/");
    const base = slash < 0 ? member : member.slice(slash + 1);
    if (
      singles.has(base) ||
      base.startsWith("._") ||
      paths.some((name) => member === name || member.endsWith(`/${name}`))
    )
      return true;
    if (slash < 0) return false;
    const parent = member.slice(0, slash);
    let above = excludedDirs.get(parent);
    if (above === undefined) excludedDirs.set(parent, (above = excluded(parent)));
    return above;
  };
  return excluded;
}

/**
 * The listing command of a delta restore ({@link planRestoreDelta}'s arguments): the whole
 * tree when `since` is null, else what changed since then and the children of every
 * directory that changed, with the changed files archived when `inline` asks.
 */
function restoreListingScript({ remoteDir, plain, since, manifest, before, lead, inline }) {
  const q = shellQuote(remoteDir);
  // Our runtime directory is never listed, nor what the excludes leave out (a git
  // workspace's repository, the heavy directories): not walked on the remote either.
  // A name by `-name` (a match of the last component alone: `-path` globs every entry's
  // whole path against each pattern, which costs a listing of a large tree tens of ms).
  const excludedPaths = plain.flatMap((name) =>
    name.includes("/")
      ? [`-path ${shellQuote(`./${name}`)}`, `-path ${shellQuote(`*/${name}`)}`]
      : [`-name ${shellQuote(name)}`],
  );
  const prunedExcludes = excludedPaths.length > 0 ? `\\( ${excludedPaths.join(" -o ")} \\) -prune -o ` : "";
  const pruned = `-path ./${RUNTIME_DIR} -prune -o ${prunedExcludes}`;
  return since == null
    ? ["set -e", `cd ${q}`, ...HEADER, ...before, listingPipeline(prunedExcludes, [RUNTIME_DIR], lead)]
    : [
        "set -e",
        `cd ${q}`,
        // Probed at the prepare (GNU tar and find, gzip): only the time is asked.
        ...(manifest.compressor ? lightHeader(manifest.compressor) : HEADER),
        ...before,
        `F='${LISTING_FORMAT.replace("%P", "%p")}'`,
        // One walk: the changed entries on stdout, the changed directories (`.` too) in a
        // file, whose children are then listed.
        `D=$(mktemp)`,
        ...(inline
          ? [
              `P=$(mktemp)`,
              `T=$(mktemp)`,
              `trap 'rm -f "$D" "$P" "$T"' EXIT`,
              // The files and links to archive: those changed after the mark, when there is one.
              `M=${inline.mark}`,
              `if [ -e "$M" ]; then set -- -cnewer "$M"; else set --; fi`,
            ]
          : [`trap 'rm -f "$D"' EXIT`]),
        `{ ${lead ? `${lead}; ` : ""}find . ${pruned}-newerct @${since} \\( -type d -fprint0 "$D" ${inline ? `-o \\( -type f -o -type l \\) "$@" -fprint0 "$P" ` : ""}-o -true \\) ! -path . -printf '${LISTING_FORMAT.replace("%P", "./%P")}'; ` +
          `xargs -0 -r sh -c 'for d; do printf "pcdelta-dir %s\\0\\0" "$d"; done; find "$@" -mindepth 1 -maxdepth 1 -printf "$0"' "$F" < "$D"; ` +
          (inline
            ? // What changed, archived as the pull would, when small (else the pull runs; a
              // larger archive is cut off as it passes the size).
              `E=$?; if [ -s "$P" ] && { tar ${pullExcludes(plain).join(" ")} --null --no-recursion -cf - -T "$P" 2>/dev/null | head -c ${inline.max + 1} > "$T"; } && [ "$(wc -c < "$T")" -le ${inline.max} ]; then ` +
              `printf 'pcdelta-note pull '; base64 < "$T" | tr -d '\\n'; printf '\\0\\0'; fi; printf 'pcdelta-end %s\\0' "$E"; } | $Z`
            : `printf 'pcdelta-end %s\\0' "$?"; } | $Z`),
      ];
}

/**
 * The listed entries to pull: a file unless both sides are as its row recorded them, a link
 * unlike the baseline's, a directory the baseline does not hold, anything new. Resolves
 * `{ changed, bytes }` (the files' listed bytes).
 */
function changedEntries(listing, entries, manifest, locals, excluded) {
  const changed = [];
  let bytes = 0;
  for (const [member, theirs] of listing.entries) {
    if (excluded(member)) continue;
    const base = entries.get(member);
    let same = false;
    if (theirs.kind === "f") {
      const row = manifest.files[member];
      const mine = locals.get(member);
      // Both sides as the row recorded them (whatever the mode: a remote umask's or a
      // checkout's is not the agent's change, and the merge keeps the host's).
      same = base?.kind === "file" && Boolean(mine) && unchanged(row, mine, theirs);
    } else if (theirs.kind === "l") same = base?.kind === "symlink" && base.target === theirs.link;
    else if (theirs.kind === "d") same = base?.kind === "dir";
    if (!same) {
      changed.push(member);
      if (theirs.kind === "f") bytes += theirs.size;
    }
  }
  return { changed, bytes };
}

/**
 * Whether a member is gone from the remote: not listed, in a listed directory (or below one
 * that is gone or is no longer a directory); with the whole tree listed, simply not listed;
 * a baseline member the prepare never put on the remote (`unsent`), unless listed.
 */
function goneTest(listing, since, unsent) {
  const goneMemo = new Map();
  const isGone = (member) => {
    if (listing.entries.has(member)) return false;
    if (since == null || unsent?.has(member)) return true;
    if (goneMemo.has(member)) return goneMemo.get(member);
    const slash = member.lastIndexOf("/");
    const parent = slash < 0 ? "" : member.slice(0, slash);
    const above = listing.entries.get(parent);
    const gone = listing.enumerated.has(parent) || (above ? above.kind !== "d" : parent !== "" && isGone(parent));
    goneMemo.set(member, gone);
    return gone;
  };
  return isGone;
}

/** A restored file's bytes are compared up to this size; a larger one goes again next time. */
const RESTORED_COMPARE_MAX = 8 * 1024 * 1024;

/**
 * The manifest rows a delta restore vouches for: each pulled file (`pulled`, member →
 * its remote listing) that the merge left on the host with exactly the bytes pulled
 * (`extractedDir` holds them), paired with the host's stat after the merge. The next
 * prepare then only gives such a file the host's time (planDelta's `touch`) instead of
 * sending it again. A file changed during the comparison, or too large, gets no row. With
 * `blobIds`, each row ends with the bytes' git blob id (a git workspace's rows do: the next
 * prepare compares the sandbox's files with HEAD's blobs).
 */
export async function rowsAfterRestore(pulled, extractedDir, localDir, { blobIds = false } = {}) {
  const files = {};
  for (const [member, theirs] of pulled) {
    if (theirs?.kind !== "f" || theirs.size > RESTORED_COMPARE_MAX) continue;
    const target = path.join(localDir, ...member.split("/"));
    try {
      const before = await fs.lstat(target, { bigint: true });
      if (!before.isFile() || Number(before.size) !== theirs.size) continue;
      const [mine, pulledBytes] = await Promise.all([
        fs.readFile(target),
        fs.readFile(path.join(extractedDir, ...member.split("/"))),
      ]);
      const after = await fs.lstat(target, { bigint: true });
      const same = ["ino", "dev", "size", "mtimeNs", "ctimeNs"].every((key) => before[key] === after[key]);
      if (!same || !mine.equals(pulledBytes)) continue;
      const local = {
        size: Number(after.size),
        mtimeNs: String(after.mtimeNs),
        ctimeNs: String(after.ctimeNs),
        ino: String(after.ino),
        dev: String(after.dev),
      };
      files[member] = blobIds ? [...manifestRow(local, theirs), gitBlobId(mine)] : manifestRow(local, theirs);
    } catch {
      // Gone, or never merged: nothing to vouch for.
    }
  }
  return files;
}

/** The git blob id of `bytes` (SHA-1 of `blob <size>\0` and the bytes). */
export function gitBlobId(bytes) {
  return createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
}

/** Whether `member` is one of `dirs` or below one. */
function within(member, dirs) {
  if (dirs.size === 0) return false;
  for (let at = member.length; at > 0; at = member.lastIndexOf("/", at - 1)) {
    if (dirs.has(member.slice(0, at))) return true;
  }
  return false;
}

/** The `--exclude` arguments of a delta restore's pull: AppleDouble names and the plain excludes `names`. */
function pullExcludes(names) {
  return [constants.appleDoubleExclude, ...names].map((name) => `--exclude=${shellQuote(name)}`);
}

/**
 * The remote `tar` arguments that archive a delta restore's pull (`{ members, trees }` of
 * {@link planRestoreDelta}) from the remote directory: each member alone, each tree whole
 * (GNU tar's positional `--no-recursion` / `--recursion`), every name `./`-prefixed, so
 * never read as an option; `names`, the plain excludes, leave their entries out of a tree.
 */
export function pullArguments({ members, trees, names }) {
  return [
    ...pullExcludes(names),
    "-cf",
    "-",
    "--no-recursion",
    ...members.map((member) => shellQuote(`./${member}`)),
    ...(trees.length > 0 ? ["--recursion", ...trees.map((tree) => shellQuote(`./${tree}`))] : []),
  ];
}
