// The activation in unmodified code, against a real OpenSSH sshd on 127.0.0.1: upstream's
// own `prepareAdapterExecutionTargetRuntime` (upstream `execution-target`, not one line
// changed) for an SSH target, run in a child Node process with and without
// `--import @paperclipai/adapter-utils-native/register` (scripts/harness/execution-target-probe.mjs)
// on twin generated git workspaces: with activation, no `ssh` or `tar` process starts on the
// host during the prepare and the restore (the unactivated run is the control: the sampler
// sees its `ssh` and `tar`), and the remote tree after the prepare and the restored
// workspace after an agent run equal the unactivated run's. Run as an unprivileged user in CI.
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRandom, runSeed } from "./helpers/random.js";
import { startSshd } from "./helpers/sshd.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const probe = path.join(repo, "scripts/harness/execution-target-probe.mjs");
const register = pathToFileURL(path.join(repo, "lib/activation/register.js")).href;
const PINNED = { GIT_AUTHOR_DATE: "2026-01-02T03:04:05Z", GIT_COMMITTER_DATE: "2026-01-02T03:04:05Z" };

let server;
let work;

function git(dir, ...args) {
  return execFileSync("git", ["-C", dir, "-c", "user.name=Test", "-c", "user.email=test@example.com", ...args], {
    env: { ...process.env, ...PINNED },
    encoding: "utf8",
  });
}

/** A git workspace of generated files (seeded), committed, with uncommitted edits on top. */
function generateWorkspace(dir, rng) {
  mkdirSync(dir, { recursive: true });
  git(dir, "init", "-q", "-b", "main");
  const files = [];
  for (let i = 0; i < 300; i += 1) {
    const rel = path.join(`d${Math.floor(rng() * 12)}`, `s${Math.floor(rng() * 4)}`, `f${i}.txt`);
    mkdirSync(path.join(dir, path.dirname(rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), `${i} ${"x".repeat(Math.floor(rng() * 4000))}\n`);
    files.push(rel);
  }
  writeFileSync(path.join(dir, ".gitignore"), "ignored/\n");
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", "initial");
  writeFileSync(path.join(dir, files[5]), "dirty local edit\n");
  writeFileSync(path.join(dir, "untracked.txt"), "untracked\n");
  rmSync(path.join(dir, files[7]));
  mkdirSync(path.join(dir, "ignored"));
  writeFileSync(path.join(dir, "ignored", "cache.bin"), "ignored\n");
  // What no tar of the lane carries: upstream's restore deletes them, ours keeps them.
  for (const kept of NEVER_SENT) writeFileSync(path.join(dir, kept), "never sent\n");
}

/** Untracked AppleDouble names at two depths (docs/differences.md, "Nothing the agent did not change"). */
const NEVER_SENT = ["._notes", "d0/._draft"];

function runProbe(workspace, runId, activated) {
  const specFile = path.join(work, `${runId}.spec.json`);
  writeFileSync(specFile, JSON.stringify(server.spec));
  const args = [...(activated ? ["--import", register] : []), probe, specFile, workspace, runId, "--agent", "--trees"];
  const out = execFileSync(process.execPath, args, {
    cwd: repo,
    env: { ...process.env, ...PINNED, NODE_OPTIONS: "" },
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 240_000,
  });
  return JSON.parse(out.trim().split("\n").pop());
}

beforeAll(async () => {
  if (process.getuid?.() === 0)
    throw new Error("run the SSH suites as an unprivileged user (see scripts/test/full.sh), not as root");
  work = mkdtempSync(path.join(os.tmpdir(), "pc-ssh-activation-test-"));
  server = await startSshd(path.join(work, "sshd"));
}, 30_000);

afterAll(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("activation: upstream's prepareAdapterExecutionTargetRuntime, unmodified, over SSH", () => {
  it("stages and restores with no host ssh or tar process, with the unactivated run's results", async () => {
    const seed = runSeed();
    const rng = createRandom(seed).next;
    const plainDir = path.join(work, "plain");
    generateWorkspace(plainDir, rng);
    const nativeDir = path.join(work, "native");
    cpSync(plainDir, nativeDir, { recursive: true, verbatimSymlinks: true });
    try {
      const plain = runProbe(plainDir, "run-plain", false);
      const native = runProbe(nativeDir, "run-native", true);

      expect(plain.activation.active).toBe(false);
      expect(native.activation).toMatchObject({ active: true, mechanism: "node-hooks" });
      expect(native.activation.modules.ssh).toContain("prepareWorkspaceForSshExecution");
      expect(native.activation.modules["remote-managed-runtime"]).toContain("prepareRemoteManagedRuntime");

      // The control: upstream's path starts ssh and tar on this host, so the sampler works.
      expect(plain.prepare.children.ssh ?? 0).toBeGreaterThan(0);
      expect((plain.prepare.children.tar ?? 0) + (plain.restore.children.tar ?? 0)).toBeGreaterThan(0);
      for (const phase of ["prepare", "restore"]) {
        expect(native[phase].children.ssh ?? 0, `${phase}: ${JSON.stringify(native[phase].children)}`).toBe(0);
        expect(native[phase].children.tar ?? 0, `${phase}: ${JSON.stringify(native[phase].children)}`).toBe(0);
      }

      expect(native.remote).toEqual(plain.remote);
      // Upstream's own orchestration, served our restore, keeps what upstream's deletes; the
      // rest is the unactivated run's.
      // (`--trees`: each tree as its digest and its entries.)
      const entries = (tree) => JSON.parse(tree.slice(tree.indexOf(" ") + 1));
      const without = ({ tree, status, ...rest }) => ({
        ...rest,
        tree: Object.fromEntries(Object.entries(entries(tree)).filter(([key]) => !NEVER_SENT.includes(key))),
        status: status
          .split("\n")
          .filter((line) => !NEVER_SENT.some((kept) => line.endsWith(kept)))
          .join("\n"),
      });
      for (const kept of NEVER_SENT) {
        expect(entries(native.local.tree)[kept], kept).toBeDefined();
        expect(entries(plain.local.tree)[kept], kept).toBeUndefined();
      }
      expect(without(native.local)).toEqual(without(plain.local));
      expect(native.local.log).toContain("agent change");
    } catch (error) {
      error.message = `${error.message} (seed ${seed})`;
      throw error;
    }
  }, 300_000);
});
