// `node --import @paperclipai/adapter-utils-native/register`: installs the activation's Node
// module hook (lib/activation/hooks.js) so that unmodified code importing
// `@paperclipai/adapter-utils` runs our drop-ins. Fail-safe: when it is turned off
// (`PAPERCLIP_ADAPTER_UTILS_NATIVE=0`), the native binary does not load, the installed
// upstream version is not a verified one, or this Node has no module hooks, it installs
// nothing, leaves upstream exactly as it is and prints one line to stderr saying why.
//
// Child processes inherit this entry through NODE_OPTIONS, whatever Node they run, so on a
// Node too old for the activation (no process.getBuiltinModule) this file loads nothing else,
// never throws, and speaks only in the main thread of a process no activated host started.
import { mayNotifyAtStart } from "./env.js";

if (typeof process.getBuiltinModule === "function") {
  const { activate } = await import("./node.js");
  await activate();
} else {
  const { isMainThread } = await import("node:worker_threads");
  if (mayNotifyAtStart(isMainThread)) {
    process.stderr.write(
      `@paperclipai/adapter-utils-native: Node ${process.versions.node} has no module.registerHooks (supported: Node >= 24.11); @paperclipai/adapter-utils unchanged\n`,
    );
  }
}
