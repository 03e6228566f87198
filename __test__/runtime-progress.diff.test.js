// Differential test of createRuntimeProgressReporter against upstream's: random call
// sequences on a shared fake clock must produce byte-identical lines in the same order.
import { describe, expect, it } from "vitest";
import { oracle } from "./helpers/oracle.js";
import * as ours from "@paperclipai/adapter-utils-native/runtime-progress";
import { createRuntimeProgressReporter as fromRoot } from "@paperclipai/adapter-utils-native";
import { createRandom, runSeed } from "./helpers/random.js";
const upstream = await oracle("runtime-progress");

const SEED = runSeed();
const MB = 1024 * 1024;

/** A byte count: round, tie-rounding (`0.25`, `1.25` … MB), fractional, negative, huge. */
function bytes(rng, total) {
  switch (rng.int(9)) {
    case 0:
      return 0;
    case 1:
      return rng.pick([262_144, 1_310_720, 0.05 * MB, 0.15 * MB, 2.45 * MB, 12.6 * MB]);
    case 2:
      return -rng.int(1000);
    case 3:
      return rng.int(2 ** 40);
    case 4:
      return rng.next() * 100 * MB;
    case 5:
      return total > 0 ? total : rng.int(10 * MB);
    case 6:
      return total > 0 ? total + rng.int(MB) : rng.int(MB);
    default:
      return total > 0 ? Math.floor(total * rng.next()) : rng.int(50 * MB);
  }
}

function total(rng) {
  return rng.pick([null, null, 0, -1, 100 * MB, 31.4 * MB, 1, 3 * MB + 17, 2 ** 41, Number.NaN, undefined]);
}

function options(rng, sink, now) {
  const out = {
    sink,
    phase: rng.pick(["Syncing", "Restoring", "Importing git history", "Exporting git history"]),
    direction: rng.pick(["to", "from"]),
    target: rng.pick(["sandbox", "ssh"]),
    now,
  };
  const label = rng.pick([undefined, "", "workspace", "asset key"]);
  if (label !== undefined) out.label = label;
  const step = rng.pick([undefined, 0, -5, 1, 10, 25, 33.3, 200]);
  if (step !== undefined) out.stepPercent = step;
  const interval = rng.pick([undefined, 0, -1, 1, 100, 2000]);
  if (interval !== undefined) out.minIntervalMs = interval;
  return out;
}

/** Runs one random script against a reporter factory; returns the lines. */
async function run(create, seed) {
  const rng = createRandom(seed);
  const lines = [];
  let clock = 1_000_000;
  const asyncSink = rng.chance(0.5);
  const sink = (line) => {
    lines.push(line);
    return asyncSink ? new Promise((resolve) => setImmediate(resolve)) : undefined;
  };
  const reporter = create(options(rng, sink, () => clock));
  let sequenceTotal = total(rng);
  const pending = [];
  for (let op = rng.int(60) + 1; op > 0; op -= 1) {
    clock += rng.pick([0, 1, 50, 500, 1999, 2000, 5000]);
    if (rng.chance(0.1)) sequenceTotal = total(rng);
    const roll = rng.next();
    let call;
    if (roll < 0.85) call = reporter.report(bytes(rng, sequenceTotal), sequenceTotal);
    else if (roll < 0.93) {
      const args = rng.pick([
        [],
        [bytes(rng, sequenceTotal)],
        [bytes(rng, sequenceTotal), total(rng)],
        [undefined, total(rng)],
        [undefined, null],
      ]);
      call = reporter.complete(...args);
    } else {
      const args = rng.pick([
        [],
        [bytes(rng, sequenceTotal)],
        [bytes(rng, sequenceTotal), total(rng)],
        [undefined, null],
      ]);
      call = reporter.fail(...args);
    }
    // Sometimes several calls are in flight at once, as a transport might issue them.
    if (rng.chance(0.3)) pending.push(call);
    else {
      await Promise.all(pending.splice(0));
      await call;
    }
  }
  await Promise.all(pending);
  return lines;
}

describe(`createRuntimeProgressReporter differential (DIFF_SEED=${SEED})`, () => {
  it("emits byte-identical lines to upstream for random call sequences", async () => {
    let emitted = 0;
    for (let round = 0; round < 400; round += 1) {
      const seed = (SEED + round * 7919) >>> 0;
      const theirs = await run(upstream.createRuntimeProgressReporter, seed);
      const mine = await run(ours.createRuntimeProgressReporter, seed);
      expect(mine, `DIFF_SEED=${SEED} round=${round}`).toEqual(theirs);
      emitted += theirs.length;
    }
    expect(emitted).toBeGreaterThan(800); // the scripts do exercise the reporter
  });

  it("rounds like toFixed and Math.round (ties up), including the line format's own examples (40% of 12.6/31.4 MB, a 12.5% tie)", async () => {
    const lines = [];
    const line = async (done, total) => {
      const reporter = ours.createRuntimeProgressReporter({
        sink: (l) => {
          lines.push(l);
        },
        phase: "Syncing",
        label: "workspace",
        direction: "to",
        target: "sandbox",
      });
      await reporter.report(done, total);
    };
    await line(12.6 * MB, 31.4 * MB);
    await line(1.25 * MB, 10 * MB); // 12.5% rounds up to 13, 1.25 MB shows as 1.3
    expect(lines).toEqual([
      "[paperclip] Syncing workspace to environment: 40% (12.6/31.4 MB)\n",
      "[paperclip] Syncing workspace to environment: 13% (1.3/10.0 MB)\n",
    ]);
    const tie = [];
    const r2 = ours.createRuntimeProgressReporter({
      sink: (l) => {
        tie.push(l);
      },
      phase: "Restoring",
      direction: "from",
      target: "ssh",
    });
    await r2.report(262_144, null);
    await r2.fail();
    expect(tie).toEqual([
      "[paperclip] Restoring from ssh: 0.3 MB\n",
      "[paperclip] Restoring from ssh: failed after 0.3 MB\n",
    ]);
  });

  it("is exported from the package root too", () => {
    expect(fromRoot).toBe(ours.createRuntimeProgressReporter);
  });
});
