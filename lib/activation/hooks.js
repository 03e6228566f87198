// The Node module customization hook of the activation (no native code here: with
// `module.register` it runs on Node's loader thread). For the URL of an upstream module we
// cover, in an upstream version we verified, `load` serves the composition (upstream's
// original, loaded from the same URL plus `?paperclip-native-original`, with our names
// overriding); every other URL, the original included, loads as usual. Upstream's own
// relative imports (`./ssh.js` from `remote-managed-runtime.js`) resolve to the plain URL,
// so they get the composition too.
import { writeSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { BOUND_QUERY, ORIGINAL_QUERY, boundSource, isBoundModule, isVerifiedUpstreamVersion, shimSource, upstreamModuleOf, VERIFIED_UPSTREAM_VERSIONS } from "./coverage.js";

let plan = null;
let recordUrl = null;
const warned = new Set();

/**
 * Sets the composition plan (`{ plan: [{ module, url, names }], recordUrl }`, computed on
 * the main thread, where the native binary was loaded). Node calls it for `module.register`.
 */
export function initialize(data) {
  plan = new Map(data.plan.map((entry) => [entry.module, entry]));
  recordUrl = data.recordUrl ?? null;
}

/** The composed source for `url`, or null when `url` is not a module we serve. */
export function composedSource(url) {
  if (!plan || !url.startsWith("file:")) return null;
  const parsed = new URL(url);
  const bound = parsed.search === `?${BOUND_QUERY}`;
  if ((parsed.search && !bound) || parsed.hash) return null;
  parsed.search = "";
  const info = upstreamModuleOf(fileURLToPath(parsed));
  if (!info) return null;
  const entry = plan.get(info.module);
  if (!entry) return null;
  if (!isVerifiedUpstreamVersion(info.version)) {
    if (!warned.has(info.root)) {
      warned.add(info.root);
      writeSync(2, `@paperclipai/adapter-utils-native: @paperclipai/adapter-utils ${info.version} is not a verified version (${VERIFIED_UPSTREAM_VERSIONS.join(", ")}); left unchanged\n`);
    }
    return null;
  }
  const plain = parsed.href;
  if (bound) return boundSource(entry, new Set(plan.keys()));
  return shimSource({
    originalSpecifier: `${plain}?${ORIGINAL_QUERY}`,
    ours: isBoundModule(info.module) ? `${plain}?${BOUND_QUERY}` : entry.url,
    names: entry.names,
    module: info.module,
    upstreamRoot: info.root,
    version: info.version,
    recordUrl,
    mechanism: "node-hooks",
  });
}

/** The `load` hook (works as an asynchronous `module.register` hook and a synchronous `module.registerHooks` one). */
export function load(url, context, nextLoad) {
  const source = composedSource(url);
  if (source !== null) return { format: "module", source, shortCircuit: true };
  return nextLoad(url, context);
}
