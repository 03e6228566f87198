// `npm run verify-upstream` (scripts/upstream/verify.mjs) on two small stand-ins, each a
// workspace directory (a path): a copy of the installed 2026.916.1 under a development version,
// which passes, and the same copy with the newer releases' modules (helpers/newer-upstream.js,
// written from the reference), which fails and names the differing module. A reduced scope
// (--modules, --quick, --parts) keeps it to a minute; the whole run on 2026.916.1 from npm is
// CONTRIBUTING.md's command, not part of the test run.
import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withNewerModules } from "./helpers/newer-upstream.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const upstreamDir = path.join(repo, "node_modules/@paperclipai/adapter-utils");
let work;
let runs;

/** A workspace-like copy of the installed upstream at `dir` (version 0.3.1, its own dependencies linked). */
function standIn(dir) {
  cpSync(path.join(upstreamDir, "dist"), path.join(dir, "dist"), {
    recursive: true,
    filter: (source) => !source.endsWith(".map"),
  });
  const manifest = JSON.parse(readFileSync(path.join(upstreamDir, "package.json"), "utf8"));
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ ...manifest, version: "0.3.1" }));
  symlinkSync(path.join(upstreamDir, "node_modules"), path.join(dir, "node_modules"), "dir");
  return dir;
}

function verify(target, args) {
  const json = path.join(work, `${path.basename(target)}.json`);
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [path.join(repo, "scripts/upstream/verify.mjs"), target, ...args, "--json", json],
      {
        cwd: repo,
        env: { ...process.env, NODE_OPTIONS: "" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    child.stdout.on("data", (d) => {
      output += d;
    });
    child.stderr.on("data", (d) => {
      output += d;
    });
    child.on("error", reject);
    child.on("close", (status) =>
      resolve({
        status,
        output,
        lines: output.split("\n").filter((line) => line.startsWith("verify-upstream: ")),
        result: JSON.parse(readFileSync(json, "utf8")),
      }),
    );
  });
}

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), "pc-verify-upstream-"));
  const same = standIn(path.join(work, "same"));
  const newer = standIn(path.join(work, "newer"));
  withNewerModules(newer);
  // Both at once: they mostly wait on their child processes.
  runs = {
    same: verify(same, ["--modules", "exclude-patterns,runtime-progress", "--quick"]),
    newer: verify(newer, ["--modules", "exclude-patterns,runtime-progress", "--parts", "admission,differential"]),
  };
});

afterAll(async () => {
  // Both runs end (and remove their scratch projects under .verify-upstream/), even when a
  // filtered run awaited only one.
  if (runs) await Promise.allSettled(Object.values(runs));
  if (work) rmSync(work, { recursive: true, force: true });
}, 300_000);

const row = (result, module) => result.rows.find((r) => r.module === module);

describe("npm run verify-upstream", () => {
  it("passes a copy of 2026.916.1, naming every module checked, each part run; nothing to add", async () => {
    const { status, output, lines, result } = await runs.same;
    expect(status, output).toBe(0);
    expect(result.pass).toBe(true);
    expect(result.rows.map((r) => r.module)).toEqual(["exclude-patterns", "runtime-progress"]);
    for (const module of ["exclude-patterns", "runtime-progress"]) {
      expect(lines).toContainEqual(
        expect.stringMatching(new RegExp(`^verify-upstream: ${module} +matches +identical to 2026\\.916\\.1 +ok \\(`)),
      );
    }
    expect(row(result, "runtime-progress").parts).toMatchObject({
      differential: { ok: true, summary: "ok (runtime-progress.diff)" },
      swapped: { ok: true, summary: "ok" },
      activation: { ok: true, summary: "ok" },
    });
    expect(row(result, "exclude-patterns").parts.differential.summary).toBe("ok (exclude.diff)");
    expect(lines).toContain("verify-upstream: PASS: every module matches (exclude-patterns, runtime-progress)");
    expect(output).toMatch(
      /identical to 2026\.916\.1's, which is verified: the workspace opt-in admits them already; nothing to add/,
    );
    // The swapped and activation runs ran upstream's runtime-progress suite, activated.
    expect(output).toMatch(/upstream-swap: 1\d passed, 0 failed/);
    expect(output).toMatch(
      /activation-suites: hook: 1\d passed, 0 failed, 0 skipped \(\d+ s; served natively: 1 modules\)/,
    );
  }, 300_000);

  it("fails the newer releases' stand-ins and names the differing module: refused by admission, different in the differential tests", async () => {
    const { status, output, lines, result } = await runs.newer;
    expect(status, output).toBe(1);
    expect(result.pass).toBe(false);
    const exclude = row(result, "exclude-patterns");
    expect(exclude.ok).toBe(false);
    expect(exclude.parts.admission).toMatchObject({
      ok: false,
      summary: "REFUSED (carries unescapeTarExcludeLiteral)",
    });
    // Not only the marker: the unescaping matcher gives other results than ours, in the
    // differential of the matcher itself or of the lists it serves (which of the two meets
    // an escaped pattern first depends on the seed).
    expect(exclude.parts.differential.ok).toBe(false);
    expect(exclude.parts.differential.details.join("\n")).toMatch(/excludePatternMatches|shouldExcludePath/);
    expect(row(result, "runtime-progress").ok).toBe(true);
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^verify-upstream: FAIL: differing modules: exclude-patterns; 0\.3\.1 cannot join the verified list/,
      ),
    );
  }, 300_000);
});
