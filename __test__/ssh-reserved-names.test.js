// No name this library reserves (crates/core/src/reserved.rs) can be planted through SSH:
// the catalogue of planted names (helpers/reserved.js) in the remote directory, against a
// real OpenSSH sshd. syncDirectoryFromSsh refuses it with
// ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY, the local directory untouched;
// restoreWorkspaceFromSshExecution (plain and with a baseline) leaves it out and takes the
// rest of the agent's work (docs/reliability.md); the next ordinary pull or restore
// succeeds. A look-alike
// this host did not create, found in the local directory, blocks no pull and is reported.
// Runs as an unprivileged user (scripts/test/full.sh), like every SSH suite.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { restoreWorkspaceFromSshExecution, syncDirectoryFromSsh } from "../lib/ssh.js";
import { captureDirectorySnapshot } from "../lib/workspace-restore-merge.js";
import {
  catalogue,
  deadPid,
  expectLeftOut,
  expectRefused,
  plant,
  PREFIXES,
  smallWorkspace,
} from "./helpers/reserved.js";
import { startSshd } from "./helpers/sshd.js";
import { treeState } from "./helpers/tar.js";

const UNSAFE = "ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY";
let work;
let server;
let counter = 0;
const fresh = (label) => {
  const dir = path.join(work, `${label}-${(counter += 1)}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};
const settle = (promise) =>
  promise.then(
    () => null,
    (error) => error,
  );

beforeAll(async () => {
  if (process.getuid?.() === 0)
    throw new Error("run the SSH suites as an unprivileged user (see scripts/test/full.sh), not as root");
  work = mkdtempSync(path.join(os.tmpdir(), "pc-ssh-reserved-"));
  server = await startSshd(path.join(work, "sshd"));
}, 30_000);

afterAll(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

const workspace = () => smallWorkspace(fresh("local"));

describe("planted names on the SSH remote are refused", () => {
  it("syncDirectoryFromSsh: every catalogue entry refused, localDir untouched; the next pull succeeds", async () => {
    const localDir = workspace();
    const before = treeState(localDir);
    for (const entry of catalogue()) {
      const remoteDir = fresh("remote");
      writeFileSync(path.join(remoteDir, "remote.txt"), "remote\n");
      plant(remoteDir, entry);
      expectRefused(
        await settle(syncDirectoryFromSsh({ spec: server.spec, remoteDir, localDir })),
        entry,
        "pull",
        localDir,
      );
      expect(treeState(localDir), entry.label).toEqual(before);
      rmSync(path.join(remoteDir, entry.top.split("/")[0]), { recursive: true, force: true });
      await syncDirectoryFromSsh({ spec: server.spec, remoteDir, localDir: fresh("next") });
    }
    const remoteDir = fresh("remote");
    writeFileSync(path.join(remoteDir, "remote.txt"), "remote\n");
    await syncDirectoryFromSsh({ spec: server.spec, remoteDir, localDir });
    expect(readdirSync(localDir)).toEqual(["remote.txt"]);
  }, 120_000);

  for (const withBaseline of [false, true]) {
    it(`restoreWorkspaceFromSshExecution${withBaseline ? " with a baseline" : ""}: one case per prefix, journal and depth, and the key file: left out, the rest arrives; the next restore succeeds`, async () => {
      for (const entry of catalogue({ every: false })) {
        const localDir = workspace();
        const baselineSnapshot = withBaseline ? await captureDirectorySnapshot(localDir, { exclude: [] }) : undefined;
        const remoteDir = fresh("remote");
        writeFileSync(path.join(remoteDir, "a.txt"), "remote\n");
        plant(remoteDir, entry);
        const error = await settle(
          restoreWorkspaceFromSshExecution({ spec: server.spec, localDir, remoteDir, baselineSnapshot }),
        );
        expectLeftOut(error, entry, "restore", localDir);
        expect(readFileSync(path.join(localDir, "a.txt"), "utf8"), entry.label).toBe("remote\n");
        rmSync(path.join(remoteDir, entry.top.split("/")[0]), { recursive: true, force: true });
        await restoreWorkspaceFromSshExecution({ spec: server.spec, localDir, remoteDir, baselineSnapshot });
        expect(readFileSync(path.join(localDir, "a.txt"), "utf8")).toBe("remote\n");
        expect(
          readdirSync(localDir).filter((name) => name.startsWith(".paperclip-")),
          entry.label,
        ).toEqual([]);
      }
    }, 120_000);
  }

  it("a planted merge journal on the remote is not copied in, so it cannot block the next pull", async () => {
    const localDir = workspace();
    const remoteDir = fresh("remote");
    const planted = `${PREFIXES.merge}${deadPid()}-0-0123456789abcdef`;
    mkdirSync(path.join(remoteDir, planted));
    writeFileSync(path.join(remoteDir, planted, "journal"), "merge\n");
    expect((await settle(syncDirectoryFromSsh({ spec: server.spec, remoteDir, localDir })))?.code).toBe(UNSAFE);
    expect(existsSync(path.join(localDir, planted))).toBe(false);
    rmSync(path.join(remoteDir, planted), { recursive: true });
    await syncDirectoryFromSsh({ spec: server.spec, remoteDir, localDir });
  });

  it("a look-alike already in localDir blocks no pull, is reported and left alone", async () => {
    const localDir = workspace();
    const planted = `${PREFIXES.merge}${deadPid()}-0-0123456789abcdef`;
    mkdirSync(path.join(localDir, planted));
    writeFileSync(path.join(localDir, planted, "journal"), "merge\n");
    const warnings = [];
    const onWarning = (warning) => warnings.push(warning);
    process.on("warning", onWarning);
    try {
      const remoteDir = fresh("remote");
      writeFileSync(path.join(remoteDir, "remote.txt"), "remote\n");
      await syncDirectoryFromSsh({ spec: server.spec, remoteDir, localDir });
      await syncDirectoryFromSsh({ spec: server.spec, remoteDir, localDir });
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(readdirSync(localDir).sort()).toEqual([planted, "remote.txt"].sort());
    const reported = warnings.filter((w) => w.code === "PAPERCLIP_NATIVE_FOREIGN_STAGING");
    expect(reported).toHaveLength(1);
    expect(reported[0].message).toContain(planted);
  });
});
