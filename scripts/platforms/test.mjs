#!/usr/bin/env node
// `npm run test:platforms`: for every platform tarball `npm run pack:release` wrote (dist/ by
// default), the strongest check this Linux x64 machine can run, printed as a table (target,
// check, what ran, result); exit 1 when one fails. Every check runs on what the tarballs
// hold (their binary, the root package's JS), installed where something is installed.
//
//   every target      the binary's static checks (scripts/platforms/binary-checks.mjs; the
//                     tools they read it with installed first, as the target's build does)
//   linux-x64-gnu     the root and platform tarballs installed into an empty project next to
//                     upstream by npm under Node 24; `paperclip-sync doctor`; the demo's
//                     differential steps (`paperclip-sync demo --no-ssh --no-sandbox`: ignore
//                     resolution, snapshots, content signature, tar pack, merge, each against
//                     upstream). The whole suite is `npm test`'s.
//   linux-arm64-gnu   the same under Node 24 for linux-arm64 in qemu (Debian's
//                     qemu-user-static, binfmt_misc: scripts/platforms/emulation.mjs), npm
//                     itself running there; then the portable vitest files
//                     (scripts/platforms/portable-vitest.txt) under that Node, loading the
//                     installed binary
//   linux-*-musl      the binary loaded by musl's own loader (dlopen, Debian's musl); the core
//                     crate's unit tests for the target (x86_64 natively, aarch64 in qemu),
//                     built by the target's toolchain (scripts/build/toolchains.mjs)
//   darwin-*          nothing runs darwin code here: the Mach-O checks, and the core crate's
//                     unit tests compiled and linked for the target
//
// Tests that cannot pass under emulation are skipped by name and listed in the table with
// the reason (EMULATION_SKIPS). `--doc` rewrites docs/platforms.md's table with this run's.
//
// Usage: node scripts/platforms/test.mjs [--dir DIR] [--targets all|LIST] [--doc] [--json FILE]
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { VERIFIED_UPSTREAM_VERSIONS } from "../../lib/activation/coverage.js";
import { binaryFileName, PACKAGE_NAME, platformOfTarget, platformPackageName } from "../../lib/platforms.js";
import { parseTargets, TARGETS } from "../build/build.mjs";
import { buildSetup, ensureInspectionTools, ensureZig } from "../build/toolchains.mjs";
import {
  ensureDebianPackages,
  isMain,
  markdownTable,
  output,
  parseArgs,
  readJson,
  repo,
  run,
  tail,
  withBlock,
} from "../lib/shared.mjs";
import { installTarballs } from "../release/install.mjs";
import { checkBinary } from "./binary-checks.mjs";
import { ensureQemuAarch64, nodeArm64, vitestArm64Natives } from "./emulation.mjs";

/**
 * Tests skipped under qemu, each with why it cannot pass there (not a fault of the binary):
 * `{ where, test, reason }`, `where` a vitest file or `cargo` (the core's tests, aarch64);
 * `test` is matched as a substring of the test's full name.
 */
export const EMULATION_SKIPS = [
  {
    where: "cargo",
    test: "ignore_scan::tests::differential_against_git_on_generated_repositories",
    reason:
      "starts git hundreds of times from a multithreaded test process; under qemu-user such a fork now and then deadlocks in the child before its exec (a child left waiting on a futex, the test with it)",
  },
  {
    where: "__test__/merge-lock.test.js",
    test: "lock held by another process blocks ours until released",
    reason:
      "asserts ours enters at most 60 ms before the holding process has reported its release; under qemu that report alone takes longer",
  },
];

/**
 * How the vitest run under qemu differs from a native one, each with why: `{ args, env, note }`.
 * Node under qemu runs JavaScript many times slower, so deadlines written for native runs are
 * raised, never the assertions.
 */
const EMULATION_VITEST = {
  args: ["--testTimeout=300000", "--hookTimeout=300000"],
  env: { IGNORE_DIFF_REPOSITORIES: "40" },
  note: "vitest's default timeouts 300 s instead of 60 s; ignore.diff on 40 generated repositories instead of 200 (IGNORE_DIFF_REPOSITORIES: 200 take past that test's own 180 s bound under qemu)",
};

const USAGE = "Usage: npm run test:platforms -- [--dir DIR] [--targets all|LIST] [--doc] [--json FILE]";

/** The command line: `{ dir, targets, doc, json }` (`targets` null when not given). */
function commandLine(argv) {
  const { values } = parseArgs(argv, {
    name: "test-platforms",
    usage: USAGE,
    options: {
      dir: { type: "string", default: path.join(repo, "dist") },
      targets: { type: "string" },
      doc: { type: "boolean", default: false },
      json: { type: "string" },
    },
  });
  return {
    dir: path.resolve(values.dir),
    targets: values.targets ?? null,
    doc: values.doc,
    json: values.json ? path.resolve(values.json) : null,
  };
}

/** npm pack's file name of `name@version`: `@scope/pkg` → `scope-pkg-<version>.tgz`. */
const tarballName = (name, version) => `${name.replace(/^@/, "").replace("/", "-")}-${version}.tgz`;

/** The Node version every run uses (scripts/setup/node-versions.sh's NODE24_VERSION). */
function node24Version() {
  return /^NODE24_VERSION=(\S+)$/m.exec(readFileSync(path.join(repo, "scripts/setup/node-versions.sh"), "utf8"))[1];
}

/** Node $NODE24_VERSION for linux-x64 (scripts/setup/node-versions.sh installs it under .cache/). */
function nodeX64(version) {
  const dir = output("bash", ["-c", `source scripts/setup/node-versions.sh && node_dir ${version}`], {
    cwd: repo,
    stdio: ["ignore", "pipe", process.stderr],
  }).trim();
  return path.join(dir, "node");
}

/** npm's own CLI script (run by another architecture's Node, npm installs for that one). */
function npmCli() {
  return realpathSync(output("bash", ["-c", "command -v npm"]).trim());
}

/**
 * Installs the root and `platform`'s tarballs with upstream into an empty project by npm
 * under `node`, then runs the installed `paperclip-sync doctor` and the demo's differential
 * steps there, each a row given to `add`. Returns `{ ok, installedBinary }`.
 */
function installedChecks({ platform, node, nodeLabel, work, root, tarball, env }, add) {
  const rows = [];
  const push = (row) => {
    rows.push(row);
    add(row);
  };
  const project = path.join(work, `project-${platform}`);
  const upstream = `@paperclipai/adapter-utils@${VERIFIED_UPSTREAM_VERSIONS[0]}`;
  const ran = `npm (under ${nodeLabel}) installs the root and ${platform} tarballs and ${upstream} into an empty project`;
  try {
    installTarballs(project, { root, platformFiles: [tarball], npm: [node, npmCli()], env, timeout: 1_800_000 });
  } catch (error) {
    push({ check: "install", ran, ok: false, result: `npm failed: ${tail(error.stderr ?? error.message)}` });
    return { ok: false };
  }
  const installedBinary = path.join(project, "node_modules", platformPackageName(platform), binaryFileName(platform));
  push({
    check: "install",
    ran,
    ok: existsSync(installedBinary),
    result: existsSync(installedBinary) ? "installed" : `no ${path.relative(project, installedBinary)}`,
  });
  if (!existsSync(installedBinary)) return { ok: false };
  const cli = path.join(project, "node_modules", PACKAGE_NAME, "bin", "paperclip-sync.mjs");
  const inProject = (args) =>
    run(node, [cli, ...args], { cwd: project, env: { ...process.env, ...env, NODE_OPTIONS: "" }, timeout: 1_800_000 });

  const doctor = inProject(["doctor", "--json"]);
  let report = null;
  try {
    report = JSON.parse(doctor.stdout.trim().split("\n").pop());
  } catch {
    // reported below
  }
  const doctorOk =
    doctor.status === 0 &&
    report?.platform === platform &&
    report?.nativeBinary === "loads" &&
    report?.upstream?.verified === true &&
    report?.withRegister?.active === true;
  push({
    check: "doctor",
    ran: `paperclip-sync doctor --json (installed, ${nodeLabel})`,
    ok: doctorOk,
    result: doctorOk
      ? `exit 0: platform ${report.platform}, binary loads, upstream ${report.upstream.version} verified, activation on with the hook (${Object.keys(report.withRegister.modules ?? {}).length} modules)`
      : `exit ${doctor.status}: ${tail(doctor.stderr || doctor.stdout)}`,
  });

  const demo = inProject(["demo", "--files", "300", "--no-ssh", "--no-sandbox", "--json"]);
  let steps = null;
  try {
    steps = JSON.parse(demo.stdout.trim().split("\n").pop()).steps;
  } catch {
    // reported below
  }
  const compared = (steps ?? []).filter((s) => s["same result"] !== "-");
  const demoOk = demo.status === 0 && compared.length >= 6 && compared.every((s) => s["same result"] === "yes");
  push({
    check: "lanes vs upstream",
    ran: `paperclip-sync demo --files 300 --no-ssh --no-sandbox (installed, ${nodeLabel}): each step natively and by upstream, compared`,
    ok: demoOk,
    result: demoOk
      ? `the same result: ${compared.map((s) => s.step).join(", ")}`
      : `exit ${demo.status}: ${
          steps
            ? compared
                .filter((s) => s["same result"] !== "yes")
                .map((s) => s.step)
                .join(", ")
            : tail(demo.stderr)
        }`,
  });
  return { ok: rows.every((r) => r.ok), installedBinary };
}

/** The vitest files every platform runs (scripts/platforms/portable-vitest.txt). */
export function portableVitestFiles() {
  return readFileSync(path.join(repo, "scripts/platforms/portable-vitest.txt"), "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
}

/** A vitest `--testNamePattern` that leaves out `names`. */
const excluding = (names) =>
  names.length ? `^(?!.*(${names.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")}))` : null;

/**
 * The portable vitest files under Node for linux-arm64 in qemu, from this checkout, loading
 * the installed binary (NAPI_RS_NATIVE_LIBRARY_PATH); vitest's own native parts (rollup,
 * esbuild) for arm64 are installed beside (scripts/platforms/emulation.mjs), found by NODE_PATH.
 */
function arm64Vitest({ node, nodeLabel, binary, work }) {
  const nodePath = vitestArm64Natives();
  const files = portableVitestFiles();
  const skips = EMULATION_SKIPS.filter((s) => files.includes(s.where));
  const report = path.join(work, "vitest-arm64.json");
  const pattern = excluding(skips.map((s) => s.test));
  const r = run(
    node,
    [
      path.join(repo, "node_modules/vitest/vitest.mjs"),
      "run",
      ...files,
      ...EMULATION_VITEST.args,
      ...(pattern ? ["--testNamePattern", pattern] : []),
      "--reporter=default",
      "--reporter=json",
      `--outputFile.json=${report}`,
    ],
    {
      cwd: repo,
      env: {
        ...process.env,
        ...EMULATION_VITEST.env,
        NODE_OPTIONS: "",
        NODE_PATH: nodePath,
        NAPI_RS_NATIVE_LIBRARY_PATH: binary,
      },
      timeout: 3_600_000,
    },
  );
  let counts = null;
  try {
    const json = JSON.parse(readFileSync(report, "utf8"));
    counts = { passed: json.numPassedTests, failed: json.numFailedTests, skipped: json.numPendingTests };
    counts.failures = json.testResults.flatMap((f) =>
      f.assertionResults.filter((a) => a.status === "failed").map((a) => `${path.basename(f.name)}: ${a.title}`),
    );
  } catch {
    // reported below
  }
  const ok = r.status === 0 && counts && counts.failed === 0 && counts.passed > 0;
  return {
    check: "vitest",
    ran: `${files.length} portable vitest files (scripts/platforms/portable-vitest.txt) under ${nodeLabel}, loading the installed binary; ${EMULATION_VITEST.note}`,
    ok,
    result: counts
      ? `${counts.passed} passed, ${counts.failed} failed${counts.failures.length ? ` (${counts.failures.join("; ")})` : ""}${skipNote(skips)}`
      : `vitest exited ${r.status}: ${tail(r.stderr || r.stdout)}`,
  };
}

/** The table's note of the tests skipped under emulation, with the reason of each. */
function skipNote(skips) {
  if (skips.length === 0) return "";
  return `; skipped under emulation: ${skips.map((s) => `${s.test} (${s.reason})`).join("; ")}`;
}

/**
 * The core crate's `cargo test` for a musl target, built by the target's toolchain (the
 * .node's: the same std, C compiler and linker), run natively (x86_64) or in qemu (aarch64).
 */
function muslCoreTests(triple) {
  const setup = buildSetup(triple);
  const aarch64 = triple.startsWith("aarch64");
  const env = { ...process.env, ...setup.env };
  if (aarch64) env[`CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUNNER`] = ensureQemuAarch64();
  const skips = aarch64 ? EMULATION_SKIPS.filter((s) => s.where === "cargo") : [];
  // cargo-zigbuild's own `test` subcommand (`cargo zigbuild` only builds); it runs the cargo
  // of $CARGO.
  const args = [
    "test",
    "--release",
    "-p",
    "paperclip-sync-core",
    "--lib", // the unit tests; rustdoc does not run doctests for another target

    "--target",
    triple,
    "--",
    ...skips.flatMap((s) => ["--skip", s.test]),
  ];
  const r = run("cargo-zigbuild", args, { cwd: repo, env, timeout: 7_200_000 });
  const out = `${r.stdout}\n${r.stderr}`;
  process.stderr.write(
    out
      .split("\n")
      .filter((l) => /^test result:|FAILED|panicked/.test(l))
      .join("\n") + "\n",
  );
  const results = [...out.matchAll(/test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored/g)].map((m) =>
    m.slice(1).map(Number),
  );
  const passed = results.reduce((n, m) => n + m[0], 0);
  const failed = results.reduce((n, m) => n + m[1], 0);
  const failures = [...out.matchAll(/^test (\S+) \.\.\. FAILED$/gm)].map((m) => m[1]);
  const ok = r.status === 0 && failed === 0 && passed > 0;
  return {
    check: "core tests",
    ran: `cargo test --release -p paperclip-sync-core --lib --target ${triple} (${setup.describe})${aarch64 ? ", run in qemu" : ", run natively"}`,
    ok,
    result:
      results.length > 0
        ? `${passed} passed, ${failed} failed${failures.length ? ` (${failures.join(", ")})` : ""}${skipNote(skips)}`
        : `cargo exited ${r.status}: ${tail(r.stderr)}`,
  };
}

/**
 * The binary loaded by a musl program (scripts/platforms/dlopen-check.c, built by zig for the target)
 * under Debian's musl dynamic loader (package `musl`, `musl:arm64` for aarch64 in qemu):
 * `dlopen(RTLD_NOW)` resolves every undefined symbol against a real musl and runs the
 * binary's constructors, as Node's `process.dlopen` does before it calls the entry.
 */
function muslLoad(triple, binary, work) {
  const arch = triple.split("-")[0];
  const pkg = arch === "x86_64" ? "musl:amd64" : "musl:arm64";
  ensureDebianPackages([pkg]);
  if (arch === "aarch64") ensureQemuAarch64();
  const musl = output("dpkg-query", ["-W", "-f=${Version}", pkg]).trim();
  const exe = path.join(work, `dlopen-check-${arch}`);
  const [shims] = ensureZig();
  const built = run(path.join(shims, "zig"), [
    "cc",
    "-target",
    `${arch}-linux-musl`,
    "-dynamic",
    "-O2",
    path.join(repo, "scripts/platforms/dlopen-check.c"),
    "-o",
    exe,
  ]);
  const loaded = built.status === 0 ? run(exe, [binary], { timeout: 600_000 }) : built;
  return {
    check: "loads under musl",
    ran: `dlopen(RTLD_NOW) by a musl program (scripts/platforms/dlopen-check.c) under Debian's musl ${musl} loader${arch === "aarch64" ? " in qemu" : ""}`,
    ok: built.status === 0 && loaded.status === 0,
    result:
      built.status !== 0
        ? `zig cc failed: ${tail(built.stderr)}`
        : loaded.status === 0
          ? loaded.stdout.trim()
          : `exit ${loaded.status}: ${tail(loaded.stderr)}`,
  };
}

/**
 * The core crate's unit tests compiled and linked for a darwin target by its toolchain (the
 * binary's own): they cannot run here, but a test that does not compile for macOS is caught.
 */
function darwinCoreTestsBuild(triple) {
  const setup = buildSetup(triple);
  const r = run(
    "cargo-zigbuild",
    ["test", "--no-run", "--release", "-p", "paperclip-sync-core", "--lib", "--target", triple],
    { cwd: repo, env: { ...process.env, ...setup.env }, timeout: 7_200_000 },
  );
  const exe = /Executable unittests src\/lib\.rs \(([^)]+)\)/.exec(`${r.stdout}\n${r.stderr}`)?.[1];
  const header =
    r.status === 0 && exe ? run("llvm-objdump", ["--macho", "--private-header", path.resolve(repo, exe)]).stdout : "";
  const fields = header.trim().split("\n").pop()?.trim().split(/\s+/) ?? [];
  const cputype = triple.startsWith("aarch64") ? "ARM64" : "X86_64";
  const ok = r.status === 0 && fields[1] === cputype && fields[4] === "EXECUTE";
  return {
    check: "core tests build",
    ran: `cargo test --no-run --release -p paperclip-sync-core --lib --target ${triple} (${setup.describe}); not run: no Mac here`,
    ok,
    result: ok ? `compiled and linked: a ${cputype} Mach-O executable` : `cargo exited ${r.status}: ${tail(r.stderr)}`,
  };
}

/** Extracts `platform`'s binary from its tarball into `work`; returns its path. */
function binaryOfTarball(tarball, platform, work) {
  const dir = path.join(work, `binary-${platform}`);
  mkdirSync(dir, { recursive: true });
  output("tar", ["-xzf", tarball, "-C", dir, `package/${binaryFileName(platform)}`]);
  return path.join(dir, "package", binaryFileName(platform));
}

/** Runs the checks the command line asks for and prints the table; returns the exit code. */
function main() {
  const opts = commandLine(process.argv.slice(2));
  const version = readJson("package.json").version;
  const wanted = opts.targets === null ? TARGETS : parseTargets(opts.targets);
  const root = path.join(opts.dir, tarballName(PACKAGE_NAME, version));
  if (!existsSync(root)) {
    console.error(`test-platforms: no ${path.relative(repo, root)}; first: npm run pack:release -- --targets all`);
    process.exit(2);
  }
  const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-platforms-"));
  // Readable by all, as a project directory is: the suites' "as an unprivileged user" cases
  // start Node as another user, which then loads the binary installed under here.
  chmodSync(work, 0o755);
  const rows = [];
  const missing = [];
  const nodeVersion = node24Version();
  try {
    for (const triple of wanted) {
      const platform = platformOfTarget(triple);
      const tarball = path.join(opts.dir, tarballName(platformPackageName(platform), version));
      if (!existsSync(tarball)) {
        missing.push(platform);
        continue;
      }
      process.stderr.write(`\n==> ${platform}\n`);
      // The log (not the table) shows how long each check took since the last one.
      let since = Date.now();
      const add = (row) => {
        rows.push({ target: platform, ...row });
        const seconds = ((Date.now() - since) / 1000).toFixed(0);
        since = Date.now();
        process.stderr.write(`${row.ok ? "pass" : "FAIL"}  ${row.check} (${seconds} s): ${row.result}\n`);
      };
      const binary = binaryOfTarball(tarball, platform, work);
      // What the static checks read the binary with, installed as the target's build installs it.
      ensureInspectionTools(triple);
      for (const c of checkBinary(triple, binary)) {
        add({ check: c.check, ran: `read from the tarball's ${binaryFileName(platform)}`, ok: c.ok, result: c.detail });
      }
      if (platform === "linux-x64-gnu") {
        const node = nodeX64(nodeVersion);
        installedChecks({ platform, node, nodeLabel: `Node ${nodeVersion} x64`, work, root, tarball }, add);
      } else if (platform === "linux-arm64-gnu") {
        ensureQemuAarch64();
        const node = nodeArm64(nodeVersion);
        const nodeLabel = `Node ${nodeVersion} linux-arm64 in qemu`;
        const installed = installedChecks({ platform, node, nodeLabel, work, root, tarball }, add);
        if (installed.ok) add(arm64Vitest({ node, nodeLabel, binary: installed.installedBinary, work }));
      } else if (platform.startsWith("darwin")) {
        add(darwinCoreTestsBuild(triple));
      } else if (platform.includes("musl")) {
        add(muslLoad(triple, binary, work));
        add(muslCoreTests(triple));
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }

  const columns = ["target", "check", "what ran", "result"];
  const table = rows.map((r) => ({
    target: r.target,
    check: r.check,
    "what ran": r.ran,
    result: `${r.ok ? "pass" : "FAIL"}: ${r.result}`,
  }));
  console.log(`\n${markdownTable(columns, table).join("\n")}`);
  if (missing.length)
    console.log(`\nnot packed (no tarball in ${path.relative(repo, opts.dir) || "."}): ${missing.join(", ")}`);
  const failed = rows.filter((r) => !r.ok).length;
  console.log(`\n${rows.length - failed} passed, ${failed} failed`);
  if (opts.json) writeFileSync(opts.json, `${JSON.stringify({ rows, missing }, null, 2)}\n`);
  if (opts.doc) {
    const command = ["npm run test:platforms --", ...(opts.targets ? ["--targets", opts.targets] : []), "--doc"].join(
      " ",
    );
    const block = withBlock({
      file: path.join(repo, "docs/platforms.md"),
      start: "<!-- platforms-table:start -->",
      end: "<!-- platforms-table:end -->",
      lines: [
        `<!-- written by \`node scripts/platforms/test.mjs --doc\`: do not edit by hand -->`,
        "",
        `Made by \`${command}\` after \`npm run pack:release -- --targets all\`, on linux x64.${missing.length ? ` Not packed: ${missing.join(", ")}.` : ""}`,
        "",
        ...markdownTable(columns, table),
        "",
      ],
    });
    writeFileSync(block.file, block.updated);
    console.log("rewrote docs/platforms.md's table");
  }
  return failed === 0 && rows.length > 0 ? 0 : 1;
}

if (isMain(import.meta.url)) process.exit(main());
