// The shipped platforms are one list: package.json `napi.targets`, the per-platform
// packages under npm/, the builds of build.yml (called by the pull-request and the release
// workflows), and the test jobs of the pull-request workflow.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { platformOfTarget } from "../lib/platforms.js";
import { checkBinary } from "../scripts/platforms/binary-checks.mjs";
import { parseTargets } from "../scripts/build/build.mjs";
import { EMULATION_SKIPS, portableVitestFiles } from "../scripts/platforms/test.mjs";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const read = (rel) => readFileSync(path.join(repo, rel), "utf8");
const targets = [...JSON.parse(read("package.json")).napi.targets].sort();

const platformName = platformOfTarget;

/** The `target:` values of the matrix `include` rows of one job in a workflow file. */
function matrixTargets(file, job) {
  const text = read(file);
  const start = text.indexOf(`\n  ${job}:\n`);
  expect(start, `${file} has a job ${job}`).toBeGreaterThanOrEqual(0);
  const rest = text.slice(start + job.length + 5);
  const end = rest.search(/\n {2}[a-z][\w-]*:\n/);
  const body = end < 0 ? rest : rest.slice(0, end);
  return [...body.matchAll(/\{[^}\n]*\btarget: ([\w-]+)/g)].map((m) => m[1]).sort();
}

describe("shipped platforms", () => {
  it("are Unix targets only (the core is built on POSIX directory handles)", () => {
    expect(targets.length).toBeGreaterThan(0);
    for (const triple of targets) expect(triple).toMatch(/-(linux-(gnu|musl)|apple-darwin)$/);
  });

  it("have one npm/<platform> package each, and no other", () => {
    const dirs = readdirSync(path.join(repo, "npm")).sort();
    expect(dirs).toEqual(targets.map(platformName).sort());
    for (const triple of targets) {
      const manifest = JSON.parse(read(`npm/${platformName(triple)}/package.json`));
      expect(manifest.os).toEqual([triple.includes("darwin") ? "darwin" : "linux"]);
      expect(manifest.cpu).toEqual([triple.startsWith("x86_64") ? "x64" : "arm64"]);
      // The Node versions we support, the same for the binary as for the package.
      expect(manifest.engines).toEqual(JSON.parse(read("package.json")).engines);
    }
  });

  it("are exactly what the one build workflow builds, which the pull-request and release workflows both call", () => {
    expect(matrixTargets(".github/workflows/build.yml", "build")).toEqual(targets);
    for (const workflow of [".github/workflows/ci.yml", ".github/workflows/release.yml"]) {
      expect(read(workflow), workflow).toMatch(/\n {2}build:\n {4}uses: \.\/\.github\/workflows\/build\.yml\n/);
    }
  });

  it("are exactly what the pull-request workflow tests", () => {
    const ci = ".github/workflows/ci.yml";
    const tested = [
      "x86_64-unknown-linux-gnu", // test-linux-x64-gnu: its own job, Node 24 and 26
      ...matrixTargets(ci, "test-native"),
      ...matrixTargets(ci, "test-musl"),
    ].sort();
    expect(tested).toEqual(targets);
    expect(read(ci)).toMatch(/\n {2}test-linux-x64-gnu:\n/);
  });
});

describe("building and checking every platform on one Linux x64 machine", () => {
  it("build.yml builds every target on a Linux x64 runner with the one build entry", () => {
    const text = read(".github/workflows/build.yml");
    const rows = [...text.matchAll(/\{ host: ([\w.-]+), target: ([\w-]+) \}/g)];
    expect(rows.map((m) => m[2]).sort()).toEqual(targets);
    for (const [, host] of rows) expect(host).toBe("ubuntu-latest");
    expect(text).toContain("run: npm run build -- --target ${{ matrix.target }}");
    expect(JSON.parse(read("package.json")).scripts.build).toBe("node scripts/build/build.mjs");
  });

  it("names targets by triple or platform, in napi.targets order, and refuses others", () => {
    expect(parseTargets("all")).toEqual(JSON.parse(read("package.json")).napi.targets);
    expect(parseTargets("darwin-arm64,linux-arm64-gnu,x86_64-unknown-linux-gnu")).toEqual([
      "x86_64-unknown-linux-gnu",
      "aarch64-unknown-linux-gnu",
      "aarch64-apple-darwin",
    ]);
    expect(() => parseTargets("x86_64-pc-windows-msvc")).toThrow(/not|unknown/);
    expect(() => parseTargets("linux-riscv64-gnu")).toThrow(/unknown target/);
  });

  it("the portable vitest list names existing files, and the pull-request workflow reads it", () => {
    const files = portableVitestFiles();
    expect(files.length).toBeGreaterThan(5);
    for (const file of files) expect(existsSync(path.join(repo, file)), file).toBe(true);
    // The arm64/darwin job and the musl job run the list's files.
    expect(
      read(".github/workflows/ci.yml").match(/grep -v '\^#' scripts\/platforms\/portable-vitest\.txt/g)?.length,
    ).toBe(2);
  });

  it("every test skipped under emulation is one the file holds, with its reason", () => {
    expect(EMULATION_SKIPS.length).toBeGreaterThan(0);
    for (const skip of EMULATION_SKIPS) {
      expect(skip.reason.length, skip.test).toBeGreaterThan(20);
      if (skip.where === "cargo") {
        const sources = execFileSync("grep", ["-rl", `fn ${skip.test.split("::").pop()}(`, "crates/core/src"], {
          cwd: repo,
          encoding: "utf8",
        });
        expect(sources.trim(), skip.test).not.toBe("");
      } else {
        expect(portableVitestFiles()).toContain(skip.where);
        // The name (or the fixed part of a templated name) as the file spells it.
        expect(read(skip.where), skip.test).toContain(skip.test);
      }
    }
  });

  it("a binary check reports a missing tool and what installs it, and installs nothing", () => {
    const cache = path.join(repo, ".cache", "cross");
    const before = existsSync(cache) ? readdirSync(cache).sort() : null;
    const saved = process.env.PATH;
    process.env.PATH = path.join(repo, "no-such-directory");
    let rows;
    try {
      rows = checkBinary("x86_64-unknown-linux-musl", path.join(repo, "package.json"));
    } finally {
      process.env.PATH = saved;
    }
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ check: "tools", ok: false });
    expect(rows[0].detail).toContain("readelf is missing, installed by apt-get install binutils");
    expect(rows[0].detail).toContain("objdump is missing");
    expect(existsSync(cache) ? readdirSync(cache).sort() : null).toEqual(before);
  });

  const x64 = path.join(repo, "native", "adapter-utils-native.linux-x64-gnu.node");
  it.skipIf(!existsSync(x64))(
    "the static checks pass the built binary and refuse what another platform or glibc needs",
    () => {
      const failing = (triple, file) =>
        checkBinary(triple, file)
          .filter((c) => !c.ok)
          .map((c) => c.check);
      expect(failing("x86_64-unknown-linux-gnu", x64)).toEqual([]);
      // The same file taken for arm64: the architecture is refused.
      expect(failing("aarch64-unknown-linux-gnu", x64)).toEqual(["ELF"]);
      // A library linked against this machine's glibc (Debian 12: 2.34+) and exporting its API.
      const system = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
      if (existsSync(system))
        expect(failing("x86_64-unknown-linux-gnu", system)).toEqual(expect.arrayContaining(["glibc floor", "exports"]));
    },
  );
});
