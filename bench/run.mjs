// Runs every benchmark in one go (`npm run bench`): each prints its own table of medians,
// ratios against upstream and the system tools, and peak RSS. Not part of the test run.
// Usage: node bench/run.mjs [snapshot,tar,ignore,...]
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const all = ["snapshot", "ignore", "tar", "deep-tar", "merge", "ssh"].filter((name) => existsSync(path.join(here, `${name}.mjs`)));
const selected = process.argv[2] ? process.argv[2].split(",") : all;
let failed = 0;
for (const name of selected) {
  console.log(`\n## ${name}\n`);
  const run = spawnSync(process.execPath, [path.join(here, `${name}.mjs`)], { stdio: "inherit" });
  if (run.status !== 0) failed += 1;
}
process.exitCode = failed === 0 ? 0 : 1;
