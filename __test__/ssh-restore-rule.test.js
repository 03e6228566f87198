// The restore rule through the SSH lane, generated (docs/differences.md, "Nothing the agent
// did not change"), against a real sshd as an unprivileged user (a remote umask): seeded host
// workspaces made of what the transfers leave out (helpers/restore-rule-gen.js), plain and
// git, through the managed runtime's prepare and restore (`prepareRemoteManagedRuntime`, each
// run in a directory of its own, the delta starting it from the last restored run's) with the
// delta on and off; three consecutive runs each, with the agent's random work on the remote
// and the host's edits meanwhile. After every restore each host path is what the agent made
// it or what the host held when the restore began (helpers/restore-rule.js, GNU tar saying
// what the pull can bring back). Upstream's lane, on a twin of each first run, breaks the rule
// on the same workspaces.
//
// `RESTORE_RULE_WORKSPACES` (default 4) sets how many workspaces; `npm run test:restore-rule`
// runs many more. Rerun a failure with DIFF_SEED=<seed>.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/remote-managed-runtime";
import { describe, expect, it } from "vitest";
import { prepareRemoteManagedRuntime } from "../lib/remote-managed-runtime.js";
import { restoreEnvAfterEach } from "./helpers/env.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { checkedRestore, preparedOrEnded, writeIngredientWorkspace } from "./helpers/restore-rule-gen.js";
import { sshdSuite } from "./helpers/sshd-suite.js";

const seed = runSeed();
const WORKSPACES = Number(process.env.RESTORE_RULE_WORKSPACES ?? 4);
const RUNS = 3;
const suite = sshdSuite("pc-ssh-restore-rule-");
restoreEnvAfterEach("PAPERCLIP_NATIVE_SSH_DELTA");
let counter = 0;
const fresh = (label) => mkdtempSync(path.join(suite.work, `${label}-${(counter += 1)}-`));

/** One managed run through `impl` (ours or upstream's module): prepare, then the generated run around it. */
async function run(impl, rng, { local, base, runId, gitBacked }) {
  const prepare = (workspaceLocalDir, remoteCwd, api = impl) =>
    api.prepareRemoteManagedRuntime({
      spec: { ...suite.server.spec, remoteCwd },
      runId,
      adapterKey: "rule",
      workspaceLocalDir,
    });
  // A host tree whose kinds HEAD contradicts (a directory kept where the agent committed a
  // file) fails the upload over the checkout, upstream's too: the workspace's runs end.
  const { prepared, ended } = await preparedOrEnded(
    local,
    () => prepare(local, base),
    (copy) => prepare(copy, fresh("copy-base"), upstream),
  );
  if (ended) return ended;
  // The managed restore's pull: the baseline's excludes (and `._*`).
  const excludes = gitBacked ? [".git", ".git/*", ".paperclip-runtime"] : [".paperclip-runtime"];
  return checkedRestore(rng, { prepared, local, remote: prepared.workspaceRemoteDir, excludes, gitBacked });
}

describe(`the restore rule through the SSH lane, generated (seed ${seed})`, { timeout: 600_000 }, () => {
  it(`holds for ${WORKSPACES} workspaces, ${RUNS} managed runs each, delta on and off; upstream's lane breaks it`, async () => {
    const rng = createRandom(seed);
    let upstreamBroke = 0;
    try {
      for (let index = 0; index < WORKSPACES; index += 1) {
        const gitBacked = index % 2 === 1;
        const delta = index % 4 < 2 ? "1" : "0";
        process.env.PAPERCLIP_NATIVE_SSH_DELTA = delta;
        const local = fresh("ws");
        // No mode 000 here: the host process is the unprivileged user, which could not read it.
        const { names } = writeIngredientWorkspace(rng, local, { gitBacked, modes: [0o600, 0o664, 0o775, 0o444] });
        const twin = `${local}-twin`;
        execFileSync("cp", ["-a", local, twin]);
        const base = fresh("remote-base");
        const context = `workspace ${index} (${gitBacked ? "git" : "plain"}, delta ${delta === "1" ? "on" : "off"}; ${names.join(", ")})`;
        for (let round = 0; round < RUNS; round += 1) {
          const outcome = await run({ prepareRemoteManagedRuntime }, rng, {
            local,
            base,
            runId: `run-${round + 1}`,
            gitBacked,
          });
          expect(outcome.breaks, `${context}, run ${round + 1} (${outcome.applied.join(", ")})`).toEqual({});
          if (outcome.prepareFailed) break;
        }
        const theirs = await run(upstream, createRandom(seed ^ index), {
          local: twin,
          base: fresh("twin-base"),
          runId: "run-1",
          gitBacked,
        });
        if (Object.keys(theirs.breaks).length > 0) upstreamBroke += 1;
        rmSync(twin, { recursive: true, force: true });
      }
      if (WORKSPACES >= 4) expect(upstreamBroke).toBeGreaterThan(0);
    } catch (error) {
      error.message = `[DIFF_SEED=${seed}] ${error.message}`;
      throw error;
    }
  });
});
