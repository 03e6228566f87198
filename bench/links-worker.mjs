// One run of bench/links.mjs in its own process (started with or without
// `--import …/register`): upstream's own `prepareAdapterExecutionTargetRuntime` for an SSH
// or a sandbox target, then the "agent" edits `agentEdits` files in the remote workspace
// (directly: the remote is this machine), then `restoreWorkspace()`. Prints one JSON line:
// { prepareMs, restoreMs, prepareBytes, restoreBytes, remote, local } where the bytes are
// what crossed the namespace's loopback (its tx counter: every packet once) and remote /
// local digest the remote tree after the prepare and the restored workspace.
// The sandbox runner's commands run in scripts/harness/sandbox-runner.mjs, on the other side of the
// shaped loopback.
// Usage: node [--import …/register] bench/links-worker.mjs <ssh|sandbox> <spec.json|runnerPort> <workspace> <runId> <agentEdits> <remoteCwd>
import { createHash } from "node:crypto";
import { lstatSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { tcpRunner } from "../scripts/harness/sandbox-runner-client.mjs";

const [lane, where, workspace, runId, agentEdits, remoteCwd] = process.argv.slice(2);
const wire = () => Number(readFileSync("/sys/class/net/lo/statistics/tx_bytes", "utf8"));

/** Every entry below `root` (but `.git` and `.paperclip-runtime`) with its content digest. */
function digest(root) {
  const out = [];
  const walk = (rel) => {
    for (const name of readdirSync(rel ? path.join(root, rel) : root).sort()) {
      if (!rel && (name === ".git" || name === ".paperclip-runtime")) continue;
      const key = rel ? `${rel}/${name}` : name;
      const full = path.join(root, key);
      const st = lstatSync(full);
      if (st.isSymbolicLink()) out.push(`${key} -> ${readlinkSync(full)}`);
      else if (st.isDirectory()) {
        out.push(`${key}/`);
        walk(key);
      } else out.push(`${key} ${st.mode & 0o777} ${createHash("sha1").update(readFileSync(full)).digest("hex")}`);
    }
  };
  walk("");
  return createHash("sha256").update(out.join("\n")).digest("hex").slice(0, 16);
}

const { prepareAdapterExecutionTargetRuntime } = await import("@paperclipai/adapter-utils/execution-target");
const { nativeActivation } = await import("../lib/activation/state.js");
const target =
  lane === "ssh"
    ? { kind: "remote", transport: "ssh", spec: JSON.parse(readFileSync(where, "utf8")) }
    : { kind: "remote", transport: "sandbox", remoteCwd, runner: tcpRunner(Number(where)), timeoutMs: 3_600_000 };
let t = process.hrtime.bigint();
let bytes = wire();
const prepared = await prepareAdapterExecutionTargetRuntime({
  target,
  runId,
  adapterKey: "bench",
  workspaceLocalDir: workspace,
});
const prepareMs = Number(process.hrtime.bigint() - t) / 1e6;
const prepareBytes = wire() - bytes;
const remoteDir = prepared.workspaceRemoteDir;
const remote = digest(remoteDir);
// The agent: edits `agentEdits` files of the source tree, deterministically.
const files = [];
const collect = (rel) => {
  for (const name of readdirSync(path.join(remoteDir, rel)).sort()) {
    if (files.length >= Number(agentEdits)) return;
    const key = rel ? `${rel}/${name}` : name;
    const st = lstatSync(path.join(remoteDir, key));
    if (st.isDirectory() && name !== ".git" && name !== ".paperclip-runtime") collect(key);
    else if (st.isFile() && key.startsWith("src/")) files.push(key);
  }
};
collect("");
for (const key of files)
  writeFileSync(
    path.join(remoteDir, key),
    `// edited by the agent in ${runId}\n${readFileSync(path.join(remoteDir, key), "utf8")}`,
  );
t = process.hrtime.bigint();
bytes = wire();
await prepared.restoreWorkspace();
const restoreMs = Number(process.hrtime.bigint() - t) / 1e6;
const restoreBytes = wire() - bytes;
process.stdout.write(
  `${JSON.stringify({ prepareMs, restoreMs, prepareBytes, restoreBytes, remote, local: digest(workspace), active: nativeActivation().active })}\n`,
);
