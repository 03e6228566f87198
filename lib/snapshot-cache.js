// Internal: the stat data of snapshots captured incrementally, kept beside the snapshot
// objects (never inside their upstream-shaped entries), keyed weakly so it dies with them.

/** snapshot → { cache: SnapshotStatCache, reusedHashes: number } */
export const statCaches = new WeakMap();
