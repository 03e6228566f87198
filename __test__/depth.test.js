// Trees deeper than PATH_MAX through every walk: each one is complete or fails with a coded
// error, never a partial success, and a merge or mirror fed a source it could not read whole
// deletes nothing. Path-based fs calls fail past PATH_MAX, so trees are built and inspected
// with bash `cd`, GNU tar and GNU find, and removed with `rm -rf`.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import * as ours from "@paperclipai/adapter-utils-native";
import * as upstreamMerge from "@paperclipai/adapter-utils/workspace-restore-merge";

const here = path.dirname(fileURLToPath(import.meta.url));
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-depth-"));
afterAll(() => execFileSync("rm", ["-rf", work]));
process.env.PAPERCLIP_HOME = path.join(work, "home");
const PATH_MAX = 4096;

let caseNumber = 0;
const fresh = (tag) => {
  const dir = path.join(work, `${tag}-${caseNumber++}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};

/**
 * Builds `levels` nested directories named `name` below `root`, `step` levels per `mkdir -p`
 * and `cd` (bash slows down badly past PATH_MAX one level at a time), with a file `f<level>`
 * at the top of every step and, when given, a file `leaf` at the bottom; returns the number
 * of entries.
 */
function deepTree(root, levels, name = "d", step = 100, leaf = "") {
  execFileSync("bash", [
    "-c",
    'cd "$1" && for ((i = 0; i < $2; i += $3)); do echo "level $i" > "f$i"; mkdir -p "$4" && cd "$4" || exit 1; done; if [ -n "$5" ]; then echo secret > "$5"; fi',
    "_",
    root,
    String(levels),
    String(step),
    `${name}/`.repeat(step),
    leaf,
  ]);
  return levels + Math.ceil(levels / step) + (leaf ? 1 : 0);
}

/** Every entry below `root` as `type path` lines (GNU find reads through handles at any depth). */
const listing = (root) =>
  execFileSync("find", [".", "-mindepth", "1", "-printf", "%y %P\\n"], {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 1 << 28,
  })
    .split("\n")
    .filter(Boolean)
    .sort();
const longest = (root) => Math.max(...listing(root).map((line) => line.length - 2)) + root.length + 1;

const CASES = [
  ["3 000 levels of 1-byte names", (root) => deepTree(root, 3000, "d")],
  ["30 levels of 200-byte names", (root) => deepTree(root, 30, "n".repeat(200), 10)],
];

describe.each(CASES)("a tree deeper than PATH_MAX: %s", (_label, build) => {
  const root = fresh("tree");
  const entries = build(root);

  it("is deeper than PATH_MAX", () => {
    expect(listing(root)).toHaveLength(entries);
    expect(longest(root)).toBeGreaterThan(PATH_MAX);
  });

  it("captureDirectorySnapshot rejects with ENAMETOOLONG (as upstream), cold and incremental", async () => {
    const error = await ours.captureDirectorySnapshot(root).catch((e) => e);
    expect(error.code).toBe("ENAMETOOLONG");
    expect(error.syscall).toBe("lstat");
    const upstream = await upstreamMerge.captureDirectorySnapshot(root).catch((e) => e);
    expect(upstream.code).toBe("ENAMETOOLONG");
    expect(error.message).toBe(upstream.message);
    // With a previous snapshot to reuse (of the shallow part), the same.
    const first = listing(root)[0].slice(2);
    const previous = await ours.captureDirectorySnapshot(root, { exclude: [first.split("/")[0]] });
    const incremental = await ours.captureDirectorySnapshot(root, { incremental: true, previous }).catch((e) => e);
    expect(incremental.code).toBe("ENAMETOOLONG");
  });

  it("referencedSourceContentSignature is unreadable:<ENAMETOOLONG>, byte-identical to upstream", async () => {
    const upstream = await import("@paperclipai/adapter-utils/acpx-engine/execute");
    for (const resolution of [{ kind: "other" }, { kind: "git", ignoredPaths: [] }]) {
      const signature = await ours.referencedSourceContentSignature(root, resolution);
      expect(signature).toMatch(/^unreadable:Error: ENAMETOOLONG/);
      expect(signature).toBe(await upstream.referencedSourceContentSignature(root, resolution));
    }
  });

  it("createTarballFromDirectory, the stream and packDirectoryToFile archive every entry (as GNU tar)", async () => {
    const expected = execFileSync("tar", ["-tf", "-", "-C", root, "."], {
      input: execFileSync("tar", ["-cf", "-", "-C", root, "."], { maxBuffer: 1 << 28 }),
      maxBuffer: 1 << 28,
      encoding: "utf8",
    })
      .split("\n")
      .filter((line) => line && line !== "./")
      .map((line) => line.replace(/^\.\//, ""))
      .sort();
    expect(expected).toHaveLength(entries);
    const list = (file) =>
      execFileSync("tar", ["-tf", file], { encoding: "utf8", maxBuffer: 1 << 28 })
        .split("\n")
        .filter(Boolean)
        .sort();
    const plain = path.join(fresh("archives"), "plain.tar");
    await ours.createTarballFromDirectory({ localDir: root, archivePath: plain });
    expect(list(plain)).toEqual(expected);
    const packed = path.join(path.dirname(plain), "packed.tar.gz");
    await ours.packDirectoryToFile({ localDir: root, archivePath: packed });
    expect(list(packed)).toEqual(expected);
    const stream = await ours.createTarballStreamFromDirectory({ localDir: root });
    const chunks = [];
    for await (const chunk of stream.stream ?? stream) chunks.push(chunk);
    const streamed = path.join(path.dirname(plain), "streamed.tar");
    writeFileSync(streamed, Buffer.concat(chunks));
    expect(list(streamed)).toEqual(expected);
  });

  it("extractTarballToDirectory extracts a GNU tar archive of it whole (GNU tar itself cannot)", async () => {
    const archive = path.join(fresh("archive"), "deep.tar");
    execFileSync("tar", ["-cf", archive, "-C", root, "."]);
    const dest = fresh("extracted");
    const summary = await ours.extractTarballToDirectory({ source: archive, localDir: dest });
    expect(summary.entries).toBe(entries);
    expect(listing(dest)).toEqual(listing(root));
  });

  it("mirrorDirectory from a source too deep to list rejects and leaves the target as it was", async () => {
    const target = fresh("mirror-target");
    writeFileSync(path.join(target, "local-only"), "mine");
    mkdirSync(path.join(target, "keep"));
    const before = listing(target);
    const error = await ours.mirrorDirectory(root, target).catch((e) => e);
    expect(error.code).toBe("ENAMETOOLONG");
    expect(listing(target)).toEqual(before);
  });
});

describe("a merge fed an incomplete source deletes nothing", () => {
  it("an identical copy of the host at a longer path (past PATH_MAX) deletes nothing", async () => {
    // 1 900 levels fit PATH_MAX where the host is; the copy, 500 bytes further down, does not.
    const host = fresh("host");
    deepTree(host, 1900);
    expect(longest(host)).toBeLessThan(PATH_MAX);
    const before = listing(host);
    const baseline = await ours.captureDirectorySnapshot(host);
    const source = path.join(fresh("source"), "x".repeat(250), "y".repeat(250));
    mkdirSync(source, { recursive: true });
    deepTree(source, 1900);
    expect(listing(source)).toEqual(before);
    expect(longest(source)).toBeGreaterThan(PATH_MAX);
    const error = await ours
      .mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: host })
      .catch((e) => e);
    expect(error.code).toBe("ENAMETOOLONG");
    expect(listing(host)).toEqual(before);
    // Upstream refuses too: its lstat fails the same way.
    const upstream = await upstreamMerge
      .mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: host })
      .catch((e) => e);
    expect(upstream?.code).toBe("ENAMETOOLONG");
  });

  it("an unreadable source directory fails the merge before any change (as an unprivileged user)", () => {
    const asRoot = process.getuid?.() === 0;
    const out = JSON.parse(
      execFileSync(process.execPath, [path.join(here, "helpers", "unreadable-source-merge-probe.mjs")], {
        encoding: "utf8",
        ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
        cwd: os.tmpdir(),
      }),
    );
    expect(out.ours.code).toBe("EACCES");
    expect(out.ours.syscall).toBe("scandir");
    expect(out.ours.hostAfter).toEqual(out.hostBefore);
    // The gap this closes: upstream reads the directory as empty and deletes its files on the host.
    expect(out.upstream.code).toBe(null);
    expect(out.upstream.hostAfter.length).toBeLessThan(out.hostBefore.length);
  });
});

describe("ignore scans of a repository deeper than PATH_MAX", () => {
  it("readReferencedSourceGitIgnoredPaths and resolveReferencedSourceIgnore fail closed, never a shorter list", async () => {
    const repo = fresh("repo");
    execFileSync("git", ["init", "-q", repo]);
    writeFileSync(path.join(repo, ".gitignore"), "*.log\n");
    writeFileSync(path.join(repo, "top.log"), "x");
    deepTree(repo, 3000, "d", 100, "deep.log");
    const scan = await ours.readReferencedSourceGitIgnoredPaths(repo).then(
      (value) => ({ value }),
      (error) => ({ error }),
    );
    if (scan.value) {
      // Complete or nothing: a list that lacks the deep ignored file would let it be uploaded.
      expect(scan.value.ignoredPaths.some((p) => p.endsWith("deep.log"))).toBe(true);
    } else {
      expect(scan.error.code).toMatch(/ENAMETOOLONG|ERR_PAPERCLIP_NATIVE/);
    }
    const resolution = await ours.resolveReferencedSourceIgnore(repo);
    if (resolution.kind === "git") {
      expect(resolution.ignoredPaths.some((p) => p.endsWith("deep.log"))).toBe(true);
    } else {
      expect(resolution.kind).toBe("failed");
    }
  });
});
