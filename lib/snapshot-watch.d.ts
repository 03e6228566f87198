import type { DirectorySnapshot } from "./workspace-restore-merge.js";

/** Options of {@link createSnapshotWatcher}. */
export interface SnapshotWatcherOptions {
  /** Upstream exclude entries, as `captureDirectorySnapshot` takes them. */
  exclude?: string[];
  /**
   * At most this many inotify watches (one per directory; default: no cap of ours, the
   * kernel's `fs.inotify.max_user_watches` still applies). Past it the watcher stops
   * watching and every capture walks the whole tree (`fallbacks.watchLimit` counts it).
   */
  maxWatches?: number;
}

/** What a watcher did, cumulatively, as of its last capture. */
export interface SnapshotWatcherStats {
  /** The watched root (absolute). */
  root: string;
  /** Whether inotify watches keep the state current (false: every capture walks the tree). */
  watching: boolean;
  /** Why not watching: `"watch-limit"`, `"unsupported-platform"` or `"closed"`; else null. */
  reason: string | null;
  closed: boolean;
  captures: number;
  /** inotify events read. */
  events: number;
  /** Captures that walked the whole tree: the first, and every fallback to a full walk. */
  fullWalks: number;
  /** Subtrees walked fresh below a re-read directory (new, moved in, replaced). */
  subtreeRewalks: number;
  /** Changed directories re-read (one level each). */
  dirsReread: number;
  /** Files read and hashed. */
  filesHashed: number;
  /** Hashes kept because the file's (dev, ino, size, mtime, ctime, mode) was unchanged. */
  hashesReused: number;
  /** Watches held now. */
  watches: number;
  /** Entries in the state (what `capture()` returns). */
  entries: number;
  /** Directories in the state, the root included. */
  directories: number;
  /** Each fallback, counted where it happened. */
  fallbacks: {
    /** The kernel's event queue overflowed: the whole tree was walked. */
    overflow: number;
    /** A directory's watch was dropped (deleted, moved away, unmounted): its subtree re-walked. */
    droppedWatch: number;
    /** Something else stood at a watched directory's path: its subtree (or the tree) re-walked. */
    directoryReplaced: number;
    /** Files re-hashed only because they were modified within 2 s before the previous capture. */
    racyWindow: number;
    /** The watch limit was reached (`ENOSPC`, `maxWatches`, or no inotify instance left): watching stopped. */
    watchLimit: number;
    /** No inotify on this platform: every capture walks the tree. */
    unsupportedPlatform: number;
    /**
     * Directory re-reads because the directory holds a file with several hard links (a
     * write through another of its names raises no event here): such directories are
     * re-read by every capture. A hard link made between two watched directories after
     * they were read is followed to its other name by the inode they share.
     */
    hardLinks: number;
    /**
     * Mount points under the root that were mounted, unmounted or replaced (mounts raise no
     * inotify event; the mount table is polled by each capture): the directory holding each
     * was re-read and the subtree now at that path walked fresh.
     */
    mountChanges: number;
    /**
     * Directory re-reads because the directory holds a file that is a mount point (a
     * bind-mounted file can be written through its source without an event here).
     */
    mountedFiles: number;
  };
}

/** A watched tree. */
export interface SnapshotWatcher {
  /** The watched root (absolute). */
  readonly root: string;
  /**
   * The snapshot of the tree now: exactly what `captureDirectorySnapshot(root, { exclude })`
   * returns (entries in upstream's order, the same serialized form and digest). The first
   * capture walks the whole tree; later ones re-read only the directories that changed.
   * Captures run one at a time in call order. `signal` aborts with an `AbortError`; after
   * an abort or a failure the next capture walks the whole tree again. Rejects with
   * `ERR_PAPERCLIP_NATIVE_WATCHER_CLOSED` when called after `close()`; a capture called
   * before `close()` completes.
   */
  capture(options?: { signal?: AbortSignal }): Promise<DirectorySnapshot>;
  /** The counters as of the last capture. */
  stats(): SnapshotWatcherStats;
  /**
   * Later captures reject. Every watch and the state are released now, or, while captures
   * called before `close()` are queued or running, once the last of them has resolved
   * (none of them fails because of the close). Idempotent.
   */
  close(): void;
}

/**
 * Creates a watcher of the tree under `dir` (a relative `dir` is resolved against the
 * working directory now). Nothing is read until the first `capture()`. Linux uses inotify
 * (one watch per directory, no thread: events are read by each capture); elsewhere every
 * capture is a full walk (`fallbacks.unsupportedPlatform`). Nothing keeps the process
 * alive, closed or not.
 *
 * @example
 * const watcher = createSnapshotWatcher(workspace, { exclude: [".git", "node_modules"] });
 * const before = await watcher.capture();
 * // … the agent runs …
 * const after = await watcher.capture(); // re-reads only what changed
 * watcher.close();
 */
export declare function createSnapshotWatcher(dir: string, options?: SnapshotWatcherOptions): SnapshotWatcher;

/**
 * The watchers of the `PAPERCLIP_NATIVE_WATCH_SNAPSHOTS=1` switch (through which
 * `captureDirectorySnapshot` serves repeat captures of the same absolute root and
 * excludes), least recently used first, each as its `stats()`.
 */
export declare function snapshotWatchPool(): SnapshotWatcherStats[];

/** Closes every watcher of the switch's pool (captures create them again on demand). */
export declare function closeSnapshotWatchPool(): void;
