// Added to vitest's `setupFiles` by `adapterUtilsNative()`: installs the Node hook in the
// worker (once per process) for the upstream modules vitest leaves to Node.
import { activate } from "./node.js";

await activate({ mechanism: "node-hooks" });
