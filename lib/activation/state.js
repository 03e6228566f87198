// The activation's diagnostics: what is served natively in this process. The store lives on
// `globalThis` so every copy of this module (Node's and vitest's module graphs) shares it.
import { VERIFIED_UPSTREAM_VERSIONS } from "./coverage.js";

const KEY = Symbol.for("paperclipai.adapterUtilsNative.activation");

/** The process-wide store (internal). */
export function activationStore() {
  if (!globalThis[KEY]) {
    globalThis[KEY] = { mechanism: null, reason: null, modules: new Map(), skipped: new Map() };
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
 * Called by every composed module when it is evaluated (internal): records the upstream
 * module and the names it serves natively.
 */
export function recordComposition({ module, upstreamRoot, version, names, mechanism }) {
  if (mechanism && !(activationStore().mechanism ?? "").split("+").includes(mechanism)) recordMechanism(mechanism);
  activationStore().modules.set(`${upstreamRoot}\u0000${module}`, { module, upstreamRoot, version, names });
}

/**
 * What the activation does in this process, for an operator checking a running host:
 * `active` (a mechanism is installed and nothing turned it off), `mechanism` (`"node-hooks"`
 * for `--import @paperclipai/adapter-utils-native/register`, `"vitest-plugin"`, or null),
 * `reason` (why it is off, when it is), `verifiedVersions`, and `upstream`: per installed
 * upstream package loaded so far, its `root`, `version` and `modules` (upstream module →
 * the names served natively), plus `skipped` (packages left untouched, with the reason).
 * Modules appear once they are loaded.
 */
export function nativeActivation() {
  const store = activationStore();
  const byRoot = new Map();
  for (const { module, upstreamRoot, version, names } of store.modules.values()) {
    if (!byRoot.has(upstreamRoot)) byRoot.set(upstreamRoot, { root: upstreamRoot, version, modules: {} });
    byRoot.get(upstreamRoot).modules[module] = [...names];
  }
  return {
    active: Boolean(store.mechanism) && !store.reason,
    mechanism: store.mechanism,
    reason: store.reason,
    verifiedVersions: [...VERIFIED_UPSTREAM_VERSIONS],
    upstream: [...byRoot.values()],
    skipped: [...store.skipped.values()],
  };
}
