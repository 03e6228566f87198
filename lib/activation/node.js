// Installs the activation in this Node process (the `--import` entry and the vitest
// plugin's worker setup call it). Never throws: every reason not to activate prints one
// line to stderr and leaves upstream untouched.
import { existsSync, readFileSync } from "node:fs";
import module from "node:module";
import path from "node:path";
import { ACTIVATION_ENV, UPSTREAM_PACKAGE, VERIFIED_UPSTREAM_VERSIONS, compositionPlan, isVerifiedUpstreamVersion } from "./coverage.js";
import { activationStore, recordDisabled, recordMechanism, recordSkipped } from "./state.js";

const PREFIX = "@paperclipai/adapter-utils-native";

function say(line) {
  process.stderr.write(`${PREFIX}: ${line}\n`);
}

/** The upstream package a program started in `dir` would import, or null. */
export function findInstalledUpstream(dir = process.cwd()) {
  for (let current = path.resolve(dir); ; current = path.dirname(current)) {
    const file = path.join(current, "node_modules", ...UPSTREAM_PACKAGE.split("/"), "package.json");
    if (existsSync(file)) {
      try {
        return { root: path.dirname(file), version: JSON.parse(readFileSync(file, "utf8")).version };
      } catch {
        return { root: path.dirname(file), version: null };
      }
    }
    if (path.dirname(current) === current) return null;
  }
}

/** Why the native binary cannot load here, or null when it loads. */
export async function nativeUnavailableReason() {
  const { nativeLoadError } = await import("../native.js");
  return nativeLoadError ? nativeLoadError.message : null;
}

/**
 * Installs the Node module hook once per process (later calls return the first result).
 * Resolves to `{ active, reason }`.
 */
export async function activate({ mechanism = "node-hooks" } = {}) {
  const store = activationStore();
  if (store.installing) return store.installing;
  store.installing = (async () => {
    const off = (reason, line = reason) => {
      recordDisabled(reason);
      say(line);
      return { active: false, reason };
    };
    try {
      if (process.env[ACTIVATION_ENV] === "0") {
        return off(`${ACTIVATION_ENV}=0`, `${ACTIVATION_ENV}=0: native paths off, @paperclipai/adapter-utils unchanged`);
      }
      if (typeof module.registerHooks !== "function" && typeof module.register !== "function") {
        return off(`Node ${process.versions.node} has no module hooks (20.6+ needed)`, `Node ${process.versions.node} has no module hooks (20.6+ needed); @paperclipai/adapter-utils unchanged`);
      }
      const missing = await nativeUnavailableReason();
      if (missing) return off(`native binary unavailable: ${missing}`, `native binary unavailable (${missing}); @paperclipai/adapter-utils unchanged`);
      const installed = findInstalledUpstream();
      if (installed && !isVerifiedUpstreamVersion(installed.version)) {
        recordSkipped(installed.root, installed.version, "unverified version");
        return off(
          `@paperclipai/adapter-utils ${installed.version} is not a verified version`,
          `@paperclipai/adapter-utils ${installed.version} is not a verified version (${VERIFIED_UPSTREAM_VERSIONS.join(", ")}); left unchanged`,
        );
      }
      const plan = (await compositionPlan()).map(({ module: name, file, url, names }) => ({ module: name, file, url, names }));
      const data = { plan, recordUrl: new URL("./state.js", import.meta.url).href };
      if (typeof module.registerHooks === "function") {
        // Synchronous, in-thread hooks (Node 22.15+, 23.5+): no loader thread to start.
        const hooks = await import("./hooks.js");
        hooks.initialize(data);
        module.registerHooks({ load: hooks.load });
      } else {
        module.register(new URL("./hooks.js", import.meta.url), { data });
      }
      recordMechanism(mechanism);
      return { active: true, reason: null };
    } catch (error) {
      return off(`activation failed: ${error?.message ?? error}`, `activation failed (${String(error?.message ?? error).split("\n")[0]}); @paperclipai/adapter-utils unchanged`);
    }
  })();
  return store.installing;
}
