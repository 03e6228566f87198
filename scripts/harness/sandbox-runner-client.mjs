// The client side of scripts/harness/sandbox-runner.mjs: a `CommandManagedRuntimeRunner` (upstream's
// sandbox runner shape) whose commands run in that runner process, one TCP connection each.
// Used by bench/links-worker.mjs and scripts/harness/execution-target-probe.mjs.
import net from "node:net";

/** A runner whose commands run in the scripts/harness/sandbox-runner.mjs process listening on `port`. */
export function tcpRunner(port) {
  return {
    execute: (input) =>
      new Promise((resolve, reject) => {
        const startedAt = new Date().toISOString();
        const stdin = input.stdin == null ? Buffer.alloc(0) : Buffer.from(input.stdin);
        const socket = net.connect(port, "127.0.0.1");
        const parts = [];
        socket.on("data", (d) => parts.push(d));
        socket.on("error", reject);
        socket.on("end", () => {
          const all = Buffer.concat(parts);
          const newline = all.indexOf(10);
          const head = JSON.parse(all.subarray(0, newline).toString("utf8"));
          const body = all.subarray(newline + 1);
          const stdout = body.subarray(0, head.stdoutLength).toString("utf8");
          const stderr = body.subarray(head.stdoutLength).toString("utf8");
          resolve({
            exitCode: head.exitCode ?? 1,
            signal: head.signal,
            timedOut: false,
            stdout,
            stderr,
            pid: null,
            startedAt,
          });
        });
        socket.write(
          `${JSON.stringify({ command: input.command, args: input.args, cwd: input.cwd, stdinLength: stdin.length })}\n`,
        );
        socket.end(stdin);
      }),
  };
}
