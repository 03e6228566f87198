// prepareCommandManagedRuntime + restoreWorkspace(), ours against upstream's, on seeded
// git and plain workspaces (dirty and untracked files, an ignored dependency tree,
// .gitignore'd files, symlinks, modes, unicode names, a big file crossing the 3 MiB
// slices, a nested project repository), with an asset (provision + restore) and referenced
// projects (one failing), through a spawn runner in each transport mode. Both sides get
// identical copies of the workspace and the same simulated agent work in the sandbox; the
// remote trees, remote git state, local git state, progress lines and status updates must
// agree; the restored workspaces agree but where ours kept a host copy upstream's replaced (a
// tracked file's 600 mode the checkout made 644: docs/differences.md, "Nothing the agent did
// not change"), which the restore rule's check tells (helpers/restore-rule.js). Rerun a
// failure with DIFF_SEED=<seed>.
import { execFileSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { oracle } from "./helpers/oracle.js";
import * as ours from "../lib/command-managed-runtime.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { nativeSyncRunner, spawnRunner } from "./helpers/sandbox-runner.js";
import { pinnedGit, repositoryState, treeWithoutGit, writeNestedRepository } from "./helpers/git-state.js";
import { pairRuleBreaks, recordRunEnd, recordRunStart, sandboxPullExcludes } from "./helpers/restore-rule.js";
const upstream = await oracle("command-managed-runtime");

const seed = runSeed();
const scratch = mkdtempSync(path.join(os.tmpdir(), "pc-sandbox-diff-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let counter = 0;
const fresh = (label) => {
  const dir = path.join(scratch, `${label}-${(counter += 1)}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};

const git = pinnedGit;

const NAMES = ["a.txt", "B.md", "ünïcode-名.txt", "with space.txt", "x.sh", "é", "data.json", "Zeta"];
/** Files, dirs, symlinks and modes under `root`. */
function writeTree(rng, root, depth = 0) {
  mkdirSync(root, { recursive: true });
  for (const name of NAMES) {
    if (!rng.chance(0.6)) continue;
    const full = path.join(root, name);
    const roll = rng.next();
    if (roll < 0.2 && depth < 2) writeTree(rng, full, depth + 1);
    // A link climbing out of the workspace is refused by our restore (the sandbox is
    // untrusted; upstream's `tar -xf` takes it): only nested links climb, and stay inside.
    else if (roll < 0.3)
      symlinkSync(rng.pick(depth > 0 ? ["a.txt", "../B.md", "missing/target"] : ["a.txt", "missing/target"]), full);
    else {
      writeFileSync(full, `${name} ${rng.int(1e9)}\n`.repeat(1 + rng.int(50)));
      chmodSync(full, rng.pick([0o644, 0o755, 0o600]));
    }
  }
}

/** A workspace: a git repository with local changes (or a plain tree). */
function writeWorkspace(rng, root, { gitBacked, nested }) {
  writeTree(rng, root);
  mkdirSync(path.join(root, "src"), { recursive: true });
  writeFileSync(path.join(root, "src", "main.js"), "console.log(1);\n");
  writeFileSync(path.join(root, "src", "gone.js"), "// deleted later\n");
  mkdirSync(path.join(root, "node_modules", "dep"), { recursive: true });
  writeFileSync(path.join(root, "node_modules", "dep", "index.js"), "heavy\n");
  writeFileSync(path.join(root, ".gitignore"), "*.log\nsecret/\n");
  if (!gitBacked) return;
  git(root, ["init", "-q"]);
  git(root, ["remote", "add", "origin", "https://user:token@example.com/org/repo.git"]);
  git(root, ["add", "-A"]);
  git(root, ["commit", "-q", "-m", "initial"]);
  // Dirty: a modified tracked file, a deleted tracked file, untracked and ignored files.
  writeFileSync(path.join(root, "src", "main.js"), "console.log(2);\n");
  unlinkSync(path.join(root, "src", "gone.js"));
  writeFileSync(path.join(root, "untracked ünï.txt"), "new\n");
  writeFileSync(path.join(root, "debug.log"), "ignored\n");
  mkdirSync(path.join(root, "secret"));
  writeFileSync(path.join(root, "secret", "key.txt"), "ignored\n");
  const big = Buffer.alloc(3 * 1024 * 1024 + 4097);
  for (let i = 0; i < big.length; i += 509) big[i] = rng.int(256);
  writeFileSync(path.join(root, "big.bin"), big);
  if (nested) writeNestedRepository(root);
}

/** The sandbox agent's work, identical on both sides. */
function agentWork(remote, { gitBacked, nested }) {
  writeFileSync(path.join(remote, "src", "main.js"), "console.log(3);\n");
  writeFileSync(path.join(remote, "made-by-agent ✓.txt"), "agent\n");
  rmSync(path.join(remote, "B.md"), { force: true, recursive: true });
  if (gitBacked) {
    git(remote, ["add", "src/main.js"]);
    git(remote, ["commit", "-q", "-m", "agent commit"]);
    writeFileSync(path.join(remote, "src", "main.js"), "console.log(4);\n");
  }
  if (nested) writeFileSync(path.join(remote, ".paperclip-repositories", "proj", "README.md"), "nested changed\n");
}

const tree = treeWithoutGit;

const gitState = (dir) => repositoryState(dir);

const normalize = (line) => line.replace(/\d+(\.\d+)?/g, "N");
/**
 * The distinct lines, sorted: the reporter throttles on time (how often a line repeats is
 * timing) and concurrent operations finish in either order, on both sides alike.
 */
const collapse = (lines) => [...new Set(lines)].sort();

async function runSide(impl, { mode, workspace, assetDir, projectDir }) {
  const remote = fresh("remote");
  const made =
    mode === "native"
      ? nativeSyncRunner()
      : spawnRunner({ singleStream: mode === "single-stream", duplex: mode === "duplex" && impl === ours });
  const progress = [];
  const statuses = [];
  const restoredAsset = [];
  const prepared = await impl.prepareCommandManagedRuntime({
    runner: made.runner,
    spec: { remoteCwd: remote, timeoutMs: 60_000 },
    adapterKey: "diff",
    workspaceLocalDir: workspace,
    assets: [
      {
        key: "cfg",
        localDir: assetDir,
        restore: async ({ assetDir: remoteAssetDir, readFile }) => {
          restoredAsset.push((await readFile(path.posix.join(remoteAssetDir, "config.json"))).toString("utf8"));
        },
      },
    ],
    additionalSources: [
      { projectId: "p1", localPath: projectDir, ignoreResolution: { kind: "other" } },
      { projectId: "bad/id", localPath: projectDir, ignoreResolution: { kind: "other" } },
    ],
    onProgress: (line) => {
      progress.push(line);
    },
    onRuntimeProgress: (update) => {
      statuses.push(`${update.phase}: ${update.message}`);
    },
  });
  return { prepared, remote, progress, statuses, restoredAsset, calls: made.calls };
}

const MODES = ["chunked", "single-stream", "duplex", "native"];
const KINDS = [
  { name: "git-backed with a nested repository", gitBacked: true, nested: true },
  { name: "plain", gitBacked: false, nested: false },
];

describe("prepareCommandManagedRuntime + restoreWorkspace against upstream", () => {
  for (const kind of KINDS) {
    for (const mode of MODES) {
      it(`${kind.name}, ${mode}: same remote tree and git state, same restored workspace, same lines`, async () => {
        const rng = createRandom(seed);
        try {
          const base = fresh("ws");
          writeWorkspace(rng, base, kind);
          const assetDir = fresh("asset");
          writeFileSync(path.join(assetDir, "config.json"), `{"n":${rng.int(1000)}}`);
          const projectDir = fresh("project");
          writeTree(rng, projectDir);
          const copies = { upstream: fresh("ws-up"), ours: fresh("ws-ours") };
          cpSync(base, copies.upstream, { recursive: true, verbatimSymlinks: true });
          cpSync(base, copies.ours, { recursive: true, verbatimSymlinks: true });
          const sides = {};
          for (const [name, impl] of [
            ["upstream", upstream],
            ["ours", ours],
          ]) {
            sides[name] = await runSide(impl, { mode, workspace: copies[name], assetDir, projectDir });
          }
          const up = sides.upstream;
          const me = sides.ours;
          expect(tree(me.remote)).toEqual(tree(up.remote));
          expect(me.prepared.additionalSourceFailures).toEqual(up.prepared.additionalSourceFailures);
          expect(Object.keys(me.prepared.additionalSourceDirs)).toEqual(["p1"]);
          if (kind.gitBacked) {
            expect(gitState(me.remote)).toEqual(gitState(up.remote));
            expect(gitState(me.remote).shallow).not.toBeNull();
            expect(gitState(path.join(me.remote, ".paperclip-repositories", "proj"))).toEqual(
              gitState(path.join(up.remote, ".paperclip-repositories", "proj")),
            );
          }
          // What the run starts from, for the rule's check of our restore: the pull leaves out
          // the heavy directories, the repositories, our runtime directory and what git ignores.
          const ignored = kind.gitBacked
            ? execFileSync("git", ["-C", copies.ours, "ls-files", "-oi", "--exclude-standard", "--directory", "-z"], {
                encoding: "utf8",
              })
                .split("\0")
                .map((entry) => entry.replace(/\/+$/, ""))
                .filter(Boolean)
            : [];
          const pair = { local: copies.ours, remote: me.remote, twin: copies.upstream };
          recordRunStart(pair, sandboxPullExcludes({}, ignored));
          for (const side of [up, me]) agentWork(side.remote, kind);
          recordRunEnd(pair);
          const restoreLines = { upstream: [], ours: [] };
          await up.prepared.restoreWorkspace((line) => {
            restoreLines.upstream.push(line);
          });
          await me.prepared.restoreWorkspace((line) => {
            restoreLines.ours.push(line);
          });
          if (kind.gitBacked) {
            expect(gitState(copies.ours)).toEqual(gitState(copies.upstream));
            expect(gitState(path.join(copies.ours, ".paperclip-repositories", "proj"))).toEqual(
              gitState(path.join(copies.upstream, ".paperclip-repositories", "proj")),
            );
          }
          // Last: the check makes the twin a copy of ours.
          expect(pairRuleBreaks(pair)).toEqual({});
          expect(me.restoredAsset).toEqual(up.restoredAsset);
          expect(collapse(me.progress.map(normalize))).toEqual(collapse(up.progress.map(normalize)));
          expect(collapse(restoreLines.ours.map(normalize))).toEqual(collapse(restoreLines.upstream.map(normalize)));
          expect(collapse(me.statuses.map(normalize))).toEqual(collapse(up.statuses.map(normalize)));
        } catch (error) {
          error.message = `[DIFF_SEED=${seed}] ${error.message}`;
          throw error;
        }
      });
    }
  }
});
