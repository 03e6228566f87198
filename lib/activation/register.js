// `node --import @paperclipai/adapter-utils-native/register`: installs the activation's Node
// module hook (lib/activation/hooks.js) so that unmodified code importing
// `@paperclipai/adapter-utils` runs our drop-ins. Fail-safe: when it is turned off
// (`PAPERCLIP_ADAPTER_UTILS_NATIVE=0`), the native binary does not load, the installed
// upstream version is not a verified one, or this Node has no module hooks, it installs
// nothing, leaves upstream exactly as it is and prints one line to stderr saying why.
import { activate } from "./node.js";

await activate();
