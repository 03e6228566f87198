#!/usr/bin/env node
// The upstream-swap runner (CONTRIBUTING.md, "How parity is proven").
//
// Copies the installed upstream package (@paperclipai/adapter-utils) twice under `.swap/`:
// `plain` as published, and `swapped`, where each upstream module we cover is replaced by
// a shim that re-exports the original and overrides every name we implement with ours:
//
//     export * from "./<module>.orig.js";
//     export { name, … } from "<this repo>/lib/<module>.js";
//
// (an explicit export shadows a star export, so upstream's own modules that import these
// names get ours too). It then runs the upstream compiled suites (`dist/*.test.js`) on both
// copies with vitest and fails when a test that passes on `plain` does not pass on
// `swapped`. It prints the swapped exports and the counts, and writes them as JSON to
// `--json <file>` for the test command's summary.
//
// A suite that prints `Skipping …` (upstream's ssh-fixture does when it cannot start sshd,
// for example as root) did not run what it skipped: each such line counts as one failed
// check, so a skipped SSH run can never pass.
//
// `--upstream DIR` takes another install of upstream instead of the devDependency, and
// `--swap-dir DIR` puts the two copies there instead of `.swap/` (scripts/upstream/verify.mjs
// uses both; the copies' dependencies resolve from the directories above them).
//
// Usage: node scripts/upstream/swap.mjs [--suites a,b] [--exclude-suites a,b] [--json out.json]
//          [--upstream DIR] [--swap-dir DIR]
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs, repo } from "../lib/shared.mjs";
// The copy and the composition (shared with the activation's coverage list) live in
// scripts/upstream/swapped-copy.mjs, which the tests use too.
import { copyUpstream, swapIn, upstreamDir } from "./swapped-copy.mjs";

// The upstream suites that exercise the modules we cover (directly or through the upstream
// modules that import them). `ssh-fixture` starts its own sshd and needs a non-root user.
const DEFAULT_SUITES = [
  "workspace-restore-merge",
  "sandbox-managed-runtime",
  "remote-managed-runtime",
  "sandbox-file-sync",
  "command-managed-runtime",
  "git-workspace-sync",
  "acpx-engine/execute",
  "runtime-progress",
  "execution-target-sandbox",
  "execution-target",
  "skills-staging-follow-symlinks",
  "ssh-fixture",
];

const USAGE = `Usage: node scripts/upstream/swap.mjs [--suites a,b] [--exclude-suites a,b] [--json out.json]
         [--upstream DIR] [--swap-dir DIR]`;

/** The command line: `{ suites, json, upstream, swapRoot }`. */
function commandLine(argv) {
  const { values } = parseArgs(argv, {
    name: "upstream-swap",
    usage: USAGE,
    options: {
      suites: { type: "string" },
      "exclude-suites": { type: "string", default: "" },
      json: { type: "string" },
      upstream: { type: "string", default: upstreamDir },
      "swap-dir": { type: "string", default: path.join(repo, ".swap") },
    },
  });
  const drop = new Set(values["exclude-suites"].split(",").filter(Boolean));
  const suites = values.suites ? values.suites.split(",").filter(Boolean) : DEFAULT_SUITES;
  return {
    suites: suites.filter((suite) => !drop.has(suite)),
    json: values.json ? path.resolve(values.json) : null,
    upstream: path.resolve(values.upstream),
    swapRoot: path.resolve(values["swap-dir"]),
  };
}

function prepareCopy(swapRoot, variant, from) {
  const dir = path.join(swapRoot, variant);
  rmSync(dir, { recursive: true, force: true });
  return copyUpstream(dir, from);
}

async function runSuites(dir, suites, label) {
  const resultFile = path.join(dir, "results.json");
  writeFileSync(
    path.join(dir, "vitest.config.mjs"),
    [
      "export default {",
      "  test: {",
      `    include: ${JSON.stringify(suites.map((s) => `dist/${s}.test.js`))},`,
      "    exclude: ['**/node_modules/**'],",
      "    environment: 'node',",
      "    testTimeout: 120000,",
      "    hookTimeout: 120000,",
      "    fileParallelism: false,",
      "  },",
      "};",
      "",
    ].join("\n"),
  );
  // Upstream's own test runner isolates every project run with these (its vitest setup).
  const scratch = mkdtempSync(path.join(os.tmpdir(), `pc-swap-${label}-`));
  mkdirSync(path.join(scratch, "h"));
  mkdirSync(path.join(scratch, "t"));
  const env = {
    ...process.env,
    PAPERCLIP_HOME: path.join(scratch, "h"),
    PAPERCLIP_INSTANCE_ID: `vt-${process.pid}-${label}`,
    TMPDIR: path.join(scratch, "t"),
  };
  const vitest = path.join(repo, "node_modules", "vitest", "vitest.mjs");
  const run = await new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [vitest, "run", "--root", dir, "--reporter=default", "--reporter=json", `--outputFile.json=${resultFile}`],
      {
        env,
        cwd: dir,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    const skips = [];
    // Lines are scanned whole as they arrive (the kept tail is only for error reports).
    const scan = () => {
      let partial = "";
      return (d) => {
        const lines = (partial + d).split("\n");
        partial = lines.pop();
        for (const line of lines) if (/\bSkipping\b/.test(line)) skips.push(line.trim());
      };
    };
    const scanOut = scan();
    const scanErr = scan();
    child.stdout.on("data", (d) => {
      scanOut(d);
      stdout = (stdout + d).slice(-64 * 1024);
    });
    child.stderr.on("data", (d) => {
      scanErr(d);
      stderr = (stderr + d).slice(-64 * 1024);
    });
    child.on("error", reject);
    child.on("close", () => resolve({ stdout, stderr, skips }));
  });
  rmSync(scratch, { recursive: true, force: true });
  if (!existsSync(resultFile)) {
    throw new Error(`vitest produced no results for ${label}:\n${run.stdout}\n${run.stderr}`);
  }
  const report = JSON.parse(readFileSync(resultFile, "utf8"));
  const tests = new Map();
  for (const file of report.testResults) {
    const suite = path.relative(path.join(dir, "dist"), file.name).replace(/\.test\.js$/, "");
    if (file.assertionResults.length === 0 && file.status === "failed") {
      tests.set(`${suite} › (file failed to load)`, "failed");
    }
    for (const t of file.assertionResults) tests.set(`${suite} › ${t.fullName}`, t.status);
  }
  return { tests, skips: run.skips };
}

async function main() {
  const args = commandLine(process.argv.slice(2));
  if (!existsSync(args.upstream))
    throw new Error(`@paperclipai/adapter-utils is not installed at ${args.upstream} (npm ci)`);
  const plainDir = prepareCopy(args.swapRoot, "plain", args.upstream);
  const swappedDir = prepareCopy(args.swapRoot, "swapped", args.upstream);
  const swapped = await swapIn(swappedDir, args.upstream);
  console.log(`upstream-swap: ${swapped.length} upstream exports swapped: ${swapped.join(", ")}`);
  console.log(`upstream-swap: suites: ${args.suites.join(", ")}`);

  // Both copies run at once: the suites mostly wait (timers, child processes).
  const [plainRun, oursRun] = await Promise.all([
    runSuites(plainDir, args.suites, "plain"),
    runSuites(swappedDir, args.suites, "swapped"),
  ]);
  const plain = plainRun.tests;
  const ours = oursRun.tests;
  const skipped = [...plainRun.skips.map((l) => `unswapped: ${l}`), ...oursRun.skips.map((l) => `swapped: ${l}`)];
  const count = (m, s) => [...m.values()].filter((v) => v === s).length;
  const regressions = [...plain]
    .filter(([name, status]) => status === "passed" && ours.get(name) !== "passed")
    .map(([name]) => name);
  const plainFailing = [...plain].filter(([, s]) => s === "failed").map(([n]) => n);

  console.log(
    `upstream-swap: unswapped: ${count(plain, "passed")} passed, ${count(plain, "failed")} failed, ${count(plain, "skipped") + count(plain, "pending")} skipped`,
  );
  console.log(
    `upstream-swap: swapped:   ${count(ours, "passed")} passed, ${count(ours, "failed")} failed, ${count(ours, "skipped") + count(ours, "pending")} skipped`,
  );
  for (const name of plainFailing) console.log(`upstream-swap: fails unswapped too (not counted against us): ${name}`);
  for (const name of regressions)
    console.log(`upstream-swap: REGRESSION (passes unswapped, not swapped): ${name} -> ${ours.get(name) ?? "missing"}`);
  for (const line of skipped) console.log(`upstream-swap: SKIPPED (counts as failed): ${line}`);
  const summary = {
    swappedExports: swapped,
    suites: args.suites,
    unswapped: { passed: count(plain, "passed"), failed: count(plain, "failed") },
    swapped: { passed: count(ours, "passed"), failed: count(ours, "failed") },
    regressions,
    skipped,
    // What the project counts: every upstream test that passes unswapped is one check; a
    // `Skipping …` line is one failed check.
    checks: { passed: count(plain, "passed") - regressions.length, failed: regressions.length + skipped.length },
  };
  if (args.json) writeFileSync(args.json, JSON.stringify(summary, null, 2));
  console.log(`upstream-swap: ${summary.checks.passed} passed, ${summary.checks.failed} failed`);
  process.exitCode = summary.checks.failed === 0 && summary.checks.passed > 0 ? 0 : 1;
}

main().catch((error) => {
  console.error(`upstream-swap: ${error.stack ?? error}`);
  process.exitCode = 2;
});
