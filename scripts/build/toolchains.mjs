// The toolchains that build every target of package.json's `napi.targets` on a Linux x64 host,
// each installed here when missing (as the test command installs what it needs), and the tools
// a built binary is read with: used by scripts/build/build.mjs (the build entry), and by the
// entry points that check built binaries (scripts/release/pack.mjs,
// scripts/platforms/test.mjs, which also build the core's tests with a target's toolchain).
// Emulation is not here: it is the platform checks' own (scripts/platforms/emulation.mjs).
// CONTRIBUTING.md ("Other targets") explains the choices; in short, per target:
//
//   x86_64-unknown-linux-gnu    the host's Rust, napi's cross toolchain (gcc, glibc 2.17 sysroot)
//   aarch64-unknown-linux-gnu   napi's aarch64 cross toolchain (gcc, glibc 2.17 sysroot) as linker
//                               and C compiler
//   *-linux-musl, *-apple-darwin  zig (PyPI `ziglang`) through cargo-zigbuild (PyPI) as C compiler
//                               and linker: musl and libSystem from zig, no SDK
//
// Rust's standard library for the target comes from the host's Rust when it has it (rustup
// with the target added, as in the GitHub workflows); otherwise from Debian's `rustc-web`
// (its own rustc and cargo): the prebuilt aarch64-gnu std (`libstd-rust-web-dev:arm64`,
// multiarch) or, for the other targets, std built from source (`rust-web-src`, `-Zbuild-std`
// allowed by RUSTC_BOOTSTRAP=1), as on a machine whose rustup cannot download targets.
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { ensureDebianPackages, hostTriple, onPath, output, repo, run, runShown, step } from "../lib/shared.mjs";

/** Pinned tool versions (PyPI packages and napi's npm toolchain package). */
export const ZIG_VERSION = "0.17.0";
export const CARGO_ZIGBUILD_VERSION = "0.24.0";
export const NAPI_CROSS_AARCH64_VERSION = "1.0.3";

/**
 * The oldest macOS the darwin binaries load on (LC_BUILD_VERSION `minos`): macOS 11, the
 * first with Apple silicon; Node 24 itself needs a newer one.
 */
export const MACOSX_DEPLOYMENT_TARGET = "11.0";

/** The one target directory of every build other than the host's own (host build scripts build once). */
export const CROSS_TARGET_DIR = path.join(repo, "target", "cross");

const cache = path.join(repo, ".cache", "cross");

/** Cargo's environment-variable spelling of a triple: `aarch64-apple-darwin` → `AARCH64_APPLE_DARWIN`. */
export function tripleEnv(triple) {
  return triple.toUpperCase().replace(/[-.]/g, "_");
}

/** Whether the Rust sysroot `sysroot` has a prebuilt standard library for `triple`. */
function hasStd(sysroot, triple) {
  const dir = path.join(sysroot, "lib", "rustlib", triple, "lib");
  return existsSync(dir) && readdirSync(dir).some((f) => f.startsWith("libstd-") && f.endsWith(".rlib"));
}

/** Debian's prebuilt std per target (multiarch package); the other targets build std from source. */
const DEBIAN_STD = {
  "x86_64-unknown-linux-gnu": "libstd-rust-web-dev",
  "aarch64-unknown-linux-gnu": "libstd-rust-web-dev:arm64",
};

/**
 * Debian's Rust toolchain (rustc-web 1.96, cargo-web) and `extra` packages, installed when
 * missing. Its `rustc`, `cargo` and `rustdoc` are diverted (dpkg-divert) to
 * `/usr/bin/<tool>.rust-web` before they are installed: /usr/bin gains no `rustc` or `cargo`
 * that would take the place of the host's own Rust for anything that finds Rust on PATH (and
 * scripts/release/install.mjs's operator PATH, which leaves out every directory holding one,
 * keeps /usr/bin). Returns the tools' paths.
 */
export function debianRust(extra = []) {
  const tools = {};
  for (const tool of ["rustc", "cargo", "rustdoc"]) {
    tools[tool] = `/usr/bin/${tool}.rust-web`;
    const diverted = run("dpkg-divert", ["--truename", `/usr/bin/${tool}`]);
    if (diverted.stdout.trim() !== tools[tool]) {
      if (process.getuid?.() !== 0) throw new Error(`Debian's rustc-web is needed: run as root to install it`);
      runShown("dpkg-divert", [
        "--package",
        "pc-native-cross",
        "--divert",
        tools[tool],
        "--rename",
        `/usr/bin/${tool}`,
      ]);
    }
  }
  ensureDebianPackages(["rustc-web", "cargo-web", ...extra]);
  return tools;
}

/**
 * The Rust toolchain for `triple`: `{ source, env, buildStd }`. `source` is `host` (the
 * host's Rust has the target's std) or `debian` (Debian's rustc-web, installed when missing;
 * `buildStd` when std is compiled from `rust-web-src`). `env` points cargo and napi at it.
 */
export function rustToolchain(triple) {
  const sysroot = output("rustc", ["--print", "sysroot"]).trim();
  if (hasStd(sysroot, triple)) return { source: "host", env: {}, buildStd: false };
  const std = DEBIAN_STD[triple];
  const tools = debianRust([std ?? "rust-web-src"]);
  const env = { CARGO: tools.cargo, RUSTC: tools.rustc, RUSTDOC: tools.rustdoc };
  const buildStd = !hasStd("/usr", triple);
  if (buildStd) Object.assign(env, { RUSTC_BOOTSTRAP: "1", CARGO_UNSTABLE_BUILD_STD: "std" });
  return { source: "debian", env, buildStd };
}

/** The virtual environment under .cache/cross that holds the pinned zig and cargo-zigbuild. */
const ZIG_VENV = path.join(cache, `py-ziglang-${ZIG_VERSION}-cargo-zigbuild-${CARGO_ZIGBUILD_VERSION}`);

/**
 * The pinned zig's binary when it is installed (ensureZig), else null; installs nothing.
 */
export function installedZig() {
  if (!existsSync(path.join(ZIG_VENV, "bin", "cargo-zigbuild"))) return null;
  const site = path.join(ZIG_VENV, "lib");
  const python = readdirSync(site).find((d) => d.startsWith("python"));
  const zig = python ? path.join(site, python, "site-packages", "ziglang", "zig") : null;
  return zig && existsSync(zig) ? zig : null;
}

/**
 * zig and cargo-zigbuild (PyPI, pinned) in a virtual environment under .cache/cross, and a
 * `zig` command in .cache/cross/bin, installed when missing (the musl and darwin builds).
 * Returns the directories to put first on PATH.
 */
export function ensureZig() {
  if (!installedZig()) {
    step(
      `ziglang ${ZIG_VERSION} and cargo-zigbuild ${CARGO_ZIGBUILD_VERSION} (PyPI) into ${path.relative(repo, ZIG_VENV)}`,
    );
    rmSync(ZIG_VENV, { recursive: true, force: true });
    runShown("python3", ["-m", "venv", ZIG_VENV]);
    runShown(path.join(ZIG_VENV, "bin", "pip"), [
      "install",
      "--quiet",
      `ziglang==${ZIG_VERSION}`,
      `cargo-zigbuild==${CARGO_ZIGBUILD_VERSION}`,
    ]);
  }
  return [shim("zig", installedZig()), path.join(ZIG_VENV, "bin")];
}

/** `.cache/cross/bin/<name>` made a link to `target`; returns the directory. */
function shim(name, target) {
  const dir = path.join(cache, "bin");
  mkdirSync(dir, { recursive: true });
  const link = path.join(dir, name);
  rmSync(link, { force: true });
  symlinkSync(target, link);
  return dir;
}

/**
 * `rust-objcopy`, which rustc runs to strip darwin binaries, from its sysroot's tools or,
 * where they lack it (Debian's rustc), Debian's llvm-objcopy under that name (the shims'
 * directory on the build's PATH, where rustc looks after its own).
 */
function ensureRustObjcopy(rustc) {
  const sysroot = output(rustc, ["--print", "sysroot"]).trim();
  if (existsSync(path.join(sysroot, "lib", "rustlib", hostTriple(rustc), "bin", "rust-objcopy"))) return [];
  ensureDebianPackages(["llvm"]);
  return [shim("rust-objcopy", "/usr/bin/llvm-objcopy")];
}

/** The `lib` directory of the zig binary `zig` (its libc headers, crt sources and symbol lists). */
export function zigLibDir(zig) {
  return path.join(path.dirname(realpathSync(zig)), "lib");
}

/**
 * napi's aarch64 cross toolchain (gcc 4.8 with a glibc 2.17 sysroot, npm package
 * `@napi-rs/cross-toolchain-x64-target-aarch64`), unpacked where napi keeps its own
 * (~/.napi-rs/cross-toolchain/<version>/<triple>). napi's `--use-napi-cross` cannot fetch it
 * here: it asks for the version of the `@napi-rs/cross-toolchain` it loads (1.0.0, pinned in
 * package.json's overrides for the x64 toolchain, the only version published for x64), and
 * the aarch64 toolchain exists only as 1.0.3. Returns the environment cargo and cc use it by.
 */
export function napiCrossAarch64Env() {
  const triple = "aarch64-unknown-linux-gnu";
  const dir = path.join(os.homedir(), ".napi-rs", "cross-toolchain", NAPI_CROSS_AARCH64_VERSION, triple);
  const gcc = path.join(dir, "bin", `${triple}-gcc`);
  if (!existsSync(gcc)) {
    const pkg = `@napi-rs/cross-toolchain-x64-target-aarch64@${NAPI_CROSS_AARCH64_VERSION}`;
    step(`${pkg} (npm) into ${dir}`);
    const tmp = path.join(cache, "napi-cross-download");
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    const [packed] = JSON.parse(
      output("npm", ["pack", "--json", pkg], { cwd: tmp, stdio: ["ignore", "pipe", "inherit"] }),
    );
    runShown("tar", ["-xzf", packed.filename, "package/aarch64-unknown-linux-gnu.tar.xz"], { cwd: tmp });
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    runShown("tar", ["-xJf", path.join(tmp, "package", `${triple}.tar.xz`), "-C", dir]);
    rmSync(tmp, { recursive: true, force: true });
  }
  const tool = (name) => path.join(dir, "bin", `${triple}-${name}`);
  const t = triple.replace(/-/g, "_");
  return {
    [`CARGO_TARGET_${tripleEnv(triple)}_LINKER`]: gcc,
    [`CC_${t}`]: gcc,
    [`CXX_${t}`]: tool("g++"),
    [`AR_${t}`]: tool("ar"),
    [`RANLIB_${t}`]: tool("ranlib"),
  };
}

/**
 * A macOS SDK of text-based stubs only, for the final link of darwin binaries (no headers: C
 * is compiled by zig with its own): libSystem (zig's stub, its arm64e-only target lists made
 * to name arm64 too, which lld reads; libc, libm, libpthread and libdl are links to it, as in
 * Apple's SDKs), libiconv (the names libgit2 uses, `/usr/lib/
 * libiconv.2.dylib`), and the Security and CoreFoundation frameworks, which libgit2-sys asks
 * to link on every Apple target although without its `https` feature (off here) it uses
 * neither: each names the framework's real install name and no symbol, and the link drops
 * both (`-dead_strip_dylibs`), so the binary loads neither. Returns the SDK's directory.
 */
export function macosSdk() {
  const sdk = path.join(cache, "macos-sdk");
  const lib = path.join(sdk, "usr", "lib");
  mkdirSync(lib, { recursive: true });
  const zig = path.join(ensureZig()[0], "zig");
  const libSystem = readFileSync(path.join(zigLibDir(zig), "libc", "darwin", "libSystem.tbd"), "utf8")
    .replace(/,\s*arm64e\.x1-(macos|maccatalyst)/g, "")
    .replace(/arm64e\.x1-(macos|maccatalyst),\s*/g, "")
    .replaceAll("arm64e-macos", "arm64-macos, arm64e-macos");
  writeFileSync(path.join(lib, "libSystem.tbd"), libSystem);
  // As in Apple's SDKs: libc, libm, libpthread and libdl are libSystem.
  for (const alias of ["c", "m", "pthread", "dl"]) {
    rmSync(path.join(lib, `lib${alias}.tbd`), { force: true });
    symlinkSync("libSystem.tbd", path.join(lib, `lib${alias}.tbd`));
  }
  const stub = (installName, symbols = []) =>
    [
      "--- !tapi-tbd",
      "tbd-version: 4",
      "targets: [ x86_64-macos, arm64-macos ]",
      `install-name: '${installName}'`,
      ...(symbols.length
        ? ["exports:", "  - targets: [ x86_64-macos, arm64-macos ]", `    symbols: [ ${symbols.join(", ")} ]`]
        : []),
      "...",
      "",
    ].join("\n");
  writeFileSync(
    path.join(lib, "libiconv.tbd"),
    stub("/usr/lib/libiconv.2.dylib", [
      "_iconv",
      "_iconv_open",
      "_iconv_close",
      "_iconvctl",
      "_iconvlist",
      "_iconv_canonicalize",
    ]),
  );
  for (const name of ["Security", "CoreFoundation"]) {
    const fw = path.join(sdk, "System", "Library", "Frameworks", `${name}.framework`);
    mkdirSync(fw, { recursive: true });
    writeFileSync(
      path.join(fw, `${name}.tbd`),
      stub(`/System/Library/Frameworks/${name}.framework/Versions/A/${name}`),
    );
  }
  return sdk;
}

/**
 * The linker of a darwin target: Debian's clang driving lld's Mach-O linker (ld64.lld) on the
 * stub SDK of `macosSdk()`, through a wrapper in .cache/cross/bin. zig links darwin binaries
 * too, but ignores `-exported_symbols_list`, so every global of the vendored C libraries
 * (some 10 000 names) would be exported; ld64.lld honours rustc's list (the addon's entry
 * only) and signs arm64 binaries ad hoc, as Apple's linker does. Returns the wrapper's path.
 */
export function darwinLinker(triple) {
  ensureDebianPackages(["clang-14", "lld-14"]);
  const arch = triple.startsWith("aarch64") ? "arm64" : "x86_64";
  const wrapper = path.join(cache, "bin", `${triple}-cc`);
  mkdirSync(path.dirname(wrapper), { recursive: true });
  writeFileSync(
    wrapper,
    [
      "#!/bin/sh",
      "# Written by scripts/build/toolchains.mjs: the darwin linker (clang + ld64.lld on a stub SDK).",
      `exec clang-14 -target ${arch}-apple-macos${MACOSX_DEPLOYMENT_TARGET} -fuse-ld=lld -isysroot '${macosSdk()}' "$@"`,
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  return wrapper;
}

/**
 * Everything `napi build` needs for `triple` on this host: `{ env, napiArgs, describe }`
 * (`describe`: one line naming the toolchain, for logs and docs/platforms.md).
 */
export function buildSetup(triple) {
  const [arch, , system, abi] = triple.split("-");
  if (triple === "x86_64-unknown-linux-gnu") {
    return {
      env: {},
      napiArgs: ["--use-napi-cross"],
      describe: "host Rust; napi cross toolchain (gcc, glibc 2.17 sysroot)",
    };
  }
  const rust = rustToolchain(triple);
  const env = { ...rust.env, CARGO_TARGET_DIR: CROSS_TARGET_DIR };
  const rustflags = [];
  const napiArgs = [];
  let describe;
  if (abi === "gnu") {
    if (arch !== "aarch64") throw new Error(`no cross toolchain for ${triple}`);
    Object.assign(env, napiCrossAarch64Env());
    describe = "napi aarch64 cross toolchain (gcc, glibc 2.17 sysroot)";
  } else {
    const shims = ensureZig();
    env.PATH = [...shims, process.env.PATH].join(path.delimiter);
    napiArgs.push("--cross-compile"); // cargo-zigbuild
    if (abi === "musl") {
      // The .node links musl's libc.so dynamically (Node's own), with zig's crt objects.
      rustflags.push("-C", "target-feature=-crt-static", "-C", "link-self-contained=no");
      describe = "zig (cargo-zigbuild): musl libc.so";
    } else if (system === "darwin") {
      env.PATH = [...ensureRustObjcopy(env.RUSTC ?? "rustc"), env.PATH].join(path.delimiter);
      env.MACOSX_DEPLOYMENT_TARGET = MACOSX_DEPLOYMENT_TARGET;
      env[`CARGO_TARGET_${tripleEnv(triple)}_LINKER`] = darwinLinker(triple);
      rustflags.push("-C", "link-arg=-Wl,-dead_strip_dylibs");
      describe = `zig (cargo-zigbuild) compiles C; clang + ld64.lld link on stub SDK, macOS ${MACOSX_DEPLOYMENT_TARGET}`;
    } else {
      throw new Error(`no cross toolchain for ${triple}`);
    }
  }
  // RUSTFLAGS, not CARGO_TARGET_<triple>_RUSTFLAGS: napi sets RUSTFLAGS for musl (adding
  // -crt-static to what it finds), and RUSTFLAGS replaces the target's flags. With --target,
  // cargo applies it to the target's crates only, not to build scripts.
  if (rustflags.length) env.RUSTFLAGS = [process.env.RUSTFLAGS, ...rustflags].filter(Boolean).join(" ");
  const std =
    rust.source === "host"
      ? "host Rust's std"
      : rust.buildStd
        ? "Debian rustc-web, std from source"
        : "Debian rustc-web and std";
  return { env, napiArgs, describe: `${std}; ${describe}` };
}

/**
 * The tools a built binary of `triple` is read with (scripts/build/check-glibc.mjs and
 * scripts/platforms/binary-checks.mjs, which report a missing one and install nothing), each
 * `{ tool, path, install, debian }`: `path` the command's (null when missing), `install` what
 * installs it, `debian` its Debian package (none for zig). binutils' readelf and objdump for
 * ELF; for musl also zig, whose musl symbol list the checks read (the musl build installs it);
 * Debian's llvm-objdump and llvm-nm for Mach-O.
 */
export function inspectionTools(triple) {
  const debian = (tool, pkg) => ({
    tool,
    path: onPath(tool),
    install: `apt-get install ${pkg} (as root: npm run pack:release and npm run test:platforms install it)`,
    debian: pkg,
  });
  if (triple.includes("-apple-")) return [debian("llvm-objdump", "llvm"), debian("llvm-nm", "llvm")];
  const tools = [debian("readelf", "binutils"), debian("objdump", "binutils")];
  if (triple.endsWith("-musl")) {
    tools.push({
      tool: `zig ${ZIG_VERSION}`,
      path: installedZig(),
      install: `npm run build -- --target ${triple} (the build's toolchain step puts it under .cache/cross; npm run pack:release and npm run test:platforms install it too)`,
      debian: null,
    });
  }
  return tools;
}

/**
 * Installs what `inspectionTools(triple)` finds missing: the Debian packages (as root), zig
 * as the build installs it (ensureZig). Called by the entry points that check built binaries
 * (npm run pack:release, npm run test:platforms) before they check one.
 */
export function ensureInspectionTools(triple) {
  const missing = inspectionTools(triple).filter((t) => !t.path);
  ensureDebianPackages([...new Set(missing.filter((t) => t.debian).map((t) => t.debian))]);
  if (missing.some((t) => !t.debian)) ensureZig();
}
