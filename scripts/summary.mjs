#!/usr/bin/env node
// Prints the closing line CI reads, `N passed, N failed`, for the JavaScript part: our
// vitest tests plus the upstream tests that must pass with our exports swapped in.
import { existsSync, readFileSync } from "node:fs";

const [vitestFile, swapFile] = process.argv.slice(2);
let passed = 0;
let failed = 0;
let skipped = 0;
if (existsSync(vitestFile)) {
  const report = JSON.parse(readFileSync(vitestFile, "utf8"));
  passed += report.numPassedTests;
  failed += report.numFailedTests + (report.numFailedTestSuites > 0 && report.numFailedTests === 0 ? report.numFailedTestSuites : 0);
  skipped += report.numPendingTests + (report.numTodoTests ?? 0);
  console.log(`vitest: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${report.numPendingTests} skipped`);
} else {
  failed += 1;
  console.log("vitest: no report (the run did not finish)");
}
if (existsSync(swapFile)) {
  const swap = JSON.parse(readFileSync(swapFile, "utf8"));
  passed += swap.checks.passed;
  failed += swap.checks.failed;
  console.log(`upstream-swap: ${swap.checks.passed} passed, ${swap.checks.failed} failed (${swap.swappedExports.length} exports swapped)`);
} else {
  failed += 1;
  console.log("upstream-swap: no report (the run did not finish)");
}
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
