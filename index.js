// Public ESM entry of @paperclipai/adapter-utils-native: every drop-in export under its
// upstream name. Subpath modules (`/exclude-patterns`, …) export the same functions.
export * from "./lib/exclude-patterns.js";
export * from "./lib/sandbox-managed-runtime.js";
export * from "./lib/git-workspace-sync.js";
