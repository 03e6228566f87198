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
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { prepareCommandManagedRuntime } from "../lib/command-managed-runtime.js";
import { HEAVY_EXCLUDES } from "../lib/sandbox/steps.js";
import { pinnedGit } from "./helpers/git-state.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { restoreRuleBreaks, ruleState, tarMembers } from "./helpers/restore-rule.js";
import { agentWork, hostEdits, writeIngredientWorkspace } from "./helpers/restore-rule-gen.js";
import { nativeSyncRunner, spawnRunner } from "./helpers/sandbox-runner.js";

const seed = runSeed();
const WORKSPACES = Number(process.env.RESTORE_RULE_WORKSPACES ?? 6);
const RUNS = 3;
const work = mkdtempSync(path.join(os.tmpdir(), "pc-restore-rule-"));
const saved = { home: process.env.PAPERCLIP_HOME, delta: process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA };
beforeAll(() => {
  process.env.PAPERCLIP_HOME = path.join(work, "home");
});
afterAll(() => {
  for (const [key, value] of [
    ["PAPERCLIP_HOME", saved.home],
    ["PAPERCLIP_NATIVE_SANDBOX_DELTA", saved.delta],
  ]) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  rmSync(work, { recursive: true, force: true });
});
let counter = 0;
const fresh = (label) => mkdtempSync(path.join(work, `${label}-${(counter += 1)}-`));

const TRANSPORTS = ["base64", "single-stream", "duplex", "native"];

/** A runner for `transport` (helpers/sandbox-runner.js). */
function runnerFor(transport) {
  if (transport === "native") return nativeSyncRunner().runner;
  return spawnRunner({ singleStream: transport === "single-stream", duplex: transport === "duplex" }).runner;
}

/** What the sandbox restore's pull leaves out of a workspace prepared with `options` (docs/sandbox.md). */
function pullExcludes(local, gitBacked, options) {
  const ignored = gitBacked
    ? pinnedGit(local, ["ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"])
        .split("\0")
        .map((entry) => entry.replace(/\/+$/, ""))
        .filter(Boolean)
    : [];
  return [
    ...HEAVY_EXCLUDES,
    ".git",
    ".git/*",
    ".paperclip-runtime",
    ...(options.preserveAbsentOnRestore ?? []),
    ...(options.workspaceExclude ?? []),
    ...ignored,
  ];
}

/** One run through `impl`: prepare, the agent's work, the host's edits, restore; resolves the rule's breaks. */
async function run(impl, rng, { local, remote, transport, gitBacked, options }) {
  const prepare = (workspaceLocalDir, remoteCwd, api = impl) =>
    api.prepareCommandManagedRuntime({
      runner: runnerFor(transport),
      spec: { remoteCwd, timeoutMs: 60_000 },
      adapterKey: "rule",
      workspaceLocalDir,
      ...options,
    });
  let prepared;
  try {
    prepared = await prepare(local, remote);
  } catch (error) {
    // A restore that made a file of a directory of HEAD (or the other way) fails the next
    // prepare's extraction of the overlay over the clone, upstream's too: the workspace's
    // runs end there.
    const copy = `${local}-prepare-copy`;
    execFileSync("cp", ["-a", local, copy]);
    const theirs = await prepare(copy, fresh("copy-remote"), upstream).then(
      () => null,
      (failed) => failed,
    );
    rmSync(copy, { recursive: true, force: true });
    const cause = (failed) => failed?.message.split(/\n/).pop();
    return {
      prepareFailed: true,
      breaks: theirs ? {} : { prepare: `failed where upstream's did not: ${cause(error)}` },
    };
  }
  const excludes = pullExcludes(local, gitBacked, options);
  const hostBaseline = ruleState(local);
  const sandboxStart = ruleState(remote);
  const startMembers = tarMembers(remote, excludes);
  const applied = [...agentWork(rng, remote, 2 + rng.int(5))];
  if (gitBacked && rng.chance(0.3)) {
    pinnedGit(remote, ["add", "-A"]);
    pinnedGit(remote, ["commit", "-q", "--allow-empty", "-m", "agent"]);
    applied.push("agent-commit");
  }
  const host = (applied.push(...hostEdits(rng, local, rng.int(4))), ruleState(local));
  const sandboxEnd = ruleState(remote);
  const endMembers = tarMembers(remote, excludes);
  const lines = [];
  const error = await prepared
    .restoreWorkspace((line) => lines.push(line))
    .then(
      () => null,
      (failed) => failed,
    );
  const breaks = error
    ? { restore: `failed: ${error.code ?? ""} ${error.message}` }
    : restoreRuleBreaks({
        restored: ruleState(local),
        host,
        hostBaseline,
        sandboxStart,
        sandboxEnd,
        returnable: (relative) => startMembers.has(relative) || endMembers.has(relative),
      });
  return { breaks, applied, lines };
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
