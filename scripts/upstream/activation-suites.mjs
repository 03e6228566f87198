#!/usr/bin/env node
// The activation suite runs: the compiled vitest suites (`dist/**/*.test.js`) of an installed
// package — upstream `@paperclipai/adapter-utils` itself or a real consumer of it
// (`@paperclipai/adapter-claude-local`, `@paperclipai/adapter-codex-local`) — run in place
// without activation and through the real activation mechanisms, unmodified:
//
//   plain            no activation, the package externalized (as installed from npm);
//   plain-inline     no activation, the package inlined (`server.deps.inline`, as vite
//                    processes a workspace package in the monorepo);
//   hook             vitest started with NODE_OPTIONS=--import …/register (the Node hook; the
//                    installed package is externalized, so Node loads upstream's modules);
//   plugin-inline    the vitest plugin with upstream inlined (`server.deps.inline`): vite
//                    loads upstream's modules and the plugin's `load` composes them;
//   plugin-external  the vitest plugin with upstream externalized: its setup file installs
//                    the Node hook in each worker.
//
// A test that passes in its baseline (BASELINE) and not in the activated mode is a regression; each activated
// mode must also have served natively (its workers report composed modules through the
// `PAPERCLIP_ADAPTER_UTILS_NATIVE_REPORT` file), else the run did not test the activation.
// A `Skipping …` line (upstream's ssh-fixture without sshd) counts as one failed check.
// Prints the counts per mode and writes `--json <file>` for the test command's summary.
//
// The plugin and the hook are loaded from `--native DIR` (default: this checkout); the test
// command passes the package as installed from the release tarballs (scripts/release/install.mjs),
// so our modules sit under node_modules as in a user's project.
//
// `--package-dir DIR` runs the package installed at DIR instead of the one under this
// checkout's node_modules (scripts/upstream/verify.mjs: an upstream being verified; DIR must
// resolve `vitest` from this checkout, so it sits inside it).
//
// The baselines (`plain`, `plain-inline`) test none of this package's code: their results
// come from the record in test-baselines/ (scripts/upstream/baselines.mjs) for every suite file whose
// record matches this run's key (the package and upstream by version and digest, the Node
// version, root or not, vitest's version and settings) and the file's digest; the others run
// live. `--baselines live` runs every baseline live. `--record` writes the baselines of this
// run (live and recorded, after the re-runs below) back to the record: the command that
// re-records them (`npm run verify-upstream -- <version> --write` passes it; the test command
// with ACTIVATION_BASELINES=record).
//
// Usage: node scripts/upstream/activation-suites.mjs [--package @paperclipai/adapter-utils] [--package-dir DIR] [--native DIR]
//          [--modes plain,hook,plugin-inline,plugin-external] [--suites a,b] [--exclude-suites a,b] [--json out.json]
//          [--baselines recorded|live] [--record]
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs, repo, usageError } from "../lib/shared.mjs";
import { baselineKey, fileDigest, readBaseline, writeBaseline } from "./baselines.mjs";

const ALL_MODES = ["plain", "plain-inline", "hook", "plugin-inline", "plugin-external"];
// Each activated mode against the unactivated run with the same module loading: upstream
// externalized (Node loads it; `vi.mock` of an externalized module does not reach Node's
// own imports, so some upstream tests fail there with and without activation) or inlined.
const BASELINE = { hook: "plain", "plugin-external": "plain", "plugin-inline": "plain-inline" };

const USAGE = `Usage: node scripts/upstream/activation-suites.mjs [--package @paperclipai/adapter-utils] [--package-dir DIR]
         [--native DIR] [--modes plain,hook,plugin-inline,plugin-external] [--suites a,b] [--exclude-suites a,b]
         [--json out.json] [--baselines recorded|live] [--record]`;

/** A comma-separated list's items. */
const list = (value) => (value ?? "").split(",").filter(Boolean);

/**
 * The command line: `{ pkg, pkgDir, native, modes, only, exclude, json, baselines, record }`;
 * `modes` with the baseline of each activated mode put first.
 */
function commandLine(argv) {
  const { values } = parseArgs(argv, {
    name: "activation-suites",
    usage: USAGE,
    options: {
      package: { type: "string", default: "@paperclipai/adapter-utils" },
      "package-dir": { type: "string" },
      native: { type: "string", default: repo },
      modes: { type: "string", default: ALL_MODES.join(",") },
      suites: { type: "string" },
      "exclude-suites": { type: "string" },
      json: { type: "string" },
      baselines: { type: "string", default: "recorded" },
      record: { type: "boolean", default: false },
    },
  });
  if (!["recorded", "live"].includes(values.baselines))
    usageError("activation-suites", `--baselines takes recorded or live, not ${values.baselines}`, USAGE);
  const modes = list(values.modes);
  const needed = new Set(modes.map((m) => BASELINE[m] ?? m));
  return {
    pkg: values.package,
    pkgDir: values["package-dir"] ? path.resolve(values["package-dir"]) : undefined,
    native: path.resolve(values.native),
    modes: [...ALL_MODES.filter((m) => needed.has(m) && !modes.includes(m)), ...modes],
    only: values.suites ? list(values.suites) : undefined,
    exclude: list(values["exclude-suites"]),
    json: values.json ? path.resolve(values.json) : null,
    baselines: values.baselines,
    record: values.record,
  };
}

function listSuites(dir, base = dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory() && entry.name !== "node_modules") out.push(...listSuites(full, base));
    else if (entry.isFile() && entry.name.endsWith(".test.js"))
      out.push(path.relative(base, full).split(path.sep).join("/"));
  }
  return out.sort();
}

const SETUP_FILE = path.join(repo, "scripts/upstream/activation-report-setup.js");

/** The vitest settings of a mode's run (part of a recorded baseline's key). */
function modeSettings(mode) {
  return {
    testTimeout: 120000,
    hookTimeout: 120000,
    maxForks: 2,
    minForks: 1,
    inline: mode.endsWith("-inline"),
    setup: fileDigest(SETUP_FILE),
  };
}

async function runMode(pkgDir, suites, mode, scratch, native) {
  const settings = modeSettings(mode);
  const dir = path.join(scratch, mode);
  mkdirSync(path.join(dir, "h"), { recursive: true });
  mkdirSync(path.join(dir, "t"), { recursive: true });
  const resultFile = path.join(dir, "results.json");
  const reportFile = path.join(dir, "activation-report.jsonl");
  const plugin = mode.startsWith("plugin-");
  const config = path.join(dir, "vitest.config.mjs");
  writeFileSync(
    config,
    [
      plugin
        ? `import { adapterUtilsNative } from ${JSON.stringify(pathToFileURL(path.join(native, "lib/activation/vitest.js")).href)};`
        : "",
      "export default {",
      `  root: ${JSON.stringify(pkgDir)},`,
      `  cacheDir: ${JSON.stringify(path.join(dir, "vite-cache"))},`,
      plugin ? `  plugins: [adapterUtilsNative({ externalized: ${mode === "plugin-external"} })],` : "",
      "  test: {",
      `    include: ${JSON.stringify(suites)},`,
      "    exclude: ['**/node_modules/**'],",
      "    environment: 'node',",
      `    testTimeout: ${settings.testTimeout},`,
      `    hookTimeout: ${settings.hookTimeout},`,
      `    poolOptions: { forks: { maxForks: ${settings.maxForks}, minForks: ${settings.minForks} } },`,
      // Inlined: upstream and the package under test (a consumer's own modules import upstream).
      settings.inline
        ? "    server: { deps: { inline: [/[\\\\/]@paperclipai[\\\\/]adapter-[^\\\\/]+[\\\\/]dist[\\\\/]/] } },"
        : "",
      `    setupFiles: [${JSON.stringify(SETUP_FILE)}],`,
      "  },",
      "};",
      "",
    ].join("\n"),
  );
  const env = {
    ...process.env,
    PAPERCLIP_HOME: path.join(dir, "h"),
    PAPERCLIP_INSTANCE_ID: `vt-${process.pid}-${mode}`,
    TMPDIR: path.join(dir, "t"),
    PAPERCLIP_ADAPTER_UTILS_NATIVE_REPORT: reportFile,
  };
  if (mode === "hook") {
    env.NODE_OPTIONS =
      `${process.env.NODE_OPTIONS ?? ""} --import ${pathToFileURL(path.join(native, "lib/activation/register.js")).href}`.trim();
  }
  const vitest = path.join(repo, "node_modules", "vitest", "vitest.mjs");
  const started = Date.now();
  const run = await new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        vitest,
        "run",
        "--config",
        config,
        process.env.ACTIVATION_SUITES_VERBOSE ? "--reporter=default" : "--reporter=dot",
        "--reporter=json",
        `--outputFile.json=${resultFile}`,
      ],
      {
        env,
        cwd: pkgDir,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let tail = "";
    const skips = [];
    let partial = "";
    const scan = (d) => {
      if (process.env.ACTIVATION_SUITES_VERBOSE) process.stderr.write(d);
      tail = (tail + d).slice(-32 * 1024);
      const lines = (partial + d).split("\n");
      partial = lines.pop();
      for (const line of lines) if (/\bSkipping\b/.test(line)) skips.push(line.trim());
    };
    child.stdout.on("data", scan);
    child.stderr.on("data", scan);
    child.on("error", reject);
    child.on("close", (status) => resolve({ tail, skips, status }));
  });
  const seconds = (Date.now() - started) / 1000;
  if (!existsSync(resultFile)) throw new Error(`vitest produced no results for ${mode}:\n${run.tail}`);
  const report = JSON.parse(readFileSync(resultFile, "utf8"));
  const tests = new Map();
  for (const file of report.testResults) {
    const suite = path.relative(pkgDir, file.name);
    if (file.assertionResults.length === 0 && file.status === "failed")
      tests.set(`${suite} › (file failed to load)`, "failed");
    for (const t of file.assertionResults) tests.set(`${suite} › ${t.fullName}`, t.status);
  }
  const served = new Set();
  if (existsSync(reportFile)) {
    for (const line of readFileSync(reportFile, "utf8").split("\n").filter(Boolean)) {
      const r = JSON.parse(line);
      for (const m of r.modules) served.add(m);
    }
  }
  rmSync(dir, { recursive: true, force: true });
  return { tests, skips: run.skips, seconds, served: [...served].sort() };
}

// ACTIVATION_SUITES_BARRIER=<dir>:<count>: this run is one of <count> runs started together
// (the test command starts one per package). `arrive()` marks this run's first pass done
// (`<dir>/<pid>.done`, written on exit too, so a run that dies early never holds the others)
// and waits until <count> runs have marked theirs, or BARRIER_MAX_WAIT_MS have passed.
const BARRIER_MAX_WAIT_MS = 30 * 60_000;
function makeBarrier(spec) {
  if (!spec) return { arrive: async () => {} };
  const at = spec.lastIndexOf(":");
  const dir = spec.slice(0, at);
  const count = Number(spec.slice(at + 1));
  if (at <= 0 || !Number.isInteger(count) || count < 1)
    throw new Error(`ACTIVATION_SUITES_BARRIER must be <dir>:<count>, got ${spec}`);
  mkdirSync(dir, { recursive: true });
  const marker = path.join(dir, `${process.pid}.done`);
  const mark = () => writeFileSync(marker, "");
  process.on("exit", mark);
  return {
    async arrive() {
      mark();
      const until = Date.now() + BARRIER_MAX_WAIT_MS;
      while (readdirSync(dir).filter((name) => name.endsWith(".done")).length < count && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    },
  };
}

/** Prints a mode's counts once its results are in. */
function reportMode(mode, result) {
  const count = (s) => [...result.tests.values()].filter((v) => v === s).length;
  const recorded = result.recorded ? `; ${result.recorded} suite file(s) from the record` : "";
  console.log(
    `activation-suites: ${mode}: ${count("passed")} passed, ${count("failed")} failed, ${count("skipped") + count("pending")} skipped (${result.seconds.toFixed(0)} s; served natively: ${result.served.length} modules${recorded})`,
  );
}

/**
 * What runs live: each activated mode whole; of each baseline, the suite files the record
 * does not hold (scripts/upstream/baselines.mjs: its key and the file's digest match). A
 * baseline wholly recorded gets its results in `results` here. Returns `{ baselines, queue }`:
 * per baseline its key, record, the entries kept and the suite files run live; the runs to make.
 */
function planRuns(args, pkgDir, suites, results) {
  const baselines = {};
  const queue = [];
  for (const mode of args.modes) {
    if (BASELINE[mode]) {
      queue.push({ mode, suites });
      continue;
    }
    const key = baselineKey({ pkgDir, mode, settings: modeSettings(mode) });
    const record = readBaseline(key);
    const kept = new Map();
    if (args.baselines === "recorded") {
      for (const suite of suites) {
        const entry = record.suites.get(suite);
        if (entry && entry.digest === fileDigest(path.join(pkgDir, suite))) kept.set(suite, entry);
      }
    }
    const live = suites.filter((suite) => !kept.has(suite));
    baselines[mode] = { key, record, kept, live };
    const where = path.relative(repo, record.file);
    console.log(
      `activation-suites: ${mode} (baseline): ${kept.size} suite file(s) from the record ${where}, ${live.length} run live${
        args.baselines === "live" ? " (--baselines live)" : live.length > 0 && record.stale ? ` (${record.stale})` : ""
      }`,
    );
    if (live.length > 0) queue.push({ mode, suites: live });
    else {
      results[mode] = { tests: new Map(), skips: [], seconds: 0, served: [...record.served] };
      for (const entry of kept.values())
        for (const [name, status] of entry.tests) results[mode].tests.set(name, status);
      results[mode].recorded = kept.size;
      reportMode(mode, results[mode]);
    }
  }
  return { baselines, queue };
}

/**
 * Runs the queued modes, every one at once by default (ACTIVATION_SUITES_PARALLEL sets fewer):
 * the suites mostly wait on timers and child processes (a mode of upstream's suites takes ~10
 * min of wall time at well under one core). A baseline's recorded suite files join its results.
 */
async function runQueued({ baselines, queue }, pkgDir, scratch, native, results) {
  const parallel = Number(process.env.ACTIVATION_SUITES_PARALLEL ?? queue.length);
  await Promise.all(
    Array.from({ length: Math.max(1, parallel) }, async () => {
      while (queue.length) {
        const job = queue.shift();
        const result = await runMode(pkgDir, job.suites, job.mode, scratch, native);
        const base = baselines[job.mode];
        if (base) {
          for (const entry of base.kept.values())
            for (const [name, status] of entry.tests) result.tests.set(name, status);
          if (base.kept.size > 0) result.served = [...new Set([...result.served, ...base.record.served])].sort();
          result.recorded = base.kept.size;
        }
        results[job.mode] = result;
        reportMode(job.mode, result);
      }
    }),
  );
}

/**
 * A timing-sensitive test can pass in one run and fail in the next on a loaded machine
 * (codex-local's lock tests give a callback 20 ms to enter): the suite files where a baseline
 * and its activated mode differ run again in those two modes, one run at a time, up to RERUNS
 * more times while a difference remains, and a test counts as passing in a mode if any
 * attempt passed it (the same rule for the baselines and the activated modes). A real
 * regression fails every attempt.
 */
async function rerunDifferences(args, pkgDir, scratch, results) {
  const RERUNS = Number(process.env.ACTIVATION_SUITES_RERUNS ?? 3);
  for (let attempt = 1; attempt <= RERUNS; attempt += 1) {
    // The suite files where an activated mode and its baseline differ, and the two modes
    // of each difference: only those run again.
    const differing = new Map();
    for (const mode of args.modes.filter((m) => BASELINE[m])) {
      const base = results[BASELINE[mode]].tests;
      const act = results[mode].tests;
      for (const name of new Set([...base.keys(), ...act.keys()])) {
        if ((base.get(name) === "passed") !== (act.get(name) === "passed")) {
          const file = name.split(" › ")[0];
          if (!differing.has(file)) differing.set(file, new Set());
          differing.get(file).add(mode).add(BASELINE[mode]);
        }
      }
    }
    if (differing.size === 0) break;
    const files = [...differing.keys()].sort();
    console.log(
      `activation-suites: re-running (attempt ${attempt + 1}) ${files.length} suite file(s) with differences, in the modes that differ: ${files.map((f) => `${f} (${[...differing.get(f)].join(", ")})`).join("; ")}`,
    );
    for (const mode of args.modes) {
      const mine = files.filter((file) => differing.get(file).has(mode));
      if (mine.length === 0) continue;
      const again = await runMode(pkgDir, mine, mode, scratch, args.native);
      for (const [name, status] of again.tests) if (status === "passed") results[mode].tests.set(name, "passed");
      results[mode].served = [...new Set([...results[mode].served, ...again.served])].sort();
      results[mode].skips.push(...again.skips);
    }
  }
}

/**
 * --record: the baselines as this run ends (the record's files and the live ones, with the
 * re-runs' passes), written back with the record's other files kept.
 */
function recordBaselines(baselines, pkgDir, suites, results) {
  for (const [mode, base] of Object.entries(baselines)) {
    const entries = new Map(base.record.suites);
    for (const suite of suites) entries.set(suite, { digest: fileDigest(path.join(pkgDir, suite)), tests: new Map() });
    for (const [name, status] of results[mode].tests) entries.get(name.split(" › ")[0])?.tests.set(name, status);
    const file = writeBaseline(base.key, entries, results[mode].served);
    console.log(`activation-suites: recorded ${mode} (${suites.length} suite files) in ${path.relative(repo, file)}`);
  }
}

/**
 * The run's summary (the test command's report): per mode its counts, every difference
 * between an activated mode and its baseline (a regression, or a test passing only
 * activated), every skip, every mode that served natively when it should not or did not when
 * it should; `checks` counts them.
 */
function summarize(args, suites, results) {
  const passing = (mode) => [...results[mode].tests].filter(([, s]) => s === "passed").map(([n]) => n);
  const summary = {
    activation: true,
    package: args.pkg,
    suites: suites.length,
    modes: {},
    regressions: [],
    skipped: [],
    inactive: [],
  };
  let passed = 0;
  let failed = 0;
  for (const mode of args.modes) {
    const r = results[mode];
    const count = (s) => [...r.tests.values()].filter((v) => v === s).length;
    summary.modes[mode] = {
      passed: count("passed"),
      failed: count("failed"),
      seconds: r.seconds,
      served: r.served,
      ...(BASELINE[mode] ? {} : { recorded: r.recorded ?? 0 }),
    };
    for (const line of r.skips) summary.skipped.push(`${mode}: ${line}`);
    if (!BASELINE[mode]) {
      if (r.served.length > 0) summary.inactive.push(`${mode}: served natively without activation`);
      continue;
    }
    const basePassing = passing(BASELINE[mode]);
    const regressions = basePassing.filter((n) => r.tests.get(n) !== "passed");
    for (const n of regressions) summary.regressions.push(`${mode}: ${n} -> ${r.tests.get(n) ?? "missing"}`);
    if (r.served.length === 0) summary.inactive.push(`${mode}: no module was served natively`);
    // Identical pass counts, not only no regression: a test that passes only with the
    // activation is a difference too.
    const gained = [...r.tests]
      .filter(([n, st]) => st === "passed" && results[BASELINE[mode]].tests.get(n) !== "passed")
      .map(([n]) => n);
    for (const n of gained) summary.regressions.push(`${mode}: ${n} passes only with activation`);
    passed += basePassing.length - regressions.length;
    failed += regressions.length + gained.length;
  }
  failed += summary.skipped.length + summary.inactive.length;
  summary.checks = { passed, failed };
  return summary;
}

async function main() {
  const barrier = makeBarrier(process.env.ACTIVATION_SUITES_BARRIER);
  const args = commandLine(process.argv.slice(2));
  const pkgDir = args.pkgDir ?? path.join(repo, "node_modules", ...args.pkg.split("/"));
  if (!existsSync(pkgDir)) throw new Error(`${args.pkg} is not installed (npm ci)`);
  const drop = new Set(args.exclude);
  const short = (s) => s.replace(/^dist\//, "").replace(/\.test\.js$/, "");
  const suites = listSuites(path.join(pkgDir, "dist"), pkgDir).filter(
    (s) => !drop.has(short(s)) && (!args.only || args.only.includes(short(s))),
  );
  console.log(`activation-suites: ${args.pkg}: ${suites.length} suites, modes ${args.modes.join(", ")}`);
  const scratch = mkdtempSync(path.join(os.tmpdir(), "pc-activation-"));
  const results = {};
  try {
    const plan = planRuns(args, pkgDir, suites, results);
    await runQueued(plan, pkgDir, scratch, args.native, results);
    // When several runs share the machine (ACTIVATION_SUITES_BARRIER), the re-runs wait until
    // every run's first pass is done, so they run on a quieter machine than the pass that
    // found the difference.
    await barrier.arrive();
    await rerunDifferences(args, pkgDir, scratch, results);
    if (args.record) recordBaselines(plan.baselines, pkgDir, suites, results);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const summary = summarize(args, suites, results);
  for (const mode of args.modes.filter((m) => !BASELINE[m])) {
    const failing = [...results[mode].tests].filter(([, s]) => s === "failed").map(([n]) => n);
    for (const n of failing)
      console.log(`activation-suites: fails without activation too (${mode}; not counted): ${n}`);
  }
  for (const line of summary.regressions) console.log(`activation-suites: DIFFERENCE: ${line}`);
  for (const line of summary.skipped) console.log(`activation-suites: SKIPPED (counts as failed): ${line}`);
  for (const line of summary.inactive) console.log(`activation-suites: NOT ACTIVE (counts as failed): ${line}`);
  if (args.json) writeFileSync(args.json, JSON.stringify(summary, null, 2));
  const { passed, failed } = summary.checks;
  console.log(`activation-suites: ${args.pkg}: ${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 && passed > 0 ? 0 : 1;
}

main().catch((error) => {
  console.error(`activation-suites: ${error.stack ?? error}`);
  process.exitCode = 2;
});
