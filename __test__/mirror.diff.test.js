// Differential test of mirrorDirectory against upstream on seeded source/target trees.
import { lstatSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { oracle } from "./helpers/oracle.js";
import * as ours from "@paperclipai/adapter-utils-native/sandbox-managed-runtime";
import { createRandom, runSeed } from "./helpers/random.js";
import { writeRandomTree } from "./helpers/trees.js";
import { REMOTE_OPS, copyTree, describeTree, inventory, mutate } from "./helpers/merge-triples.js";
const upstream = await oracle("sandbox-managed-runtime");

const SEED = runSeed();
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-mirror-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const settle = (p) =>
  p.then(
    () => "ok",
    (e) => String(e?.code),
  );

describe(`mirrorDirectory differential (DIFF_SEED=${SEED})`, () => {
  it("mirrors seeded trees exactly as upstream, preserving preserveAbsent paths", async () => {
    const rng = createRandom(SEED);
    let compared = 0;
    for (let round = 0; round < 24; round += 1) {
      const dir = path.join(work, `round-${round}`);
      const source = path.join(dir, "source");
      await (await writeRandomTree(rng, source, { special: false, maxFileBytes: 4096 })).close();
      const host = path.join(dir, "host");
      if (rng.chance(0.7)) {
        copyTree(source, host);
        mutate(rng, host, REMOTE_OPS, 1 + rng.int(4), { extra: [] });
      } else {
        await (await writeRandomTree(rng, host, { special: false, maxFileBytes: 4096 })).close();
      }
      const hostEntries = [...inventory(host).files, ...inventory(host).dirs];
      const preserveAbsent =
        hostEntries.length > 0 && rng.chance(0.7) ? [rng.pick(hostEntries), ".paperclip-runtime"] : [];
      const mineTarget = path.join(dir, "ours", "t");
      const theirsTarget = path.join(dir, "theirs", "t");
      copyTree(host, mineTarget);
      copyTree(host, theirsTarget);
      const where = `DIFF_SEED=${SEED} round=${round} preserveAbsent=${JSON.stringify(preserveAbsent)}`;
      const mine = await settle(ours.mirrorDirectory(source, mineTarget, { preserveAbsent }));
      const theirs = await settle(upstream.mirrorDirectory(source, theirsTarget, { preserveAbsent }));
      if (mine === "ERR_PAPERCLIP_NATIVE_SYMLINKED_ANCESTOR") continue; // upstream writes through a link here
      expect(mine, where).toBe(theirs);
      if (mine === "ok") {
        expect(describeTree(mineTarget), where).toEqual(describeTree(theirsTarget));
        expect(
          describeTree(mineTarget).some(([rel]) => rel.includes(".paperclip-copy.")),
          where,
        ).toBe(false);
        compared += 1;
      }
      rmSync(dir, { recursive: true, force: true });
    }
    expect(compared, `DIFF_SEED=${SEED}`).toBeGreaterThanOrEqual(18);
  }, 120_000);

  it("creates a missing target and refuses to copy into a target directory that is a link to a directory", async () => {
    const source = path.join(work, "src");
    await (await writeRandomTree(createRandom(SEED), source, { special: false })).close();
    const target = path.join(work, "fresh", "deep", "target");
    await ours.mirrorDirectory(source, target);
    expect(describeTree(target)).toEqual(
      describeTree(source).map(([rel, d]) => [
        rel,
        d.startsWith("dir ") ? `dir ${statSync(path.join(target, rel)).mode.toString(8)}` : d,
      ]),
    );
    const { symlinkSync, mkdirSync, writeFileSync } = await import("node:fs");
    const src2 = path.join(work, "src2");
    mkdirSync(path.join(src2, "sub"), { recursive: true });
    writeFileSync(path.join(src2, "sub", "x"), "x");
    const outside = path.join(work, "outside");
    mkdirSync(outside);
    const t2 = path.join(work, "t2");
    mkdirSync(t2);
    symlinkSync(outside, path.join(t2, "sub"));
    await expect(ours.mirrorDirectory(src2, t2)).rejects.toMatchObject({
      code: "ERR_PAPERCLIP_NATIVE_SYMLINKED_ANCESTOR",
    });
    expect(readdirSync(outside)).toEqual([]);
    expect(lstatSync(path.join(t2, "sub")).isSymbolicLink()).toBe(true);
  });
});
