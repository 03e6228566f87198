// The CLI's push and pull against a real sshd on 127.0.0.1 (run as an unprivileged user by
// scripts/test/full.sh, like the other SSH suites): round trip, progress lines, a refused host
// key with its coded line and exit code, and usage errors.
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateKey, startSshd } from "./helpers/sshd.js";
import { treeState } from "./helpers/tar.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const bin = path.join(repo, "bin", "paperclip-sync.mjs");
let server;
let work;
let keyFile;
let knownHostsFile;

beforeAll(async () => {
  if (process.getuid?.() === 0)
    throw new Error("run the SSH suites as an unprivileged user (scripts/test/full.sh does)");
  work = mkdtempSync(path.join(os.tmpdir(), "pc-native-ssh-cli-"));
  server = await startSshd(path.join(work, "sshd"));
  keyFile = path.join(work, "id_client");
  writeFileSync(keyFile, server.config.privateKey, { mode: 0o600 });
  knownHostsFile = path.join(work, "known_hosts");
  writeFileSync(knownHostsFile, server.config.knownHosts);
}, 30_000);

afterAll(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

function cli(...args) {
  const out = spawnSync(process.execPath, [bin, ...args], { encoding: "utf8", cwd: work });
  return { code: out.status, stdout: out.stdout, stderr: out.stderr };
}

const sshArgs = (remoteDir, knownHosts = knownHostsFile) => [
  "--host",
  "127.0.0.1",
  "--port",
  String(server.port),
  "--user",
  server.config.username,
  "--key",
  keyFile,
  "--known-hosts",
  knownHosts,
  "--remote-dir",
  remoteDir,
];

describe("paperclip-sync push/pull", () => {
  it("pushes a tree and pulls it back identical, with progress lines and JSON summaries", () => {
    const local = path.join(work, "local");
    mkdirSync(path.join(local, "src", "deep"), { recursive: true });
    mkdirSync(path.join(local, "node_modules", "x"), { recursive: true });
    writeFileSync(path.join(local, "src", "a.ts"), "a\n");
    writeFileSync(path.join(local, "src", "deep", "b.sh"), "#!/bin/sh\n");
    chmodSync(path.join(local, "src", "deep", "b.sh"), 0o755);
    writeFileSync(path.join(local, "node_modules", "x", "i.js"), "x\n");
    symlinkSync("src/a.ts", path.join(local, "link"));
    const remoteDir = path.join(server.workspace, "cli-push");
    const push = cli("push", local, ...sshArgs(remoteDir), "--exclude", "node_modules", "--json");
    expect(push.code, push.stderr).toBe(0);
    expect(JSON.parse(push.stdout)).toMatchObject({ remoteDir, host: "127.0.0.1" });
    expect(push.stderr.trim().split("\n").at(-1)).toMatch(/^\[paperclip\] Syncing workspace to ssh: 100% \(/);
    expect(readFileSync(path.join(remoteDir, "src", "a.ts"), "utf8")).toBe("a\n");
    const back = path.join(work, "back");
    const pull = cli("pull", back, ...sshArgs(remoteDir));
    expect(pull.code, pull.stderr).toBe(0);
    rmSync(path.join(local, "node_modules"), { recursive: true });
    expect(treeState(back)).toEqual(treeState(local));
  }, 60_000);

  it("refuses an unknown host key with one coded line and exit 1, before anything is written", () => {
    const wrong = path.join(work, "wrong_known_hosts");
    // A real key of the right type, but not the server's: the host key "changed".
    const [type, blob] = generateKey(path.join(work, "other_host_key")).split(" ");
    writeFileSync(wrong, `[127.0.0.1]:${server.port} ${type} ${blob}\n`);
    const local = path.join(work, "refused-local");
    mkdirSync(local);
    writeFileSync(path.join(local, "f"), "f");
    const remoteDir = path.join(server.workspace, "cli-refused");
    const run = cli("push", local, ...sshArgs(remoteDir, wrong));
    expect(run.code).toBe(1);
    expect(run.stderr.trim().split("\n").at(-1)).toMatch(
      /^paperclip-sync: ERR_PAPERCLIP_NATIVE_SSH_HOST_KEY_(UNKNOWN|CHANGED): /,
    );
    expect(spawnSync("test", ["-e", remoteDir]).status).not.toBe(0);
  }, 60_000);

  it("rejects incomplete SSH options with exit 2", () => {
    const local = path.join(work, "usage");
    mkdirSync(local, { recursive: true });
    expect(cli("push", local, "--host", "127.0.0.1").code).toBe(2);
    expect(cli("push", local, ...sshArgs("relative/dir")).code).toBe(2);
    expect(cli("pull", local, ...sshArgs("/tmp/x"), "--no-host-key-check").code).toBe(2);
    expect(cli("push", "--help").stdout).toMatch(/^Usage: paperclip-sync push/);
  });
});
