#!/usr/bin/env node
// Prints the closing line CI reads, `N passed, N failed`: our vitest tests, the upstream
// tests that must pass with our exports swapped in, and the bounded fuzz runs of the tar
// extractor and the tar packer (one check each).
//
// Usage: node scripts/test/summary.mjs [--steps steps.tsv] <report>… — with --steps (scripts/test/full.sh's
// record of each step's start, `<seconds into the run>\t<step>` a line), each step's minutes
// are printed before the closing line. Each report is a cargo test log (`.log`), a scripts/test/lint.sh report, a vitest JSON report, an
// upstream-swap summary, a scripts/upstream/activation-suites.mjs summary or a scripts/test/fuzz.sh report (told apart by content); a report that
// is missing (its run did not finish) counts as one failure.
// A report may have its step's exit status beside it (`<name>.status`, written by
// scripts/test/full.sh): a status other than 0 whose report shows no failure (vitest's unhandled
// errors, a runner that died after writing) counts as one failure, named with the status.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { stripVTControlCharacters } from "node:util";
import { parseArgs } from "../lib/shared.mjs";

let passed = 0;
let failed = 0;
let skipped = 0;
const { values, positionals: reports } = parseArgs(process.argv.slice(2), {
  name: "summary",
  usage: "Usage: node scripts/test/summary.mjs [--steps steps.tsv] <report>…",
  options: { steps: { type: "string" } },
  positionals: true,
});
const stepsFile = values.steps ?? null;
for (const file of reports) {
  const name = path.basename(file, ".json");
  const statusFile = file.replace(/\.(json|log)$/, ".status");
  const status = existsSync(statusFile) ? readFileSync(statusFile, "utf8").trim() : null;
  const failedBefore = failed;
  count(file, name, status);
  if (status != null && status !== "0" && failed === failedBefore) {
    failed += 1;
    console.log(`  failed: ${name} exited with status ${status} and no failed check in its report`);
    // The step's own error lines (vitest's unhandled errors are in no report), when kept.
    const out = file.replace(/\.(json|log)$/, ".out");
    if (existsSync(out)) {
      for (const line of stepErrorLines(readFileSync(out, "utf8"))) console.log(`    ${line.slice(0, 300)}`);
    }
  }
}

/** Adds one report's checks to the totals and prints its line (`status`: its step's exit status, or null). */
function count(file, name, status) {
  if (!existsSync(file)) {
    failed += 1;
    console.log(`${name}: no report (the run did not finish)`);
    return;
  }
  if (file.endsWith(".log")) {
    // A cargo test log: its `test result:` lines, and the exit status written beside it
    // (`<name>.status`); a run that did not exit 0 with no failed test counts as one failure.
    const log = readFileSync(file, "utf8");
    let ok = 0;
    let bad = 0;
    for (const [, p, f] of log.matchAll(/^test result: \w+\. (\d+) passed; (\d+) failed/gm)) {
      ok += Number(p);
      bad += Number(f);
    }
    if (status == null && bad === 0) bad = 1;
    passed += ok;
    failed += bad;
    console.log(`${name}: ${ok} passed, ${bad} failed (exit status ${status ?? "missing"})`);
    return;
  }
  const report = JSON.parse(readFileSync(file, "utf8"));
  if (report.lint) {
    for (const lint of report.lint) {
      if (lint.passed) passed += 1;
      else failed += 1;
    }
    const bad = report.lint.filter((lint) => !lint.passed).map((lint) => lint.name);
    console.log(
      `${name}: ${report.lint.length - bad.length} passed, ${bad.length} failed${bad.length ? ` (${bad.join(", ")})` : ""}`,
    );
  } else if (report.fuzz) {
    const f = report.fuzz;
    if (f.passed) passed += 1;
    else failed += 1;
    const stats = `${f.runs ?? "?"} runs in ${f.seconds ?? "?"} s, ${f.execPerSecond ?? "?"} exec/s, ${f.sanitizer} sanitizer`;
    console.log(
      `${name}: ${f.passed ? "1 passed" : `1 failed (exit status ${f.status}${f.artifact ? `, input ${f.artifact}` : ""})`} (${stats})`,
    );
  } else if (report.activation) {
    passed += report.checks.passed;
    failed += report.checks.failed;
    const modes = Object.entries(report.modes)
      .map(([mode, m]) => `${mode} ${m.passed}/${m.failed}`)
      .join(", ");
    console.log(
      `${name}: ${report.checks.passed} passed, ${report.checks.failed} failed (${report.package}, ${report.suites} suites; passed/failed per mode: ${modes})`,
    );
  } else if (report.checks) {
    passed += report.checks.passed;
    failed += report.checks.failed;
    console.log(
      `${name}: ${report.checks.passed} passed, ${report.checks.failed} failed (${report.swappedExports.length} exports swapped; suites: ${report.suites.join(", ")})`,
    );
  } else {
    passed += report.numPassedTests;
    failed +=
      report.numFailedTests +
      (report.numFailedTestSuites > 0 && report.numFailedTests === 0 ? report.numFailedTestSuites : 0);
    // A run that found no test (a wrong filter) did not test anything: a failure.
    if (report.numTotalTests === 0) failed += 1;
    skipped += report.numPendingTests + (report.numTodoTests ?? 0);
    console.log(
      `${name}: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${report.numPendingTests} skipped`,
    );
    // Each failure by name, with its message's first line: the closing lines are often all
    // of a run's output that is kept.
    for (const file of report.testResults ?? []) {
      const failures = (file.assertionResults ?? []).filter((test) => test.status === "failed");
      if (file.status === "failed" && failures.length === 0) {
        console.log(`  failed: ${path.relative(process.cwd(), file.name)}: ${firstLine(file.message)}`);
      }
      for (const test of failures) {
        console.log(
          `  failed: ${path.relative(process.cwd(), file.name)} > ${test.fullName}: ${firstLine(test.failureMessages?.[0])}`,
        );
      }
    }
  }
}
/**
 * The lines of a step's output that say why it failed though its report shows no failure:
 * vitest's unhandled-error block whole (the error, its stack's first frames, the file and the
 * test it came from) when there is one, else the lines that name an error.
 */
function stepErrorLines(output) {
  const lines = stripVTControlCharacters(output)
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);
  const start = lines.findIndex((line) => /Unhandled Errors?\b/.test(line) && /⎯/.test(line));
  if (start >= 0) {
    return lines
      .slice(start)
      .filter(
        (line) => !/^(This might cause false positive|- The error was thrown|- Cancel timers|- Make sure)/.test(line),
      )
      .slice(0, 24);
  }
  return lines.filter((line) => /unhandled|error|timeout|killed/i.test(line) && !line.startsWith("✓")).slice(0, 8);
}

/** The first non-empty line of a failure message, shortened, without colour codes. */
function firstLine(message) {
  const line =
    stripVTControlCharacters(message ?? "")
      .split("\n")
      .find((l) => l.trim()) ?? "";
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}

if (stepsFile && existsSync(stepsFile)) printSteps(readFileSync(stepsFile, "utf8"));

/** Each step's minutes, from its start to the next step's (the last one, `summary`, ends the run). */
function printSteps(text) {
  const lines = text.split("\n").filter(Boolean);
  // A line starting with `#` is a note (a step that ran in the background beside others).
  const notes = lines.filter((line) => line.startsWith("#")).map((line) => line.replace(/^#\s*/, ""));
  const steps = lines
    .filter((line) => !line.startsWith("#"))
    .map((line) => {
      const tab = line.indexOf("\t");
      return { at: Number(line.slice(0, tab)), name: line.slice(tab + 1) };
    });
  console.log("minutes per step (start in the run, minutes):");
  for (let i = 0; i + 1 < steps.length; i += 1) {
    const minutes = (steps[i + 1].at - steps[i].at) / 60;
    console.log(`  ${(steps[i].at / 60).toFixed(1).padStart(5)}  ${minutes.toFixed(1).padStart(5)}  ${steps[i].name}`);
  }
  for (const note of notes) console.log(`  ${note}`);
  if (steps.length > 0) console.log(`  total ${(steps.at(-1).at / 60).toFixed(1)} minutes to the summary`);
}

console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
