import type { DirectorySnapshot } from "./workspace-restore-merge.js";
/**
 * For a snapshot captured with `incremental: true` or `previous`, how many file hashes the
 * capture reused from the previous snapshot instead of reading the file (0 otherwise).
 */
export declare function snapshotReusedHashCount(snapshot: DirectorySnapshot): number;
