// The SSH lane's remaining upstream functions that started a host `ssh` (upstream's
// `ensureSshWorkspaceReady` and `createSshCommandManagedRuntimeRunner` call its own
// `runSshCommand` inside its module, which the composition cannot reach): ours give
// upstream's results against a real sshd, on pooled in-process sessions, with no child
// process on the host. Run as an unprivileged user (scripts/test/full.sh).
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/ssh";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSshCommandManagedRuntimeRunner, ensureSshWorkspaceReady } from "../lib/ssh.js";
import { sshPoolStats } from "../lib/extras.js";
import { childrenOf, startSshd } from "./helpers/sshd.js";

let server;
let work;

beforeAll(async () => {
  if (process.getuid?.() === 0)
    throw new Error("run the SSH suites as an unprivileged user (see scripts/test/full.sh), not as root");
  work = mkdtempSync(path.join(os.tmpdir(), "pc-ssh-runner-"));
  server = await startSshd(path.join(work, "sshd"));
}, 30_000);

afterAll(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Runs `work` and reports whether this process started any child meanwhile. */
async function withoutChildren(work) {
  const before = new Set(childrenOf(process.pid));
  let seen = false;
  let running = true;
  const sampler = (async () => {
    while (running) {
      if (childrenOf(process.pid).some((pid) => !before.has(pid))) seen = true;
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  try {
    return { value: await work(), children: seen };
  } finally {
    running = false;
    await sampler;
  }
}

const strip = ({ startedAt: _startedAt, ...rest }) => rest;

describe("SSH drop-ins that upstream runs through its own runSshCommand", () => {
  it("ensureSshWorkspaceReady creates the directory and resolves the remote pwd, as upstream", async () => {
    const config = { ...server.config, remoteWorkspacePath: path.join(server.workspace, "ready", "nested dir") };
    const { value, children } = await withoutChildren(() => ensureSshWorkspaceReady(config));
    expect(children).toBe(false);
    expect(value).toEqual(await upstream.ensureSshWorkspaceReady(config));
    expect(value.remoteCwd).toBe(config.remoteWorkspacePath);
  });

  it("createSshCommandManagedRuntimeRunner gives upstream's results on pooled sessions", async () => {
    const spec = { ...server.spec, remoteCwd: server.workspace };
    const ours = createSshCommandManagedRuntimeRunner({ spec, maxBufferBytes: 4096 });
    const theirs = upstream.createSshCommandManagedRuntimeRunner({ spec, maxBufferBytes: 4096 });
    const cases = [
      {
        command: "sh",
        args: ["-c", 'echo out; echo err >&2; pwd; printf %s "$GREETING"'],
        env: { GREETING: "it's me" },
      },
      { command: "printf", args: ["%s|", "a b", "c'd"], cwd: "/" },
      { command: "cat", args: [], stdin: "from stdin\n" },
      { command: "sh", args: ["-c", "echo failing >&2; exit 3"] },
      { command: "bash", args: ["-lc", "echo $0"], env: { X: "1" } },
      { command: "sh", args: ["-c", "head -c 3000 /dev/zero | tr '\\0' x"] },
    ];
    const opened = sshPoolStats().opened;
    for (const input of cases) {
      const logs = { ours: [], theirs: [] };
      const { value, children } = await withoutChildren(() =>
        ours.execute({ ...input, onLog: (stream, text) => logs.ours.push([stream, text]) }),
      );
      expect(children, JSON.stringify(input)).toBe(false);
      const expected = await theirs.execute({ ...input, onLog: (stream, text) => logs.theirs.push([stream, text]) });
      expect(strip(value), JSON.stringify(input)).toEqual(strip(expected));
      expect(logs.ours).toEqual(logs.theirs);
    }
    // One session served them all (the pool reuses it).
    expect(sshPoolStats().opened - opened).toBeLessThanOrEqual(1);
  });
});
