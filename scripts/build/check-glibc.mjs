#!/usr/bin/env node
// Fails when a linux-gnu `.node` needs a glibc symbol version newer than the limit
// (default 2.17, what the napi cross toolchains build against), so prebuilt binaries keep
// loading on old distributions. Usage: node scripts/build/check-glibc.mjs [file.node] [--max 2.17]
// Without a file: every linux-gnu `.node` in native/.
import { readdirSync } from "node:fs";
import path from "node:path";
import { isMain, onPath, output, parseArgs, repo } from "../lib/shared.mjs";

/** The glibc floor the README states for linux-gnu binaries. */
export const GLIBC_FLOOR = "2.17";

const parse = (v) => v.split(".").map(Number);

/** Whether version `a` (`2.17`) is newer than `b`. */
export function newerVersion(a, b) {
  const [x, y] = [parse(a), parse(b)];
  for (let i = 0; i < Math.max(x.length, y.length); i += 1) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) > (y[i] ?? 0);
  }
  return false;
}

/**
 * The newest `GLIBC_x.y` symbol version `file` needs (`0` when none), read by binutils'
 * objdump; throws, saying what installs it, when objdump is missing.
 */
export function highestGlibc(file) {
  if (!onPath("objdump")) throw new Error("objdump is missing (binutils: apt-get install binutils)");
  const dump = output("objdump", ["-T", file]);
  const versions = [...new Set([...dump.matchAll(/GLIBC_(\d+(?:\.\d+)+)/g)].map((m) => m[1]))];
  return versions.reduce((a, b) => (newerVersion(b, a) ? b : a), "0");
}

const USAGE = "Usage: node scripts/build/check-glibc.mjs [file.node]... [--max 2.17]";

if (isMain(import.meta.url)) {
  const { values, positionals } = parseArgs(process.argv.slice(2), {
    name: "check-glibc",
    usage: USAGE,
    options: { max: { type: "string", default: GLIBC_FLOOR } },
    positionals: true,
  });
  const files =
    positionals.length > 0
      ? positionals
      : readdirSync(path.join(repo, "native"))
          .filter((f) => /linux-(x64|arm64)-gnu\.node$/.test(f))
          .map((f) => path.join(repo, "native", f));
  if (files.length === 0) {
    console.error("check-glibc: no linux-gnu .node in native/ (build first)");
    process.exit(2);
  }
  let failed = false;
  for (const file of files) {
    let highest;
    try {
      highest = highestGlibc(file);
    } catch (error) {
      console.error(`check-glibc: ${error.message}`);
      process.exit(2);
    }
    const ok = !newerVersion(highest, values.max);
    failed ||= !ok;
    console.log(
      `check-glibc: ${path.basename(file)} needs GLIBC_${highest} (limit ${values.max}): ${ok ? "ok" : "TOO NEW"}`,
    );
  }
  process.exit(failed ? 1 : 0);
}
