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
import { admit, UPSTREAM_OPT_IN_ENV, WORKSPACE_OPT_IN } from "./admission.js";
import {
  ACTIVATION_ENV,
  BOUND_QUERY,
  ORIGINAL_QUERY,
  boundSource,
  compositionPlan,
  isBoundModule,
  shimSource,
  upstreamModuleOf,
} from "./coverage.js";

const PREFIX = "@paperclipai/adapter-utils-native";
const statePath = fileURLToPath(new URL("./state.js", import.meta.url));
const setupPath = fileURLToPath(new URL("./vitest-setup.js", import.meta.url));
const libDir = fileURLToPath(new URL("..", import.meta.url));

/** A pattern of the files of our lib/ directory, for vitest's `server.deps.inline`. */
const OUR_MODULES = new RegExp(`^${libDir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/[\\/]$/, "")}[\\/]`);

/**
 * The Vite plugin for a `vitest.config.ts`: `plugins: [adapterUtilsNative()]`. Options:
 * `externalized` (default true) also composes upstream modules vitest leaves to Node, through
 * a setup file that installs the Node hook in each worker; `upstream: "workspace"` opts in to
 * an unpublished upstream workspace package (its version unverified): each module identical to
 * a verified upstream's (lib/activation/admission.js) is composed, the others stay upstream's,
 * and one line says which and why. Our drop-in modules are processed by vitest (added to `server.deps.inline`), so
 * a suite's `vi.mock("node:fs")` and spies reach their calls as they reach upstream's.
 */
export function adapterUtilsNative(options = {}) {
  const externalized = options.externalized !== false;
  const optIn = (options.upstream ?? process.env[UPSTREAM_OPT_IN_ENV]) === WORKSPACE_OPT_IN ? WORKSPACE_OPT_IN : null;
  let plan = null;
  let off = null;
  const decisions = new Map();
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
      plan = await compositionPlan();
    } catch (error) {
      off = `activation failed (${String(error?.message ?? error).split("\n")[0]}); @paperclipai/adapter-utils unchanged`;
    }
  })();
  /** The admission of one upstream package, decided and said once. */
  const decide = (info) => {
    let decision = decisions.get(info.root);
    if (!decision) {
      decision = admit({ root: info.root, version: info.version, kind: info.kind, plan, optIn });
      decisions.set(info.root, decision);
      if (decision.line) writeSync(2, `${PREFIX}: ${decision.line}\n`);
    }
    return decision;
  };
  return {
    name: "paperclip-adapter-utils-native",
    enforce: "pre",
    async config(config) {
      await ready;
      if (off) {
        writeSync(2, `${PREFIX}: ${off}\n`);
        return undefined;
      }
      config.test ??= {};
      // Our drop-ins run in vitest's module graph, so mocks of node:fs (and of any module they
      // import) apply to them.
      config.test.server ??= {};
      config.test.server.deps ??= {};
      const inline = config.test.server.deps.inline;
      if (inline !== true) config.test.server.deps.inline = [...(inline ? [inline].flat() : []), OUR_MODULES];
      if (optIn) {
        // The workers' Node hook (externalized modules) takes the same opt-in.
        config.test.env = { ...config.test.env, [UPSTREAM_OPT_IN_ENV]: optIn };
      }
      if (!externalized) return undefined;
      // First among the setup files, so modules the project's own setup imports are composed too.
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
      const entry = plan.find((candidate) => candidate.module === info.module);
      if (!entry) return null;
      const decision = decide(info);
      const names = decision.modules.get(info.module);
      if (!names) return null;
      if (query === BOUND_QUERY) return boundSource(entry, new Set(plan.map((candidate) => candidate.module)));
      return shimSource({
        originalSpecifier: `${file}?${ORIGINAL_QUERY}`,
        ours: isBoundModule(info.module) ? `${file}?${BOUND_QUERY}` : entry.file,
        names,
        module: info.module,
        upstreamRoot: info.root,
        version: info.version,
        recordUrl: statePath,
        mechanism: "vitest-plugin",
        refused: decision.refused,
      });
    },
  };
}

export default adapterUtilsNative;
