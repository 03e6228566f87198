#!/usr/bin/env node
// Runs upstream's own, unmodified `prepareAdapterExecutionTargetRuntime` (upstream
// `execution-target`) for an SSH or a sandbox target over a git workspace, then an "agent
// run" on the remote side (plain file-system edits and a commit, done directly: the remote
// directory is on this machine), then `restoreWorkspace()`; prints one JSON line: the remote
// tree after the prepare, the restored workspace, the host child processes started during
// prepare and restore (sampled from /proc), timings and peak RSS, and what
// `nativeActivation()` reports. Started with or without
// `--import @paperclipai/adapter-utils-native/register`: the activation test, the demo and
// bench/activation.mjs compare the two.
//
// <spec.json>: an SSH target's spec (`SshRemoteExecutionSpec`), or for a sandbox target
// `{ "runnerPort": N, "remoteCwd": "…" }`: its commands run in the scripts/harness/sandbox-runner.mjs
// process listening on that port, so the sandbox's own `tar` is not counted as the host's.
//
// Usage: node [--import …/register] scripts/harness/execution-target-probe.mjs <spec.json> <workspace> <runId> [--agent] [--trees]
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { nativeActivation } from "../../lib/activation/state.js";
import { parseArgs } from "../lib/shared.mjs";
import { tcpRunner } from "./sandbox-runner-client.mjs";

const USAGE =
  "Usage: node [--import …/register] scripts/harness/execution-target-probe.mjs <spec.json> <workspace> <runId> [--agent] [--trees]";
const { values, positionals } = parseArgs(process.argv.slice(2), {
  name: "execution-target-probe",
  usage: USAGE,
  options: { agent: { type: "boolean", default: false }, trees: { type: "boolean", default: false } },
  positionals: true,
});
if (positionals.length !== 3) {
  console.error(USAGE);
  process.exit(2);
}
const [specFile, workspace, runId] = positionals;
const spec = JSON.parse(readFileSync(specFile, "utf8"));
const withAgent = values.agent;
const withTrees = values.trees;

function descendants(root) {
  const children = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(name));
    } catch {
      /* gone */
    }
  }
  const out = [];
  const stack = [root];
  while (stack.length)
    for (const pid of children.get(stack.pop()) ?? []) {
      out.push(pid);
      stack.push(pid);
    }
  return out;
}

/** Runs `fn`, sampling the names of the processes started under this one meanwhile. */
async function sampled(fn) {
  const seen = new Map();
  let running = true;
  const sampler = (async () => {
    while (running) {
      for (const pid of descendants(process.pid)) {
        if (seen.has(pid)) continue;
        try {
          seen.set(pid, readFileSync(`/proc/${pid}/comm`, "utf8").trim());
        } catch {
          /* gone */
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  })();
  const started = process.hrtime.bigint();
  try {
    await fn();
  } finally {
    running = false;
    await sampler;
  }
  const counts = {};
  for (const name of seen.values()) counts[name] = (counts[name] ?? 0) + 1;
  return { ms: Number(process.hrtime.bigint() - started) / 1e6, children: counts };
}

/** Every file, directory and link under `root` but `.git`: path → content digest. */
function tree(root, skip = new Set([".git"])) {
  const out = {};
  const walk = (dir, rel) => {
    for (const name of readdirSync(dir).sort()) {
      if (rel === "" && skip.has(name)) continue;
      const full = path.join(dir, name);
      const key = rel ? `${rel}/${name}` : name;
      const st = lstatSync(full);
      if (st.isSymbolicLink()) out[key] = `link:${readlinkSync(full)}`;
      else if (st.isDirectory()) {
        out[key] = "dir";
        walk(full, key);
      } else
        out[key] =
          `${st.mode & 0o111 ? "x" : "-"}${createHash("sha256").update(readFileSync(full)).digest("hex").slice(0, 16)}`;
    }
  };
  walk(root, "");
  return createHash("sha256").update(JSON.stringify(out)).digest("hex") + (withTrees ? ` ${JSON.stringify(out)}` : "");
}

/** The first `n` regular files under `root` (sorted walk), relative. */
function firstFiles(root, n) {
  const out = [];
  const walk = (dir, rel) => {
    for (const name of readdirSync(dir).sort()) {
      if (out.length >= n) return;
      if (rel === "" && name === ".paperclip-runtime") continue;
      const st = lstatSync(path.join(dir, name));
      const key = rel ? `${rel}/${name}` : name;
      if (st.isDirectory()) walk(path.join(dir, name), key);
      else if (st.isFile()) out.push(key);
    }
  };
  walk(root, "");
  return out;
}

const git = (dir, ...args) =>
  execFileSync("git", ["-C", dir, "-c", "user.name=Agent", "-c", "user.email=agent@example.com", ...args], {
    encoding: "utf8",
  }).trim();

const { prepareAdapterExecutionTargetRuntime } = await import("@paperclipai/adapter-utils/execution-target");

let prepared;
const prepare = await sampled(async () => {
  prepared = await prepareAdapterExecutionTargetRuntime({
    target:
      spec.runnerPort === undefined
        ? { kind: "remote", transport: "ssh", spec }
        : {
            kind: "remote",
            transport: "sandbox",
            remoteCwd: spec.remoteCwd,
            runner: tcpRunner(spec.runnerPort),
            timeoutMs: 300_000,
          },
    runId,
    adapterKey: "probe",
    workspaceLocalDir: workspace,
  });
});
const remoteDir = prepared.workspaceRemoteDir;
// A git workspace (the usual case) or a plain directory.
const isGit = existsSync(path.join(workspace, ".git"));
const remote = isGit
  ? {
      tree: tree(remoteDir, new Set([".git", ".paperclip-runtime"])),
      head: git(remoteDir, "rev-parse", "HEAD"),
      status: git(remoteDir, "status", "--porcelain"),
    }
  : { tree: tree(remoteDir, new Set([".paperclip-runtime"])) };

if (withAgent) {
  // The agent's run: edit, add, delete; in a git workspace commit one change and leave one uncommitted.
  // Tracked files the remote has (a file deleted locally and uncommitted is tracked but absent).
  const files = isGit
    ? git(remoteDir, "ls-files")
        .split("\n")
        .filter((file) => file && existsSync(path.join(remoteDir, file)))
    : firstFiles(remoteDir, 3);
  writeFileSync(path.join(remoteDir, files[0]), "edited by the agent\n");
  writeFileSync(path.join(remoteDir, "AGENT_NOTES.md"), "# notes\n");
  rmSync(path.join(remoteDir, files[files.length - 1]));
  if (isGit) {
    git(remoteDir, "add", "-A");
    git(remoteDir, "commit", "-q", "-m", "agent change");
  }
  writeFileSync(path.join(remoteDir, files[1] ?? "second.txt"), "uncommitted agent edit\n");
}

const restore = await sampled(() => prepared.restoreWorkspace());
const local = isGit
  ? {
      tree: tree(workspace),
      log: git(workspace, "log", "--format=%H %s"),
      status: git(workspace, "status", "--porcelain"),
    }
  : { tree: tree(workspace) };
const activation = nativeActivation();
process.stdout.write(
  `${JSON.stringify({
    remote,
    local,
    prepare,
    restore,
    peakRssMb: Math.round(Number(readFileSync("/proc/self/status", "utf8").match(/VmHWM:\s+(\d+)/)[1]) / 1024),
    activation: {
      active: activation.active,
      mechanism: activation.mechanism,
      modules: Object.fromEntries(activation.upstream.flatMap((u) => Object.entries(u.modules))),
    },
  })}\n`,
);
