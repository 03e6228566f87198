// Public types of @paperclipai/adapter-utils-native (the raw binding's types are internal).
export * from "./lib/exclude-patterns.js";
export * from "./lib/sandbox-managed-runtime.js";
export * from "./lib/git-workspace-sync.js";
