#!/usr/bin/env node
// `npm run pack:release -- --out DIR`: writes the tarballs a release publishes, exactly as
// they are published (the release workflow calls this script and publishes its output):
//
//   - the root package, its package.json given `optionalDependencies` on the platform package
//     of every target in `napi.targets`, each at the root's exact version (npm installs the
//     one whose `os`/`cpu`/`libc` match the machine);
//   - one platform package per binary found (`npm/<platform>/` plus
//     `adapter-utils-native.<platform>.node`), at the root's version.
//
// Binaries are taken from native/ (this machine's build) and from every `--binaries DIR`
// (searched recursively: the release workflow's downloaded build artifacts). Unless
// `--no-build`, the addon is built first (incremental; on linux-x64 against glibc 2.17 and
// checked). A linux-gnu binary that needs a newer glibc than 2.17 is refused. Prints one
// line per tarball, or a JSON summary with `--json`: `{ version, root, platforms: [{ platform,
// file }], missing: [platform] }`.
//
// Usage: node scripts/pack-release.mjs --out DIR [--binaries DIR]... [--no-build] [--json]
import { execFileSync } from "node:child_process";
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
import { fileURLToPath } from "node:url";
import { binaryFileName, platformPackageName, platformOfTarget } from "../lib/platforms.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function parseArgs(argv) {
  const out = { out: null, binaries: [], build: true, json: false };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === "--out") out.out = path.resolve(argv[++i] ?? "");
    else if (arg === "--binaries") out.binaries.push(path.resolve(argv[++i] ?? ""));
    else if (arg === "--no-build") out.build = false;
    else if (arg === "--json") out.json = true;
    else if (arg === "--help" || arg === "-h") {
      console.log("Usage: npm run pack:release -- --out DIR [--binaries DIR]... [--no-build] [--json]");
      process.exit(0);
    } else {
      console.error(`pack-release: unknown argument ${arg}`);
      process.exit(2);
    }
  }
  if (!out.out) {
    console.error("pack-release: --out DIR is required");
    process.exit(2);
  }
  return out;
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
    execFileSync("npm", ["pack", "--json", "--pack-destination", out], {
      cwd: dir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
    }),
  );
  return path.join(out, info.filename);
}

const opts = parseArgs(process.argv.slice(2));
const pkg = JSON.parse(readFileSync(path.join(repo, "package.json"), "utf8"));
const targets = pkg.napi.targets.map((triple) => ({ triple, platform: platformOfTarget(triple) }));

if (opts.build) {
  const host = execFileSync("rustc", ["-vV"], { encoding: "utf8" }).match(/^host: (.+)$/m)[1];
  const script = host === "x86_64-unknown-linux-gnu" ? "build:linux-x64-gnu" : "build";
  execFileSync("npm", ["run", "--silent", script], { cwd: repo, stdio: ["ignore", process.stderr, "inherit"] });
}

mkdirSync(opts.out, { recursive: true });
const stage = mkdtempSync(path.join(os.tmpdir(), "pc-native-release-"));
try {
  // The platform packages: npm/<platform>/ with its binary, at the root's version.
  const platforms = [];
  const missing = [];
  for (const { platform } of targets) {
    const file = binaryFileName(platform);
    const candidates = [
      path.join(repo, "native", file),
      ...opts.binaries.flatMap((dir) => findFiles(dir, file)),
    ].filter((f) => existsSync(f));
    if (candidates.length === 0) {
      missing.push(platform);
      continue;
    }
    // The newest build when there are several (native/ and an artifact of the same platform).
    const binary = candidates.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
    if (platform.endsWith("-gnu"))
      execFileSync(process.execPath, [path.join(repo, "scripts/check-glibc.mjs"), binary], {
        stdio: ["ignore", process.stderr, "inherit"],
      });
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
        `pack-release: no binary here for ${missing.join(", ")} (built by the release workflow on their own runners)`,
      );
  }
} finally {
  rmSync(stage, { recursive: true, force: true });
}
