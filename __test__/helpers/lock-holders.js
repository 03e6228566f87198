// Starts helpers/lock-holder.mjs: a process holding the directory-merge lock of a target
// through `ours`, `upstream` (2026.916.1) or `newer` (the stand-in of the SQLite protocol),
// for the lock tests (merge-lock.test.js, merge-lock-protocols.test.js).
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const holderScript = path.join(path.dirname(fileURLToPath(import.meta.url)), "lock-holder.mjs");

/**
 * Spawns a holder of `target`'s lock through `impl`, with `env` added to this process's; resolves
 * once it printed `until` ("held", or "database" for a `newer` holder that has the database
 * lock). `waitMs` is its own wait; the child is pushed to `children` for the caller to kill
 * after each test. Returns `{ child, exited, stderr(), held(), isHolding(), release() }`.
 */
export async function spawnLockHolder(impl, target, env, { until = "held", waitMs = 20_000, children = [] } = {}) {
  const child = spawn(process.execPath, [holderScript, impl, target], {
    env: { ...process.env, ...env, HOLDER_WAIT_MS: String(waitMs) },
    stdio: ["pipe", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const reached = (word) =>
    new Promise((resolve, reject) => {
      const check = () => output.includes(word) && resolve();
      child.stdout.on("data", (d) => {
        output += d;
        check();
      });
      check();
      child.on("exit", () => reject(new Error(`holder ${impl} exited before "${word}": ${stderr}`)));
    });
  await reached(until);
  return {
    child,
    exited,
    stderr: () => stderr,
    held: () => reached("held"),
    isHolding: () => output.includes("held") && !output.includes("released"),
    release: async () => {
      child.stdin.write("release\n");
      await exited;
      return output;
    },
  };
}
