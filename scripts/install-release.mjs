#!/usr/bin/env node
// Installs what `npm run pack:release` makes into an empty project, the way an operator
// would: `npm install <root>.tgz <platform>.tgz @paperclipai/adapter-utils@<verified>` and
// nothing else from this repository. Used by the release install test
// (__test__/release-install.test.js) and by the test command, whose activation suite runs
// load the plugin and the hook from this installed copy.
//
// Usage: node scripts/install-release.mjs --dir DIR [--no-build] [--json]
// Prints the project's directory, or with --json `{ project, nativeRoot, root, platforms }`.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { VERIFIED_UPSTREAM_VERSIONS } from "../lib/activation/coverage.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** PATH without any directory that holds cargo or rustc: an operator's machine has no Rust. */
export function pathWithoutRust(value = process.env.PATH ?? "") {
  return value
    .split(path.delimiter)
    .filter((dir) => dir && !existsSync(path.join(dir, "cargo")) && !existsSync(path.join(dir, "rustc")))
    .join(path.delimiter);
}

/**
 * Packs the release tarballs into `dir/tarballs` and installs them with upstream into the
 * empty project `dir/project`; returns `{ project, nativeRoot, root, platforms }`.
 */
export function installRelease(dir, { build = false } = {}) {
  const tarballs = path.join(dir, "tarballs");
  const packed = JSON.parse(
    execFileSync(
      process.execPath,
      [path.join(repo, "scripts/pack-release.mjs"), "--out", tarballs, "--json", ...(build ? [] : ["--no-build"])],
      {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "inherit"],
      },
    ),
  );
  const project = path.join(dir, "project");
  mkdirSync(project, { recursive: true });
  writeFileSync(
    path.join(project, "package.json"),
    `${JSON.stringify({ name: "operator-project", private: true, type: "module" }, null, 2)}\n`,
  );
  execFileSync(
    "npm",
    [
      "install",
      "--no-audit",
      "--no-fund",
      "--prefer-offline",
      packed.root,
      ...packed.platforms.map((p) => p.file),
      `@paperclipai/adapter-utils@${VERIFIED_UPSTREAM_VERSIONS[0]}`,
    ],
    {
      cwd: project,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, PATH: pathWithoutRust() },
    },
  );
  return {
    project,
    nativeRoot: path.join(project, "node_modules/@paperclipai/adapter-utils-native"),
    root: packed.root,
    platforms: packed.platforms,
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const at = args.indexOf("--dir");
  if (at < 0 || !args[at + 1]) {
    console.error("Usage: node scripts/install-release.mjs --dir DIR [--no-build] [--json]");
    process.exit(2);
  }
  const installed = installRelease(path.resolve(args[at + 1]), { build: !args.includes("--no-build") });
  console.log(args.includes("--json") ? JSON.stringify(installed) : installed.project);
}
