// Delta prepares of the sandbox lane's git workspaces (docs/sandbox.md, "Git workspaces"):
// to a sandbox that kept the workspace (its repository included) since the last prepare, a
// prepare sends only the git objects the sandbox lacks and the working-tree files it does
// not hold, instead of upstream's clear of the directory, upload of a depth-1 clone of HEAD
// and upload of the overlay (the files that differ from HEAD).
//
// What upstream's prepare leaves, and so what the delta must leave: a repository whose
// HEAD, branch, refs, `origin` and shallow boundary are a fresh depth-1 clone's of the host
// HEAD (`H`), an index of `H`'s tree, and a working tree of `H`'s checkout overlaid with the
// host's overlay files, less the deleted ones. The host knows that target without making it:
// `git ls-tree` of `H` (every path, mode and blob id) and the snapshot's overlay and deleted
// paths. One runner command lists the sandbox's tree and says which of the commits recorded
// in the manifest it still holds; a second one takes a payload on its stdin (the objects of
// `H` beyond those commits' trees as a pack, the files to check out, to remove, to create,
// to chmod, and a tar of the overlay files that changed), rebuilds `.git` around its objects
// (the recorded clone's config and exclude file, `H` on the branch, nothing else: no other
// ref, no reflog, no hook but the samples, no operation in progress), sets the index to
// `H`'s tree, checks out of its own history the paths that are not `H`'s blob, writes the
// overlay files, and lists what it wrote for the next manifest. A file is left alone only
// when the manifest's row says the sandbox copy (its `stat`, ctime and inode included) holds
// the same bytes as the target: `H`'s blob, or the host's overlay file. Modes are the ones a
// checkout and a tar extraction give under the host's and the sandbox's umasks.
//
// Without a manifest, without the history it names, on a workspace with project
// repositories, a `.gitattributes` or an end-of-line setting (a checkout that is not the
// blob's bytes), an overlay that changes an entry's kind, or any other doubt, upstream's
// full upload runs, and is counted (`sandboxDeltaStats().git`).
import { createReadStream, createWriteStream, promises as fs } from "node:fs";
import { pipeline } from "node:stream/promises";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { shouldExcludePath } from "../exclude-patterns.js";
import { originUrl, runLocalGit } from "../local-git.js";
import { abortError } from "../native.js";
import { hostUmask } from "../lifecycle/remote-start.js";
import { listingOrFallback, stageDelta } from "../lifecycle/stage.js";
import { createTarballStreamFromDirectory } from "../tar-stream.js";
import {
  CLOCKED_HEADER,
  endsTheCall,
  headerOf,
  lightHeader,
  listingPipeline,
  newManifest,
  listingFields,
  parseMembers,
  readManifest,
  remoteUnchanged,
  RUNTIME_DIR,
  sentListing,
  unchanged,
  walkLocalTree,
  writeManifest,
} from "../tree-delta.js";
import {
  countGitPrepare,
  deltaClient,
  GZIP_FROM,
  INLINE_UPLOAD_MAX,
  keptHeads,
  knownFast,
  listRemote,
  manifestFile,
  touchMark,
  UPLOAD_SCRATCH,
} from "./delta.js";
import { listCommitTree, writeObjectsBeyond } from "./git-history.js";
import { shellQuote } from "./shell.js";

/** What the sandbox's listing prunes: our runtime directory, the repository, in-flight uploads (upstream's clear spares the first and the last). */
const PRUNE = [RUNTIME_DIR, ".git", UPLOAD_SCRATCH];
/** How long before the prepare began a host file must have last changed for its row to vouch for the host's copy (git's racy window, and a margin). */
const SETTLED_NS = 2_000_000_000n;
/** The git of every sandbox command: no end-of-line conversion, real links, no monitor, no hooks. */
const SANDBOX_GIT =
  "git -c core.autocrlf=false -c core.symlinks=true -c core.fsmonitor=false -c core.hooksPath=/dev/null";

/** A path the clone's archive leaves out: below `.paperclip-runtime` or an AppleDouble name (`._*`), at any depth. */
function leftOutOfClone(member) {
  return member.split("/").some((part) => part === RUNTIME_DIR || part.startsWith("._"));
}

/**
 * Whether a checkout here could write other bytes than the blobs, or other kinds of entry:
 * attributes (a `.gitattributes` in the tree, `info/attributes`, a global attributes file),
 * or an end-of-line or symlink setting other than the defaults. Then the sandbox's own
 * checkout is not the host clone's, and the full upload runs.
 */
async function convertsOnCheckout(localDir, tree) {
  if (tree.some((entry) => entry.path === ".gitattributes" || entry.path.endsWith("/.gitattributes"))) return true;
  const exists = (file) =>
    fs.stat(file).then(
      () => true,
      () => false,
    );
  const home = process.env.XDG_CONFIG_HOME || (process.env.HOME ? path.join(process.env.HOME, ".config") : null);
  const [attributes, global, settings] = await Promise.all([
    runLocalGit(localDir, ["rev-parse", "--git-path", "info/attributes"]).then(
      ({ stdout }) => exists(path.resolve(localDir, stdout.trim())),
      () => true,
    ),
    home ? exists(path.join(home, "git", "attributes")) : false,
    runLocalGit(localDir, ["config", "-z", "--get-regexp", "^core\\.(autocrlf|eol|symlinks|attributesfile)$"]).then(
      ({ stdout }) => stdout,
      (error) => (error?.code === 1 ? "" : "unreadable"),
    ),
  ]);
  if (attributes || global) return true;
  const harmless = /^core\.(autocrlf\nfalse|eol\nlf|symlinks\ntrue)$/i;
  return settings
    .split("\0")
    .filter(Boolean)
    .some((record) => !harmless.test(record));
}

/** A local member record (the walk's shape) from a bigint `lstat`. */
function recordOf(member, stat, link) {
  return {
    member,
    kind: stat.isDirectory() ? "d" : stat.isSymbolicLink() ? "l" : stat.isFile() ? "f" : "?",
    size: Number(stat.size),
    mode: Number(stat.mode) & 0o7777,
    mtimeNs: String(stat.mtimeNs),
    ctimeNs: String(stat.ctimeNs),
    ino: String(stat.ino),
    dev: String(stat.dev),
    link,
  };
}

/**
 * The working tree upstream's prepare leaves in the sandbox, as a map of member →
 * `{ kind: "f" | "l" | "d", mode, source: "head" | "overlay", id, size, local, link }`:
 * `H`'s checkout (`tree`, less what the clone's archive leaves out and the snapshot's
 * deleted paths) under the overlay (the snapshot's overlay paths the archive's excludes
 * keep, as the host holds them now). `mode` is the mode the sandbox gets: a checkout's
 * under `umask` for `H`'s files and every directory, the host file's as the sandbox's tar
 * extracts it for an overlay file. Resolves `{ target }`, or `{ conflict }` when the overlay
 * changes the kind of an entry of `H` or reaches into a deleted path or our runtime
 * directory (upstream's extraction order decides those: the full upload runs). With
 * `lenient`, a conflict leaves its path out of the target instead; with `records` (member →
 * a walk's record), the overlay's entries are taken from them instead of an `lstat` now,
 * and one the walk did not see is left out.
 */
export async function gitTarget({ localDir, tree, snapshot, exclude, umask, header, lenient = false, records = null }) {
  const target = new Map();
  // The paths a lenient target leaves out, each with everything below it (the shallowest
  // path a conflict involves).
  const conflicts = [];
  const conflict = (reason, at) => {
    conflicts.push(at);
    return lenient ? null : { conflict: reason };
  };
  const deleted = new Set(snapshot.deletedPaths);
  const dirMode = 0o777 & ~umask;
  for (const entry of tree) {
    if (leftOutOfClone(entry.path) || deleted.has(entry.path)) continue;
    if (entry.type === "tree" || entry.type === "commit") target.set(entry.path, { kind: "d", mode: dirMode });
    else if (entry.mode === "120000") target.set(entry.path, { kind: "l", source: "head", id: entry.id });
    else
      target.set(entry.path, {
        kind: "f",
        source: "head",
        id: entry.id,
        size: entry.size,
        mode: (entry.mode === "100755" ? 0o777 : 0o666) & ~umask,
      });
  }
  const overlayMode = (mode) => (header.uid === 0 ? mode : mode & ~header.umask & 0o7777);
  /** Makes the first `depth` components of `parts` directories of the target; the first that `H` holds otherwise, or that is deleted, when one is. */
  const directoriesAbove = (parts, depth) => {
    for (let at = 1; at <= depth; at += 1) {
      const ancestor = parts.slice(0, at).join("/");
      const held = target.get(ancestor);
      if (deleted.has(ancestor) || (held && held.kind !== "d")) return ancestor;
      if (!held) target.set(ancestor, { kind: "d", mode: dirMode });
    }
    return null;
  };
  for (const member of snapshot.overlayPaths) {
    if (shouldExcludePath(member, exclude)) continue;
    const apple = member.split("/").findIndex((part) => part.startsWith("._"));
    if (apple >= 0) {
      // Never sent (the archive leaves AppleDouble names out), but upstream's copy of the
      // overlay makes the directories above it, which its archive holds.
      if (apple === 0 || !(await fs.lstat(path.join(localDir, member)).catch(() => null))) continue;
      const blocked = directoriesAbove(member.split("/"), apple);
      const ended = blocked ? conflict("overlay-kind", blocked) : null;
      if (ended) return ended;
      continue;
    }
    let local;
    if (records) {
      // As the walk taken before the upload saw it (a path it did not see gets no row).
      local = records.get(member);
      if (!local) {
        conflicts.push(member);
        continue;
      }
    } else {
      const stat = await fs.lstat(path.join(localDir, member), { bigint: true }).catch(() => null);
      if (!stat) continue;
      local = recordOf(member, stat, stat.isSymbolicLink() ? await fs.readlink(path.join(localDir, member)) : null);
    }
    const parts = member.split("/");
    // An overlay file in our runtime directory lands where the listing does not look.
    if (parts.some((part) => part === "" || part === "." || part === "..") || parts[0] === RUNTIME_DIR) {
      const ended = conflict("overlay-path", parts[0]);
      if (ended) return ended;
      continue;
    }
    let blocked = directoriesAbove(parts, parts.length - 1);
    const held = target.get(member);
    if (!blocked && (local.kind === "d" ? held && held.kind !== "d" : held?.kind === "d")) blocked = member;
    if (!blocked && !["d", "l", "f"].includes(local.kind)) blocked = member;
    if (blocked) {
      const ended = conflict("overlay-kind", blocked);
      if (ended) return ended;
      continue;
    }
    if (local.kind === "d") target.set(member, { kind: "d", mode: dirMode });
    else if (local.kind === "l") target.set(member, { kind: "l", source: "overlay", link: local.link });
    else target.set(member, { kind: "f", source: "overlay", size: local.size, mode: overlayMode(local.mode), local });
  }
  for (const at of conflicts) {
    for (const member of target.keys()) if (member === at || member.startsWith(`${at}/`)) target.delete(member);
  }
  return { target };
}

/**
 * What turns the sandbox's tree (`listing`) into `target`: `remove` (entries to delete
 * first: the sandbox's extras, outermost only, and entries of another kind), `mkdir`
 * (directories to create), `checkout` (paths of `H` the sandbox checks out of its history),
 * `chmod` (mode → paths whose mode is not the target's), `send` (overlay members to pack).
 */
export function planGitDelta(target, listing, files) {
  const remove = new Set();
  const mkdir = [];
  const checkout = [];
  const chmod = new Map();
  const send = [];
  const setMode = (mode, member) => {
    if (!chmod.has(mode)) chmod.set(mode, []);
    chmod.get(mode).push(member);
  };
  for (const [member, wanted] of target) {
    let theirs = listing.get(member);
    if (theirs && theirs.kind !== wanted.kind) {
      remove.add(member);
      theirs = undefined;
    }
    if (wanted.kind === "d") {
      if (!theirs) mkdir.push(member);
      else if (theirs.mode !== wanted.mode) setMode(wanted.mode, member);
    } else if (wanted.source === "head") {
      const row = files[member];
      if (!(theirs && row?.[10] === wanted.id && remoteUnchanged(row, theirs))) checkout.push(member);
      // A file the checkout does not write (only its mode differs) is given the target's.
      else if (wanted.kind === "f" && theirs.mode !== wanted.mode) setMode(wanted.mode, member);
    } else if (wanted.kind === "l") {
      if (theirs?.link !== wanted.link) send.push(member);
    } else if (!(theirs && theirs.mode === wanted.mode && unchanged(files[member], wanted.local, theirs))) {
      send.push(member);
    }
  }
  // The sandbox's extras, parents before their children, each removed directory taking its
  // children along.
  const gone = [...remove].filter((member) => listing.get(member)?.kind === "d");
  for (const member of [...listing.keys()].filter((m) => !target.has(m)).sort()) {
    if (gone.some((dir) => member.startsWith(`${dir}/`))) continue;
    remove.add(member);
    if (listing.get(member).kind === "d") gone.push(member);
  }
  mkdir.sort();
  return { remove, mkdir, checkout, chmod, send };
}

/** A NUL-separated list of names. */
const nulList = (names) => Buffer.from(names.map((name) => `${name}\0`).join(""), "utf8");

/**
 * The payload of a delta and the script that applies it: sections laid end to end (the
 * objects pack, `packBytes` long; the lists; the overlay tar, the rest of the payload) read
 * back by offset, and the commands that take each (the body runs under `set -e`, from the
 * workspace directory, with `$P` naming the payload file). Resolves `{ lists, body }`, the
 * lists' bytes (what follows the pack) and the body. `git`: `{ head, branch, config, exclude }`.
 */
function payloadScript({ plan, packBytes, overlay, git, umask }) {
  const lists = [];
  const body = [];
  let offset = packBytes;
  const section = (bytes) => {
    const at = offset;
    lists.push(bytes);
    offset += bytes.length;
    return `sect ${at} ${bytes.length}`;
  };
  const head = shellQuote(git.head);
  body.push(
    `sect() { tail -c "+$(($1 + 1))" "$P" | head -c "$2"; }`,
    `G() { ${SANDBOX_GIT} "$@"; }`,
    `O=$(umask)`,
    // `.git` around its objects: the recorded clone's configuration and exclude file, the
    // hooks' samples, no other ref, reflog, alternate or operation in progress.
    "find .git -mindepth 1 -maxdepth 1 ! -name objects ! -name hooks ! -name description ! -name shallow -exec rm -rf -- {} +",
    "rm -f .git/objects/info/alternates .git/objects/info/http-alternates .git/objects/info/grafts",
    "if [ -d .git/hooks ]; then find .git/hooks -mindepth 1 ! -name '*.sample' -exec rm -rf -- {} +; fi",
    "mkdir -p .git/refs/heads .git/refs/tags .git/info",
    `printf %s ${shellQuote(Buffer.from(git.config, "utf8").toString("base64"))} | base64 -d > .git/config`,
    ...(git.exclude === null
      ? []
      : [
          `printf %s ${shellQuote(Buffer.from(git.exclude, "utf8").toString("base64"))} | base64 -d > .git/info/exclude`,
        ]),
    git.branch
      ? `printf 'ref: refs/heads/%s\\n' ${shellQuote(git.branch)} > .git/HEAD`
      : `printf '%s\\n' ${head} > .git/HEAD`,
    ...(packBytes > 0 ? [`sect 0 ${packBytes} | G index-pack --stdin >/dev/null`] : []),
    ...(git.branch ? [`G update-ref ${shellQuote(`refs/heads/${git.branch}`)} ${head}`] : []),
    // The boundary: HEAD, and the older boundaries the objects still hold (until git's own
    // gc prunes them, their commits lack parents here too).
    `{ cat .git/shallow 2>/dev/null || :; printf '%s\\n' ${head}; } | sort -u | G cat-file --batch-check='%(objectname) %(objecttype)' | sed -n 's/ commit$//p' > .git/shallow.pc`,
    "mv -f .git/shallow.pc .git/shallow",
    // The index of HEAD's tree, with no file times (as the clone's is to the sandbox: the
    // first status there reads every file).
    `G read-tree ${head}`,
  );
  const dotted = (names) => names.map((name) => `./${name}`);
  if (plan.remove.size > 0) body.push(`${section(nulList(dotted([...plan.remove])))} | xargs -0 -r rm -rf --`);
  body.push(`umask ${(umask & 0o777).toString(8).padStart(4, "0")}`);
  if (plan.mkdir.length > 0) body.push(`${section(nulList(dotted(plan.mkdir)))} | xargs -0 -r mkdir -p --`);
  if (plan.checkout.length > 0) body.push(`${section(nulList(plan.checkout))} | G checkout-index -f -z --stdin`);
  for (const [mode, names] of plan.chmod)
    body.push(`${section(nulList(dotted(names)))} | xargs -0 -r chmod ${mode.toString(8).padStart(4, "0")} --`);
  body.push(`umask "$O"`);
  if (overlay) body.push(`tail -c +${offset + 1} "$P" | tar -xf -`);
  return { lists: Buffer.concat(lists), body };
}

/** A tar of `only` (overlay members of `localDir`, no excludes) as a stream of chunks. */
function overlayArchive(localDir, only, signal) {
  return createTarballStreamFromDirectory({ localDir, only, signal });
}

/** A generous bound of the size of the overlay tar of `members` (headers, long names, padding, the end blocks). */
function overlayBound(target, members) {
  let bytes = 1024;
  for (const member of members) {
    const wanted = target.get(member);
    bytes += 3 * 512 + Math.ceil(Buffer.byteLength(member) / 512) * 512;
    if (wanted?.kind === "f") bytes += Math.ceil(wanted.size / 512) * 512;
  }
  return bytes;
}

/**
 * Which of `target`'s files of `H` the host holds with the same bytes, as the restore needs
 * to know (docs/sandbox.md): not an overlay or deleted path, a file of the blob's size in the
 * walk, and unchanged since before the prepare began (git's own view of it is that old).
 * Resolves member → the walk's record.
 */
function hostClaims(target, locals, snapshot, startedNs) {
  const overlay = new Set(snapshot.overlayPaths);
  const deleted = new Set(snapshot.deletedPaths);
  const claims = new Map();
  const before = startedNs - SETTLED_NS;
  for (const local of locals) {
    const wanted = target.get(local.member);
    if (wanted?.source !== "head" || wanted.kind !== "f" || local.kind !== "f" || local.size !== wanted.size) continue;
    if (overlay.has(local.member) || deleted.has(local.member)) continue;
    if (BigInt(local.ctimeNs) < before && BigInt(local.mtimeNs) < before) claims.set(local.member, local);
  }
  return claims;
}

/**
 * The manifest rows of `target`'s files and links of `H` and files of the overlay:
 * `[host size, mtime, ctime, inode, device, sandbox size, mtime, ctime, inode, mode, blob]`,
 * the host half from the overlay's record or the host's claim (else `null`s: the restore
 * then pulls the file), the blob id for `H`'s entries (else `null`). An entry written by
 * this prepare is taken from `after` (the listing of what it wrote), any other from `before`
 * unless `after` shows it moved since.
 */
function gitRows(target, claims, before, after, written) {
  const files = {};
  for (const [member, wanted] of target) {
    if (wanted.kind === "d" || (wanted.source === "overlay" && wanted.kind === "l")) continue;
    let theirs;
    if (written.has(member)) theirs = after?.get(member);
    else {
      theirs = before.get(member);
      const moved = after?.get(member);
      if (moved && theirs && (moved.ctime !== theirs.ctime || moved.ino !== theirs.ino)) continue;
    }
    if (!theirs || theirs.kind !== wanted.kind) continue;
    if (wanted.kind === "f" && theirs.size !== wanted.size) continue;
    const local = wanted.source === "overlay" ? wanted.local : claims.get(member);
    files[member] = [
      local?.size ?? null,
      local?.mtimeNs ?? null,
      local?.ctimeNs ?? null,
      local?.ino ?? null,
      local?.dev ?? null,
      theirs.size,
      theirs.mtime,
      theirs.ctime,
      theirs.ino,
      theirs.mode,
      wanted.source === "head" ? wanted.id : null,
    ];
  }
  return files;
}

/**
 * The listing of a git workspace's delta: which of `heads` (commits) the sandbox's
 * repository holds (`pcdelta-note has <id>` records), then its working tree (`.git`, our
 * runtime directory and in-flight uploads pruned); `pcdelta absent` without a repository.
 */
export function listGit(features, remoteDir, heads) {
  const q = shellQuote(remoteDir);
  return listRemote(
    features,
    [
      `if [ ! -d ${q}/.git ] || [ -L ${q}/.git ] || [ ! -d ${q}/.git/objects ] || [ -L ${q}/.git/objects ]; then echo 'pcdelta absent'; exit 0; fi`,
      `cd ${q}`,
      ...CLOCKED_HEADER,
      listingPipeline(
        "",
        PRUNE,
        `printf '%s\\n' ${heads.map(shellQuote).join(" ")} | ${SANDBOX_GIT} cat-file --batch-check='%(objectname) %(objecttype)' 2>/dev/null | sed -n 's/ commit$//p' | while read -r c; do printf 'pcdelta-note has %s\\0\\0' "$c"; done`,
      ),
    ].join("\n"),
  );
}

/**
 * Stages a git workspace's history and working tree for a prepare: by a delta when the
 * sandbox kept what the last prepare left (and the manifest says how), else by
 * `fullUpload()` (upstream's clear, clone and overlay uploads; resolves the clone's
 * `{ config, exclude }`), then records what the sandbox holds for the next prepare (unless
 * the setting is off).
 * - `client`, `spec`, `localDir`, `remoteDir`, `signal`, `ensureDirs`, `stageInline`,
 *   `mark`, `stageDelta`: as `stageSandboxTree`'s (delta.js); `stageDelta` takes
 *   `{ file, command }`, a host file to upload and the command that applies it.
 * - `snapshot`: the workspace's git snapshot; `exclude`: the overlay's excludes (the
 *   workspace archive's); `tempDir`: the prepare's private directory; `startedNs`: when the
 *   prepare began (process.hrtime is not a file time: `BigInt(Date.now()) * 1_000_000n`);
 *   `early`: what delta.js `startEarlyListing` started as the prepare began, or `null`.
 *
 * The steps, each a function below over one prepare's context (`openGitDelta`): whether the
 * sandbox can take a delta (`gitDeltaReady`), the delta (`applyGitDelta`: inline or by an
 * upload, then its rows), or the full upload and its rows (`fullGitUpload`, `recordFullGit`),
 * run by ../lifecycle/stage.js `stageDelta`.
 */
export async function stageSandboxGit(args) {
  const { features, reason } = deltaClient(args.client);
  if (!features) {
    countGitPrepare({ reason });
    await args.fullUpload();
    return { mode: "full", reason };
  }
  const run = await openGitDelta({ ...args, ensureDirs: args.ensureDirs ?? [], early: args.early ?? null }, features);
  return await stageDelta(GIT_DELTA, run, args.snapshot.repositories?.length ? "repositories" : null);
}

/**
 * One git prepare's context: its arguments, the client's `features` and link, and what is
 * asked of this host at once (the walk, HEAD's tree, the umask, whether the checkout converts
 * files, origin's URL) beside the manifest's location (`file`, `local`); `settle()` waits for
 * all of them.
 */
async function openGitDelta(args, features) {
  const { localDir, snapshot, exclude, tempDir, signal, spec, remoteDir } = args;
  const head = snapshot.headCommit;
  const walking = walkLocalTree(localDir, exclude, signal, { dotMembers: false });
  const listingTree = listCommitTree(localDir, head);
  listingTree.catch(() => undefined);
  const umaskRead = hostUmask(tempDir);
  umaskRead.catch(() => undefined);
  // What a delta checks of this host's repository, asked beside the sandbox's listing.
  const converting = listingTree.then((tree) => convertsOnCheckout(localDir, tree));
  converting.catch(() => undefined);
  const origin = originUrl(localDir);
  // The manifest and the listing, when the prepare asked for them as it began, else here.
  const asked = await args.early;
  const taken = asked?.kind === "git" ? asked : null;
  const { file, local } = taken ?? (await manifestFile(spec, remoteDir, localDir));
  return {
    ...args,
    features,
    link: features.link(),
    head,
    walking,
    listingTree,
    umaskRead,
    converting,
    origin,
    taken,
    file,
    local,
    q: shellQuote(remoteDir),
    settle: () =>
      Promise.all([walking, listingTree, umaskRead, converting, origin].map((p) => p.catch(() => undefined))),
  };
}

/** Upstream's full upload; resolves the clone's template (`{ config, exclude }`) that `recordFullGit` records. */
async function fullGitUpload(run) {
  // The walk vouches for the host's files only when taken before the clone and overlay read them.
  await run.walking.catch(() => undefined);
  return await run.fullUpload();
}

/** After a full upload: the sandbox's tree listed, the target computed, every row recorded. */
async function recordFullGit(run, template) {
  if (!template?.config) return;
  const { localDir, snapshot, exclude, remoteDir, head } = run;
  const [locals, tree, umask] = await Promise.all([run.walking.then(parseMembers), run.listingTree, run.umaskRead]);
  const listing = await listRemote(
    run.features,
    [`cd ${run.q}`, touchMark(run.mark), ...CLOCKED_HEADER, listingPipeline("", PRUNE)].join("\n"),
  ).catch(() => null);
  if (!listing?.entries) return;
  const header = headerOf(listing.header);
  const effective = header.uid === 0 ? umask : umask | header.umask;
  // What a conflict leaves to upstream's extraction order gets no row; the overlay's files
  // as the walk saw them before the upload read them.
  const records = new Map(locals.map((record) => [record.member, record]));
  const { target } = await gitTarget({
    localDir,
    tree,
    snapshot,
    exclude,
    umask: effective,
    header,
    lenient: true,
    records,
  });
  writeManifest(
    run.file,
    newManifest({
      kind: "git",
      localDir: run.local,
      remoteDir,
      ...listingFields(header),
      link: run.link.bytesPerSecond,
      git: {
        heads: keptHeads(head),
        branch: snapshot.branchName,
        origin: await run.origin,
        config: template.config,
        exclude: template.exclude ?? null,
      },
      files: gitRows(target, hostClaims(target, locals, snapshot, run.startedNs), listing.entries, null, new Set()),
    }),
  );
}

/** The sandbox git workspace delta's steps (../lifecycle/stage.js). */
const GIT_DELTA = {
  ready: gitDeltaReady,
  apply: applyGitDelta,
  upload: fullGitUpload,
  recordFull: recordFullGit,
  countFull: (reason) => countGitPrepare({ reason }),
  settle: (run) => run.settle(),
};

/**
 * Whether the sandbox can take a delta: the manifest, the sandbox's listing and the commits
 * it holds, this host's tree, and the target (gitTarget) and plan (planGitDelta). Resolves
 * `{ fallback }` (why the full upload runs) or `{ manifest, listing, bases, locals, header,
 * effective, target, plan }`. A listing that ends the call rejects.
 */
async function gitDeltaReady(run) {
  const { taken, features, remoteDir, head, localDir, snapshot, exclude, signal } = run;
  const manifest = taken ? taken.manifest : await readManifest(run.file);
  if (
    !manifest ||
    manifest.kind !== "git" ||
    manifest.remoteDir !== remoteDir ||
    manifest.localDir !== run.local ||
    typeof manifest.git?.config !== "string"
  )
    return { fallback: "no-manifest" };
  run.link.remember(manifest.link);
  const answer = await listingOrFallback(
    () => (taken?.listing ? taken.listing : listGit(features, remoteDir, keptHeads(head, manifest.git.heads))),
    endsTheCall,
  );
  if (answer.fallback) return answer;
  const { listing } = answer;
  const bases = listing.notes.filter((note) => note.startsWith("has ")).map((note) => note.slice(4));
  if (bases.length === 0) return { fallback: "no-history" };
  let tree;
  let locals;
  let umask;
  try {
    [tree, locals, umask] = await Promise.all([run.listingTree, run.walking.then(parseMembers), run.umaskRead]);
  } catch (error) {
    if (error?.name === "AbortError") throw error;
    return { fallback: "walk-failed" };
  }
  if (await run.converting) return { fallback: "git-attributes" };
  if ((await run.origin) !== (manifest.git.origin ?? null)) return { fallback: "origin-changed" };
  const header = headerOf(listing.header);
  const effective = header.uid === 0 ? umask : umask | header.umask;
  const { target, conflict } = await gitTarget({ localDir, tree, snapshot, exclude, umask: effective, header });
  if (!target) return { fallback: conflict };
  const plan = planGitDelta(target, listing.entries, manifest.files);
  if (signal?.aborted) throw abortError(signal);
  return { manifest, listing, bases, locals, header, effective, target, plan };
}

/**
 * The delta: the objects beyond what the sandbox holds, the lists and the overlay's changed
 * files, applied inline or through an upload (`sendInline`, `sendByUpload`), then the rows
 * of what the sandbox now holds. Falls back to the full upload when the pack or the apply
 * fails.
 */
async function applyGitDelta(run, ready, full) {
  const { localDir, head, snapshot, tempDir, q, ensureDirs } = run;
  const { manifest, bases, target, plan, effective } = ready;
  const packFile = path.join(tempDir, "git-delta.pack");
  let objects = 0;
  if (!bases.includes(head)) {
    try {
      objects = await writeObjectsBeyond(localDir, head, bases, packFile);
    } catch {
      // A recorded commit this host no longer has (its gc pruned it), or git failed.
      return await full("pack-failed");
    }
  }
  const packBytes = objects > 0 ? (await fs.stat(packFile)).size : 0;
  const git = { head, branch: snapshot.branchName, config: manifest.git.config, exclude: manifest.git.exclude ?? null };
  const overlay = plan.send.length > 0;
  const { lists, body } = payloadScript({ plan, packBytes, overlay, git, umask: effective });
  const written = new Set([...plan.checkout, ...plan.send, ...[...plan.chmod.values()].flat()]);
  const payload = {
    packFile,
    packBytes,
    lists,
    body,
    overlay,
    relist: sentListing(
      [...written].filter((member) => target.get(member)?.kind !== "d"),
      ready.header,
      PRUNE,
    ),
    prologue: [...ensureDirs.map((dir) => `mkdir -p ${shellQuote(dir)}`), `cd ${q}`],
  };
  const inline = packBytes + lists.length + (overlay ? overlayBound(target, plan.send) : 0) <= INLINE_UPLOAD_MAX;
  const post = inline ? await sendInline(run, ready, payload) : await sendByUpload(run, ready, payload);
  if (post === "failed") return await full("delta-failed");
  countGitPrepare({ objects, checkedOut: plan.checkout.length, sent: plan.send.length, removed: plan.remove.size });
  recordGitDelta(run, ready, post, written);
  return {
    mode: "delta",
    objects,
    checkedOut: plan.checkout.length,
    sent: plan.send.length,
    removed: plan.remove.size,
  };
}

/** One command: the payload on its stdin, applied, what it wrote listed. Resolves that listing, or `"failed"`. */
async function sendInline(run, { header, plan }, payload) {
  const { packFile, packBytes, lists, overlay, body, relist, prologue } = payload;
  const chunks = [packBytes > 0 ? await fs.readFile(packFile) : Buffer.alloc(0), lists];
  if (overlay) for await (const chunk of await overlayArchive(run.localDir, plan.send, run.signal)) chunks.push(chunk);
  const bytes = Buffer.concat(chunks);
  const gzip = header.compressor === "gzip" && bytes.length >= GZIP_FROM && !knownFast(run.link);
  const post = await run.stageInline({
    bytes: bytes.length,
    upload: async () => {
      const stdin = bytes.length > 0 ? (gzip ? gzipSync(bytes, { level: 1 }) : bytes).toString("base64") : "";
      const script = [
        "set -e",
        ...prologue,
        `P=$(mktemp)`,
        `trap 'rm -f "$P"' EXIT`,
        gzip ? `base64 -d | gzip -dc > "$P"` : `base64 -d > "$P"`,
        ...body,
        touchMark(run.mark),
        ...lightHeader(header.compressor),
        relist.script,
      ].join("\n");
      const listed = await listRemote(run.features, script, { dotted: relist.dotted }, stdin);
      return { listed, bytes: bytes.length };
    },
  });
  return post.header[1] !== "ok" ? "failed" : post;
}

/**
 * A large payload goes as a file through the client's upload; a post-upload command applies
 * it and leaves a mark when it did, the listing after it asks for the mark. Resolves that
 * listing (`null` when it could not be taken), or `"failed"`.
 */
async function sendByUpload(run, { header, plan }, payload) {
  const { packFile, packBytes, lists, overlay, body, relist, prologue } = payload;
  const payloadFile = path.join(run.tempDir, "git-delta.payload");
  await pipeline(async function* payloadChunks() {
    if (packBytes > 0) yield* createReadStream(packFile);
    yield lists;
    if (overlay) yield* await overlayArchive(run.localDir, plan.send, run.signal);
  }, createWriteStream(payloadFile));
  let applied;
  await run.stageDelta({
    file: payloadFile,
    command: (remoteFile) => {
      applied = `${remoteFile}.applied`;
      return [
        `rm -f ${shellQuote(applied)}`,
        `(`,
        "set -e",
        ...prologue,
        `P=${shellQuote(remoteFile)}`,
        ...body,
        `)`,
        `s=$?`,
        `rm -f ${shellQuote(remoteFile)}`,
        `if [ "$s" = 0 ]; then : > ${shellQuote(applied)}; fi`,
      ].join("\n");
    },
  });
  const post = await listRemote(
    run.features,
    [
      `if [ ! -f ${shellQuote(applied)} ]; then echo 'pcdelta failed'; exit 0; fi`,
      `rm -f ${shellQuote(applied)}`,
      `cd ${run.q}`,
      touchMark(run.mark),
      ...lightHeader(header.compressor),
      relist.script,
    ].join("\n"),
    { dotted: relist.dotted },
  ).catch(() => null);
  return post?.header[1] === "failed" ? "failed" : post;
}

/**
 * The manifest after a delta. Without the listing after it the manifest keeps its rows of
 * what this prepare did not write; the rest goes again next time.
 */
function recordGitDelta(run, { manifest, listing, bases, locals, header, target }, post, written) {
  writeManifest(
    run.file,
    newManifest({
      ...manifest,
      ...listingFields(header, manifest.remote),
      link: run.link.bytesPerSecond ?? manifest.link,
      git: { ...manifest.git, heads: keptHeads(run.head, bases), branch: run.snapshot.branchName },
      files: gitRows(
        target,
        hostClaims(target, locals, run.snapshot, run.startedNs),
        listing.entries,
        post?.entries ?? new Map(),
        written,
      ),
    }),
  );
}
