// The sandbox side of a sandbox execution target on this machine (bench/links.mjs, inside its
// network namespace, so that everything a sandbox runner moves crosses the shaped loopback;
// the demo's sandbox step): a command runner listening on 127.0.0.1, each command run with
// sh/bash in its own process, a descendant of this one (never of the process staging the
// workspace, which can then count its own `tar` children apart). One TCP connection per
// command: the request is a JSON line `{command, args, cwd, stdinLength}` then the stdin
// bytes; the reply a JSON line `{exitCode, signal, stdoutLength, stderrLength}` then stdout
// and stderr. Prints `ready <port>` once listening (port 0: any free port). The count of
// commands served is written to `<stats file>` after each. `<latency ms>` (default 0): a
// delay before each command's answer, as a provider's API round trip adds to every command.
// The client side: scripts/harness/sandbox-runner-client.mjs.
// Usage: node scripts/harness/sandbox-runner.mjs <port> <stats file> [<latency ms>]
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import net from "node:net";
import { parseArgs } from "../lib/shared.mjs";

const USAGE = "Usage: node scripts/harness/sandbox-runner.mjs <port> <stats file> [<latency ms>]";
const { positionals } = parseArgs(process.argv.slice(2), { name: "sandbox-runner", usage: USAGE, positionals: true });
if (positionals.length < 2 || positionals.length > 3) {
  console.error(USAGE);
  process.exit(2);
}
const [port, statsFile, latency = "0"] = positionals;
const latencyMs = Number(latency);
let commands = 0;
// A runner started anew (another latency) counts from zero.
writeFileSync(statsFile, JSON.stringify({ commands }));

net
  .createServer({ allowHalfOpen: true }, (socket) => {
    let buffered = Buffer.alloc(0);
    let header = null;
    const chunks = [];
    let received = 0;
    const run = () => {
      const child = spawn(header.command === "bash" ? "/bin/bash" : "/bin/sh", header.args ?? [], {
        cwd: header.cwd || undefined,
      });
      const out = [];
      const err = [];
      child.stdout.on("data", (d) => out.push(d));
      child.stderr.on("data", (d) => err.push(d));
      child.stdin.on("error", () => undefined);
      child.stdin.end(Buffer.concat(chunks));
      child.on("close", async (code, signal) => {
        commands += 1;
        writeFileSync(statsFile, JSON.stringify({ commands }));
        if (latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, latencyMs));
        const stdout = Buffer.concat(out);
        const stderr = Buffer.concat(err);
        socket.end(
          Buffer.concat([
            Buffer.from(
              `${JSON.stringify({ exitCode: code, signal, stdoutLength: stdout.length, stderrLength: stderr.length })}\n`,
            ),
            stdout,
            stderr,
          ]),
        );
      });
    };
    socket.on("data", (data) => {
      if (header === null) {
        buffered = Buffer.concat([buffered, data]);
        const newline = buffered.indexOf(10);
        if (newline < 0) return;
        header = JSON.parse(buffered.subarray(0, newline).toString("utf8"));
        data = buffered.subarray(newline + 1);
      }
      chunks.push(data);
      received += data.length;
      if (received >= header.stdinLength) run();
    });
    socket.on("error", () => undefined);
  })
  .listen(Number(port), "127.0.0.1", function () {
    process.stdout.write(`ready ${this.address().port}\n`);
  });
