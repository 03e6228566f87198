// The numbered cases of docs/differences.md, "Nothing the agent did not change", as workspaces
// the lanes' named tests (never-sent.test.js, ssh-never-sent.test.js) build: each case's
// `make(root)` writes its ingredient (`kind`: "plain" or "git"), `during(local)` the host's
// edits while the run is on, `agent(remote)` the agent's work besides its edit of
// `edit-me.txt`, and `upstreamLoses`, what upstream's restore deletes or rewrites although the
// agent never touched it.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { expect } from "vitest";
import { pinnedGit } from "./git-state.js";
import { ruleState } from "./restore-rule.js";
import { writeFile } from "./restore-rule-gen.js";

export const git = (dir, ...args) => pinnedGit(dir, args);

/** A repository of everything in `dir`, `force` added despite the ignores, one commit. */
export function commitAll(dir, ...force) {
  git(dir, "init", "-q");
  git(dir, "add", "-A");
  if (force.length > 0) git(dir, "add", "-f", ...force);
  git(dir, "commit", "-q", "-m", "initial");
}

/** The agent's file, in a case's workspace `root` (committed in a git workspace). */
export function addAgentsFile(root, kind) {
  writeFile(root, "edit-me.txt", "before\n");
  if (kind === "git") {
    git(root, "add", "edit-me.txt");
    git(root, "commit", "-q", "--allow-empty", "-m", "edit-me");
  }
}

/** A submodule `mods/sub` of `root` (a repository) from a source repository beside it. */
export function addSubmodule(root) {
  const source = `${root}-submodule-source`;
  writeFile(source, "lib.c", "int lib;\n");
  commitAll(source);
  git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", source, "mods/sub");
  git(root, "commit", "-q", "-m", "a submodule");
}

/** A cloned repository (its own history) at `relative` in `root`. */
export function addClone(root, relative) {
  writeFile(root, `${relative}/x.txt`, "cloned\n");
  commitAll(path.join(root, relative));
}

/** The cases both lanes meet, for `kind`. */
export function sharedCases(kind) {
  const commit = (root) => kind === "git" && commitAll(root);
  return [
    {
      name: `2. AppleDouble names at any depth (${kind}, committed in git)`,
      kind,
      make(root) {
        writeFile(root, "._notes", "apple double\n");
        writeFile(root, "docs/._draft.md", "apple double, deeper\n");
        commit(root);
      },
      upstreamLoses: ["._notes", "docs/._draft.md"],
    },
    {
      name: `3. .paperclip-runtime below the root (${kind})`,
      kind,
      make(root) {
        writeFile(root, "docs/.paperclip-runtime/notes.md", "not ours\n");
        commit(root);
      },
      upstreamLoses: ["docs/.paperclip-runtime/notes.md"],
    },
    {
      name: `9. a directory the agent replaced with a file, edited on the host meanwhile (${kind})`,
      kind,
      make(root) {
        writeFile(root, "notes/a.md", "a\n");
        writeFile(root, "notes/b.md", "b\n");
        commit(root);
      },
      during(local) {
        writeFile(local, "notes/a.md", "the host's edit during the run\n");
      },
      agent(remote) {
        writeFile(remote, "notes", "a file now\n", 0o644, { replaceDirectory: true });
      },
      // The agent's deletion of b.md arrives; the host's edited a.md and its directory stay.
      agentChanges: ["notes/b.md"],
      upstreamLoses: ["notes/a.md"],
    },
  ];
}

/** The paths whose state differs between `before` and `after`, the agent's file and `also` left out. */
export function changed(before, after, also = []) {
  return [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((key) => key !== "edit-me.txt" && !also.includes(key) && before[key] !== after[key])
    .sort();
}

/** An empty directory `relative` (and its parents) in `root`. */
export function makeDir(root, relative) {
  mkdirSync(path.join(root, relative), { recursive: true });
}

/**
 * Our restore of a case kept the rule (`ours`: a run's `{ root, before, after, error, lines }`):
 * it succeeded, the agent's edit arrived, nothing else changed but what the case says the agent
 * changed, and a case whose agent met a host edit says what it kept on the progress sink.
 */
export function expectKept(ours, testCase, label) {
  expect(ours.error, label).toBeNull();
  expect(readFileSync(path.join(ours.root, "edit-me.txt"), "utf8"), label).toBe("the agent's edit\n");
  expect(changed(ours.before, ours.after, testCase.agentChanges), label).toEqual([]);
  if (testCase.agent)
    expect(
      ours.lines.some((line) => line.startsWith("Kept ")),
      label,
    ).toBe(true);
}

/** Upstream's restore of a case (`theirs`, as `expectKept`'s) lost what the case says it loses. */
export function expectUpstreamLoses(theirs, testCase) {
  expect(theirs.error).toBeNull();
  const lost = changed(theirs.before, theirs.after);
  for (const key of testCase.upstreamLoses) expect(lost, `upstream's loss of ${key}`).toContain(key);
}

/** Case 10: the remote workspace `remote` replaced by a link to another directory (`stranger`) holding one other file. */
export function replaceWithStranger(remote, stranger) {
  writeFileSync(path.join(stranger, "unrelated.txt"), "someone else's\n");
  rmSync(remote, { recursive: true });
  symlinkSync(stranger, remote);
}

/** Our restore refused a replaced workspace (case 10) and left the host `root` as `before`. */
export function expectRefusedReplaced(error, root, before, label) {
  expect(error?.code, label).toBe("ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE");
  expect(error.reason, label).toBe("replaced");
  expect(ruleState(root), label).toEqual(before);
}

/** A workspace for case 10 (`kind`): a few files, committed in git. */
export function strangerCase(kind) {
  return {
    kind,
    make(dir) {
      for (let i = 0; i < 8; i += 1) writeFile(dir, `src/m${i}.js`, `export const m${i} = ${i};\n`);
      if (kind === "git") commitAll(dir);
    },
  };
}

/** The FIFO case: a FIFO in a plain workspace. */
export const FIFO_CASE = {
  kind: "plain",
  make(root) {
    makeDir(root, "run");
    execFileSync("mkfifo", [path.join(root, "run", "pipe")]);
  },
};

/** Our restore left the FIFO case's FIFO alone and brought the agent's work. */
export function expectFifoKept(ours) {
  expect(ours.error).toBeNull();
  expect(ours.after["run/pipe"]).toMatch(/^special 1/);
  expect(readFileSync(path.join(ours.root, "edit-me.txt"), "utf8")).toBe("the agent's edit\n");
  expect(changed(ours.before, ours.after)).toEqual([]);
}

/** The two-restore case: a workspace (`kind`) whose agent works on after a first restore. */
export function twoRestoresCase(kind) {
  return {
    kind,
    make(root) {
      for (const name of ["again.txt", "both-again.txt", "recreated.txt", "stays.txt"]) writeFile(root, name, "base\n");
      if (kind === "git") commitAll(root);
    },
  };
}

/**
 * Two restores of one run (`restore()` restores once, resolving `{ error, lines }`; `root`
 * and `remote` the host workspace and the remote one): what the first wrote is where the
 * second starts on the host. The agent's later edit and a file it deleted then made again
 * arrive; a file the host edited after the first restore and the agent edited again keeps
 * the host's edit, reported; what neither touched stays.
 */
export async function expectSecondRestoreFollows({ root, remote, restore }) {
  const read = (relative) => readFileSync(path.join(root, relative), "utf8");
  writeFile(remote, "again.txt", "the agent's first version\n");
  writeFile(remote, "both-again.txt", "the agent's first version\n");
  rmSync(path.join(remote, "recreated.txt"));
  const first = await restore();
  expect(first.error).toBeNull();
  expect(read("again.txt")).toBe("the agent's first version\n");
  expect(ruleState(root)["recreated.txt"]).toBeUndefined();
  writeFile(remote, "again.txt", "the agent's second version\n");
  writeFile(remote, "recreated.txt", "made again by the agent\n");
  writeFile(remote, "both-again.txt", "the agent's second version\n");
  writeFile(root, "both-again.txt", "the host's edit after the first restore\n");
  const second = await restore();
  expect(second.error).toBeNull();
  expect(read("again.txt")).toBe("the agent's second version\n");
  expect(read("recreated.txt")).toBe("made again by the agent\n");
  expect(read("both-again.txt")).toBe("the host's edit after the first restore\n");
  expect(read("stays.txt")).toBe("base\n");
  expect(second.lines.filter((line) => line.startsWith("Kept "))).toEqual([
    "Kept 1 host path as the host holds it, not as the agent left it: both-again.txt (changed on the host during the run)",
  ]);
}
