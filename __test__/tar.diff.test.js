// Differential tests of host tar creation and extraction against GNU tar and
// against upstream's createTarballFromDirectory (which runs the system tar).
import { execFileSync } from "node:child_process";
import { linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { oracle } from "./helpers/oracle.js";
import * as ours from "@paperclipai/adapter-utils-native/sandbox-managed-runtime";
import { extractTarballToDirectory, packDirectoryToFile } from "@paperclipai/adapter-utils-native";
import { createRandom, runSeed } from "./helpers/random.js";
import { randomExcludes, writeRandomTree } from "./helpers/trees.js";
import { gnuCreate, gnuExtract, haveGnuTar, listMembers, removeEscapingSymlinks, treeState } from "./helpers/tar.js";
const upstream = await oracle("sandbox-managed-runtime");

const SEED = runSeed();
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-tar-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const gnu = haveGnuTar();

const HEAVY = ["node_modules", ".git", "dist", "build"];
const META = ["secret[1].txt", "star*name", "q?mark", "back\\slash", "caret^", "dollar$", "{brace}"];

/** Upstream's escape (bracket and wildcard patterns are tested escaped and unescaped). */
const escape = (entry) => ours.escapeTarExcludeLiteral(entry);

/** An exclude list of every kind the upstream lanes pass: random shapes, metacharacter
 *  literals escaped or not, heavy-directory quartets, and `._*`. */
function excludeList(rng) {
  const list = randomExcludes(rng);
  for (let i = rng.int(3); i > 0; i -= 1) {
    const name = rng.pick(META);
    list.push(rng.chance(0.5) ? escape(name) : name);
    if (rng.chance(0.3)) list.push(`*/${rng.chance(0.5) ? escape(name) : name}`);
  }
  if (rng.chance(0.5)) {
    const dir = rng.pick(HEAVY);
    list.push(dir, `${dir}/*`, `*/${dir}`, `*/${dir}/*`);
  }
  if (rng.chance(0.2)) list.push("._*");
  if (rng.chance(0.2)) list.push(rng.pick(["*", "?", "a?", "*.txt", "[ab]", "[!a]*", "\\*", "x\\", "*/"]));
  return list;
}

const sortedNames = (dir) => import("node:fs").then((fs) => fs.readdirSync(dir).sort((a, b) => a.localeCompare(b)));

describe.skipIf(!gnu)(`tar differential against GNU tar (DIFF_SEED=${SEED})`, () => {
  it("archives the same members as GNU tar for generated trees and exclude lists", async () => {
    const rng = createRandom(SEED);
    for (let round = 0; round < 30; round += 1) {
      const root = path.join(work, `members-${round}`);
      const tree = await writeRandomTree(rng, root, { maxEntries: 14, maxFileBytes: 4096 });
      try {
        const exclude = excludeList(rng);
        const where = `DIFF_SEED=${SEED} round=${round} exclude=${JSON.stringify(exclude)}`;
        const archivePath = path.join(work, `members-${round}.tar`);
        await ours.createTarballFromDirectory({ localDir: root, archivePath, exclude });
        const expected = listMembers(gnuCreate(root, await sortedNames(root), exclude));
        expect(listMembers(archivePath), where).toEqual(expected);
      } finally {
        await tree.close();
      }
    }
  }, 120_000);

  it("GNU tar extracts our archive to the same tree as its own, and we extract GNU tar's archive to the same tree as GNU tar", async () => {
    const rng = createRandom(SEED + 1);
    for (let round = 0; round < 12; round += 1) {
      const root = path.join(work, `extract-${round}`);
      await writeRandomTree(rng, root, { maxEntries: 14, special: false, maxFileBytes: 16 * 1024 });
      removeEscapingSymlinks(root);
      writeFileSync(path.join(root, "linked-source"), `round ${round}`);
      linkSync(path.join(root, "linked-source"), path.join(root, "linked-copy")); // a hard link pair
      const exclude = excludeList(rng);
      const where = `DIFF_SEED=${SEED + 1} round=${round} exclude=${JSON.stringify(exclude)}`;
      const names = await sortedNames(root);
      const gnuArchive = gnuCreate(root, names, exclude);
      const reference = path.join(work, `extract-${round}-gnu-gnu`);
      mkdirSync(reference);
      gnuExtract(gnuArchive, reference);
      const expected = treeState(reference);

      // Our archive, extracted by GNU tar.
      const archivePath = path.join(work, `extract-${round}.tar`);
      await ours.createTarballFromDirectory({ localDir: root, archivePath, exclude });
      const gnuOfOurs = path.join(work, `extract-${round}-ours-gnu`);
      mkdirSync(gnuOfOurs);
      gnuExtract(archivePath, gnuOfOurs);
      expect(treeState(gnuOfOurs), `${where} (tar -xf of our archive)`).toEqual(expected);

      // GNU tar's archive, extracted by us (from a Buffer, a file and a gzip stream).
      const oursOfGnu = path.join(work, `extract-${round}-gnu-ours`);
      await extractTarballToDirectory({ source: gnuArchive, localDir: oursOfGnu });
      expect(treeState(oursOfGnu), `${where} (our extract of GNU tar's archive)`).toEqual(expected);

      // And our own gzip archive, extracted by us from a file.
      const gzPath = path.join(work, `extract-${round}.tar.gz`);
      await packDirectoryToFile({ localDir: root, archivePath: gzPath, exclude, gzip: 1 });
      const oursOfOurs = path.join(work, `extract-${round}-ours-ours`);
      await extractTarballToDirectory({ source: gzPath, localDir: oursOfOurs });
      expect(treeState(oursOfOurs), `${where} (our extract of our tar.gz)`).toEqual(expected);
    }
  }, 120_000);

  it("reproduces GNU tar's members for each shape of exclude (literal, class, escaped, wildcard, */X, ._*)", async () => {
    const root = path.join(work, "table");
    for (const rel of [
      "build/x",
      "src/build/y",
      "secret1.txt",
      "secret[1].txt",
      "x*y",
      "xzy",
      "^lead",
      "lead",
      "tail$",
      "._x",
      "src/._y",
      "keep",
    ]) {
      mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      writeFileSync(path.join(root, rel), rel);
    }
    const cases = [
      ["build"],
      ["secret[1].txt"],
      ["secret\\[1].txt"],
      ["x*y"],
      ["x\\*y"],
      ["^lead"],
      ["tail$"],
      ["*/build"],
      ["*/build/*"],
      ["._*"],
      [],
    ];
    for (const exclude of cases) {
      const archivePath = path.join(work, "table.tar");
      await ours.createTarballFromDirectory({ localDir: root, archivePath, exclude });
      expect(listMembers(archivePath), JSON.stringify(exclude)).toEqual(
        listMembers(gnuCreate(root, await sortedNames(root), exclude)),
      );
    }
    const members = (exclude) =>
      ours
        .createTarballFromDirectory({ localDir: root, archivePath: path.join(work, "t.tar"), exclude })
        .then(() => listMembers(path.join(work, "t.tar")));
    expect(await members(["secret[1].txt"])).toContain("secret[1].txt");
    expect(await members(["secret[1].txt"])).not.toContain("secret1.txt");
    expect(await members(["secret\\[1].txt"])).toContain("secret1.txt");
    expect(await members(["secret\\[1].txt"])).not.toContain("secret[1].txt");
    expect((await members([])).some((m) => m.includes("._"))).toBe(false);
  });
});

describe(`createTarballFromDirectory against upstream (DIFF_SEED=${SEED})`, () => {
  // Upstream runs the system tar with the process environment; pin the locale the core's
  // matcher is tested against (a UTF-8 locale: fnmatch on characters, then bytes).
  const withUtf8Locale = async (fn) => {
    const saved = process.env.LC_ALL;
    process.env.LC_ALL = "C.UTF-8";
    try {
      return await fn();
    } finally {
      if (saved === undefined) delete process.env.LC_ALL;
      else process.env.LC_ALL = saved;
    }
  };

  it.skipIf(!gnu)(
    "archives the same members as upstream for generated trees (a top-level name upstream's tar cannot take is archived by us)",
    async () => {
      const rng = createRandom(SEED + 2);
      let upstreamFailures = 0;
      for (let round = 0; round < 20; round += 1) {
        const root = path.join(work, `upstream-${round}`);
        const tree = await writeRandomTree(rng, root, { maxFileBytes: 2048 });
        try {
          const exclude = excludeList(rng);
          const followSymlinks = false;
          const where = `DIFF_SEED=${SEED + 2} round=${round} exclude=${JSON.stringify(exclude)}`;
          const theirsPath = path.join(work, `upstream-${round}-theirs.tar`);
          const oursPath = path.join(work, `upstream-${round}-ours.tar`);
          await ours.createTarballFromDirectory({ localDir: root, archivePath: oursPath, exclude, followSymlinks });
          const theirs = await withUtf8Locale(() =>
            upstream.createTarballFromDirectory({ localDir: root, archivePath: theirsPath, exclude, followSymlinks }),
          ).then(
            () => null,
            (error) => error,
          );
          if (theirs) {
            // GNU tar unquotes the names after `--`: `a\b` becomes `a` + backspace + … (so those names cannot be compared).
            upstreamFailures += 1;
            expect(String(theirs.message), where).toMatch(/Cannot stat/);
            const backslashed = (await sortedNames(root)).filter((name) => name.includes("\\"));
            expect(backslashed.length, where).toBeGreaterThan(0);
            continue;
          }
          expect(listMembers(oursPath), where).toEqual(listMembers(theirsPath));
        } finally {
          await tree.close();
        }
      }
      expect(upstreamFailures).toBeLessThan(20);
    },
    120_000,
  );

  it("archives a top-level name with a backslash, where upstream fails", async () => {
    const root = path.join(work, "backslash");
    mkdirSync(root);
    writeFileSync(path.join(root, "a\\b"), "x");
    writeFileSync(path.join(root, "plain"), "y");
    const theirs = await upstream
      .createTarballFromDirectory({ localDir: root, archivePath: path.join(work, "bs-theirs.tar") })
      .then(
        () => null,
        (error) => error,
      );
    expect(theirs).toBeInstanceOf(Error);
    await ours.createTarballFromDirectory({ localDir: root, archivePath: path.join(work, "bs-ours.tar") });
    expect(listMembers(path.join(work, "bs-ours.tar"))).toEqual(["a\\b", "plain"]);
  });

  it("writes 1024 zero bytes for an empty directory, as upstream", async () => {
    const root = path.join(work, "empty");
    mkdirSync(root);
    await ours.createTarballFromDirectory({ localDir: root, archivePath: path.join(work, "empty-ours.tar") });
    await upstream.createTarballFromDirectory({ localDir: root, archivePath: path.join(work, "empty-theirs.tar") });
    expect(readFileSync(path.join(work, "empty-ours.tar"))).toEqual(Buffer.alloc(1024));
    expect(readFileSync(path.join(work, "empty-ours.tar"))).toEqual(readFileSync(path.join(work, "empty-theirs.tar")));
  });

  it("orders top-level members with localeCompare and follows symlinks with followSymlinks", async () => {
    const root = path.join(work, "order");
    mkdirSync(path.join(root, "real"), { recursive: true });
    for (const name of ["b", "B", "a", "é", "z", "_x", "10", "9"]) writeFileSync(path.join(root, name), name);
    writeFileSync(path.join(root, "real", "inside"), "i");
    const { symlinkSync } = await import("node:fs");
    symlinkSync("real", path.join(root, "link"));
    const archivePath = path.join(work, "order.tar");
    await ours.createTarballFromDirectory({ localDir: root, archivePath, followSymlinks: true });
    const raw = readFileSync(archivePath);
    const order = [];
    for (let offset = 0; offset + 512 <= raw.length; offset += 512) {
      const name = raw
        .subarray(offset, offset + 100)
        .toString("utf8")
        .replace(/\0.*$/s, "");
      if (name === "") break;
      order.push(name);
      const size = parseInt(
        raw
          .subarray(offset + 124, offset + 136)
          .toString("utf8")
          .replace(/\0.*$/s, "")
          .trim() || "0",
        8,
      );
      offset += Math.ceil(size / 512) * 512;
    }
    const tops = order.filter((name) => !name.slice(0, -1).includes("/")).map((name) => name.replace(/\/$/, ""));
    expect(tops).toEqual([...tops].sort((a, b) => a.localeCompare(b)));
    expect(order).toContain("link/inside");
    const theirsPath = path.join(work, "order-theirs.tar");
    await upstream.createTarballFromDirectory({ localDir: root, archivePath: theirsPath, followSymlinks: true });
    expect(listMembers(archivePath)).toEqual(listMembers(theirsPath));
  });

  it.skipIf(!gnu)("orders top-level members as upstream under two locales (sv_SE and C.UTF-8)", () => {
    const root = path.join(work, "locale");
    mkdirSync(root);
    for (const name of ["a", "z", "å", "ä", "ö", "A.txt", "a.txt", "a-b", "a.b", "é", "10", "9"])
      writeFileSync(path.join(root, name), name);
    const probe = path.join(path.dirname(fileURLToPath(import.meta.url)), "helpers", "tar-order-probe.mjs");
    const run = (lang) =>
      JSON.parse(
        execFileSync(process.execPath, [probe, root], {
          env: { ...process.env, LANG: lang, LC_ALL: lang },
          encoding: "utf8",
        }),
      );
    const sv = run("sv_SE.UTF-8");
    const en = run("C.UTF-8");
    expect(sv.ours).toEqual(sv.upstream);
    expect(en.ours).toEqual(en.upstream);
    expect(sv.ours).not.toEqual(en.ours); // the locale really changed the order
    expect(sv.ours.slice(-3)).toEqual(["å", "ä", "ö"]);
  });

  it("rejects a missing directory with upstream's readdir error and leaves no archive", async () => {
    const archivePath = path.join(work, "missing.tar");
    const missing = path.join(work, "does-not-exist");
    const mine = await ours.createTarballFromDirectory({ localDir: missing, archivePath }).catch((e) => e);
    const theirs = await upstream.createTarballFromDirectory({ localDir: missing, archivePath }).catch((e) => e);
    expect(mine).toMatchObject({ code: "ENOENT", syscall: "scandir", path: missing, message: theirs.message });
    expect(theirs.code).toBe("ENOENT");
    const { existsSync } = await import("node:fs");
    expect(existsSync(archivePath)).toBe(false);
  });
});
