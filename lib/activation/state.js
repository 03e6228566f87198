// The activation's diagnostics: what is served natively in this process. The store lives on
// `globalThis` so every copy of this module (Node's and vitest's module graphs) shares it.
import { findInstalledUpstream, isVerifiedUpstreamVersion, VERIFIED_UPSTREAM_VERSIONS } from "./coverage.js";
import { writeServedRecord } from "./served-record.js";

const { createRequire } = process.getBuiltinModule("node:module");

const KEY = Symbol.for("paperclipai.adapterUtilsNative.activation");

/** The process-wide store (internal). */
export function activationStore() {
  if (!globalThis[KEY]) {
    globalThis[KEY] = { mechanism: null, reason: null, modules: new Map(), skipped: new Map(), refused: new Map() };
  }
  return globalThis[KEY];
}

/** Records that a mechanism (`"node-hooks"`, `"vitest-plugin"`) was installed (internal). */
export function recordMechanism(mechanism) {
  const store = activationStore();
  if ((store.mechanism ?? "").split("+").includes(mechanism)) return;
  store.mechanism = store.mechanism ? `${store.mechanism}+${mechanism}` : mechanism;
}

/** Records why the activation stayed off (internal). */
export function recordDisabled(reason) {
  activationStore().reason = reason;
}

/** Records an upstream package left untouched, with the reason (internal). */
export function recordSkipped(root, version, reason) {
  activationStore().skipped.set(root, { root, version, reason });
}

/**
 * Records the modules of an upstream package that the admission left upstream's (internal):
 * `refused` maps each module to why (lib/activation/admission.js).
 */
export function recordRefused(root, version, refused) {
  if (refused && Object.keys(refused).length > 0) activationStore().refused.set(root, { ...refused });
}

/**
 * Called by every composed module when it is evaluated (internal): records the upstream
 * module and the names it serves natively (and, from the vitest plugin, the package's modules
 * left upstream's). The first one served leaves the process's record for `paperclip-sync
 * doctor --pid` (lib/activation/served-record.js).
 */
export function recordComposition({ module, upstreamRoot, version, names, mechanism, refused }) {
  const store = activationStore();
  recordRefused(upstreamRoot, version, refused);
  if (mechanism && !(store.mechanism ?? "").split("+").includes(mechanism)) recordMechanism(mechanism);
  store.modules.set(`${upstreamRoot}\u0000${module}`, { module, upstreamRoot, version, names });
  if (!store.recorded && store.mechanism && !store.reason) {
    store.recorded = true;
    writeServedRecord({ mechanism: store.mechanism, module });
  }
}

/**
 * What the activation does in this process, for an operator checking a running host:
 * `active` (upstream modules are served natively here: a mechanism is installed, nothing
 * turned it off, and at least one covered upstream module was composed), `mechanism`
 * (`"node-hooks"` for `--import @paperclipai/adapter-utils-native/register`,
 * `"vitest-plugin"`, or null), `reason` (why it is not active, when it is not),
 * `verifiedVersions`, and `upstream`: per installed upstream package loaded so far, its `root`,
 * `version`, `modules` (upstream module → the names served natively) and `refused` (upstream
 * module → why it was left upstream's: the workspace opt-in admits a module only where it is
 * identical to a verified upstream's), plus `skipped` (packages left untouched, with the reason,
 * and `refused` when the reason is that every module was). Modules appear once they are loaded.
 */
export function nativeActivation() {
  const store = activationStore();
  const byRoot = new Map();
  for (const { module, upstreamRoot, version, names } of store.modules.values()) {
    if (!byRoot.has(upstreamRoot)) {
      byRoot.set(upstreamRoot, {
        root: upstreamRoot,
        version,
        modules: {},
        refused: { ...store.refused.get(upstreamRoot) },
      });
    }
    byRoot.get(upstreamRoot).modules[module] = [...names];
  }
  const skipped = [...store.skipped.values()].map((entry) =>
    store.refused.has(entry.root) ? { ...entry, refused: { ...store.refused.get(entry.root) } } : entry,
  );
  const active = Boolean(store.mechanism) && !store.reason && byRoot.size > 0;
  return {
    active,
    mechanism: store.mechanism,
    reason: active ? null : (store.reason ?? notServingReason(store, skipped)),
    verifiedVersions: [...VERIFIED_UPSTREAM_VERSIONS],
    upstream: [...byRoot.values()],
    skipped,
  };
}

/**
 * Why nothing is served although nothing turned the activation off: first a native binary
 * that does not load (its message names the platform package to install), then the rest.
 */
function notServingReason(store, skipped) {
  const loadError = nativeLoadError();
  if (loadError) return `native binary unavailable: ${loadError.message}`;
  if (!store.mechanism)
    return "not installed in this process (start Node with --import @paperclipai/adapter-utils-native/register, or use the vitest plugin)";
  if (skipped.length > 0) return skipped.map((entry) => entry.reason).join("; ");
  const installed = findInstalledUpstream();
  if (installed && !isVerifiedUpstreamVersion(installed.version)) {
    return `nothing served: ${installed.root} holds @paperclipai/adapter-utils ${installed.version}, not a verified version`;
  }
  return "nothing served yet: no covered @paperclipai/adapter-utils module has been loaded in this process";
}

/** Why the native binary does not load (lib/native.js, loaded only now: diagnostics), or null. */
function nativeLoadError() {
  try {
    return createRequire(import.meta.url)("../native.js").nativeLoadError;
  } catch (error) {
    return error;
  }
}
