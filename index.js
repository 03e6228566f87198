// Public ESM entry of @paperclipai/adapter-utils-native: every drop-in export under its
// upstream name. Subpath modules (`/exclude-patterns`, …) export the same functions.
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
export { nativeActivation } from "./lib/activation/state.js";
