// Differential tests of snapshots and content signatures against upstream.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, unlinkSync, writeFileSync, mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { oracle } from "./helpers/oracle.js";
import * as ours from "@paperclipai/adapter-utils-native/workspace-restore-merge";
import * as oursRoot from "@paperclipai/adapter-utils-native";
import { createRandom, runSeed } from "./helpers/random.js";
import { randomExcludes, writeRandomTree } from "./helpers/trees.js";
const upstream = await oracle("workspace-restore-merge");
const upstreamExecute = await oracle("acpx-engine/execute");

const SEED = runSeed();
const here = path.dirname(fileURLToPath(import.meta.url));
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-snap-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function ordered(snapshot) {
  return { exclude: snapshot.exclude, entries: [...snapshot.entries] };
}

describe(`snapshot differential (DIFF_SEED=${SEED})`, () => {
  it("captures generated trees exactly as upstream: entries in order, serialized form and digest", async () => {
    const rng = createRandom(SEED);
    for (let round = 0; round < 25; round += 1) {
      const root = path.join(work, `tree-${round}`);
      const tree = await writeRandomTree(rng, root, { maxFileBytes: round % 5 === 0 ? 256 * 1024 : 8 * 1024 });
      try {
        const exclude = randomExcludes(rng);
        const theirs = await upstream.captureDirectorySnapshot(root, { exclude });
        const mine = await ours.captureDirectorySnapshot(root, { exclude });
        const where = `DIFF_SEED=${SEED} round=${round} exclude=${JSON.stringify(exclude)}`;
        expect(ordered(mine), where).toEqual(ordered(theirs));
        expect(ours.serializeDirectorySnapshot(mine), where).toEqual(upstream.serializeDirectorySnapshot(theirs));
        expect(ours.directorySnapshotSha256(mine), where).toBe(upstream.directorySnapshotSha256(theirs));
        expect(mine.entries.has("fifo") || mine.entries.has("sock")).toBe(false);
        for (const kind of ["other", "git"]) {
          const resolution =
            kind === "git" ? { kind, ignoredPaths: exclude.filter((e) => !e.includes("*")) } : { kind };
          expect(await oursRoot.referencedSourceContentSignature(root, resolution), `${where} ${kind}`).toBe(
            await upstreamExecute.referencedSourceContentSignature(root, resolution),
          );
        }
      } finally {
        await tree.close();
      }
    }
  }, 120_000);

  it("gives the same order and digest as upstream under another locale (sv_SE)", () => {
    const root = path.join(work, "locale");
    mkdirSync(root);
    for (const name of ["a", "z", "å", "ä", "ö", "A.txt", "a.txt", "a-b", "a.b", "é"])
      writeFileSync(path.join(root, name), name);
    const script = path.join(here, "helpers", "locale-probe.mjs");
    const run = (lang) =>
      JSON.parse(
        execFileSync(process.execPath, [script, root], {
          env: { ...process.env, LANG: lang, LC_ALL: lang },
          encoding: "utf8",
        }),
      );
    const sv = run("sv_SE.UTF-8");
    const en = run("C.UTF-8");
    expect(sv.ours).toEqual(sv.upstream);
    expect(en.ours).toEqual(en.upstream);
    expect(sv.ours.keys).not.toEqual(en.ours.keys); // the locale really changed the order
    expect(sv.ours.keys.slice(-4)).toEqual(["z", "å", "ä", "ö"]);
  });

  it("content signature of a failed resolution reads nothing and leaks nothing", async () => {
    const resolution = { kind: "failed", reason: "git-ignore-scan-failed" };
    expect(await oursRoot.referencedSourceContentSignature("/definitely/missing", resolution)).toBe(
      await upstreamExecute.referencedSourceContentSignature("/definitely/missing", resolution),
    );
    expect(await oursRoot.referencedSourceContentSignature("/definitely/missing", { kind: "other" })).toBe(
      await upstreamExecute.referencedSourceContentSignature("/definitely/missing", { kind: "other" }),
    );
  });

  it("round-trips through serialize/parse and rejects what upstream rejects", async () => {
    const rng = createRandom(SEED + 1);
    const root = path.join(work, "roundtrip");
    const tree = await writeRandomTree(rng, root, { special: false });
    const mine = await ours.captureDirectorySnapshot(root);
    const json = JSON.parse(JSON.stringify(ours.serializeDirectorySnapshot(mine)));
    expect(ordered(ours.parseDirectorySnapshot(json))).toEqual(ordered(upstream.parseDirectorySnapshot(json)));
    const bad = [
      null,
      1,
      [],
      { version: 2, exclude: [], entries: [] },
      { version: 1, exclude: [1], entries: [] },
      { version: 1, exclude: [], entries: [["../escape", { kind: "dir" }]] },
      { version: 1, exclude: [], entries: [["/abs", { kind: "dir" }]] },
      { version: 1, exclude: [], entries: [["C:\\x", { kind: "dir" }]] },
      { version: 1, exclude: [], entries: [["a\\..\\b", { kind: "dir" }]] },
      {
        version: 1,
        exclude: [],
        entries: [
          ["a", { kind: "dir" }],
          ["a", { kind: "dir" }],
        ],
      },
      { version: 1, exclude: [], entries: [["a", { kind: "file", mode: 1.5, hash: "0".repeat(64) }]] },
      { version: 1, exclude: [], entries: [["a", { kind: "file", mode: 1, hash: "A".repeat(64) }]] },
      {
        version: 1,
        exclude: ["x", "x"],
        entries: [
          ["a", { kind: "symlink", target: "t" }],
          ["", { kind: "dir" }],
        ],
      },
      { version: 1, exclude: ["x", "x"], entries: [["a", { kind: "symlink", target: "t" }]] },
    ];
    for (const value of bad) {
      const mineParsed = ours.parseDirectorySnapshot(value);
      const theirsParsed = upstream.parseDirectorySnapshot(value);
      expect(mineParsed === null ? null : ordered(mineParsed), JSON.stringify(value)).toEqual(
        theirsParsed === null ? null : ordered(theirsParsed),
      );
    }
    await tree.close();
  });

  it("directoryEntryMatchesBaseline agrees with upstream for kept, edited, chmod-ed, retyped and missing entries", async () => {
    const root = path.join(work, "baseline");
    mkdirSync(path.join(root, "d"), { recursive: true });
    writeFileSync(path.join(root, "f"), "one");
    writeFileSync(path.join(root, "g"), "two");
    execFileSync("ln", ["-s", "f", path.join(root, "l")]);
    const baseline = await upstream.captureDirectorySnapshot(root);
    writeFileSync(path.join(root, "g"), "changed");
    chmodSync(path.join(root, "f"), 0o755);
    unlinkSync(path.join(root, "l"));
    mkdirSync(path.join(root, "l"));
    for (const [rel, entry] of [...baseline.entries, ["missing", { kind: "dir" }]]) {
      expect(await ours.directoryEntryMatchesBaseline(root, rel, entry), rel).toBe(
        await upstream.directoryEntryMatchesBaseline(root, rel, entry),
      );
    }
  });
});

describe("snapshot errors and options", () => {
  it("a missing root gives an empty snapshot, like upstream", async () => {
    const mine = await ours.captureDirectorySnapshot(path.join(work, "nope"), { exclude: ["a", "a"] });
    expect(ordered(mine)).toEqual(
      ordered(await upstream.captureDirectorySnapshot(path.join(work, "nope"), { exclude: ["a", "a"] })),
    );
    expect(mine.exclude).toEqual(["a"]);
  });

  it("unreadable directories read as empty and unreadable files reject with EACCES (as an unprivileged user)", () => {
    const root = mkdtempSync(path.join(os.tmpdir(), "pc-native-eacces-"));
    chmodSync(root, 0o755);
    mkdirSync(path.join(root, "closed"));
    writeFileSync(path.join(root, "closed", "x"), "x");
    writeFileSync(path.join(root, "open"), "o");
    chmodSync(path.join(root, "closed"), 0o000);
    try {
      const script = path.join(here, "helpers", "eacces-probe.mjs");
      const asRoot = process.getuid?.() === 0;
      // Root reads everything, so the probe runs as `nobody` there.
      const out = execFileSync(process.execPath, [script, root], {
        encoding: "utf8",
        ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
        cwd: os.tmpdir(),
      });
      const result = JSON.parse(out);
      expect(result.dir.ours).toEqual(result.dir.upstream);
      expect(result.dir.ours).toEqual([
        ["closed", { kind: "dir" }],
        ["open", expect.any(Object)],
      ]);
      expect(result.file.ours).toEqual({ code: "EACCES", syscall: "open" });
      expect(result.file.upstream.code).toBe("EACCES");
    } finally {
      chmodSync(path.join(root, "closed"), 0o755);
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("a file removed during the walk rejects with ENOENT or is simply absent, never anything else", async () => {
    const root = path.join(work, "racing");
    mkdirSync(root);
    const names = Array.from({ length: 3000 }, (_, i) => `f${i}`);
    let sawEnoent = false;
    for (let attempt = 0; attempt < 20 && !sawEnoent; attempt += 1) {
      for (const n of names) writeFileSync(path.join(root, n), n);
      const capture = ours.captureDirectorySnapshot(root).then(
        () => null,
        (error) => error,
      );
      for (const n of names.slice().reverse()) rmSync(path.join(root, n), { force: true });
      const error = await capture;
      if (error) {
        expect(error.code).toBe("ENOENT");
        expect(error.message).toMatch(/^ENOENT: no such file or directory, (lstat|open) '/);
        sawEnoent = true;
      }
    }
  }, 60_000);

  it("an AbortSignal stops the capture with an AbortError", async () => {
    const controller = new AbortController();
    controller.abort(new Error("stop"));
    await expect(ours.captureDirectorySnapshot(work, { signal: controller.signal })).rejects.toMatchObject({
      name: "AbortError",
      code: "ABORT_ERR",
    });
    const root = path.join(work, "abort");
    mkdirSync(root);
    for (let i = 0; i < 2000; i += 1) writeFileSync(path.join(root, `f${i}`), Buffer.alloc(16 * 1024, i));
    const late = new AbortController();
    const pending = ours.captureDirectorySnapshot(root, { signal: late.signal });
    late.abort();
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
  });

  it("an incremental capture equals a cold one and reuses the hashes of unchanged files only", async () => {
    const root = path.join(work, "incremental");
    mkdirSync(path.join(root, "d"), { recursive: true });
    for (let i = 0; i < 50; i += 1) writeFileSync(path.join(root, "d", `f${i}`), `v${i}`);
    // Age the files beyond the racy window so their hashes may be reused.
    const old = new Date(Date.now() - 60_000);
    for (let i = 0; i < 50; i += 1) execFileSync("touch", ["-d", old.toISOString(), path.join(root, "d", `f${i}`)]);
    const first = await ours.captureDirectorySnapshot(root, { incremental: true });
    expect(oursRoot.snapshotReusedHashCount(first)).toBe(0);
    writeFileSync(path.join(root, "d", "f3"), "changed");
    writeFileSync(path.join(root, "d", "new"), "new");
    const second = await ours.captureDirectorySnapshot(root, { previous: first });
    const cold = await upstream.captureDirectorySnapshot(root);
    expect(ordered(second)).toEqual(ordered(cold));
    expect(oursRoot.snapshotReusedHashCount(second)).toBe(49);
    // Files that are racily new (written within the window) are always re-read.
    const third = await ours.captureDirectorySnapshot(root, { previous: second });
    expect(oursRoot.snapshotReusedHashCount(third)).toBe(49);
    expect(ordered(third)).toEqual(ordered(cold));
  });
});
