// The restore rule through the sandbox lane, generated (docs/differences.md, "Nothing the agent
// did not change"): seeded host workspaces made of what the transfers leave out or change in
// transit (helpers/restore-rule-gen.js), plain and git, through every transport of our client
// (base64 slices, one stream, the duplex channel, a provider's native syncIn/syncOut) with the
// delta on and off; three consecutive runs each, with the agent's random work in the sandbox
// and the host's edits meanwhile. After every restore each host path is what the agent made it
// or what the host held when the restore began (helpers/restore-rule.js, GNU tar saying what
// the pull can bring back). Upstream's lane, run on a twin of each first run, breaks the rule
// on the same workspaces (the losses ours does not copy).
//
// `RESTORE_RULE_WORKSPACES` (default 6) sets how many workspaces; `npm run test:restore-rule`
// runs many more. Rerun a failure with DIFF_SEED=<seed>.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/command-managed-runtime";
import { afterAll, describe, expect, it } from "vitest";
import { prepareCommandManagedRuntime } from "../lib/command-managed-runtime.js";
import { envForSuite, restoreEnvAfterEach } from "./helpers/env.js";
import { pinnedGit } from "./helpers/git-state.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { sandboxPullExcludes } from "./helpers/restore-rule.js";
import { checkedRestore, preparedOrEnded, writeIngredientWorkspace } from "./helpers/restore-rule-gen.js";
import { nativeSyncRunner, spawnRunner } from "./helpers/sandbox-runner.js";

const seed = runSeed();
const WORKSPACES = Number(process.env.RESTORE_RULE_WORKSPACES ?? 6);
const RUNS = 3;
const work = mkdtempSync(path.join(os.tmpdir(), "pc-restore-rule-"));
envForSuite({ PAPERCLIP_HOME: path.join(work, "home") });
restoreEnvAfterEach("PAPERCLIP_NATIVE_SANDBOX_DELTA");
afterAll(() => rmSync(work, { recursive: true, force: true }));
let counter = 0;
const fresh = (label) => mkdtempSync(path.join(work, `${label}-${(counter += 1)}-`));

const TRANSPORTS = ["base64", "single-stream", "duplex", "native"];

/** A runner for `transport` (helpers/sandbox-runner.js). */
function runnerFor(transport) {
  if (transport === "native") return nativeSyncRunner().runner;
  return spawnRunner({ singleStream: transport === "single-stream", duplex: transport === "duplex" }).runner;
}

/** What the sandbox restore's pull leaves out of a workspace prepared with `options` (its git ignores too). */
function pullExcludes(local, gitBacked, options) {
  const ignored = gitBacked
    ? pinnedGit(local, ["ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"])
        .split("\0")
        .map((entry) => entry.replace(/\/+$/, ""))
        .filter(Boolean)
    : [];
  return sandboxPullExcludes(options, ignored);
}

/** One run through `impl` (ours or upstream's module): prepare, then the generated run around it. */
async function run(impl, rng, { local, remote, transport, gitBacked, options }) {
  const prepare = (workspaceLocalDir, remoteCwd, api = impl) =>
    api.prepareCommandManagedRuntime({
      runner: runnerFor(transport),
      spec: { remoteCwd, timeoutMs: 60_000 },
      adapterKey: "rule",
      workspaceLocalDir,
      ...options,
    });
  // A restore that made a file of a directory of HEAD (or the other way) fails the next
  // prepare's extraction of the overlay over the clone, upstream's too: the runs end there.
  const { prepared, ended } = await preparedOrEnded(
    local,
    () => prepare(local, remote),
    (copy) => prepare(copy, fresh("copy-remote"), upstream),
  );
  if (ended) return ended;
  const excludes = pullExcludes(local, gitBacked, options);
  return checkedRestore(rng, { prepared, local, remote, excludes, gitBacked });
}

describe(`the restore rule through the sandbox lane, generated (seed ${seed})`, { timeout: 600_000 }, () => {
  it(`holds for ${WORKSPACES} workspaces, ${RUNS} runs each, every transport, delta on and off; upstream's lane breaks it`, async () => {
    const rng = createRandom(seed);
    let upstreamBroke = 0;
    try {
      for (let index = 0; index < WORKSPACES; index += 1) {
        const gitBacked = index % 2 === 1;
        const transport = TRANSPORTS[Math.floor(index / 2) % TRANSPORTS.length];
        const delta = rng.chance(0.5) ? "auto" : "off";
        process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = delta;
        const local = fresh("ws");
        const { options, names } = writeIngredientWorkspace(rng, local, { gitBacked });
        const twin = `${local}-twin`;
        execFileSync("cp", ["-a", local, twin]);
        const remote = fresh("remote");
        const context = `workspace ${index} (${gitBacked ? "git" : "plain"}, ${transport}, delta ${delta}; ${names.join(", ")})`;
        for (let round = 0; round < RUNS; round += 1) {
          const outcome = await run({ prepareCommandManagedRuntime }, rng, {
            local,
            remote,
            transport,
            gitBacked,
            options,
          });
          expect(outcome.breaks, `${context}, run ${round + 1} (${outcome.applied?.join(", ")})`).toEqual({});
          if (outcome.prepareFailed) break;
        }
        // Upstream's lane on the twin, one run: the differential side.
        const theirs = await run(upstream, createRandom(seed ^ index), {
          local: twin,
          remote: fresh("twin-remote"),
          transport: transport === "duplex" ? "base64" : transport,
          gitBacked,
          options,
        });
        if (Object.keys(theirs.breaks).length > 0) upstreamBroke += 1;
        rmSync(twin, { recursive: true, force: true });
        execFileSync("rm", ["-rf", `${local}-submodule-source`]);
      }
      // The generated workspaces hold what upstream's lane loses: the rule catches it there.
      if (WORKSPACES >= 4) expect(upstreamBroke).toBeGreaterThan(0);
    } catch (error) {
      error.message = `[DIFF_SEED=${seed}] ${error.message}`;
      throw error;
    }
  });
});
