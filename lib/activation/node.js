// Installs the activation in this Node process (the `--import` entry and the vitest plugin's
// worker setup call it). Never throws: every reason not to activate prints one line to
// stderr and leaves upstream untouched.
//
// It loads nothing native: the hook loads our drop-ins and the binary when the first covered
// upstream module is imported. And it keeps child processes working: when this process was
// started through `NODE_OPTIONS`, our `--import` entry there is rewritten to this file's
// absolute URL, so a child started from any working directory finds it (a bare specifier
// would be resolved from the child's own directory).
import { WORKSPACE_OPT_IN } from "./admission.js";
import { ACTIVATION_ENV, INHERITED_ENV, mayNotifyAtStart, UPSTREAM_OPT_IN_ENV } from "./env.js";
import { rewriteNodeOptions } from "./node-options.js";
import { activationStore, recordDisabled, recordMechanism } from "./state.js";

// Built-ins through process.getBuiltinModule, as in coverage.js (on the register path).
const module = process.getBuiltinModule("node:module");
const { isMainThread } = process.getBuiltinModule("node:worker_threads");

const PREFIX = "@paperclipai/adapter-utils-native";
const REGISTER_URL = new URL("./register.js", import.meta.url).href;

function say(line) {
  process.stderr.write(`${PREFIX}: ${line}\n`);
}

/**
 * Installs the Node module hook once per process (later calls return the first result):
 * `{ active, reason }`, where `active` means the hook is installed (what it serves shows in
 * `nativeActivation()` as upstream's modules load).
 */
export async function activate({ mechanism = "node-hooks" } = {}) {
  const store = activationStore();
  if (store.installing) return store.installing;
  store.installing = (async () => {
    // Start-up notices are said by the main thread of the process the operator started, not
    // by each worker thread (which runs --import too) nor by the children of an activated host.
    const off = (reason, line, { atStart = false } = {}) => {
      recordDisabled(reason);
      if (!atStart || mayNotifyAtStart(isMainThread)) say(line);
      return { active: false, reason };
    };
    try {
      if (process.env[ACTIVATION_ENV] === "0") {
        // Said once: this process's children are not given the hook, so they do not repeat it.
        setNodeOptions(
          rewriteNodeOptions(process.env.NODE_OPTIONS, { registerUrl: REGISTER_URL, cwd: process.cwd(), remove: true }),
        );
        return off(
          `${ACTIVATION_ENV}=0`,
          `${ACTIVATION_ENV}=0: native paths off, @paperclipai/adapter-utils unchanged`,
          { atStart: true },
        );
      }
      if (typeof module.registerHooks !== "function") {
        return off(
          `Node ${process.versions.node} has no synchronous module hooks (module.registerHooks: Node 22.15+, 23.5+; supported: Node >= 24.11)`,
          `Node ${process.versions.node} has no module.registerHooks (supported: Node >= 24.11); @paperclipai/adapter-utils unchanged`,
          { atStart: true },
        );
      }
      setNodeOptions(rewriteNodeOptions(process.env.NODE_OPTIONS, { registerUrl: REGISTER_URL, cwd: process.cwd() }));
      const optIn = process.env[UPSTREAM_OPT_IN_ENV] === WORKSPACE_OPT_IN ? WORKSPACE_OPT_IN : null;
      const hooks = await import("./hooks.js");
      hooks.initialize({ recordUrl: new URL("./state.js", import.meta.url).href, optIn });
      module.registerHooks({ load: hooks.load });
      recordMechanism(mechanism);
      process.env[INHERITED_ENV] = "1";
      return { active: true, reason: null };
    } catch (error) {
      const first = String(error?.message ?? error).split("\n")[0];
      return off(`activation failed: ${first}`, `activation failed (${first}); @paperclipai/adapter-utils unchanged`);
    }
  })();
  return store.installing;
}

function setNodeOptions(value) {
  if (value === process.env.NODE_OPTIONS) return;
  if (value === undefined || value === "") delete process.env.NODE_OPTIONS;
  else process.env.NODE_OPTIONS = value;
}
