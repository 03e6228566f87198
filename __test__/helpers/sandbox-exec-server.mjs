// The sandbox side of a test runner, in its own process: reads one JSON request a line on
// stdin ({ id, command, args, cwd, stdin }), runs it with sh/bash, and answers one JSON line
// ({ id, exitCode, stdout, stderr }). Whatever the "remote" commands start (`tar`, `dd`,
// `base64`, `git`) is a descendant of this process, never a child of the test's process,
// so a test can count the host's own children apart from the sandbox's.
import { spawn } from "node:child_process";
import readline from "node:readline";

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  const request = JSON.parse(line);
  const child = spawn(request.command === "bash" ? "/bin/bash" : "/bin/sh", request.args ?? [], { cwd: request.cwd });
  const out = [];
  const err = [];
  child.stdout.on("data", (d) => out.push(d));
  child.stderr.on("data", (d) => err.push(d));
  child.on("close", (code) => {
    process.stdout.write(
      `${JSON.stringify({
        id: request.id,
        exitCode: code ?? 1,
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: Buffer.concat(err).toString("utf8"),
      })}\n`,
    );
  });
  child.stdin.on("error", () => undefined);
  if (request.stdin != null) child.stdin.write(request.stdin);
  child.stdin.end();
});
