import type { DirectorySnapshot } from "./workspace-restore-merge.js";
/**
 * For a snapshot captured with `incremental: true` or `previous`, how many file hashes the
 * capture reused from the previous snapshot instead of reading the file (0 otherwise).
 */
export declare function snapshotReusedHashCount(snapshot: DirectorySnapshot): number;
/** The fixed part of an archive transfer deadline: 60 000 ms. */
export declare const ARCHIVE_TRANSFER_BASE_MS: number;
/** The size-scaled part of an archive transfer deadline: 1 000 ms per MiB. */
export declare const ARCHIVE_TRANSFER_MS_PER_MIB: number;
/** The cap of an archive transfer deadline: 1 800 000 ms (30 minutes). */
export declare const ARCHIVE_TRANSFER_MAX_MS: number;
/** Up to this deadline (300 000 ms, five minutes) a transfer keeps the provider's timeout. */
export declare const ARCHIVE_TRANSFER_SMALL_MS: number;
/**
 * The deadline in ms for transferring an archive of `archiveBytes` bytes (the design notes'
 * rule; upstream 2026.916.1 has no size-scaled timeout): `60 000 + 1 000 × archiveBytes / MiB`,
 * rounded up, capped at 30 minutes. When that figure is at most five minutes and
 * `providerTimeoutMs` is given, `providerTimeoutMs` is returned unchanged (a small archive
 * keeps the provider's timeout); otherwise the figure.
 *
 * Throws a `RangeError` with code `ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT` for a negative or
 * non-finite size or a non-positive provider timeout.
 *
 * @example archiveTransferTimeoutMs({ archiveBytes: 1024 ** 3, providerTimeoutMs: 300_000 }) // 1 084 000 (18 min 4 s)
 */
export declare function archiveTransferTimeoutMs(input: {
  archiveBytes: number;
  providerTimeoutMs?: number | null;
}): number;
/** The counters of this process's SSH session pool (see {@link sshPoolStats}). */
export interface SshPoolStats {
  /** Sessions opened (connected, host key verified, authenticated). */
  opened: number;
  /** Calls served by an idle pooled session instead of a new one. */
  reused: number;
  /** Sessions put back into the pool after a clean call. */
  returned: number;
  /** Sessions disconnected after an error, a cancellation or a timeout. */
  dropped: number;
  /** Sessions closed after a clean call without being kept (reuse off with `PAPERCLIP_NATIVE_SSH_REUSE=0`, pool full). */
  closed: number;
  /** Idle sessions closed after 10 s unused. */
  expired: number;
  /** Idle sessions closed because they stopped answering keepalives (a link that died, a wedged server; docs/ssh.md). */
  dead: number;
  /** Pooled sessions found closed by the server at checkout and replaced by a new connection. */
  retried: number;
  /** Calls served by a session opened ahead of them (the SSH prepare and restore start their first command's login while they do their local work); counted in `opened`, not in `reused`. */
  openedAhead: number;
  /** Idle sessions held now. */
  idle: number;
  /** Commands run on a warm channel: their remote shell started while the previous command ran (`PAPERCLIP_NATIVE_SSH_WARM=0` turns that off). */
  warmUsed: number;
  /** Warm channels dropped unused because the login printed something of its own or could not start one (the command ran on a channel of its own). */
  warmDropped: number;
}
/**
 * The counters of this process's SSH session pool: every SSH call (`runSshCommand`, the
 * transfers, the workspace lifecycle) leases an authenticated session, and a call that ends
 * cleanly leaves it for the next call to the same host, port and user with the same key and
 * known hosts. Diagnostics: counts since the process started.
 */
export declare function sshPoolStats(): SshPoolStats;
/** What the SSH lane's delta uploads and restores did in this process (docs "SSH", delta uploads). */
export interface SshDeltaStats {
  /** Workspace uploads sent as deltas. */
  delta: number;
  /** Full uploads (upstream's clear and upload). */
  full: number;
  /** Managed run directories started from the previous restored run's. */
  seeded: number;
  /** Entries the delta uploads sent (files, links, and directories for their mode and mtime). */
  sent: number;
  /** Remote entries the delta uploads removed (outermost only). */
  removed: number;
  /** Full uploads by reason: `no-manifest`, `remote-absent`, `remote-cannot-answer`, `nested-git`, `off`. */
  fallbacks: Record<string, number>;
  /** The same for baseline restores (reasons: `no-manifest`, `excludes`, `remote-cannot-answer`, `too-many-changes`). */
  restore: { delta: number; full: number; fallbacks: Record<string, number> };
  /**
   * Git history moved by the prepare (`import`) and the restore (`export`): bundles of only
   * the commits the other side lacked (`delta`; for an export, what was asked of the remote),
   * of the whole history (`full`), and deltas refused (the remote lacked a commit, or this
   * host a bundle's prerequisite), then moved whole (`fallback`).
   */
  history: {
    import: { delta: number; full: number; fallback: number };
    export: { delta: number; full: number; fallback: number };
  };
}
/** What the SSH lane's delta uploads and restores did in this process. */
export declare function sshDeltaStats(): SshDeltaStats;
/** What the sandbox lane's delta uploads and restores did in this process (docs "Sandboxes", delta uploads and restores). */
export interface SandboxDeltaStats {
  /** Workspace uploads sent as deltas. */
  delta: number;
  /** Full uploads (upstream's clear and whole archive). */
  full: number;
  /** Entries the delta uploads sent (files, links, and directories for their mode and mtime). */
  sent: number;
  /** Sandbox entries the delta uploads removed (outermost only). */
  removed: number;
  /** Files the delta uploads only gave the host's time: the sandbox held their bytes (a restore merged them). */
  touched: number;
  /**
   * Full uploads by reason: `no-manifest`, `remote-absent`, `remote-cannot-answer`,
   * `walk-failed`, `too-many-removals`, `preserved-pattern` (a spared top-level name that is
   * a pattern), `client` (a provider's own `syncIn`), `delta-failed` (a one-command delta
   * whose answer did not say it extracted), `touch-failed` (a file's time not set as asked), `off`.
   */
  fallbacks: Record<string, number>;
  /** The prepares of git workspaces: by delta (the objects and files the sandbox lacks) or by upstream's clone and overlay. */
  git: {
    /** Prepares done as deltas. */
    delta: number;
    /** Full uploads (upstream's clear, depth-1 clone and overlay). */
    full: number;
    /** Git objects the deltas sent (commits, trees and blobs the sandbox's history lacked). */
    objects: number;
    /** Files of HEAD the deltas had the sandbox check out of its own history (no bytes sent). */
    checkedOut: number;
    /** Overlay files and links the deltas sent. */
    sent: number;
    /** Sandbox entries the deltas removed (outermost only). */
    removed: number;
    /**
     * Full uploads by reason: `no-manifest`, `remote-absent` (no repository there),
     * `remote-cannot-answer`, `no-history` (the sandbox holds none of the recorded commits),
     * `walk-failed`, `git-attributes` (attributes or settings that make a checkout other
     * bytes than the blobs), `origin-changed`, `overlay-kind` and `overlay-path` (an overlay
     * that changes an entry's kind, or writes into the runtime directory), `repositories`
     * (project repositories inside), `pack-failed` (this host could not pack the objects:
     * a recorded commit it no longer has), `delta-failed` (the command that applies it did
     * not say it did), `client`, `off`.
     */
    fallbacks: Record<string, number>;
  };
  /** The restores: by delta (only what the run changed) or by upstream's full pull. */
  restore: {
    /** Restores done as deltas. */
    delta: number;
    /** Full pulls. */
    full: number;
    /** Entries the delta restores pulled (members, and directories pulled whole). */
    pulled: number;
    /** Pulled files recorded as the host holds them after the merge (the next prepare does not send them again). */
    recorded: number;
    /** Delta restores whose members came back with the restore's listing, without a pull command. */
    inline: number;
    /**
     * Full pulls by reason: `no-manifest`, `excludes` (an exclude that is not a plain name
     * or path), `remote-cannot-answer`, `walk-failed`, `head-unreadable` (git could not list
     * the tree of a git workspace's commit), `too-many-changes`, `pull-failed`,
     * `repositories` (a workspace with project repositories), `client` (a provider's own
     * `syncOut`, or a client whose transfers are not ours), `off`.
     */
    fallbacks: Record<string, number>;
  };
}
/** What the sandbox lane's delta uploads and restores did in this process. */
export declare function sandboxDeltaStats(): SandboxDeltaStats;
/** Closes every idle pooled SSH session now (they also close by themselves after 10 s idle). */
export declare function closeIdleSshSessions(): void;
