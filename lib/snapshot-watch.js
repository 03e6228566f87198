// Watched snapshots: `createSnapshotWatcher` (ours, exported from the package root) and the
// process-wide pool behind the `PAPERCLIP_NATIVE_WATCH_SNAPSHOTS=1` switch, through which
// `captureDirectorySnapshot` serves repeat captures of the same root and excludes.
//
// The native watcher keeps each directory's children current from inotify events and
// returns only the directories that changed; this module keeps each directory's children
// sorted in upstream's order (`localeCompare` in the process locale, as
// `./snapshot-transfer.js` sorts a cold capture) and rebuilds upstream's `Map` from them.
import path from "node:path";
import { checkOptionNames, invalidArgument, requireString, requireStringArray } from "./arguments.js";
import { codes, native, runCancellable } from "./native.js";

const KIND_DIR = 1;
const KIND_FILE = 2;
const KIND_SYMLINK = 3;
const WATCHER_OPTIONS = ["exclude", "maxWatches"];
const CAPTURE_OPTIONS = ["signal"];

/** `options` (absent: none) once its names are checked against `known`. */
function checkOptions(options, known, what) {
  if (options == null) return {};
  checkOptionNames(options, known, what);
  return options;
}

function closedError() {
  const error = new Error("the snapshot watcher is closed");
  error.code = codes.WATCHER_CLOSED;
  return error;
}

/** A watched tree; see `createSnapshotWatcher` in `snapshot-watch.d.ts`. */
class SnapshotWatcher {
  #handle;
  #root;
  #exclude;
  /** directory rel → { rels: string[], items: { kind, mode?, hash?, target? }[] }, sorted */
  #dirs = new Map();
  #queue = Promise.resolve();
  /** Captures accepted and not yet settled. */
  #pending = 0;
  #closed = false;
  #released = false;

  constructor(root, exclude, maxWatches) {
    this.#root = root;
    this.#exclude = exclude;
    this.#handle = native.snapshotWatchCreate(root, exclude, maxWatches);
  }

  /** The watched root (absolute). */
  get root() {
    return this.#root;
  }

  /** The snapshot of the tree now, equal to `captureDirectorySnapshot(root, { exclude })`. */
  capture(options) {
    const { signal } = checkOptions(options, CAPTURE_OPTIONS, "capture");
    if (this.#closed) return Promise.reject(closedError());
    // Captures run one at a time, in call order: each applies the changes since the last.
    // A capture accepted here runs to its end even if close() comes first: the native
    // watcher is released only once no accepted capture is left.
    this.#pending += 1;
    const run = this.#queue
      .then(() => this.#capture(signal))
      .finally(() => {
        this.#pending -= 1;
        if (this.#closed && this.#pending === 0) this.#release();
      });
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #capture(signal) {
    let transfer;
    try {
      transfer = await runCancellable(signal, (cancelId) => native.snapshotWatchCapture(this.#handle, cancelId));
    } catch (error) {
      // The native state was dropped with the failure: the next capture walks the whole tree.
      this.#dirs.clear();
      throw error;
    }
    this.#apply(transfer);
    return { exclude: [...this.#exclude], entries: this.#entries() };
  }

  #apply(t) {
    if (t.reset) this.#dirs.clear();
    if (t.removedCount > 0) for (const rel of t.removed.split("\u0000")) this.#dirs.delete(rel);
    if (t.dirCount === 0) return;
    const dirs = t.dirs.split("\u0000");
    const { kinds, modes } = t;
    const names = kinds.length > 0 ? t.names.split("\u0000") : [];
    const targets = t.targets.length > 0 || kinds.includes(KIND_SYMLINK) ? t.targets.split("\u0000") : [];
    const compare = new Intl.Collator().compare;
    let at = 0;
    let files = 0;
    let links = 0;
    for (let k = 0; k < t.dirCount; k += 1) {
      const rel = dirs[k];
      const end = at + t.childCounts[k];
      const items = [];
      for (let i = at; i < end; i += 1) {
        const kind = kinds[i];
        if (kind === KIND_FILE) {
          items.push({ name: names[i], kind, mode: modes[i], hash: t.hashes.slice(files * 64, files * 64 + 64) });
          files += 1;
        } else if (kind === KIND_SYMLINK) {
          items.push({ name: names[i], kind, target: targets[links] });
          links += 1;
        } else if (kind === KIND_DIR) {
          items.push({ name: names[i], kind });
        }
      }
      at = end;
      // Native children arrive in byte order (as Node's readdir returns them); a stable
      // sort by the collator breaks ties exactly as upstream's does.
      items.sort((a, b) => compare(a.name, b.name));
      const rels = items.map((item) => (rel ? `${rel}/${item.name}` : item.name));
      this.#dirs.set(rel, { rels, items });
    }
  }

  #entries() {
    const entries = new Map();
    const root = this.#dirs.get("");
    if (!root) return entries;
    // Pre-order: a stack of directories being listed and the next child of each.
    const dirs = [root];
    const next = [0];
    while (dirs.length > 0) {
      const top = dirs.length - 1;
      const dir = dirs[top];
      const i = next[top];
      if (i === dir.items.length) {
        dirs.pop();
        next.pop();
        continue;
      }
      next[top] = i + 1;
      const item = dir.items[i];
      const rel = dir.rels[i];
      if (item.kind === KIND_DIR) {
        entries.set(rel, { kind: "dir" });
        const sub = this.#dirs.get(rel);
        if (sub) {
          dirs.push(sub);
          next.push(0);
        }
      } else if (item.kind === KIND_FILE) {
        entries.set(rel, { kind: "file", mode: item.mode, hash: item.hash });
      } else {
        entries.set(rel, { kind: "symlink", target: item.target });
      }
    }
    return entries;
  }

  /** The watcher's counters as of its last capture; see `SnapshotWatcherStats`. */
  stats() {
    const s = native.snapshotWatchStats(this.#handle);
    return {
      root: this.#root,
      watching: s.watching && !this.#closed,
      reason: this.#closed ? "closed" : (s.reason ?? null),
      closed: this.#closed,
      captures: s.captures,
      events: s.events,
      fullWalks: s.fullWalks,
      subtreeRewalks: s.subtreeRewalks,
      dirsReread: s.dirsReread,
      filesHashed: s.filesHashed,
      hashesReused: s.hashesReused,
      watches: s.watches,
      entries: s.entries,
      directories: s.directories,
      fallbacks: {
        overflow: s.overflow,
        droppedWatch: s.droppedWatch,
        directoryReplaced: s.directoryReplaced,
        racyWindow: s.racyWindow,
        watchLimit: s.watchLimit,
        unsupportedPlatform: s.unsupportedPlatform,
        hardLinks: s.hardLinks,
        mountChanges: s.mountChanges,
        mountedFiles: s.mountedFiles,
      },
    };
  }

  /**
   * Later captures reject; the watches and the state are released now, or, when captures
   * accepted before this call are still queued or running, as soon as the last of them
   * resolved (they never fail for the close). Idempotent.
   */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#pending === 0) this.#release();
  }

  #release() {
    if (this.#released) return;
    this.#released = true;
    this.#dirs.clear();
    native.snapshotWatchClose(this.#handle);
  }
}

/**
 * A watcher of the tree under `dir` whose `capture()` returns what
 * `captureDirectorySnapshot(dir, { exclude })` would, re-reading only the directories that
 * changed since the previous capture (see the .d.ts).
 */
export function createSnapshotWatcher(dir, options) {
  const { exclude, maxWatches } = checkOptions(options, WATCHER_OPTIONS, "createSnapshotWatcher");
  requireString(dir, "dir");
  if (maxWatches !== undefined && !(Number.isInteger(maxWatches) && maxWatches >= 0 && maxWatches <= 0xffffffff)) {
    throw invalidArgument("maxWatches must be a non-negative integer");
  }
  if (exclude !== undefined) requireStringArray(exclude, "exclude");
  return new SnapshotWatcher(path.resolve(dir), [...new Set(exclude ?? [])], maxWatches);
}

// The process-wide pool of the environment switch: least recently used first.
const pool = new Map();

/** Whether `captureDirectorySnapshot` serves repeat captures from the pool (internal). */
export function watchedSnapshotsEnabled() {
  return process.env.PAPERCLIP_NATIVE_WATCH_SNAPSHOTS === "1";
}

function maxRoots() {
  const raw = process.env.PAPERCLIP_NATIVE_WATCH_MAX_ROOTS;
  const n = raw === undefined ? NaN : Number(raw);
  return Number.isInteger(n) && n > 0 ? n : 8;
}

/**
 * Captures `root` (absolute, normalized) with `exclude` (deduplicated) through the pool's
 * watcher for that pair, creating it (and closing the least recently used past the cap)
 * when there is none (internal; `captureDirectorySnapshot` calls it under the switch).
 */
export function captureWatchedSnapshot(root, exclude, signal) {
  const key = JSON.stringify([root, exclude]);
  let watcher = pool.get(key);
  if (watcher) {
    pool.delete(key);
  } else {
    watcher = createSnapshotWatcher(root, { exclude });
  }
  pool.set(key, watcher);
  for (const [oldest, old] of pool) {
    if (pool.size <= maxRoots()) break;
    pool.delete(oldest);
    old.close();
  }
  return watcher.capture({ signal });
}

/**
 * The pool of the `PAPERCLIP_NATIVE_WATCH_SNAPSHOTS=1` switch: one entry per watched root
 * and exclude list, least recently used first, each with its watcher's `stats()`.
 */
export function snapshotWatchPool() {
  return [...pool.values()].map((watcher) => watcher.stats());
}

/** Closes every watcher of the pool (they are created again on demand). */
export function closeSnapshotWatchPool() {
  for (const watcher of pool.values()) watcher.close();
  pool.clear();
}
