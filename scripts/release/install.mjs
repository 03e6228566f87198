#!/usr/bin/env node
// Installs what `npm run pack:release` makes into an empty project, the way an operator
// would: `npm install <root>.tgz <platform>.tgz @paperclipai/adapter-utils@<verified>` and
// nothing else from this repository (the platform tarball of the machine npm runs for). Used by the release install test
// (__test__/release-install.test.js) and by the test command, whose activation suite runs
// load the plugin and the hook from this installed copy.
//
// Usage: node scripts/release/install.mjs --dir DIR [--no-build] [--json]
// Prints the project's directory, or with --json `{ project, nativeRoot, root, platforms }`.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { VERIFIED_UPSTREAM_VERSIONS } from "../../lib/activation/coverage.js";
import { currentPlatform } from "../../lib/platforms.js";
import { isMain, output, parseArgs, repo } from "../lib/shared.mjs";

/** PATH without any directory that holds cargo or rustc: an operator's machine has no Rust. */
export function pathWithoutRust(value = process.env.PATH ?? "") {
  return value
    .split(path.delimiter)
    .filter((dir) => dir && !existsSync(path.join(dir, "cargo")) && !existsSync(path.join(dir, "rustc")))
    .join(path.delimiter);
}

/**
 * Installs the root tarball `root`, the platform tarballs `platformFiles` and the first
 * verified upstream into the empty project `project` (created), with no Rust on PATH.
 * `npm` is the command that runs npm (default `npm`; scripts/platforms/test.mjs passes
 * another architecture's Node running npm's CLI, so npm picks that platform).
 */
export function installTarballs(project, { root, platformFiles, npm = ["npm"], env = {}, timeout }) {
  mkdirSync(project, { recursive: true });
  writeFileSync(
    path.join(project, "package.json"),
    `${JSON.stringify({ name: "operator-project", private: true, type: "module" }, null, 2)}\n`,
  );
  execFileSync(
    npm[0],
    [
      ...npm.slice(1),
      "install",
      "--no-audit",
      "--no-fund",
      "--prefer-offline",
      root,
      ...platformFiles,
      `@paperclipai/adapter-utils@${VERIFIED_UPSTREAM_VERSIONS[0]}`,
    ],
    {
      cwd: project,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env, PATH: pathWithoutRust(env.PATH ?? process.env.PATH) },
      timeout,
    },
  );
  return path.join(project, "node_modules/@paperclipai/adapter-utils-native");
}

/**
 * Packs the release tarballs into `dir/tarballs` and installs the root and this machine's
 * platform tarball with upstream into the empty project `dir/project`; returns `{ project,
 * nativeRoot, root, platforms }` (`platforms`: every platform tarball packed).
 */
export function installRelease(dir, { build = false } = {}) {
  const tarballs = path.join(dir, "tarballs");
  const packed = JSON.parse(
    output(
      process.execPath,
      [path.join(repo, "scripts/release/pack.mjs"), "--out", tarballs, "--json", ...(build ? [] : ["--no-build"])],
      { stdio: ["ignore", "pipe", "inherit"] },
    ),
  );
  const project = path.join(dir, "project");
  const platform = currentPlatform();
  const nativeRoot = installTarballs(project, {
    root: packed.root,
    platformFiles: packed.platforms.filter((p) => p.platform === platform).map((p) => p.file),
  });
  return { project, nativeRoot, root: packed.root, platforms: packed.platforms };
}

const USAGE = "Usage: node scripts/release/install.mjs --dir DIR [--no-build] [--json]";

if (isMain(import.meta.url)) {
  const { values } = parseArgs(process.argv.slice(2), {
    name: "install-release",
    usage: USAGE,
    options: {
      dir: { type: "string" },
      "no-build": { type: "boolean", default: false },
      json: { type: "boolean", default: false },
    },
  });
  if (!values.dir) {
    console.error(USAGE);
    process.exit(2);
  }
  const installed = installRelease(path.resolve(values.dir), { build: !values["no-build"] });
  console.log(values.json ? JSON.stringify(installed) : installed.project);
}
