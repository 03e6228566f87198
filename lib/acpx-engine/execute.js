// Drop-in for `referencedSourceContentSignature` of
// `@paperclipai/adapter-utils/acpx-engine/execute`: the walk and the hashing are native.
import path from "node:path";
import { native, runCancellable } from "../native.js";

export async function referencedSourceContentSignature(localPath, ignoreResolution, options = {}) {
  if (ignoreResolution.kind === "failed") return `unreadable:${ignoreResolution.reason}`;
  const ignored = ignoreResolution.kind === "git" ? ignoreResolution.ignoredPaths : [];
  try {
    return await runCancellable(options.signal, (cancelId) =>
      native.contentSignature(path.normalize(localPath), ignored, cancelId),
    );
  } catch (error) {
    if (error?.name === "AbortError") throw error;
    return `unreadable:${String(error)}`;
  }
}
