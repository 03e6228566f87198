// The commands README.md and CONTRIBUTING.md document, from a fresh clone: a copy holding only
// the repository's own files (those git tracks or would add), with no node_modules, no built
// binary and no .cache. Every `npm run` entry point they name is a script of package.json and
// says, in a dry run (ENTRY_DRY_RUN=1, scripts/setup/entry.sh), what it installs first (the build
// entries, `node scripts/build/build.mjs`, install the npm dependencies themselves and have no dry
// run); then the cheapest real runs: each works, or says what it needs, with no stack trace.
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const scripts = JSON.parse(readFileSync(path.join(repo, "package.json"), "utf8")).scripts;
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-fresh-"));
const clone = path.join(work, "clone");
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The repository's own files copied into `dir`, as a clone has them. */
function cloneLike(dir) {
  const listed = execFileSync("git", ["-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    encoding: "utf8",
    maxBuffer: 1 << 26,
  });
  for (const rel of new Set(listed.split("\0").filter(Boolean))) {
    const from = path.join(repo, rel);
    if (!existsSync(from) || !statSync(from).isFile()) continue; // deleted here, not yet committed
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    copyFileSync(from, path.join(dir, rel));
  }
}

/** `npm run --silent <args>` in the clone, awaited (npm ci can take minutes): `{ status, stdout, stderr }`. */
function npmRun(args, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn("npm", ["run", "--silent", ...args], {
      cwd: clone,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        NODE_OPTIONS: "",
        PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}`,
        ...env,
      },
    });
    const out = { stdout: "", stderr: "" };
    for (const name of ["stdout", "stderr"]) child[name].setEncoding("utf8").on("data", (text) => (out[name] += text));
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, ...out }));
  });
}

/** The `npm run <name>` entry points a document names (and `npm test`). */
function documentedEntries(file) {
  const text = readFileSync(path.join(repo, file), "utf8");
  const names = new Set([...text.matchAll(/\bnpm\s+run\s+([a-z][\w:-]*\w)/g)].map((m) => m[1]));
  if (/\bnpm\s+test\b/.test(text)) names.add("test");
  return [...names].sort();
}

// A stack trace's frame line, as Node prints an uncaught error.
const STACK_FRAME = /^\s+at .+[(:]\d+:\d+\)?$/m;

beforeAll(() => cloneLike(clone));

describe("the documented commands on a fresh clone", () => {
  const entries = [...new Set([...documentedEntries("README.md"), ...documentedEntries("CONTRIBUTING.md")])].sort();

  it("name only scripts of package.json, each of which says what it installs first and what it runs", async () => {
    expect(entries).toEqual(expect.arrayContaining(["demo", "test", "pack:release", "test:quick", "verify-upstream"]));
    expect(entries.filter((name) => !(name in scripts))).toEqual([]);
    for (const name of entries) {
      if (scripts[name].startsWith("node scripts/build/build.mjs")) continue; // the real runs below
      const run = await npmRun([name], { ENTRY_DRY_RUN: "1" });
      expect(run.status, `${name}: ${run.stderr}`).toBe(0);
      const ran = run.stdout.match(/^entry: would run: (.+)$/m);
      expect(ran, `${name} goes through scripts/setup/entry.sh: ${run.stdout}`).not.toBeNull();
      // The file the command runs is in the clone (or is a dependency it installs).
      const file = ran[1].split(" ").find((word) => /\.(m?js|sh)$/.test(word) && !word.startsWith("node_modules/"));
      if (file) expect(existsSync(path.join(clone, file)), `${name}: ${file}`).toBe(true);
      // An entry point that needs the npm dependencies installs them on a clone, which has none.
      if (/--(deps|build) /.test(scripts[name]))
        expect(run.stdout, name).toMatch(/would install the npm dev dependencies \(npm ci\)/);
      if (/--build /.test(scripts[name])) expect(run.stdout, name).toMatch(/would build the addon/);
    }
  }, 120_000);

  it("run with their cheapest arguments: each works or says what it needs, with no stack trace", async () => {
    // pack:release installs the dependencies its build needs (it died in @napi-rs/cli's absence).
    const pack = await npmRun(["pack:release", "--", "--help"]);
    expect(pack.status, pack.stderr).toBe(0);
    expect(pack.stdout).toMatch(/^Usage: npm run pack:release/m);
    expect(existsSync(path.join(clone, "node_modules/@napi-rs/cli/dist/cli.js"))).toBe(true);

    const build = await npmRun(["build", "--", "--help"]);
    expect(build.status, build.stderr).toBe(0);
    expect(build.stdout).toMatch(/^Usage: npm run build/m);

    const demo = await npmRun(["demo", "--", "--help"]);
    expect(demo.status, demo.stderr).toBe(0);
    expect(demo.stdout).toMatch(/demo/);

    const verify = await npmRun(["verify-upstream", "--", "--help"]);
    expect(verify.status, verify.stderr).toBe(0);
    expect(verify.stdout).toMatch(/^Usage: npm run verify-upstream/m);

    // No binary yet: the quick loop says to build first.
    const quick = await npmRun(["test:quick"]);
    expect(quick.status).toBe(1);
    expect(quick.stderr).toMatch(/no built addon in native\/; build first/);

    for (const run of [pack, build, demo, verify, quick])
      expect(`${run.stdout}\n${run.stderr}`).not.toMatch(STACK_FRAME);
  }, 900_000);
});
