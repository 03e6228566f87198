// Seeded generator of git repositories for the ignore-resolution differential tests:
// nested `.gitignore` files with negations, dir-only, `**`, anchored, escaped and
// trailing-space patterns, `info/exclude`, a repo-local `core.excludesFile`, the user's
// default excludes file, tracked-but-ignored files, ignored directories holding tracked files,
// wholly ignored and empty directories, symlinks, names with spaces, non-ASCII, a leading
// `#` or `!`, and now and then a submodule, an embedded repository or a linked worktree.
import { execFileSync } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";

const NAMES = [
  "a",
  "b",
  "c",
  "build",
  "node_modules",
  "dist",
  "src",
  "deep",
  "sub",
  "out",
  "d1",
  "Foo",
  "important",
  "keep.log",
  "x.log",
  "y.tmp",
  "z.txt",
  "name with space",
  " lead",
  "trail ",
  "#hash",
  "!bang",
  "ünï",
  "日本",
  "é",
  "e\u0301",
  "secret[1].txt",
  "star*",
  "q?",
  "-dash",
  ".env",
  "😀",
  "a-b",
  "a.b",
  "A.txt",
];

const PATTERNS = [
  "*.log",
  "!keep.log",
  "build/",
  "/dist",
  "**/deep",
  "a/**/b",
  "\\#hash",
  "trail\\ ",
  "trail ",
  "node_modules",
  "*.tmp",
  "!*.tmp",
  "src/*.txt",
  "?oo",
  "[a-c]",
  "**/x.log",
  "d*/",
  "!important/",
  "name with space",
  "\\!bang",
  "*",
  "!*/",
  "sub/",
  "ünï",
  "/a/b",
  "#comment",
  "",
  "**",
  "a/**",
  "**/b/**",
  "!a",
  "out",
  "/out/",
  "important",
  "!d1",
  "*.txt",
  " lead",
  "日本/",
  "!/build",
  "**/*.log",
  "c/",
  "!c",
  "deep/",
  "[!a-m]*",
  "x.l?g",
  "b\\",
  ".env",
  "secret\\[1\\].txt",
  "star\\*",
  "!node_modules/keep",
  "**/node_modules/",
  "/*.txt",
  "é",
  "*/",
];

/** Environment for the commands that build a repository (no user or system config). */
export function setupGitEnv(home) {
  const env = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith("GIT_")) env[key] = value;
  return { ...env, HOME: home, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };
}

/** Runs git for a fixture (identity, default branch and file transport set). */
export function git(dir, args, env, input) {
  return execFileSync(
    "git",
    [
      "-C",
      dir,
      "-c",
      "user.name=t",
      "-c",
      "user.email=t@t",
      "-c",
      "init.defaultBranch=main",
      "-c",
      "protocol.file.allow=always",
      "-c",
      "advice.addEmbeddedRepo=false",
      ...args,
    ],
    { env, input, stdio: ["pipe", "pipe", "pipe"], maxBuffer: 64 * 1024 * 1024 },
  );
}

function randomPatterns(rng) {
  const lines = [];
  for (let i = 1 + rng.int(6); i > 0; i -= 1) lines.push(rng.pick(PATTERNS));
  return `${lines.join(rng.chance(0.1) ? "\r\n" : "\n")}\n`;
}

/**
 * Writes a random repository at `<root>/repo` and returns it with its directories (relative,
 * POSIX) and a few interesting places to scan from. `home` is the user's home for the
 * default excludes file. Uses the same `rng` for everything, so a seed reproduces it.
 */
export function writeRandomRepo(rng, root, home) {
  const env = setupGitEnv(home);
  const repo = path.join(root, "repo");
  mkdirSync(repo, { recursive: true });
  git(repo, ["init", "-q"], env);
  const files = [];
  const dirs = [];
  const fill = (rel, depth) => {
    const count = 1 + rng.int(depth === 0 ? 8 : 5);
    for (let i = 0; i < count; i += 1) {
      const name = rng.pick(NAMES);
      const relPath = rel ? `${rel}/${name}` : name;
      const abs = path.join(repo, relPath);
      if (files.includes(relPath) || dirs.includes(relPath)) continue;
      const roll = rng.int(10);
      if (roll <= 4) {
        writeFileSync(abs, "x");
        files.push(relPath);
      } else if (roll <= 7 && depth < 3) {
        mkdirSync(abs);
        dirs.push(relPath);
        if (rng.chance(0.85)) fill(relPath, depth + 1);
        if (rng.chance(0.3)) writeFileSync(path.join(abs, ".gitignore"), randomPatterns(rng));
      } else if (roll === 8) {
        symlinkSync(rng.pick(["z.txt", "sub", "../a", "/etc", "dangling"]), abs);
        files.push(relPath);
      } else {
        mkdirSync(abs); // an empty directory
        dirs.push(relPath);
      }
    }
  };
  fill("", 0);
  writeFileSync(path.join(repo, ".gitignore"), randomPatterns(rng));
  if (rng.chance(0.5)) writeFileSync(path.join(repo, ".git", "info", "exclude"), randomPatterns(rng));
  mkdirSync(path.join(home, ".config", "git"), { recursive: true });
  writeFileSync(path.join(home, ".config", "git", "ignore"), rng.chance(0.3) ? randomPatterns(rng) : "");
  if (rng.chance(0.3)) {
    writeFileSync(path.join(repo, ".git", "my-excludes"), randomPatterns(rng));
    git(
      repo,
      ["config", "core.excludesFile", rng.chance(0.5) ? ".git/my-excludes" : path.join(repo, ".git", "my-excludes")],
      env,
    );
  }
  if (rng.chance(0.1)) git(repo, ["config", "core.ignoreCase", "true"], env);
  // Tracked files, some of them ignored by the patterns (tracked-but-ignored).
  const tracked = files.filter(() => rng.chance(0.3));
  if (tracked.length > 0)
    git(repo, ["add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul"], env, `${tracked.join("\0")}\0`);
  const extras = [];
  const special = rng.int(25);
  if (special === 0) {
    // A real submodule (a `.git` file pointing into `.git/modules`).
    const upstream = path.join(root, "upstream");
    mkdirSync(upstream);
    git(upstream, ["init", "-q"], env);
    writeFileSync(path.join(upstream, ".gitignore"), "*.log\n");
    writeFileSync(path.join(upstream, "a.txt"), "a");
    git(upstream, ["add", "-f", ".gitignore", "a.txt"], env);
    git(upstream, ["commit", "-qm", "sub"], env);
    git(repo, ["submodule", "add", "-f", "-q", upstream, "mod"], env);
    mkdirSync(path.join(repo, "mod", "deep"), { recursive: true });
    writeFileSync(path.join(repo, "mod", "inner.log"), "i");
    writeFileSync(path.join(repo, "mod", "deep", "x.log"), "x");
    dirs.push("mod", "mod/deep");
  } else if (special === 1) {
    // A linked worktree of this repository, scanned from inside.
    git(repo, ["commit", "-qm", "base", "--allow-empty"], env);
    const worktree = path.join(root, "worktree");
    git(repo, ["worktree", "add", "-q", worktree, "-b", "side"], env);
    writeFileSync(path.join(worktree, "wt.log"), "w");
    writeFileSync(path.join(worktree, ".gitignore"), "*.log\nnode_modules/\n");
    mkdirSync(path.join(worktree, "wt-build", "node_modules"), { recursive: true });
    writeFileSync(path.join(worktree, "wt-build", "node_modules", "out.bin"), "b");
    extras.push(worktree);
  } else if (special === 2) {
    // An embedded repository added as a gitlink, and one left untracked.
    for (const name of ["nested", "loose"]) {
      mkdirSync(path.join(repo, name));
      git(path.join(repo, name), ["init", "-q"], env);
      writeFileSync(path.join(repo, name, "n.log"), "n");
      dirs.push(name);
    }
    git(path.join(repo, "nested"), ["commit", "-qm", "n", "--allow-empty"], env);
    git(repo, ["add", "-f", "nested"], env);
  }
  return { repo, dirs, files, extras, env };
}
