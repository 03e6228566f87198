#!/usr/bin/env node
// `npm run pack:release -- [--targets all|LIST] [--out DIR]`: writes the tarballs a release
// publishes, exactly as they are published (the release workflow is written to call this
// script and publish its output; it has not run yet), into DIR (default dist/):
//
//   - the root package, its package.json given `optionalDependencies` on the platform package
//     of every target in `napi.targets`, each at the root's exact version (npm installs the
//     one whose `os`/`cpu`/`libc` match the machine);
//   - one platform package per binary (`npm/<platform>/` plus
//     `adapter-utils-native.<platform>.node`), at the root's version.
//
// Which platforms: with `--targets all` (or a comma-separated list of triples or platform
// names), those, each built first (scripts/build/build.mjs, every target on a Linux x64 host) and
// a missing binary is an error; without it, this machine's platform (built first) and every
// binary found in a `--binaries DIR` (searched recursively: the release workflow's
// downloaded build artifacts). `--no-build` packs what is there. Every binary is checked
// before it is packed (scripts/platforms/binary-checks.mjs: a linux-gnu binary within glibc 2.17, a
// musl one linking only musl's libc, a darwin one's Mach-O load commands and exports) and
// refused when a check fails, so each tarball holds a binary that passed. Prints one line per
// tarball, or a JSON summary with `--json`: `{ version, root, platforms: [{ platform, file }],
// missing: [platform] }`.
//
// Usage: node scripts/release/pack.mjs [--out DIR] [--targets all|LIST] [--binaries DIR]...
//        [--no-build] [--json]
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { binaryFileName, platformPackageName, platformOfTarget } from "../../lib/platforms.js";
import { buildTarget, parseTargets } from "../build/build.mjs";
import { ensureInspectionTools } from "../build/toolchains.mjs";
import { hostTriple, output, parseArgs, repo } from "../lib/shared.mjs";
import { checkBinary } from "../platforms/binary-checks.mjs";

const USAGE =
  "Usage: npm run pack:release -- [--out DIR] [--targets all|LIST] [--binaries DIR]... [--no-build] [--json]";

/** The command line: `{ out, targets, binaries, build, json }` (`targets` null when not given). */
function commandLine(argv) {
  const { values } = parseArgs(argv, {
    name: "pack-release",
    usage: USAGE,
    options: {
      out: { type: "string", default: path.join(repo, "dist") },
      targets: { type: "string" },
      binaries: { type: "string", multiple: true, default: [] },
      "no-build": { type: "boolean", default: false },
      json: { type: "boolean", default: false },
    },
  });
  return {
    out: path.resolve(values.out),
    targets: values.targets ?? null,
    binaries: values.binaries.map((dir) => path.resolve(dir)),
    build: !values["no-build"],
    json: values.json,
  };
}

/** Every file named `name` under `dir` (recursively). */
function findFiles(dir, name) {
  if (!existsSync(dir)) return [];
  const found = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...findFiles(full, name));
    else if (entry.name === name) found.push(full);
  }
  return found;
}

/** `npm pack` of `dir` into `out`; returns the tarball's path. */
function npmPack(dir, out) {
  const [info] = JSON.parse(
    output("npm", ["pack", "--json", "--pack-destination", out], { cwd: dir, stdio: ["ignore", "pipe", "inherit"] }),
  );
  return path.join(out, info.filename);
}

const opts = commandLine(process.argv.slice(2));
const pkg = JSON.parse(readFileSync(path.join(repo, "package.json"), "utf8"));
const targets = pkg.napi.targets.map((triple) => ({ triple, platform: platformOfTarget(triple) }));

// The targets asked for (built unless --no-build), or this machine's own.
let listed;
try {
  listed = opts.targets === null ? null : parseTargets(opts.targets);
} catch (error) {
  console.error(`pack-release: ${error.message}`);
  process.exit(2);
}
const host = hostTriple();
const own = targets.some((t) => t.triple === host) ? [host] : [];
if (opts.build) {
  for (const triple of listed ?? own) {
    try {
      buildTarget(triple);
    } catch (error) {
      console.error(`pack-release: ${error.message}`);
      process.exit(1);
    }
  }
}

// Each platform's binary: a listed target's from native/ or the artifacts; without a list,
// this machine's own from native/ and any platform's from the artifacts. The newest when
// there are several (native/ and an artifact of the same platform).
const chosen = [];
const missing = [];
for (const { triple, platform } of targets) {
  if (listed && !listed.includes(triple)) continue;
  const file = binaryFileName(platform);
  const candidates = [
    ...((listed ?? own).includes(triple) ? [path.join(repo, "native", file)] : []),
    ...opts.binaries.flatMap((dir) => findFiles(dir, file)),
  ].filter((f) => existsSync(f));
  if (candidates.length === 0) missing.push(platform);
  else
    chosen.push({ triple, platform, binary: candidates.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0] });
}
if (listed && missing.length) {
  console.error(`pack-release: no binary for ${missing.join(", ")} (build with npm run build -- --target <triple>)`);
  process.exit(1);
}
// Nothing is packed from a binary that fails its checks, read with the tools its build
// installs (installed here too when missing: a binary can come from another machine's build).
for (const { triple, binary } of chosen) {
  ensureInspectionTools(triple);
  const failed = checkBinary(triple, binary).filter((c) => !c.ok);
  if (failed.length) {
    console.error(
      `pack-release: ${path.relative(repo, binary)} fails its checks, not packed: ${failed.map((c) => `${c.check}: ${c.detail}`).join("; ")}`,
    );
    process.exit(1);
  }
}

mkdirSync(opts.out, { recursive: true });
const stage = mkdtempSync(path.join(os.tmpdir(), "pc-native-release-"));
try {
  // The platform packages: npm/<platform>/ with its binary, at the root's version.
  const platforms = [];
  for (const { platform, binary } of chosen) {
    const file = binaryFileName(platform);
    const dir = path.join(stage, platform);
    cpSync(path.join(repo, "npm", platform), dir, { recursive: true });
    cpSync(binary, path.join(dir, file));
    const manifest = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
    if (manifest.name !== platformPackageName(platform))
      throw new Error(
        `npm/${platform}/package.json is named ${manifest.name}, expected ${platformPackageName(platform)}`,
      );
    manifest.version = pkg.version;
    manifest.engines = pkg.engines;
    writeFileSync(path.join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
    platforms.push({ platform, file: npmPack(dir, opts.out) });
  }

  // The root package: the published files, its manifest with the platform packages as
  // optional dependencies and without what only this repository uses.
  const rootDir = path.join(stage, "root");
  mkdirSync(rootDir);
  for (const entry of [...pkg.files, "README.md", "LICENSE", "CHANGELOG.md"]) {
    if (existsSync(path.join(repo, entry)))
      cpSync(path.join(repo, entry), path.join(rootDir, entry), { recursive: true });
  }
  const manifest = { ...pkg };
  delete manifest.devDependencies;
  delete manifest.overrides;
  delete manifest.scripts;
  manifest.optionalDependencies = Object.fromEntries(
    targets.map(({ platform }) => [platformPackageName(platform), pkg.version]),
  );
  writeFileSync(path.join(rootDir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  const root = npmPack(rootDir, opts.out);

  if (opts.json) {
    console.log(JSON.stringify({ version: pkg.version, root, platforms, missing }));
  } else {
    console.log(
      `pack-release: ${path.relative(process.cwd(), root) || root} (root, optionalDependencies: ${targets.length} platforms at ${pkg.version})`,
    );
    for (const { platform, file } of platforms)
      console.log(`pack-release: ${path.relative(process.cwd(), file) || file} (${platform})`);
    if (missing.length)
      console.log(
        `pack-release: no binary here for ${missing.join(", ")} (npm run pack:release -- --targets ${missing.join(",")} builds them)`,
      );
  }
} finally {
  rmSync(stage, { recursive: true, force: true });
}
