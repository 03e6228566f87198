// No name this library reserves (crates/core/src/reserved.rs: our staging directories and
// key) can be planted from outside. The catalogue of planted names (every staging prefix, the
// current form with a forged tag and an earlier form, live and dead pids, with and without a
// journal, at the root and nested, and the key file) through each untrusted way in but SSH
// (ssh-reserved-names.test.js): extraction from a file, a stream and a buffer, a restore
// merge's source, a mirror's source. Each is refused with
// ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY, nothing is written, and the next ordinary
// operation on the same root succeeds. A sandbox restore (archive download and native
// syncOut) leaves the planted entry out instead and takes the rest of the agent's work, so a
// committed file of a reserved name cannot stop every restore (docs/reliability.md). And a look-alike this
// host did not create, found on disk, is reported (a PAPERCLIP_NATIVE_FOREIGN_STAGING
// warning) and not obeyed: it blocks nothing and nothing of it is moved in.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { extractTarballToDirectory } from "../index.js";
import { prepareCommandManagedRuntime } from "../lib/command-managed-runtime.js";
import { mirrorDirectory } from "../lib/sandbox-managed-runtime.js";
import { captureDirectorySnapshot, mergeDirectoryWithBaseline } from "../lib/workspace-restore-merge.js";
import {
  archiveOf,
  catalogue,
  deadPid,
  expectLeftOut,
  expectRefused,
  plant,
  PREFIXES,
  smallWorkspace,
} from "./helpers/reserved.js";
import { CHILD } from "./helpers/kill-points.js";
import { nativeSyncRunner, spawnRunner } from "./helpers/sandbox-runner.js";
import { RawArchive, treeState } from "./helpers/tar.js";

const scratch = mkdtempSync(path.join(os.tmpdir(), "pc-reserved-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let counter = 0;
const fresh = (label) => {
  const dir = path.join(scratch, `${label}-${(counter += 1)}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};

const workspace = () => smallWorkspace(fresh("ws"));

const settle = (promise) =>
  promise.then(
    () => null,
    (error) => error,
  );

describe("planted names from an archive are refused (extraction from a file, a stream, a buffer)", () => {
  it("every catalogue entry: refused, nothing written; the next extraction succeeds", async () => {
    const dest = workspace();
    const before = treeState(dest);
    const file = path.join(scratch, "planted.tar");
    const cases = catalogue();
    expect(cases.length).toBeGreaterThanOrEqual(66);
    for (const entry of cases) {
      const archive = archiveOf(entry);
      writeFileSync(file, archive);
      for (const [how, source] of [
        ["file", file],
        ["stream", Readable.from([archive.subarray(0, 700), archive.subarray(700)])],
        ["buffer", archive],
      ]) {
        expectRefused(await settle(extractTarballToDirectory({ source, localDir: dest })), entry, how, dest);
        expect(treeState(dest), `${how}: ${entry.label}`).toEqual(before);
      }
    }
    await extractTarballToDirectory({ source: new RawArchive().file("after.txt", "after\n").finish(), localDir: dest });
    expect(readFileSync(path.join(dest, "after.txt"), "utf8")).toBe("after\n");
    expect(readdirSync(dest).sort()).toEqual(["a.txt", "after.txt", "d"]);
  });
});

describe("planted names in a merge's or a mirror's source are refused", () => {
  it("restore merge: every catalogue entry refused before any change; the next merge succeeds", async () => {
    const target = workspace();
    const baseline = await captureDirectorySnapshot(target, { exclude: [] });
    const before = treeState(target);
    for (const entry of catalogue()) {
      const source = fresh("merge-src");
      writeFileSync(path.join(source, "a.txt"), "changed by the remote\n");
      plant(source, entry);
      expectRefused(
        await settle(mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: target })),
        entry,
        "merge",
        source,
      );
      expect(treeState(target), entry.label).toEqual(before);
      rmSync(source, { recursive: true });
    }
    const source = fresh("merge-src");
    writeFileSync(path.join(source, "a.txt"), "changed by the remote\n");
    mkdirSync(path.join(source, "d"));
    writeFileSync(path.join(source, "d", "b.txt"), "b\n");
    await mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: target });
    expect(readFileSync(path.join(target, "a.txt"), "utf8")).toBe("changed by the remote\n");
  });

  it("mirror: every catalogue entry refused before any change (a missing target is not created); the next mirror succeeds", async () => {
    const target = workspace();
    const before = treeState(target);
    for (const entry of catalogue()) {
      const source = fresh("mirror-src");
      plant(source, entry);
      expectRefused(await settle(mirrorDirectory(source, target)), entry, "mirror", source);
      expect(treeState(target), entry.label).toEqual(before);
      const missing = path.join(scratch, `never-${counter}`);
      expectRefused(await settle(mirrorDirectory(source, missing)), entry, "mirror into a missing target", source);
      expect(existsSync(missing)).toBe(false);
      rmSync(source, { recursive: true });
    }
    const source = fresh("mirror-src");
    writeFileSync(path.join(source, "only.txt"), "only\n");
    await mirrorDirectory(source, target);
    expect(readdirSync(target)).toEqual(["only.txt"]);
  });
});

describe("planted names in a sandbox's workspace are left out by its restore, the rest arrives", () => {
  // Every host temp file the lane makes goes to os.tmpdir(): a private one per test.
  let savedTmp;
  beforeEach(() => {
    savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = fresh("tmp");
  });
  afterEach(() => {
    if (savedTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmp;
  });

  for (const [how, makeRunner] of [
    ["archive download", spawnRunner],
    ["native syncOut", nativeSyncRunner],
  ]) {
    it(`${how}: every catalogue entry left out, the rest of the work arrives, the host's files kept; the next restore succeeds`, async () => {
      const local = workspace();
      const remote = fresh("remote");
      const { runner } = makeRunner();
      const prepared = await prepareCommandManagedRuntime({
        runner,
        spec: { remoteCwd: remote, timeoutMs: 30_000 },
        adapterKey: "t",
        workspaceLocalDir: local,
      });
      for (const entry of catalogue()) {
        plant(remote, entry);
        const before = treeState(local);
        expectLeftOut(await settle(prepared.restoreWorkspace(() => {})), entry, how, local);
        const after = treeState(local);
        for (const [rel, state] of Object.entries(before))
          expect(after[rel], `${how}: ${entry.label}: ${rel}`).toEqual(state);
        rmSync(path.join(remote, entry.top.split("/")[0]), { recursive: true, force: true });
        writeFileSync(path.join(remote, "agent.txt"), `agent work after ${entry.label}\n`);
        await prepared.restoreWorkspace(() => {});
        expect(readFileSync(path.join(local, "agent.txt"), "utf8")).toBe(`agent work after ${entry.label}\n`);
        expect(
          readdirSync(local).filter((name) => name.startsWith(".paperclip-")),
          entry.label,
        ).toEqual([]);
      }
    }, 120_000);
  }
});

describe("a look-alike found on disk that this host did not create is reported, not obeyed", () => {
  const warnings = [];
  const onWarning = (warning) => warnings.push(warning);
  beforeEach(() => {
    warnings.length = 0;
    process.on("warning", onWarning);
  });
  afterEach(() => {
    process.off("warning", onWarning);
  });
  const foreignWarnings = async () => {
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
    return warnings.filter((w) => w.code === "PAPERCLIP_NATIVE_FOREIGN_STAGING").map((w) => w.message);
  };

  it("a planted merge journal (a dead pid) blocks no extraction, merge or mirror, and is reported once", async () => {
    const dest = workspace();
    const planted = `${PREFIXES.merge}${deadPid()}-0-0123456789abcdef`;
    mkdirSync(path.join(dest, planted));
    writeFileSync(path.join(dest, planted, "journal"), "merge\n");
    await extractTarballToDirectory({ source: new RawArchive().file("x.txt", "x\n").finish(), localDir: dest });
    await extractTarballToDirectory({ source: new RawArchive().file("y.txt", "y\n").finish(), localDir: dest });
    const baseline = await captureDirectorySnapshot(dest, { exclude: [] });
    const source = fresh("src");
    writeFileSync(path.join(source, "x.txt"), "merged\n");
    await mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: dest });
    expect(readFileSync(path.join(dest, "x.txt"), "utf8")).toBe("merged\n");
    expect(existsSync(path.join(dest, planted, "journal")), "left where it is").toBe(true);
    const reported = await foreignWarnings();
    expect(reported).toHaveLength(1);
    expect(reported[0]).toContain(planted);
  });

  it("a planted extraction journal with a staged file: the next extraction does not move the file in", async () => {
    const dest = workspace();
    for (const planted of [
      `${PREFIXES.extract}${deadPid()}-0-0123456789abcdef`,
      `${PREFIXES.extract}${deadPid()}-0-${"0123456789abcdef".repeat(2)}`,
    ]) {
      mkdirSync(path.join(dest, planted, "tree"), { recursive: true });
      writeFileSync(path.join(dest, planted, "tree", "planted.sh"), "#!/bin/sh\n");
      writeFileSync(path.join(dest, planted, "journal"), "extract 0\n");
    }
    await extractTarballToDirectory({ source: new RawArchive().file("x.txt", "x\n").finish(), localDir: dest });
    expect(existsSync(path.join(dest, "planted.sh"))).toBe(false);
    expect(existsSync(path.join(dest, "x.txt"))).toBe(true);
    expect(await foreignWarnings()).toHaveLength(2);
  });

  it("staging a killed process of this host left is still completed or reported as before (tagged names)", async () => {
    // A child process names a merge staging directory and exits: its pid is then dead.
    const name = execFileSync(process.execPath, [CHILD, "staging-name", "merge"], { encoding: "utf8" }).split("\n")[1];
    expect(name.startsWith(PREFIXES.merge)).toBe(true);
    const dest = workspace();
    mkdirSync(path.join(dest, name));
    writeFileSync(path.join(dest, name, "journal"), "merge\n");
    const error = await settle(
      extractTarballToDirectory({ source: new RawArchive().file("x.txt", "x\n").finish(), localDir: dest }),
    );
    expect(error?.code).toBe("ERR_PAPERCLIP_NATIVE_INTERRUPTED_RESTORE");
    expect(error.message).toContain(name);
    expect(await foreignWarnings()).toEqual([]);
  });
});
