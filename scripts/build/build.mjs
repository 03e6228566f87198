#!/usr/bin/env node
// `npm run build -- [--target TRIPLE]`: the release build of one target of package.json's
// `napi.targets` into native/adapter-utils-native.<platform>.node, installing the toolchain it
// needs when missing (scripts/build/toolchains.mjs). Without --target, this machine's own target (on
// linux-x64: x86_64-unknown-linux-gnu against glibc 2.17). Every target builds on a Linux x64
// host; on another host only its own target builds (napi's plain host build). A linux-gnu
// binary is then checked against the glibc floor (scripts/build/check-glibc.mjs, 2.17). The GitHub
// workflows and `npm run pack:release -- --targets …` build through this script. On a fresh
// clone it installs the npm dev dependencies first (@napi-rs/cli; scripts/setup/npm-deps.sh).
//
// Usage: node scripts/build/build.mjs [--target TRIPLE] [--debug]
import { spawnSync } from "node:child_process";
import { statSync } from "node:fs";
import path from "node:path";
import { binaryFileName, platformOfTarget } from "../../lib/platforms.js";
import { hostTriple, isMain, parseArgs, readJson, repo, runShown, step } from "../lib/shared.mjs";
import { buildSetup } from "./toolchains.mjs";

/** The targets this repository ships (package.json `napi.targets`). */
export const TARGETS = readJson("package.json").napi.targets;

/** The built binary of `triple` (native/adapter-utils-native.<platform>.node). */
export function binaryPath(triple) {
  return path.join(repo, "native", binaryFileName(platformOfTarget(triple)));
}

/**
 * Builds `triple` (release unless `debug`) and returns `{ triple, file, seconds, describe }`.
 * Throws when the build or the glibc check fails.
 */
export function buildTarget(triple, { debug = false } = {}) {
  if (!TARGETS.includes(triple)) {
    throw new Error(`${triple} is not one of package.json's napi.targets (${TARGETS.join(", ")})`);
  }
  runShown("bash", [path.join(repo, "scripts/setup/npm-deps.sh")], { cwd: repo });
  const host = hostTriple();
  let setup;
  if (host === "x86_64-unknown-linux-gnu") setup = buildSetup(triple);
  else if (triple === host) setup = { env: {}, napiArgs: [], describe: "host Rust and C compiler" };
  else throw new Error(`${triple} is built on a Linux x64 host (this one is ${host}); here only ${host} builds`);

  const napi = path.join(repo, "node_modules", "@napi-rs", "cli", "dist", "cli.js");
  const args = [
    napi,
    "build",
    ...(debug ? [] : ["--release"]),
    "--target",
    triple,
    ...setup.napiArgs,
    "--platform",
    "--output-dir",
    "native",
    "--js",
    "binding.cjs",
    "--dts",
    "binding.d.ts",
    "--no-dts-header",
  ];
  step(`build ${triple} (${setup.describe})`);
  const started = process.hrtime.bigint();
  const r = spawnSync(process.execPath, args, {
    cwd: repo,
    stdio: ["ignore", process.stderr, process.stderr],
    env: { ...process.env, ...setup.env },
  });
  if (r.status !== 0) throw new Error(`build of ${triple} failed (napi build exited ${r.status ?? r.signal})`);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const file = binaryPath(triple);
  if (triple.endsWith("-linux-gnu")) {
    runShown(process.execPath, [path.join(repo, "scripts/build/check-glibc.mjs"), file]);
  }
  process.stderr.write(
    `build: ${path.relative(repo, file)} (${statSync(file).size} bytes, ${seconds.toFixed(0)} s, ${setup.describe})\n`,
  );
  return { triple, file, seconds, describe: setup.describe };
}

/** `all` or a comma-separated list of triples or platform names → triples, in `napi.targets` order. */
export function parseTargets(spec) {
  if (spec === "all") return [...TARGETS];
  const wanted = spec
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const out = [];
  for (const name of wanted) {
    const triple = TARGETS.find((t) => t === name || platformOfTarget(t) === name);
    if (!triple) throw new Error(`unknown target ${name} (package.json napi.targets: ${TARGETS.join(", ")})`);
    if (!out.includes(triple)) out.push(triple);
  }
  return TARGETS.filter((t) => out.includes(t));
}

const USAGE = `Usage: npm run build -- [--target TRIPLE] [--debug]
  TRIPLE: one of package.json's napi.targets (${TARGETS.join(", ")}); default this machine's`;

if (isMain(import.meta.url)) {
  const { values } = parseArgs(process.argv.slice(2), {
    name: "build",
    usage: USAGE,
    options: { target: { type: "string" }, debug: { type: "boolean", default: false } },
  });
  try {
    buildTarget(values.target ? parseTargets(values.target)[0] : hostTriple(), { debug: values.debug });
  } catch (error) {
    console.error(`build: ${error.message}`);
    process.exit(1);
  }
}
