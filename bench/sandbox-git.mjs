// The sandbox lane's shallow HEAD export alone: upstream's sequence (git init, a temp ref,
// `fetch --depth=1`, `checkout -B`, `reset --hard`, the ref deleted) against ours
// (lib/sandbox/git-history.js withShallowHeadClone: the commit's objects copied by
// rev-list | pack-objects --window=0 | index-pack, then the checkout), each followed by the
// clone's removal, on a git repository made from a corpus of bench/corpus.mjs (node_modules
// ignored, the rest committed). A run's time is the making of its clone plus its removal;
// off tmpfs every clone stays until all are made, after an untimed warm-up round
// (bench/summary.mjs keepTrees: a clone removed before the next is made would charge that
// one alone). Interleaved runs, the order swapped every round, medians, then the summary row
// (bench/summary.mjs; both run in this process, so no peak RSS). The clone goes to os.tmpdir()
// (set TMPDIR=/dev/shm for tmpfs); the repository is on tmpfs unless `--repo disk`.
// Usage: [TMPDIR=…] node bench/sandbox-git.mjs [c] [--runs N] [--repo tmpfs|disk]
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { corpus } from "./corpus.mjs";
import { emitRows, keepTrees, median, settle } from "./summary.mjs";
import { withShallowHeadClone } from "../lib/sandbox/git-history.js";

const args = process.argv.slice(2);
const name = args[0] && !args[0].startsWith("--") ? args[0] : "c";
const flag = (key, fallback) => (args.includes(key) ? args[args.indexOf(key) + 1] : fallback);
const runs = Number(flag("--runs", "5"));
const repoOn = flag("--repo", "tmpfs");

const parent = mkdtempSync(path.join(repoOn === "disk" ? "/var/tmp" : "/dev/shm", "pc-bench-git-"));
const repo = path.join(parent, "ws");
try {
  cpSync(corpus(name).dir, repo, { recursive: true, verbatimSymlinks: true });
  writeFileSync(path.join(repo, ".gitignore"), "node_modules/\n");
  const git = (dir, ...gitArgs) =>
    execFileSync(
      "git",
      ["-C", dir, "-c", "user.name=b", "-c", "user.email=b@b", "-c", "init.defaultBranch=main", ...gitArgs],
      { encoding: "utf8", maxBuffer: 1 << 26 },
    );
  git(repo, "init", "-q");
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "bench");
  const head = git(repo, "rev-parse", "HEAD").trim();
  const files = git(repo, "ls-files").split("\n").filter(Boolean).length;

  // Each takes `hold`, which it awaits with the clone made, before it removes it.
  let upstreamRuns = 0;
  const upstream = async (hold) => {
    const clone = await fs.mkdtemp(path.join(os.tmpdir(), "paperclip-git-workspace-"));
    const ref = `refs/paperclip/git-sync/import/bench-${process.pid}-${(upstreamRuns += 1)}`;
    try {
      git(repo, "update-ref", ref, head);
      git(clone, "init", "-q");
      git(clone, "fetch", "-q", "--depth=1", repo, ref);
      git(clone, "checkout", "-q", "--force", "-B", "main", "FETCH_HEAD");
      git(clone, "reset", "-q", "--hard", head);
      await hold();
    } finally {
      git(repo, "update-ref", "-d", ref);
      await fs.rm(clone, { recursive: true, force: true });
    }
  };
  const ours = (hold) => withShallowHeadClone(repo, { headCommit: head, branchName: "main", repositories: [] }, hold);

  /**
   * Starts `fn` and resolves once its clone is made: `makeMs`, the time that took, and
   * `remove()`, which lets `fn` remove the clone and resolves the time the removal took.
   */
  const make = async (fn) => {
    const ms = (since) => Number(process.hrtime.bigint() - since) / 1e6;
    let release;
    const released = new Promise((resolve) => (release = resolve));
    let made;
    let held = false;
    const start = process.hrtime.bigint();
    const madeIn = new Promise((resolve) => (made = resolve));
    const finished = fn(async () => {
      held = true;
      made(ms(start));
      await released;
    });
    // Settles only when `fn` ends (or fails) without holding; `remove()` awaits `finished` itself.
    const endedEarly = finished.then(() => {
      if (!held) throw new Error("the clone was removed before it was held");
      return new Promise(() => {});
    });
    endedEarly.catch(() => {});
    const makeMs = await Promise.race([madeIn, endedEarly]);
    return {
      makeMs,
      remove: async () => {
        const removing = process.hrtime.bigint();
        release();
        await finished;
        return ms(removing);
      },
    };
  };

  const times = { upstream: [], ours: [] };
  const impls = { upstream, ours };
  const keep = keepTrees(os.tmpdir());
  const held = []; // [label, clone]; the warm-up round's label is null
  const removeHeld = async () => {
    for (const [label, clone] of held.splice(0)) {
      const removeMs = await clone.remove();
      if (label) times[label].push(clone.makeMs + removeMs);
    }
  };
  try {
    for (let run = keep ? -1 : 0; run < runs; run += 1) {
      for (const label of run % 2 === 0 ? ["upstream", "ours"] : ["ours", "upstream"]) {
        settle(os.tmpdir());
        held.push([run >= 0 ? label : null, await make(impls[label])]);
        if (!keep) await removeHeld();
      }
    }
  } finally {
    await removeHeld();
  }
  const up = median(times.upstream);
  const me = median(times.ours);
  console.log(
    `corpus ${name}: ${files} tracked files; repository on ${repoOn}, clone in ${os.tmpdir()}; ${runs} interleaved runs${keep ? " (clones kept until all are made, after a warm-up round)" : ""}, medians`,
  );
  console.log(
    `| upstream's clone | ours | upstream / ours |\n|---|---|---|\n| ${(up / 1000).toFixed(2)} s | ${(me / 1000).toFixed(2)} s | ${(up / me).toFixed(1)}x |`,
  );
  emitRows([
    {
      path: `sandbox shallow HEAD clone, corpus ${name} (${files} tracked files)`,
      hotPath: "Sandbox shallow HEAD clone",
      case: `corpus ${name}`,
      ours: me,
      upstream: up,
      floor: null,
    },
  ]);
} finally {
  rmSync(parent, { recursive: true, force: true });
}
