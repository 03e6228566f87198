// The shipped platforms are one list: package.json `napi.targets`, the per-platform
// packages under npm/, the builds of build.yml (called by the pull-request and the release
// workflows), and the test jobs of the pull-request workflow.
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { platformOfTarget } from "../lib/platforms.js";

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
