// One process of a lock schedule: takes the directory-merge lock of a target `cycles` times,
// each time appending "<label> in" to the log once inside and "<label> out" just before
// leaving, holding it for a seeded random 0-25 ms between; a seeded random pause of 0-30 ms
// before each cycle. Usage:
//   node lock-cycles.mjs <ours|upstream|newer> <targetDir> <log> <cycles> <seed> <label>
// `ours` is this package, `upstream` @paperclipai/adapter-utils 2026.916.1, `newer` the
// stand-in of the newer SQLite protocol. Exits 0 when every cycle got the lock (a deadlock
// shows as a lock timeout: exit 1 with the error on stderr).
import { appendFileSync } from "node:fs";
import * as upstream from "@paperclipai/adapter-utils/workspace-restore-merge";
import { withDirectoryMergeLockWaiting } from "../../lib/merge-lock.js";
import { withNewerDirectoryMergeLock } from "./newer-merge-lock.mjs";
import { createRandom } from "./random.js";

const [impl, target, log, cycles, seed, label] = process.argv.slice(2);
const rng = createRandom(Number(seed));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const lock = {
  ours: (fn) => withDirectoryMergeLockWaiting(target, fn, process.env, 25_000),
  newer: (fn) => withNewerDirectoryMergeLock(target, fn, process.env, 25_000),
  upstream: (fn) => upstream.withDirectoryMergeLock(target, fn),
}[impl];
for (let cycle = 0; cycle < Number(cycles); cycle += 1) {
  await sleep(rng.int(31));
  await lock(async () => {
    appendFileSync(log, `${label} in\n`);
    await sleep(rng.int(26));
    appendFileSync(log, `${label} out\n`);
  });
}
