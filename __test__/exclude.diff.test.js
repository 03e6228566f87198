// Differential tests of the exclude-pattern escaping against the upstream package on seeded random inputs.
import { describe, expect, it } from "vitest";
import { oracle } from "./helpers/oracle.js";
import * as ours from "@paperclipai/adapter-utils-native";
import * as oursExclude from "@paperclipai/adapter-utils-native/exclude-patterns";
import * as oursSandbox from "@paperclipai/adapter-utils-native/sandbox-managed-runtime";
import { createRandom, randomPattern, randomRelativePath, randomSegment, runSeed } from "./helpers/random.js";
const upstreamExclude = await oracle("exclude-patterns");
const upstreamSandbox = await oracle("sandbox-managed-runtime");
const upstreamGit = await oracle("git-workspace-sync");

const CASES = 10_000;
const SEED = runSeed();

/** Runs `CASES` generated cases; fails with the seed and the first differing case. */
function differential(name, generate, theirs, mine) {
  const rng = createRandom(SEED ^ [...name].reduce((h, c) => Math.imul(h ^ c.charCodeAt(0), 16777619), 2166136261));
  let hits = 0;
  for (let i = 0; i < CASES; i += 1) {
    const args = generate(rng);
    const expected = theirs(...args);
    const actual = mine(...args);
    if (expected === true) hits += 1;
    if (JSON.stringify(actual) !== JSON.stringify(expected)) {
      expect.fail(
        `${name} differs (DIFF_SEED=${SEED}, case ${i}): args=${JSON.stringify(args)} upstream=${JSON.stringify(expected)} ours=${JSON.stringify(actual)}`,
      );
    }
  }
  return hits;
}

describe(`exclude-pattern differential (DIFF_SEED=${SEED})`, () => {
  it("isRelativePathOrDescendant", () => {
    const hits = differential(
      "isRelativePathOrDescendant",
      (rng) => {
        const rel = randomRelativePath(rng);
        const parts = rel.split("/");
        const candidate = rng.chance(0.6)
          ? parts.slice(0, rng.int(parts.length + 1)).join("/")
          : randomRelativePath(rng);
        return [rel, candidate];
      },
      upstreamExclude.isRelativePathOrDescendant,
      oursExclude.isRelativePathOrDescendant,
    );
    expect(hits).toBeGreaterThan(CASES / 10);
  });

  it("excludePatternMatches", () => {
    const hits = differential(
      "excludePatternMatches",
      (rng) => {
        const rel = randomRelativePath(rng);
        return [rel, randomPattern(rng, rel)];
      },
      upstreamExclude.excludePatternMatches,
      oursExclude.excludePatternMatches,
    );
    expect(hits).toBeGreaterThan(CASES / 10);
  });

  it("shouldExcludePath", () => {
    const hits = differential(
      "shouldExcludePath",
      (rng) => {
        const rel = randomRelativePath(rng);
        const list = Array.from({ length: rng.int(6) }, () => randomPattern(rng, rel));
        return [rel, list];
      },
      upstreamExclude.shouldExcludePath,
      ours.shouldExcludePath,
    );
    expect(hits).toBeGreaterThan(CASES / 10);
  });

  it("escapeTarExcludeLiteral", () => {
    differential(
      "escapeTarExcludeLiteral",
      (rng) => [randomSegment(rng, { allowSlash: true }) + randomSegment(rng)],
      upstreamSandbox.escapeTarExcludeLiteral,
      oursSandbox.escapeTarExcludeLiteral,
    );
  });

  it("mergeExcludes", () => {
    differential(
      "mergeExcludes",
      (rng) => {
        const pool = Array.from({ length: 1 + rng.int(6) }, () => randomSegment(rng, { allowSlash: true }));
        return Array.from({ length: rng.int(5) }, () =>
          rng.chance(0.2) ? undefined : Array.from({ length: rng.int(6) }, () => rng.pick(pool)),
        );
      },
      upstreamSandbox.mergeExcludes,
      ours.mergeExcludes,
    );
  });

  it("referencedSourceIgnoreExcludeEntries", () => {
    differential(
      "referencedSourceIgnoreExcludeEntries",
      (rng) => {
        const kind = rng.pick(["git", "git", "other", "failed"]);
        if (kind === "git")
          return [{ kind, ignoredPaths: Array.from({ length: rng.int(6) }, () => randomRelativePath(rng)) }];
        if (kind === "failed") return [{ kind, reason: "git-ignore-scan-failed" }];
        return [{ kind }];
      },
      upstreamSandbox.referencedSourceIgnoreExcludeEntries,
      ours.referencedSourceIgnoreExcludeEntries,
    );
  });

  it("keeps a lone surrogate exactly as upstream does", () => {
    const odd = "a\ud800*[b";
    expect(ours.escapeTarExcludeLiteral(odd)).toBe(upstreamSandbox.escapeTarExcludeLiteral(odd));
    expect(ours.shouldExcludePath(`${odd}/x`, [odd])).toBe(true);
    expect(ours.shouldExcludePath("a\ud801*[b/x", [odd])).toBe(false);
  });

  it("constants equal upstream's", () => {
    expect(ours.REFERENCED_SOURCE_IGNORE_FAILURE_REASONS).toEqual(
      upstreamSandbox.REFERENCED_SOURCE_IGNORE_FAILURE_REASONS,
    );
    expect(ours.GIT_ARCHIVE_EXCLUDES).toEqual(upstreamGit.GIT_ARCHIVE_EXCLUDES);
  });

  it("accepts a frozen (readonly) exclude list", () => {
    expect(ours.shouldExcludePath("build/x", Object.freeze(["build"]))).toBe(true);
    expect(ours.shouldExcludePath("src/build", ["build"])).toBe(false);
  });
});
