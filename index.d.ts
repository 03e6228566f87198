// Public types of @paperclipai/adapter-utils-native (the raw binding's types are internal).
export * from "./lib/exclude-patterns.js";
export * from "./lib/sandbox-managed-runtime.js";
export * from "./lib/git-workspace-sync.js";
export * from "./lib/workspace-restore-merge.js";
export * from "./lib/acpx-engine/execute.js";
export * from "./lib/runtime-progress.js";
export * from "./lib/ssh.js";
export * from "./lib/command-managed-runtime.js";
export * from "./lib/extras.js";
export * from "./lib/tar-stream.js";
export * from "./lib/remote-managed-runtime.js";
export { createSnapshotWatcher, snapshotWatchPool, closeSnapshotWatchPool } from "./lib/snapshot-watch.js";
export type { SnapshotWatcher, SnapshotWatcherOptions, SnapshotWatcherStats } from "./lib/snapshot-watch.js";
export { nativeActivation } from "./lib/activation/state.js";
