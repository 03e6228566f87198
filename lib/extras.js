// Our additions that have no upstream twin (exported from the package root only).
import { statCaches } from "./snapshot-cache.js";

/**
 * For a snapshot captured with `incremental: true` or `previous`, how many file hashes the
 * capture reused from the previous snapshot instead of reading the file (0 otherwise).
 */
export function snapshotReusedHashCount(snapshot) {
  return statCaches.get(snapshot)?.reusedHashes ?? 0;
}
