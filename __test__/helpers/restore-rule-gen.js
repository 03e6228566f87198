// The generator of the restore rule's tests (docs/differences.md, "Nothing the agent did not
// change"): host workspaces made of what the lanes' transfers leave out or change in transit,
// and their neighbours, the agent's random work in the remote workspace, and host edits made
// while the run is on. helpers/restore-rule.js checks each restore against the rule.
//
// The ingredients: `.git` directories and files at any depth (a cloned repository, a
// submodule's `.git` file, a real submodule in a git workspace), AppleDouble `._*` names,
// `.paperclip-runtime` and our key file's name below the root, empty directories, caller
// excludes and git ignores (anchored or not, with glob characters, over committed files),
// skip-worktree and assume-unchanged edits, a clean/smudge filter and an end-of-line
// conversion only the host's repository configures, unusual modes, a FIFO.
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { pinnedGit } from "./git-state.js";
import { inventory } from "./merge-triples.js";
import { restoreRuleBreaks, ruleState, tarMembers } from "./restore-rule.js";

/** The caller excludes a workspace may get: plain names, paths, globs (tar reads them unanchored). */
const CALLER_EXCLUDES = ["secrets", "config/local.json", "*.tmp", "cache*"];
/** `.gitignore` lines: anchored, unanchored, escaped glob characters, a directory. */
const IGNORES = ["/gen/", "*.log", "report\\[1\\].csv", "a\\*", "build-out/"];

const bytes = (rng, tag) => `${tag} ${rng.int(1e9)}\n`.repeat(1 + rng.int(8));

/**
 * Writes `text` to `relative` in `root` with `mode`, its directories made: a new file in place
 * of the old (so one its owner may not write, mode 444 as a user, is replaced too), or with
 * `replaceDirectory` in place of a directory there.
 */
export function writeFile(root, relative, text, mode = 0o644, { replaceDirectory = false } = {}) {
  const full = path.join(root, relative);
  mkdirSync(path.dirname(full), { recursive: true });
  rmSync(full, { force: true, recursive: replaceDirectory });
  writeFileSync(full, text);
  chmodSync(full, mode);
}
const write = writeFile;

/**
 * A workspace under `root` with a random selection of the ingredients (see the module docs).
 * `gitBacked`: a repository with commits and local changes; `modes`: the unusual modes it may
 * use (`000` only where the host process may read any file). Resolves the options the
 * lane's prepare takes for it (`workspaceExclude`, `preserveAbsentOnRestore`) and `names`,
 * what it made.
 */
export function writeIngredientWorkspace(rng, root, { gitBacked, modes = [0o600, 0o664, 0o775, 0o444] }) {
  const names = [];
  const git = (...args) => pinnedGit(root, args);
  mkdirSync(root, { recursive: true });
  // An ordinary tree the agent works on.
  for (let i = 0; i < 6 + rng.int(6); i += 1) {
    const dir = i < 4 ? "" : rng.pick(["", "src", "src/lib", "docs", "pkg/a", "app"]);
    write(root, path.join(dir, `f${i}.txt`), bytes(rng, `file ${i}`), rng.chance(0.3) ? rng.pick(modes) : 0o644);
  }
  symlinkSync("f0.txt", path.join(root, "link-to-f0"));
  const maybe = (p, name, make) => {
    if (rng.chance(p)) {
      make();
      names.push(name);
    }
  };
  maybe(0.6, "apple-double", () => {
    write(root, "._notes", "apple double\n");
    write(root, "docs/._draft.md", "apple double, deeper\n");
  });
  maybe(0.5, "runtime-below-root", () => write(root, "docs/.paperclip-runtime/notes.md", "not ours\n"));
  maybe(0.3, "reserved-name-below-root", () =>
    write(root, "app/.paperclip-staging-key", "a user's file of that name\n"),
  );
  maybe(0.5, "git-file", () => write(root, "vendor/lib/.git", "gitdir: ../../.git/modules/lib\n"));
  maybe(0.5, "cloned-repository", () => {
    const clone = path.join(root, "vendor", "clone");
    write(root, "vendor/clone/x.txt", "cloned\n");
    pinnedGit(clone, ["init", "-q"]);
    pinnedGit(clone, ["add", "-A"]);
    pinnedGit(clone, ["commit", "-q", "-m", "cloned history"]);
  });
  maybe(0.5, "empty-directories", () => mkdirSync(path.join(root, "empty", "inner"), { recursive: true }));
  maybe(0.4, "fifo", () => {
    mkdirSync(path.join(root, "docs"), { recursive: true });
    execFileSync("mkfifo", [path.join(root, "docs", "pipe")]);
  });
  const options = {};
  maybe(0.5, "caller-excludes", () => {
    options.workspaceExclude = CALLER_EXCLUDES.filter(() => rng.chance(0.6));
    if (options.workspaceExclude.length === 0) options.workspaceExclude = ["secrets"];
    write(root, "app/secrets/key.txt", "a committed secret\n");
    write(root, "pkg/config/local.json", "{}\n");
    write(root, "notes.tmp", "scratch\n");
    write(root, "docs/cache-index", "cached\n");
  });
  maybe(0.3, "preserved-names", () => {
    options.preserveAbsentOnRestore = ["keep.local"];
    write(root, "src/keep.local", "kept deeper\n");
  });
  const ignores = IGNORES.filter(() => rng.chance(0.7));
  if (ignores.length > 0) {
    names.push("ignores");
    write(root, ".gitignore", `${ignores.join("\n")}\n`);
    // What the ignores name, ignored and committed alike (the committed copies travel).
    write(root, "gen/out.o", "ignored output\n");
    write(root, "src/gen/gen.c", "int gen;\n");
    write(root, "debug.log", "ignored log\n");
    write(root, "report[1].csv", "ignored report\n");
    write(root, "report1.csv", "a committed report\n");
    write(root, "a*", "an ignored star\n");
    write(root, "abc.txt", "committed abc\n");
    write(root, "lib/alpha.txt", "committed alpha\n");
    write(root, "build-out/x.o", "ignored build\n");
  }
  if (!gitBacked) {
    // A plain workspace: not a repository (its own ignores come from no repository).
    return { options, names };
  }
  git("init", "-q");
  git("remote", "add", "origin", "https://user:token@example.com/org/repo.git");
  // Committed despite the ignores (`add -f`): the clone has them, the pull leaves them out.
  git("add", "-A");
  if (ignores.length > 0) git("add", "-f", "src/gen/gen.c", "report1.csv", "abc.txt", "lib/alpha.txt");
  maybe(0.5, "filters", () => {
    // A clean/smudge filter and an end-of-line conversion configured in this repository
    // alone: the clone the prepare makes writes the blobs' own bytes.
    write(root, ".gitattributes", "*.up filter=upper\n");
    write(root, "notes.up", "lower case in the blob\n");
    write(root, "eol.txt", "line one\nline two\n");
    git("add", ".gitattributes", "notes.up", "eol.txt");
  });
  git("commit", "-q", "-m", "initial");
  if (names.includes("filters")) {
    git("config", "filter.upper.smudge", "tr a-z A-Z");
    git("config", "filter.upper.clean", "tr A-Z a-z");
    git("config", "core.autocrlf", "true");
    for (const file of ["notes.up", "eol.txt"]) rmSync(path.join(root, file));
    git("checkout", "--", "notes.up", "eol.txt");
  }
  maybe(0.4, "submodule", () => {
    const source = `${root}-submodule-source`;
    mkdirSync(source, { recursive: true });
    writeFileSync(path.join(source, "lib.c"), "int lib;\n");
    pinnedGit(source, ["init", "-q"]);
    pinnedGit(source, ["add", "-A"]);
    pinnedGit(source, ["commit", "-q", "-m", "submodule"]);
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", source, "mods/sub");
    git("commit", "-q", "-m", "a submodule");
  });
  maybe(0.6, "skip-worktree", () => {
    git("update-index", "--skip-worktree", "f1.txt");
    write(root, "f1.txt", "a local edit git does not see\n");
  });
  maybe(0.4, "assume-unchanged", () => {
    git("update-index", "--assume-unchanged", "f2.txt");
    write(root, "f2.txt", "another edit git does not see\n");
  });
  maybe(0.5, "tracked-modes", () => {
    write(root, "private.txt", "private\n");
    git("add", "private.txt");
    git("commit", "-q", "-m", "private");
    chmodSync(path.join(root, "private.txt"), rng.pick(modes));
  });
  // Local changes: an edit, an untracked file, a deletion.
  write(root, "src/f-untracked.txt", "untracked\n");
  const tracked = readdirSync(root).filter((name) => /^f\d+\.txt$/.test(name) && !["f1.txt", "f2.txt"].includes(name));
  if (tracked.length > 0) write(root, tracked[0], "a dirty edit\n");
  if (tracked.length > 1) rmSync(path.join(root, tracked[1]));
  return { options, names };
}

/**
 * Every entry below `root` by kind (directories, files, links), leaving out `.git` at any depth
 * and git's `.git*` files (a repository's own: no edit of ours belongs there, and git then fails
 * on both sides alike) and our runtime directory.
 */
function entries(root) {
  const all = inventory(root);
  const ours = (rel) => !/(^|\/)\.git/.test(rel) && !/^\.paperclip-runtime(\/|$)/.test(rel);
  return { files: all.files.filter(ours), dirs: all.dirs.filter(ours), links: all.links.filter(ours) };
}

/**
 * Applies `count` operations picked from `ops` (each given `entries(root)`; one that returns
 * `false`, or that the tree does not allow, is skipped) and returns their names, `prefix`ed.
 */
function applyOps(rng, root, ops, count, prefix) {
  const applied = [];
  for (let i = 0; i < count; i += 1) {
    const name = rng.pick(Object.keys(ops));
    let done;
    try {
      done = ops[name](entries(root)) !== false;
    } catch (error) {
      if (!["EEXIST", "ENOTDIR", "ENOENT", "EISDIR", "EACCES"].includes(error?.code)) throw error;
      done = false;
    }
    if (done) applied.push(`${prefix}-${name}`);
  }
  return applied;
}

let fresh = 0;
const freshName = (rng) => `${rng.pick(["agent", "new", "N"])}-${(fresh += 1)}`;

/**
 * The agent's random work in the remote workspace `remote` (`count` operations): edits,
 * chmods that add bits, deletions of files and directories, files made directories and the
 * other way, files made links, new files and directories, and new files where no transfer
 * goes (an AppleDouble name, an excluded directory). Returns the operations' names.
 */
export function agentWork(rng, remote, count) {
  const ops = {
    edit(inv) {
      if (inv.files.length === 0) return false;
      const rel = rng.pick(inv.files);
      // A file its owner may not write (an unprivileged agent could not either).
      if ((lstatSync(path.join(remote, rel)).mode & 0o200) === 0) return false;
      writeFileSync(path.join(remote, rel), "the agent's edit\n");
    },
    chmod(inv) {
      if (inv.files.length === 0) return false;
      const rel = rng.pick(inv.files);
      chmodSync(
        path.join(remote, rel),
        (lstatSync(path.join(remote, rel)).mode & 0o7777) | rng.pick([0o100, 0o010, 0o020]),
      );
    },
    deleteFile(inv) {
      const pool = [...inv.files, ...inv.links];
      if (pool.length === 0) return false;
      unlinkSync(path.join(remote, rng.pick(pool)));
    },
    deleteDir(inv) {
      if (inv.dirs.length === 0) return false;
      rmSync(path.join(remote, rng.pick(inv.dirs)), { recursive: true, force: true });
    },
    dirToFile(inv) {
      if (inv.dirs.length === 0) return false;
      const rel = rng.pick(inv.dirs);
      rmSync(path.join(remote, rel), { recursive: true, force: true });
      write(remote, rel, "a directory the agent made a file\n");
    },
    fileToDir(inv) {
      if (inv.files.length === 0) return false;
      const rel = rng.pick(inv.files);
      unlinkSync(path.join(remote, rel));
      write(remote, `${rel}/inside.txt`, "a file the agent made a directory\n");
    },
    fileToLink(inv) {
      if (inv.files.length === 0) return false;
      const rel = rng.pick(inv.files);
      unlinkSync(path.join(remote, rel));
      symlinkSync("f0.txt", path.join(remote, rel));
    },
    add(inv) {
      const dir = inv.dirs.length > 0 && rng.chance(0.7) ? rng.pick(inv.dirs) : "";
      write(remote, path.join(dir, freshName(rng)), "the agent's new file\n");
    },
    addDir() {
      write(remote, path.join(freshName(rng), freshName(rng)), "the agent's new directory\n");
    },
    addWhereNothingTravels() {
      write(remote, rng.pick(["._agent", "docs/._agent", "node_modules/agent.js", "x/.git/agent"]), "never back\n");
    },
  };
  return applyOps(rng, remote, ops, count, "agent");
}

/**
 * The host's random edits while the run is on (`count` operations): edits (of files the
 * agent may edit too), chmods, deletions, new files, a file added inside a directory, edits
 * of what no transfer carries. Returns the operations' names.
 */
export function hostEdits(rng, local, count) {
  const ops = {
    edit(inv) {
      if (inv.files.length === 0) return false;
      const rel = rng.pick(inv.files);
      if ((lstatSync(path.join(local, rel)).mode & 0o200) === 0) return false;
      writeFileSync(path.join(local, rel), "the host's edit during the run\n");
    },
    chmod(inv) {
      if (inv.files.length === 0) return false;
      chmodSync(path.join(local, rng.pick(inv.files)), 0o700);
    },
    delete(inv) {
      if (inv.files.length === 0) return false;
      unlinkSync(path.join(local, rng.pick(inv.files)));
    },
    add(inv) {
      const dir = inv.dirs.length > 0 ? rng.pick(inv.dirs) : "";
      write(local, path.join(dir, freshName(rng)), "the host's new file\n");
    },
    editUnsent() {
      const unsent = ["._notes", "docs/._draft.md", "app/secrets/key.txt"].filter((rel) =>
        existsSync(path.join(local, rel)),
      );
      if (unsent.length === 0) return false;
      writeFileSync(path.join(local, rng.pick(unsent)), "the host's edit of what never travels\n");
    },
  };
  return applyOps(rng, local, ops, count, "host");
}

/**
 * One generated run around `prepared` (a sandbox or managed runtime just prepared from `local`
 * into `remote`): records what the run starts from (the host, the remote, what the pull with
 * `excludes` can bring back), makes the agent's random work (a commit now and then in a git
 * workspace) and the host's edits, restores, and resolves `{ breaks, applied, lines }`: where
 * the restore broke the rule (./restore-rule.js), or how it failed.
 */
export async function checkedRestore(rng, { prepared, local, remote, excludes, gitBacked }) {
  const hostBaseline = ruleState(local);
  const sandboxStart = ruleState(remote);
  const startMembers = tarMembers(remote, excludes);
  const applied = agentWork(rng, remote, 2 + rng.int(5));
  if (gitBacked && rng.chance(0.3)) {
    pinnedGit(remote, ["add", "-A"]);
    pinnedGit(remote, ["commit", "-q", "--allow-empty", "-m", "agent"]);
    applied.push("agent-commit");
  }
  applied.push(...hostEdits(rng, local, rng.int(4)));
  const host = ruleState(local);
  const sandboxEnd = ruleState(remote);
  const endMembers = tarMembers(remote, excludes);
  const { error, lines } = await settledRestore(prepared);
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

/**
 * A run's prepare of the host workspace `local` (`prepare()`): resolves `{ prepared }`, or, when
 * it failed, `{ ended }`, the run's outcome: no break where upstream's prepare
 * (`prepareUpstream(copy)`) fails on a copy of `local` too (a host tree whose kinds HEAD
 * contradicts, say a directory kept where the agent committed a file, fails the upload over
 * the checkout on both sides alike), else the failure as a break.
 */
export async function preparedOrEnded(local, prepare, prepareUpstream) {
  try {
    return { prepared: await prepare() };
  } catch (error) {
    const theirs = await upstreamFailsToo(local, prepareUpstream);
    return {
      ended: {
        prepareFailed: true,
        applied: [],
        breaks: theirs ? {} : { prepare: `failed where upstream's did not: ${error.message}` },
      },
    };
  }
}

/** Whether upstream's prepare (`prepareUpstream(copy)`) fails on a copy of the host workspace `local`. */
async function upstreamFailsToo(local, prepareUpstream) {
  const copy = `${local}-prepare-copy`;
  execFileSync("cp", ["-a", local, copy]);
  try {
    return await prepareUpstream(copy).then(
      () => false,
      () => true,
    );
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
}

/** Runs `prepared.restoreWorkspace()`; resolves its error (or `null`) and the progress lines it wrote. */
export async function settledRestore(prepared) {
  const lines = [];
  const error = await prepared
    .restoreWorkspace((line) => lines.push(line))
    .then(
      () => null,
      (failed) => failed,
    );
  return { error, lines };
}
