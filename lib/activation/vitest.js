// `adapterUtilsNative()`: the activation inside vitest's module graph. For the id of an
// upstream module we cover (the published `dist/<module>.js`, or a workspace package's
// `src/<module>.ts`), in a verified upstream version, `load` serves the composition:
// upstream's original (the same file, id plus `?paperclip-native-original`) with our names
// overriding. The module keeps its id, so `vi.mock("@paperclipai/adapter-utils/ssh")`,
// `vi.mock("./ssh.js")` and `vi.importActual` work as before. Modules vitest leaves to Node
// (externalized dependencies) are composed by the Node hook, installed in each worker by a
// setup file the plugin adds. Fail-safe as the `--import` hook: when it is turned off or the
// native binary does not load, the plugin does nothing and prints one line to stderr.
import { writeSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  ACTIVATION_ENV,
  BOUND_QUERY,
  ORIGINAL_QUERY,
  VERIFIED_UPSTREAM_VERSIONS,
  boundSource,
  compositionPlan,
  isBoundModule,
  isVerifiedUpstreamVersion,
  shimSource,
  upstreamModuleOf,
} from "./coverage.js";

const PREFIX = "@paperclipai/adapter-utils-native";
const statePath = fileURLToPath(new URL("./state.js", import.meta.url));
const setupPath = fileURLToPath(new URL("./vitest-setup.js", import.meta.url));

/**
 * The Vite plugin for a `vitest.config.ts`: `plugins: [adapterUtilsNative()]`. Options:
 * `externalized` (default true) also composes upstream modules vitest leaves to Node, through
 * a setup file that installs the Node hook in each worker.
 */
export function adapterUtilsNative(options = {}) {
  const externalized = options.externalized !== false;
  let plan = null;
  let off = null;
  const warned = new Set();
  const ready = (async () => {
    if (process.env[ACTIVATION_ENV] === "0") {
      off = `${ACTIVATION_ENV}=0: native paths off, @paperclipai/adapter-utils unchanged`;
      return;
    }
    const { nativeLoadError } = await import("../native.js");
    if (nativeLoadError) {
      off = `native binary unavailable (${nativeLoadError.message}); @paperclipai/adapter-utils unchanged`;
      return;
    }
    try {
      plan = new Map((await compositionPlan()).map((entry) => [entry.module, entry]));
    } catch (error) {
      off = `activation failed (${String(error?.message ?? error).split("\n")[0]}); @paperclipai/adapter-utils unchanged`;
    }
  })();
  return {
    name: "paperclip-adapter-utils-native",
    enforce: "pre",
    async config(config) {
      await ready;
      if (off) {
        writeSync(2, `${PREFIX}: ${off}\n`);
        return undefined;
      }
      if (!externalized) return undefined;
      // First among the setup files, so modules the project's own setup imports are composed too.
      config.test ??= {};
      const existing = config.test.setupFiles === undefined ? [] : [config.test.setupFiles].flat();
      config.test.setupFiles = [setupPath, ...existing.filter((file) => file !== setupPath)];
      return undefined;
    },
    async load(id) {
      await ready;
      if (!plan) return null;
      const at = id.indexOf("?");
      const file = at < 0 ? id : id.slice(0, at);
      const query = at < 0 ? "" : id.slice(at + 1);
      if (query && query !== BOUND_QUERY) return null;
      const info = upstreamModuleOf(file);
      if (!info) return null;
      const entry = plan.get(info.module);
      if (!entry) return null;
      if (!isVerifiedUpstreamVersion(info.version)) {
        if (!warned.has(info.root)) {
          warned.add(info.root);
          writeSync(2, `${PREFIX}: @paperclipai/adapter-utils ${info.version} is not a verified version (${VERIFIED_UPSTREAM_VERSIONS.join(", ")}); left unchanged\n`);
        }
        return null;
      }
      if (query === BOUND_QUERY) return boundSource(entry, new Set(plan.keys()));
      return shimSource({
        originalSpecifier: `${file}?${ORIGINAL_QUERY}`,
        ours: isBoundModule(info.module) ? `${file}?${BOUND_QUERY}` : entry.file,
        names: entry.names,
        module: info.module,
        upstreamRoot: info.root,
        version: info.version,
        recordUrl: statePath,
        mechanism: "vitest-plugin",
      });
    },
  };
}

export default adapterUtilsNative;
