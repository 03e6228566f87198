// One sandbox-lane cycle in its own process (so its peak RSS and its children are its
// own): prepareCommandManagedRuntime for a plain workspace through a local spawn runner
// (the "sandbox" is a directory on this host; commands run with sh), then
// restoreWorkspace(). Prints one JSON line:
//   { prepareMs, restoreMs, ms, rssMb, hostTar, hostGit, children, spans }
// (`spans`: each runtimeSpan's name and milliseconds, the outermost first to finish last)
// where hostTar / hostGit count this process's own `tar` / `git` children (the sandbox's
// commands are grandchildren, under sh) sampled from /proc.
// Usage: node bench/sandbox-worker.mjs <ours|upstream> <chunked|single|duplex> <workspace> <remoteDir>
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

const [impl, mode, workspace, remoteDir] = process.argv.slice(2);
const mod =
  impl === "ours"
    ? await import("@paperclipai/adapter-utils-native/command-managed-runtime")
    : await import("@paperclipai/adapter-utils/command-managed-runtime");

function children() {
  const out = new Map();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[1]) === process.pid)
        out.set(Number(entry), stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

const runner = {
  supportsSingleStreamStdinProgress: mode === "single",
  execute: (input) =>
    new Promise((resolve) => {
      const startedAt = new Date().toISOString();
      const child = spawn(input.command === "bash" ? "/bin/bash" : "/bin/sh", input.args ?? [], { cwd: input.cwd });
      const out = [];
      const err = [];
      child.stdout.on("data", (d) => out.push(d));
      child.stderr.on("data", (d) => err.push(d));
      child.on("close", (code) =>
        resolve({
          exitCode: code ?? 1,
          signal: null,
          timedOut: false,
          stdout: Buffer.concat(out).toString("utf8"),
          stderr: Buffer.concat(err).toString("utf8"),
          pid: child.pid ?? null,
          startedAt,
        }),
      );
      child.stdin.on("error", () => undefined);
      if (input.stdin != null) child.stdin.write(input.stdin);
      child.stdin.end();
    }),
};
if (mode === "duplex") {
  runner.supportsDuplexFileTransfer = true;
  runner.openDuplexChannel = async ({ command }) => {
    const child = spawn(command[0] === "bash" ? "/bin/bash" : "/bin/sh", command.slice(1));
    child.stdin.on("error", () => undefined);
    return {
      write: (data) => {
        child.stdin.write(data);
      },
      onData: (listener) => {
        child.stdout.on("data", (chunk) => listener(chunk));
      },
      onExit: (listener) => {
        child.on("close", (code) => listener({ exitCode: code }));
      },
      stop: () => {
        child.kill("SIGTERM");
      },
      close: async () => {
        child.stdin.destroy();
      },
    };
  };
}

const seen = new Map();
let sampling = true;
const sampler = (async () => {
  while (sampling) {
    for (const [pid, name] of children()) seen.set(pid, name);
    await new Promise((r) => setTimeout(r, 5));
  }
})();
const spans = [];
const runtimeSpan = async (name, work) => {
  const began = process.hrtime.bigint();
  try {
    return await work();
  } finally {
    spans.push([name, Math.round(Number(process.hrtime.bigint() - began) / 1e6)]);
  }
};
const start = process.hrtime.bigint();
const prepared = await mod.prepareCommandManagedRuntime({
  runner,
  spec: { remoteCwd: remoteDir, timeoutMs: 3_600_000 },
  adapterKey: "bench",
  workspaceLocalDir: workspace,
  onProgress: () => {},
  runtimeSpan,
});
const mid = process.hrtime.bigint();
await prepared.restoreWorkspace(() => {});
const end = process.hrtime.bigint();
sampling = false;
await sampler;
const names = [...seen.values()];
console.log(
  JSON.stringify({
    prepareMs: Number(mid - start) / 1e6,
    restoreMs: Number(end - mid) / 1e6,
    ms: Number(end - start) / 1e6,
    rssMb: process.resourceUsage().maxRSS / 1024,
    hostTar: names.filter((n) => n === "tar").length,
    hostGit: names.filter((n) => n === "git").length,
    children: names.length,
    spans,
  }),
);
