// Loads the raw napi binding (internal). The generated loader picks the prebuilt binary for
// this platform: a local `native/*.node` in a checkout, otherwise the per-platform package
// `@paperclipai/adapter-utils-native-<platform>`; its error names the platform it looked for.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** The raw binding. Internal: import the public modules instead. */
export const native = require("../native/binding.cjs");
