// Differential tests of the restore merge against upstream on seeded triples:
// a baseline tree, a remote result derived from it, and host edits since the baseline.
// Upstream merges one copy of the host tree, ours another; the results must be equal byte
// for byte (kinds, full modes, contents, link targets), or fail with the same code.
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { oracle } from "./helpers/oracle.js";
import * as ours from "@paperclipai/adapter-utils-native/workspace-restore-merge";
import { createRandom, runSeed } from "./helpers/random.js";
import { randomExcludes, writeRandomTree } from "./helpers/trees.js";
import { HOST_OPS, REMOTE_OPS, copyTree, describeTree, inventory, mutate } from "./helpers/merge-triples.js";
const upstream = await oracle("workspace-restore-merge");

const SEED = runSeed();
const ROUNDS = 64;
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-merge-"));
const saved = { home: process.env.PAPERCLIP_HOME, instance: process.env.PAPERCLIP_INSTANCE_ID };

beforeAll(() => {
  process.env.PAPERCLIP_HOME = path.join(work, "paperclip-home");
  process.env.PAPERCLIP_INSTANCE_ID = "merge-diff";
});
afterAll(() => {
  for (const [key, value] of [
    ["PAPERCLIP_HOME", saved.home],
    ["PAPERCLIP_INSTANCE_ID", saved.instance],
  ]) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  rmSync(work, { recursive: true, force: true });
});

async function settle(promise) {
  try {
    await promise;
    return { ok: true, label: "ok" };
  } catch (error) {
    return { ok: false, label: String(error?.code), error };
  }
}

/** Makes `relative` (and each directory above it) a real directory below `root`, removing
 * any file or link in the way. */
function realDirs(root, relative) {
  let at = root;
  for (const part of relative === "." ? [] : relative.split("/")) {
    at = path.join(at, part);
    let st = null;
    try {
      st = lstatSync(at);
    } catch {}
    if (st && !st.isDirectory()) rmSync(at, { force: true });
    if (!st || !st.isDirectory()) mkdirSync(at);
  }
}

/** Changes made to one path on both sides (the cases random picks rarely hit together). */
const PAIRED = {
  hostEditsRemoteDeleted(rng, remote, host, file) {
    rmSync(path.join(remote, file));
    writeFileSync(path.join(host, file), `host edit ${rng.int(1e9)}`);
  },
  bothModify(rng, remote, host, file) {
    writeFileSync(path.join(remote, file), `remote ${rng.int(1e9)}`);
    writeFileSync(path.join(host, file), `host ${rng.int(1e9)}`);
  },
  sameChange(rng, remote, host, file) {
    const text = `both ${rng.int(1e9)}`;
    writeFileSync(path.join(remote, file), text);
    writeFileSync(path.join(host, file), text);
  },
};

describe(`merge differential (DIFF_SEED=${SEED})`, () => {
  it(`merges ${ROUNDS} seeded triples exactly as upstream`, async () => {
    const rng = createRandom(SEED);
    const remoteNames = Object.keys(REMOTE_OPS);
    const hostNames = Object.keys(HOST_OPS);
    const pairedNames = Object.keys(PAIRED);
    const stats = { compared: 0, sameError: 0, refused: 0, escapedUpstream: 0 };
    for (let round = 0; round < ROUNDS; round += 1) {
      const dir = path.join(work, `round-${round}`);
      const base = path.join(dir, "base");
      const tree = await writeRandomTree(rng, base, { special: false, maxFileBytes: 4096 });
      await tree.close();
      // Every eighth round is a symlinked-ancestor attack (below); every sixteenth is one no
      // exclusion can hide and no random tree can lack a directory for.
      const pinned = round % 16 === 3;
      if (pinned) {
        mkdirSync(path.join(base, "guarded dir"));
        writeFileSync(path.join(base, "guarded dir", "kept"), "kept");
      }
      const exclude = pinned ? [] : randomExcludes(rng);
      const baseline = await upstream.captureDirectorySnapshot(base, { exclude });
      const remote = path.join(dir, "remote");
      const host = path.join(dir, "host");
      const outside = path.join(dir, "outside");
      copyTree(base, remote);
      copyTree(base, host);
      mkdirSync(outside);

      const files = inventory(base).files;
      const paired = round % 4 === 1 && files.length > 0 ? pairedNames[(round >> 2) % pairedNames.length] : null;
      if (paired) PAIRED[paired](rng, remote, host, rng.pick(files));
      const dirs = inventory(base).dirs;
      const attack = round % 8 === 3 && dirs.length > 0 ? (pinned ? "guarded dir" : rng.pick(dirs)) : null;
      const remoteOps = mutate(rng, remote, REMOTE_OPS, rng.int(5), {
        forced: remoteNames[round % remoteNames.length],
        extra: exclude,
      });
      const hostOps = mutate(rng, host, HOST_OPS, rng.int(4), {
        forced: round % 3 === 0 ? hostNames[(round / 3) % hostNames.length] : undefined,
        extra: outside,
        avoid: round % 3 === 0 ? [] : ["dirToLink"],
      });
      if (attack) {
        // The host replaced a directory by a link leading outside the target; the remote
        // writes below that directory. Planted after the random edits, which could undo it.
        realDirs(host, path.dirname(attack));
        rmSync(path.join(host, attack), { recursive: true, force: true });
        symlinkSync(outside, path.join(host, attack));
        realDirs(remote, attack);
        writeFileSync(path.join(remote, attack, "planted"), "payload");
      }
      const where = `DIFF_SEED=${SEED} round=${round} paired=${paired} attack=${attack} remote=${remoteOps} host=${hostOps} exclude=${JSON.stringify(exclude)}`;

      const oursTarget = path.join(dir, "ours", "t");
      const theirsTarget = path.join(dir, "theirs", "t");
      copyTree(host, oursTarget);
      copyTree(host, theirsTarget);
      // Ours first: `outside` must still be empty afterwards, whatever upstream does next.
      const mine = await settle(
        ours.mergeDirectoryWithBaseline({ baseline, sourceDir: remote, targetDir: oursTarget }),
      );
      expect(describeTree(outside), where).toEqual([]);
      const theirs = await settle(
        upstream.mergeDirectoryWithBaseline({ baseline, sourceDir: remote, targetDir: theirsTarget }),
      );

      // Where upstream wrote through the host's link, ours must have refused.
      if (describeTree(outside).length > 0) {
        stats.escapedUpstream += 1;
        expect(mine.label, where).toBe("ERR_PAPERCLIP_NATIVE_SYMLINKED_ANCESTOR");
      }
      if (mine.label === "ERR_PAPERCLIP_NATIVE_SYMLINKED_ANCESTOR") {
        // Upstream writes through a host symlink here; ours refuses before any change.
        stats.refused += 1;
        expect(describeTree(oursTarget), where).toEqual(describeTree(host));
        expect(mine.error.paths.length, where).toBeGreaterThan(0);
        for (const p of mine.error.paths) expect(lstatSync(path.join(host, p)).isSymbolicLink(), where).toBe(true);
      } else {
        expect(mine.label, `${where} ${mine.error?.stack ?? ""}`).toBe(theirs.label);
        if (theirs.ok) {
          expect(describeTree(oursTarget), where).toEqual(describeTree(theirsTarget));
          stats.compared += 1;
        } else {
          stats.sameError += 1;
        }
      }
      rmSync(dir, { recursive: true, force: true });
    }
    console.log(`merge differential DIFF_SEED=${SEED}: ${JSON.stringify(stats)}`);
    expect(stats.compared, `DIFF_SEED=${SEED}`).toBeGreaterThanOrEqual(40);
    // The pinned attack rounds cannot miss.
    expect(stats.refused, `DIFF_SEED=${SEED}`).toBeGreaterThanOrEqual(ROUNDS / 16);
  }, 180_000);

  it("matches upstream on the upstream suite's sequential stale-baseline restores", async () => {
    const dir = path.join(work, "stale");
    const run = async (impl, target) => {
      mkdirSync(target, { recursive: true });
      const baseline = await impl.captureDirectorySnapshot(target, { exclude: [] });
      for (const name of ["a", "b"]) {
        const source = path.join(dir, `src-${name}`);
        mkdirSync(path.join(source, "x", "y"), { recursive: true });
        writeFileSync(path.join(source, "x", "y", `${name}.md`), name);
        await impl.mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: target });
      }
      return describeTree(target);
    };
    expect(await run(ours, path.join(dir, "ours"))).toEqual(await run(upstream, path.join(dir, "theirs")));
    expect(readFileSync(path.join(dir, "ours", "x", "y", "a.md"), "utf8")).toBe("a");
  });
});
