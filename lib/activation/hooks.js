// The Node module hook of the activation (`module.registerHooks`: synchronous, on the thread
// that loads the module). For the URL of an upstream module we cover, in an upstream package
// the admission accepts (lib/activation/admission.js), `load` serves the composition
// (upstream's original, loaded from the same URL plus `?paperclip-native-original`, with our
// names overriding); every other URL, the original included, loads as usual. Upstream's own
// relative imports (`./ssh.js` from `remote-managed-runtime.js`) resolve to the plain URL, so
// they get the composition too.
//
// Nothing native loads until the first covered upstream module does: then our drop-in modules
// are loaded (and with them the binary). A process that never imports upstream pays only for
// this file and the checks of the URLs it loads.
import { admit } from "./admission.js";
import {
  BOUND_QUERY,
  ORIGINAL_QUERY,
  boundSource,
  compositionPlanSync,
  coveredModules,
  isBoundModule,
  shimSource,
  upstreamModuleOf,
} from "./coverage.js";
import { recordDisabled, recordRefused, recordSkipped } from "./state.js";

// Built-ins through process.getBuiltinModule, as in coverage.js (this module loads in every
// child process of an activated host).
const { writeSync } = process.getBuiltinModule("node:fs");
const { createRequire } = process.getBuiltinModule("node:module");
const { fileURLToPath } = process.getBuiltinModule("node:url");

const PREFIX = "@paperclipai/adapter-utils-native";

let settings = null;
let covered = null;
/** `{ plan, byModule }` once our modules loaded, `{ failed }` when they could not. */
let runtime = null;
const decisions = new Map();

/** Sets what the hook needs: `{ recordUrl, optIn }` (the state module's URL, the workspace opt-in). */
export function initialize(data) {
  settings = { recordUrl: data.recordUrl ?? null, optIn: data.optIn ?? null };
}

function say(line) {
  writeSync(2, `${PREFIX}: ${line}\n`);
}

/** Our drop-ins and the binary, loaded on first use; null when they cannot load (said once). */
function loadRuntime() {
  if (runtime) return runtime.failed ? null : runtime;
  try {
    const { nativeLoadError } = createRequire(import.meta.url)("../native.js");
    if (nativeLoadError) throw nativeLoadError;
    const plan = compositionPlanSync();
    runtime = { plan, byModule: new Map(plan.map((entry) => [entry.module, entry])) };
    return runtime;
  } catch (error) {
    const reason = String(error?.message ?? error).split("\n")[0];
    runtime = { failed: true };
    recordDisabled(`native binary unavailable: ${reason}`);
    say(`native binary unavailable (${reason}); @paperclipai/adapter-utils unchanged`);
    return null;
  }
}

/** The admission of one upstream package (decided and said once per package). */
function decide(info, plan) {
  let decision = decisions.get(info.root);
  if (!decision) {
    decision = admit({ root: info.root, version: info.version, kind: info.kind, plan, optIn: settings?.optIn });
    decisions.set(info.root, decision);
    if (decision.line) say(decision.line);
    recordRefused(info.root, info.version, decision.refused);
    if (decision.modules.size === 0) recordSkipped(info.root, info.version, decision.reason);
  }
  return decision;
}

/** The composed source for `url`, or null when `url` is not a module we serve. */
export function composedSource(url) {
  if (!settings || !url.startsWith("file:")) return null;
  const parsed = new URL(url);
  const bound = parsed.search === `?${BOUND_QUERY}`;
  if ((parsed.search && !bound) || parsed.hash) return null;
  parsed.search = "";
  const info = upstreamModuleOf(fileURLToPath(parsed));
  if (!info) return null;
  covered ??= new Set(coveredModules().map((entry) => entry.module));
  if (!covered.has(info.module)) return null;
  const loaded = loadRuntime();
  if (!loaded) return null;
  const entry = loaded.byModule.get(info.module);
  const names = decide(info, loaded.plan).modules.get(info.module);
  if (!entry || !names) return null;
  const plain = parsed.href;
  if (bound) return boundSource(entry, new Set(loaded.byModule.keys()));
  return shimSource({
    originalSpecifier: `${plain}?${ORIGINAL_QUERY}`,
    ours: isBoundModule(info.module) ? `${plain}?${BOUND_QUERY}` : entry.url,
    names,
    module: info.module,
    upstreamRoot: info.root,
    version: info.version,
    recordUrl: settings.recordUrl,
    mechanism: "node-hooks",
  });
}

/** The `load` hook for `module.registerHooks`. */
export function load(url, context, nextLoad) {
  const source = composedSource(url);
  if (source !== null) return { format: "module", source, shortCircuit: true };
  return nextLoad(url, context);
}
