// Length fields at every block boundary. A member name (or link target) of exactly 512·k
// bytes once made the packer declare a GNU long-name record one byte longer than it wrote:
// the member's own header was swallowed and its content read as headers, so a file holding
// a tar stream planted members of its choosing. Here: that injection through every packing
// entry point, then seeded trees whose names, directory names, paths and link targets sit at
// and around every length where the tar format changes shape (ASCII and multi-byte UTF-8),
// packed by us and by GNU tar, listed and extracted by GNU tar, bsdtar and our extractor.
import {
  accessSync,
  chmodSync,
  constants,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import {
  createTarballFromDirectory,
  createTarballStreamFromDirectory,
  extractTarballToDirectory,
  packDirectoryToFile,
} from "@paperclipai/adapter-utils-native";
import { createRandom, runSeed } from "./helpers/random.js";
import { RawArchive, bsdTar, gnuCreate, gnuExtract, haveGnuTar, listMembers, treeState } from "./helpers/tar.js";

const SEED = runSeed();
// Thousands of nested directories per run: on tmpfs when there is one (on this VM's disk,
// removing them takes longer than the tests).
const scratch = (() => {
  try {
    accessSync("/dev/shm", constants.W_OK);
    return "/dev/shm";
  } catch {
    return os.tmpdir();
  }
})();
const work = mkdtempSync(path.join(scratch, "pc-native-tarbound-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
let counter = 0;
const fresh = (tag) => {
  const dir = path.join(work, `${tag}-${(counter += 1)}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};

/** Byte lengths at and around every place a tar length field changes shape. */
const LENGTHS = [
  99, 100, 101, 154, 155, 156, 255, 256, 257, 510, 511, 512, 513, 514, 1022, 1023, 1024, 1025, 1026, 1534, 1535, 1536,
  1537, 1538,
];
/** Single-component lengths around the name fields, up to the 255-byte NAME_MAX. */
const COMPONENTS = [99, 100, 101, 154, 155, 156, 254, 255];
/** Fill characters of 1 to 4 UTF-8 bytes. */
const FILLS = ["a", "é", "€", "中", "😀"];

/** A tar stream that plants `evil/planted-<tag>.sh` (mode 755) and `evil/link-<tag> -> ../after.txt`. */
function plantedTar(tag) {
  return new RawArchive()
    .file(`evil/planted-${tag}.sh`, "#!/bin/sh\necho planted\n", 0o755)
    .symlink(`evil/link-${tag}`, "../after.txt")
    .finish();
}

/** `len` bytes: `shift` ASCII bytes, then `fill` repeated, topped up with `x`. */
function filled(len, fill, shift = 0) {
  const width = Buffer.byteLength(fill);
  const lead = Math.min(shift, len);
  const count = Math.floor((len - lead) / width);
  const out = "y".repeat(lead) + fill.repeat(count) + "x".repeat(len - lead - count * width);
  if (Buffer.byteLength(out) !== len) throw new Error(`filled(${len}) is ${Buffer.byteLength(out)} bytes`);
  return out;
}

/**
 * A relative path of exactly `len` bytes starting with the component `head`, continued by
 * components of at most 255 bytes (sizes drawn by `rng`, so component ends land anywhere,
 * at 99–101 and 154–156 and 255 too).
 */
function pathOfLen(rng, head, len, fill, shift) {
  let remaining = len - Buffer.byteLength(head);
  if (remaining < 2) throw new Error(`${len} bytes cannot start with ${head}`);
  const parts = [head];
  while (remaining > 0) {
    let size;
    if (remaining <= 256 && rng.chance(0.7)) size = remaining - 1;
    else {
      do size = rng.pick([255, 254, 200, 156, 155, 154, 101, 100, 99, 1 + rng.int(255)]);
      while (size > remaining - 1 || (remaining - size - 1 !== 0 && remaining - size - 1 < 2));
    }
    parts.push(filled(size, fill, parts.length === 1 ? shift : rng.int(4)));
    remaining -= size + 1;
  }
  const out = parts.join("/");
  if (Buffer.byteLength(out) !== len) throw new Error(`pathOfLen(${len}) is ${Buffer.byteLength(out)} bytes`);
  return out;
}

function writeFile(root, rel, content, mode = 0o644) {
  const full = path.join(root, rel);
  mkdirSync(path.dirname(full), { recursive: true });
  writeFileSync(full, content);
  chmodSync(full, mode);
}

const KINDS = ["file", "dir", "target", "linkname", "component"];

/**
 * A tree with one entry of every kind at every boundary length, fill characters and their
 * alignment drawn by `rng`: files whose member names, directories whose member names (with
 * their `/`), symlinks whose targets or own names have each length in LENGTHS, and files
 * whose single-component names have each length in COMPONENTS. Every file holds a planted
 * tar stream.
 */
function boundaryTree(rng, root) {
  writeFile(root, "after.txt", plantedTar("after"));
  let i = 0;
  for (const kind of KINDS) {
    for (const len of kind === "component" ? COMPONENTS : LENGTHS) {
      i += 1;
      const fill = rng.pick(FILLS);
      const shift = rng.int(4);
      if (kind === "file") {
        writeFile(root, pathOfLen(rng, `f${i}`, len, fill, shift), plantedTar(i), rng.pick([0o644, 0o755, 0o600]));
      } else if (kind === "dir") {
        // The member name is the path plus its `/`: `len` bytes, or `len + 1`.
        const dir = pathOfLen(rng, `d${i}`, rng.chance(0.5) ? len - 1 : len, fill, shift);
        mkdirSync(path.join(root, dir), { recursive: true });
        chmodSync(path.join(root, dir), rng.pick([0o755, 0o700]));
        if (rng.chance(0.3)) writeFile(root, `${dir}/inside`, plantedTar(`${i}-inside`));
      } else if (kind === "target" || kind === "linkname") {
        const target = pathOfLen(rng, "t", kind === "target" ? len : rng.pick(LENGTHS), fill, shift);
        const name = kind === "target" ? `l${i}` : pathOfLen(rng, `s${i}`, len, rng.pick(FILLS), rng.int(4));
        mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
        symlinkSync(target, path.join(root, name));
      } else {
        // At the top (a name alone in its header field) or under a directory.
        const name = filled(len, fill, shift);
        writeFile(root, rng.chance(0.5) ? name : `c${i}/${name}`, plantedTar(`c${i}`));
      }
    }
  }
}

const sorted = (root) => readdirSync(root).sort();
const noPlanted = (members) => members.filter((m) => m.includes("evil"));

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** Our archive of `root` through each packing entry point, as uncompressed tar bytes. */
async function ourArchives(root) {
  const file = path.join(fresh("out"), "a.tar");
  await createTarballFromDirectory({ localDir: root, archivePath: file });
  const viaFile = readFileSync(file);
  const plain = await collect(await createTarballStreamFromDirectory({ localDir: root }));
  const gzip = gunzipSync(await collect(await createTarballStreamFromDirectory({ localDir: root, gzip: true })));
  const packed = path.join(fresh("out"), "p.tar");
  await packDirectoryToFile({ localDir: root, archivePath: packed });
  return {
    createTarballFromDirectory: viaFile,
    "stream (plain)": plain,
    "stream (gzip)": gzip,
    packDirectoryToFile: readFileSync(packed),
  };
}

/** Lists `archive` with bsdtar (sorted, directories with their `/`), or `null` without bsdtar. */
function bsdList(archive) {
  const out = bsdTar(["-t", "-f", "-"], { input: archive });
  return out === null
    ? null
    : out
        .toString("utf8")
        .split("\n")
        .filter((l) => l !== "")
        .sort();
}

/** The trees GNU tar, bsdtar and our extractor make of `archive`. */
async function extractions(archive) {
  const out = {};
  const gnu = fresh("gnu-x");
  gnuExtract(archive, gnu);
  out["GNU tar"] = treeState(gnu);
  const bsd = fresh("bsd-x");
  if (bsdTar(["-x", "-p", "-P", "-f", "-", "-C", bsd], { input: archive }) !== null) out.bsdtar = treeState(bsd);
  const ours = fresh("our-x");
  await extractTarballToDirectory({ source: archive, localDir: ours });
  out.extractTarballToDirectory = treeState(ours);
  return out;
}

describe.skipIf(!haveGnuTar())(`tar length boundaries (seed ${SEED}; rerun with DIFF_SEED=${SEED})`, () => {
  it("a file of 512·k path bytes holding a tar stream stays one member, through every packing entry point", async () => {
    const root = fresh("inject");
    writeFile(root, "after.txt", "after\n");
    writeFile(root, "before.txt", "before\n");
    const rng = createRandom(1);
    for (const len of [511, 512, 513, 1024, 1536]) {
      writeFile(root, pathOfLen(rng, `n${len}`, len, "a", 0), plantedTar(len));
      mkdirSync(path.join(root, pathOfLen(rng, `m${len}`, len - 1, "a", 0)), { recursive: true }); // `name/` is len bytes
      symlinkSync(pathOfLen(rng, "t", len, "a", 0), path.join(root, `link${len}`));
    }
    const expected = treeState(root);
    const gnuMembers = listMembers(gnuCreate(root, sorted(root)));
    for (const [via, archive] of Object.entries(await ourArchives(root))) {
      const members = listMembers(archive);
      expect(noPlanted(members), via).toEqual([]);
      expect(members, via).toEqual(gnuMembers);
      for (const [tool, tree] of Object.entries(await extractions(archive))) {
        expect(tree, `${via}, extracted by ${tool}`).toEqual(expected);
      }
    }
  });

  it("a multi-byte character straddling byte 100 or byte 155 of a name, a directory name or a link target", async () => {
    const root = fresh("straddle");
    // `€` is 3 bytes: after 98 or 99 ASCII bytes it covers bytes 99-101 or 100-102; after
    // 153 or 154 it covers the 155th byte. In one component, and as a whole member path.
    for (const at of [98, 99, 153, 154]) {
      const name = `${"s".repeat(at)}€${"t".repeat(8)}`;
      writeFile(root, name, plantedTar(`top${at}`));
      writeFile(root, `dir${at}/${"p".repeat(at - 7)}€tail`, plantedTar(`in${at}`)); // `dir<at>/` is 6-7 bytes
      mkdirSync(path.join(root, `D${"q".repeat(at - 1)}€`), { recursive: true });
      symlinkSync(`${"r".repeat(at)}€/x`, path.join(root, `link${at}`));
    }
    const expected = treeState(root);
    const theirs = gnuCreate(root, sorted(root));
    for (const [via, archive] of Object.entries(await ourArchives(root))) {
      expect(listMembers(archive), via).toEqual(listMembers(theirs));
      const bsd = bsdList(archive);
      if (bsd !== null) expect(bsd, `${via}: bsdtar -t`).toEqual(bsdList(theirs));
      for (const [tool, tree] of Object.entries(await extractions(archive))) {
        expect(tree, `${via}, extracted by ${tool}`).toEqual(expected);
      }
    }
  });

  it("generated trees at every length boundary: same members and trees from us and GNU tar, whoever extracts", async () => {
    const rng = createRandom(SEED);
    for (let round = 0; round < 3; round += 1) {
      const root = fresh("bound");
      boundaryTree(rng, root);
      const expected = treeState(root);
      const theirs = gnuCreate(root, sorted(root));
      const ours = await collect(await createTarballStreamFromDirectory({ localDir: root, precomputeSize: true }));
      const context = `seed ${SEED}, round ${round}`;
      const members = listMembers(ours);
      expect(noPlanted(members), context).toEqual([]);
      expect(members, context).toEqual(listMembers(theirs));
      const bsd = bsdList(ours);
      if (bsd !== null) expect(bsd, `${context}: bsdtar -t`).toEqual(bsdList(theirs));
      for (const [from, archive] of [
        ["ours", ours],
        ["GNU tar's", theirs],
      ]) {
        for (const [tool, tree] of Object.entries(await extractions(archive))) {
          expect(tree, `${context}: ${from} archive extracted by ${tool}`).toEqual(expected);
        }
      }
    }
  });
});
