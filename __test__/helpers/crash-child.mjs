// A child process for the crash tests (__test__/crash.test.js): runs one operation and is
// killed with SIGKILL by its parent at a seeded point. Prints "started" before it begins.
//   node crash-child.mjs extract <archive> <dest>
//   node crash-child.mjs merge <baseline.json> <sourceDir> <targetDir>
//   node crash-child.mjs pull <spec.json> <remoteDir> <localDir>
//   node crash-child.mjs staging-name <kind>   (prints a fresh staging name of this
//     process, tagged with this host's key, and exits: what a killed process leaves)
import { readFileSync } from "node:fs";
import { extractTarballToDirectory } from "../../index.js";
import { native } from "../../lib/native.js";
import { syncDirectoryFromSsh } from "../../lib/ssh.js";
import { mergeDirectoryWithBaseline, parseDirectorySnapshot } from "../../lib/workspace-restore-merge.js";

const [mode, ...args] = process.argv.slice(2);
process.stdout.write("started\n");
if (mode === "extract") {
  const [archive, dest] = args;
  await extractTarballToDirectory({ source: archive, localDir: dest });
} else if (mode === "merge") {
  const [baselineFile, sourceDir, targetDir] = args;
  const baseline = parseDirectorySnapshot(JSON.parse(readFileSync(baselineFile, "utf8")));
  await mergeDirectoryWithBaseline({ baseline, sourceDir, targetDir });
} else if (mode === "pull") {
  const [specFile, remoteDir, localDir] = args;
  const spec = JSON.parse(readFileSync(specFile, "utf8"));
  await syncDirectoryFromSsh({ spec, remoteDir, localDir });
} else if (mode === "staging-name") {
  process.stdout.write(`${native.stagingName(args[0])}\n`);
} else {
  throw new Error(`unknown mode ${mode}`);
}
process.stdout.write("done\n");
