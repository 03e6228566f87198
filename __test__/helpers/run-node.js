// Long child processes, awaited. Not spawnSync: a test worker blocked for a minute cannot
// read vitest's replies (its worker RPC gives up after 60 s and fails a run whose tests all
// passed), so a run that can take that long on a loaded machine goes through here.
import { spawn } from "node:child_process";

/**
 * Runs this Node with `args` (spawn's `options`; output is read as UTF-8) to its end:
 * `{ status, signal, stdout, stderr }`. Rejects only when the process could not start.
 */
export function runNode(args, options = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
    const out = { stdout: "", stderr: "" };
    for (const name of ["stdout", "stderr"]) child[name].setEncoding("utf8").on("data", (text) => (out[name] += text));
    child.on("error", reject);
    child.on("close", (status, signal) => resolve({ status, signal, ...out }));
  });
}
