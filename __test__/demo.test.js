// The demo (`npm run demo`'s command) as a fresh clone runs it: from a copy holding only the
// repository's own files (those git tracks or would add, as a clone has them), this
// checkout's npm dependencies and its built binary, nothing else of this checkout. Every step
// runs, none is skipped, and both execution-target steps run upstream's own
// prepareAdapterExecutionTargetRuntime with and without the activation: over SSH (a
// throwaway sshd on 127.0.0.1, which scripts/test/full.sh installs, as `npm run demo` does) and in
// a sandbox through a command runner. Their remote trees and restored workspaces are equal;
// activated, the host starts no `ssh` or `tar`; plain, it does (the control: the sampling
// sees them).
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { runNode } from "./helpers/run-node.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-demo-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A clone-like copy of the repository: its own files, this checkout's node_modules and binary. */
function cloneLike(dir) {
  const listed = execFileSync("git", ["-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    encoding: "utf8",
    maxBuffer: 1 << 26,
  });
  let copied = 0;
  for (const rel of new Set(listed.split("\0").filter(Boolean))) {
    const from = path.join(repo, rel);
    let st;
    try {
      st = statSync(from);
    } catch {
      continue; // deleted in this checkout, not yet committed
    }
    if (!st.isFile()) continue;
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    copyFileSync(from, path.join(dir, rel));
    copied += 1;
  }
  symlinkSync(path.join(repo, "node_modules"), path.join(dir, "node_modules"));
  for (const name of readdirSync(path.join(repo, "native")).filter((n) => n.endsWith(".node")))
    copyFileSync(path.join(repo, "native", name), path.join(dir, "native", name));
  return copied;
}

describe("paperclip-sync demo from a fresh clone", () => {
  it("runs every step, none skipped, and upstream's SSH and sandbox execution targets give equal results with and without the activation", async () => {
    const clone = path.join(work, "clone");
    expect(cloneLike(clone)).toBeGreaterThan(100);
    const run = await runNode([path.join(clone, "bin", "paperclip-sync.mjs"), "demo", "--files", "300", "--json"], {
      cwd: clone,
      env: { ...process.env, NODE_OPTIONS: "" },
    });
    expect(run.status, run.stderr).toBe(0);
    const { steps } = JSON.parse(run.stdout.trim().split("\n").pop());
    const byName = Object.fromEntries(steps.map((s) => [s.step, s]));
    expect(steps.filter((s) => /skipped/.test(s.note))).toEqual([]);
    const ssh = byName["execution target over SSH (upstream code)"];
    const sandbox = byName["execution target in a sandbox (upstream code)"];
    for (const step of [ssh, sandbox]) {
      expect(step["same result"]).toBe("yes");
      expect(Number(step["native ms"])).toBeGreaterThan(0);
      expect(Number(step["upstream ms"])).toBeGreaterThan(0);
    }
    // Activated: no host ssh or tar; plain upstream starts both (the detector works).
    expect(ssh.details.native.hostChildren).toEqual({ ssh: 0, tar: 0 });
    expect(ssh.details.plain.hostChildren.ssh).toBeGreaterThan(0);
    expect(ssh.details.plain.hostChildren.tar).toBeGreaterThan(0);
    expect(sandbox.details.native.hostChildren).toEqual({ tar: 0 });
    expect(sandbox.details.plain.hostChildren.tar).toBeGreaterThan(0);
    expect(sandbox.details["runner commands"].native).toBeGreaterThan(0);
    expect(sandbox.details["runner commands"].plain).toBeGreaterThan(0);
    // Every step that compares with upstream gave upstream's result.
    const compared = steps.filter((s) => s["same result"] !== "-");
    expect(compared.length).toBe(9);
    expect(compared.filter((s) => s["same result"] !== "yes")).toEqual([]);
  }, 300_000);
});
