// Each numbered case of docs/differences.md, "Nothing the agent did not change", through the
// sandbox lane: an ordinary workspace holding the case's ingredient, one unrelated file edited by
// the agent in the sandbox, restored by ours (base64 slices with the delta on and off, a
// provider's native syncIn/syncOut) and by upstream's on a twin. Ours leaves every host path
// but the agent's file as it was (bytes, mode, kind, existence) and brings the agent's edit;
// upstream's loses what the case names (the differential: the loss ours does not copy).
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/command-managed-runtime";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { prepareCommandManagedRuntime } from "../lib/command-managed-runtime.js";
import { pinnedGit } from "./helpers/git-state.js";
import { ruleState } from "./helpers/restore-rule.js";
import { nativeSyncRunner, spawnRunner } from "./helpers/sandbox-runner.js";

const work = mkdtempSync(path.join(os.tmpdir(), "pc-never-sent-"));
const saved = { home: process.env.PAPERCLIP_HOME, tar: process.env.TAR_OPTIONS };
beforeAll(() => {
  process.env.PAPERCLIP_HOME = path.join(work, "home");
});
afterEach(() => {
  delete process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA;
  if (saved.tar === undefined) delete process.env.TAR_OPTIONS;
  else process.env.TAR_OPTIONS = saved.tar;
});
afterAll(() => {
  if (saved.home === undefined) delete process.env.PAPERCLIP_HOME;
  else process.env.PAPERCLIP_HOME = saved.home;
  rmSync(work, { recursive: true, force: true });
});
let counter = 0;
const fresh = (label) => mkdtempSync(path.join(work, `${label}-${(counter += 1)}-`));

function write(root, relative, text, mode = 0o644) {
  mkdirSync(path.dirname(path.join(root, relative)), { recursive: true });
  writeFileSync(path.join(root, relative), text);
  chmodSync(path.join(root, relative), mode);
}
const git = (dir, ...args) => pinnedGit(dir, args);
/** A repository of everything in `dir` (what the ignores leave out stays untracked), one commit. */
function commitAll(dir, ...force) {
  git(dir, "init", "-q");
  git(dir, "add", "-A");
  if (force.length > 0) git(dir, "add", "-f", ...force);
  git(dir, "commit", "-q", "-m", "initial");
}

/**
 * The cases: `make(root)` builds the workspace (`kind`: "plain" or "git"), `options` for the
 * prepare, `during(local)` the host's edits while the run is on, `agent(remote)` the agent's
 * work besides its edit of `edit-me.txt`, and `upstreamLoses`: paths upstream's restore
 * deletes or rewrites although the agent never touched them.
 */
const CASES = [
  {
    name: "1. a cloned repository's .git and a submodule's .git file (plain)",
    kind: "plain",
    make(root) {
      write(root, "third_party/clone/x.txt", "cloned\n");
      commitAll(path.join(root, "third_party", "clone"));
      write(root, "mods/lib/.git", "gitdir: ../../.git/modules/lib\n");
      write(root, "mods/lib/lib.c", "int lib;\n");
    },
    upstreamLoses: ["third_party/clone/.git", "mods/lib/.git"],
  },
  {
    name: "1. a submodule and a cloned repository (git)",
    kind: "git",
    make(root) {
      const source = `${root}-submodule-source`;
      write(source, "lib.c", "int lib;\n");
      commitAll(source);
      write(root, "README.md", "readme\n");
      commitAll(root);
      git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", source, "mods/sub");
      git(root, "commit", "-q", "-m", "a submodule");
      write(root, "third_party/clone/x.txt", "cloned\n");
      commitAll(path.join(root, "third_party", "clone"));
    },
    upstreamLoses: ["mods/sub/.git", "mods/sub/lib.c", "third_party/clone/.git", "third_party/clone/x.txt"],
  },
  ...["plain", "git"].map((kind) => ({
    name: `2. AppleDouble names at any depth (${kind})`,
    kind,
    make(root) {
      write(root, "._notes", "apple double\n");
      write(root, "docs/._draft.md", "apple double, deeper\n");
      if (kind === "git") commitAll(root);
    },
    upstreamLoses: ["._notes", "docs/._draft.md"],
  })),
  ...["plain", "git"].map((kind) => ({
    name: `3. .paperclip-runtime below the root (${kind})`,
    kind,
    make(root) {
      write(root, "docs/.paperclip-runtime/notes.md", "not ours\n");
      if (kind === "git") commitAll(root);
    },
    upstreamLoses: ["docs/.paperclip-runtime/notes.md"],
  })),
  ...["plain", "git"].map((kind) => ({
    name: `4. caller excludes match deeper paths (${kind}, committed in git)`,
    kind,
    options: { workspaceExclude: ["secrets"], preserveAbsentOnRestore: ["config/local.json"] },
    make(root) {
      write(root, "app/secrets/key.txt", "a committed secret\n");
      write(root, "pkg/config/local.json", "{}\n");
      if (kind === "git") commitAll(root);
    },
    upstreamLoses: ["app/secrets/key.txt", "pkg/config/local.json"],
  })),
  ...[
    ["git", ""],
    ["plain subfolder of a repository", "sub"],
  ].map(([label, sub]) => ({
    name: `5. git ignores, anchored and with glob characters, over committed files (${label})`,
    kind: sub ? "plain" : "git",
    sub,
    make(root) {
      const top = sub ? path.dirname(root) : root;
      write(root, ".gitignore", "/gen/\nreport\\[1\\].csv\na\\*\n");
      write(root, "gen/out.o", "ignored\n");
      write(root, "src/gen/gen.c", "int gen;\n");
      write(root, "report[1].csv", "ignored report\n");
      write(root, "report1.csv", "a committed report\n");
      write(root, "a*", "an ignored star\n");
      write(root, "abc.txt", "committed abc\n");
      write(root, "lib/alpha.txt", "committed alpha\n");
      commitAll(top, ...["src/gen/gen.c", "report1.csv", "abc.txt", "lib/alpha.txt"].map((p) => path.join(root, p)));
    },
    upstreamLoses: ["src/gen/gen.c", "report1.csv", "abc.txt", "lib/alpha.txt"],
  })),
  {
    name: "6. empty directories (git)",
    kind: "git",
    make(root) {
      write(root, "README.md", "readme\n");
      commitAll(root);
      mkdirSync(path.join(root, "empty", "inner"), { recursive: true });
    },
    upstreamLoses: ["empty", "empty/inner"],
  },
  {
    name: "7. a working tree unlike a fresh checkout that git calls clean: skip-worktree, assume-unchanged, a filter, CRLF (git)",
    kind: "git",
    make(root) {
      write(root, "skip.txt", "committed\n");
      write(root, "assumed.txt", "committed\n");
      write(root, ".gitattributes", "*.up filter=upper\n");
      write(root, "notes.up", "lower case in the blob\n");
      write(root, "eol.txt", "line one\nline two\n");
      commitAll(root);
      git(root, "update-index", "--skip-worktree", "skip.txt");
      writeFileSync(path.join(root, "skip.txt"), "a local edit git does not see\n");
      git(root, "update-index", "--assume-unchanged", "assumed.txt");
      writeFileSync(path.join(root, "assumed.txt"), "another edit git does not see\n");
      git(root, "config", "filter.upper.smudge", "tr a-z A-Z");
      git(root, "config", "filter.upper.clean", "tr A-Z a-z");
      git(root, "config", "core.autocrlf", "true");
      rmSync(path.join(root, "notes.up"));
      rmSync(path.join(root, "eol.txt"));
      git(root, "checkout", "--", "notes.up", "eol.txt");
    },
    upstreamLoses: ["skip.txt", "assumed.txt", "notes.up", "eol.txt"],
  },
  {
    name: "8. modes: tracked 600 and 000 files, 664 and 775 under a remote umask, a host edit during the run (git)",
    kind: "git",
    nonRootRemote: true,
    make(root) {
      for (const name of ["private.txt", "closed.txt", "group.txt", "tool.sh", "edited-meanwhile.txt"])
        write(root, name, `${name}\n`);
      commitAll(root);
      chmodSync(path.join(root, "private.txt"), 0o600);
      chmodSync(path.join(root, "closed.txt"), 0o000);
      chmodSync(path.join(root, "group.txt"), 0o664);
      chmodSync(path.join(root, "tool.sh"), 0o775);
      chmodSync(path.join(root, "edited-meanwhile.txt"), 0o600);
    },
    during(local) {
      writeFileSync(path.join(local, "edited-meanwhile.txt"), "the host's edit during the run\n");
    },
    upstreamLoses: ["private.txt", "closed.txt", "group.txt", "tool.sh", "edited-meanwhile.txt"],
  },
  ...["plain", "git"].map((kind) => ({
    name: `9. a directory the agent replaced with a file, edited on the host meanwhile (${kind})`,
    kind,
    make(root) {
      write(root, "notes/a.md", "a\n");
      write(root, "notes/b.md", "b\n");
      if (kind === "git") commitAll(root);
    },
    during(local) {
      writeFileSync(path.join(local, "notes", "a.md"), "the host's edit during the run\n");
    },
    agent(remote) {
      rmSync(path.join(remote, "notes"), { recursive: true });
      writeFileSync(path.join(remote, "notes"), "a file now\n");
    },
    upstreamLoses: ["notes/a.md"],
  })),
];

/** A runner for `transport`. With `nonRootRemote`, the sandbox's tar applies its umask (as a non-root user's does). */
function runnerFor(transport) {
  return transport === "native" ? nativeSyncRunner().runner : spawnRunner().runner;
}

/** Builds a case's workspace (in `<dir>/sub` for a subfolder case) and returns it. */
function workspaceOf(testCase) {
  const top = fresh("ws");
  const root = testCase.sub ? path.join(top, testCase.sub) : top;
  mkdirSync(root, { recursive: true });
  write(root, "edit-me.txt", "before\n");
  testCase.make(root);
  if (testCase.kind === "git" && !testCase.sub) {
    // The agent's file is committed as the rest.
    git(root, "add", "edit-me.txt");
    git(root, "commit", "-q", "-m", "edit-me", "--allow-empty");
  }
  return { top, root };
}

/** One run of a case through `impl`: resolves the host before and after, and the restore's error. */
async function runCase(impl, testCase, { transport = "base64", delta = "auto" } = {}) {
  process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = delta;
  if (testCase.nonRootRemote) process.env.TAR_OPTIONS = "--no-same-permissions";
  const { root } = workspaceOf(testCase);
  const remote = fresh("remote");
  const lines = [];
  const prepared = await impl.prepareCommandManagedRuntime({
    runner: runnerFor(transport),
    spec: { remoteCwd: remote, timeoutMs: 60_000 },
    adapterKey: "case",
    workspaceLocalDir: root,
    ...testCase.options,
  });
  delete process.env.TAR_OPTIONS;
  writeFileSync(path.join(remote, "edit-me.txt"), "the agent's edit\n");
  testCase.agent?.(remote);
  testCase.during?.(root);
  const before = ruleState(root);
  const error = await prepared
    .restoreWorkspace((line) => lines.push(line))
    .then(
      () => null,
      (failed) => failed,
    );
  return { before, after: ruleState(root), error, lines, root };
}

/** The paths whose state changed between `before` and `after` (the agent's file left out). */
function changed(before, after) {
  return [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((key) => key !== "edit-me.txt" && before[key] !== after[key])
    .sort();
}

describe(
  "the numbered cases through the sandbox lane: the host keeps what the agent never touched",
  { timeout: 120_000 },
  () => {
    for (const testCase of CASES) {
      it(`${testCase.name}`, async () => {
        const kept = testCase.agent ? ["notes", "notes/a.md"] : [];
        for (const mode of [
          { transport: "base64", delta: "auto" },
          { transport: "base64", delta: "off" },
          { transport: "native", delta: "auto" },
        ]) {
          const ours = await runCase({ prepareCommandManagedRuntime }, testCase, mode);
          const label = `${mode.transport}, delta ${mode.delta}`;
          expect(ours.error, label).toBeNull();
          expect(readFileSync(path.join(ours.root, "edit-me.txt"), "utf8"), label).toBe("the agent's edit\n");
          // Case 9: the agent's other file (b.md) goes with the directory; the host's edited one stays, reported.
          const moved = changed(ours.before, ours.after).filter((key) => !(testCase.agent && key === "notes/b.md"));
          expect(moved, label).toEqual([]);
          for (const key of kept) expect(ours.after[key], label).toBe(ours.before[key]);
          if (testCase.agent)
            expect(
              ours.lines.some((line) => line.startsWith("Kept ")),
              label,
            ).toBe(true);
        }
        const theirs = await runCase(upstream, testCase);
        expect(theirs.error).toBeNull();
        const lost = changed(theirs.before, theirs.after);
        for (const key of testCase.upstreamLoses) expect(lost, `upstream's loss of ${key}`).toContain(key);
      });
    }

    it("10. a workspace replaced by a link to another directory: refused, the host untouched (upstream's plain restore deletes every file)", async () => {
      for (const kind of ["plain", "git"]) {
        for (const impl of [{ prepareCommandManagedRuntime }, upstream]) {
          const { root } = workspaceOf({ kind, make: (dir) => kind === "git" && commitAll(dir) });
          for (let i = 0; i < 8; i += 1) write(root, `src/m${i}.js`, `export const m${i} = ${i};\n`);
          const remote = path.join(fresh("remote"), "workspace");
          const prepared = await impl.prepareCommandManagedRuntime({
            runner: spawnRunner().runner,
            spec: { remoteCwd: remote, timeoutMs: 60_000 },
            adapterKey: "case",
            workspaceLocalDir: root,
          });
          const stranger = fresh("stranger");
          writeFileSync(path.join(stranger, "unrelated.txt"), "someone else's\n");
          rmSync(remote, { recursive: true });
          symlinkSync(stranger, remote);
          const before = ruleState(root);
          const error = await prepared.restoreWorkspace().then(
            () => null,
            (failed) => failed,
          );
          if (impl === upstream) {
            // Upstream's plain restore takes the stranger's tree for the agent's and deletes
            // every host file (its git restore fails on the stranger's missing repository).
            if (kind === "plain") {
              expect(error).toBeNull();
              expect(Object.keys(ruleState(root))).toEqual(["unrelated.txt"]);
            }
            continue;
          }
          expect(error?.code, kind).toBe("ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE");
          expect(error.reason, kind).toBe("replaced");
          expect(ruleState(root), kind).toEqual(before);
        }
      }
    });

    it("a FIFO in the workspace: left alone, and the agent's work arrives (ours refused the archive before)", async () => {
      for (const mode of [{ transport: "base64" }, { transport: "native" }]) {
        const testCase = {
          kind: "plain",
          make: (root) => {
            mkdirSync(path.join(root, "run"), { recursive: true });
            execFileSync("mkfifo", [path.join(root, "run", "pipe")]);
          },
        };
        const ours = await runCase({ prepareCommandManagedRuntime }, testCase, mode);
        expect(ours.error).toBeNull();
        expect(ours.after["run/pipe"]).toMatch(/^special 1/);
        expect(readFileSync(path.join(ours.root, "edit-me.txt"), "utf8")).toBe("the agent's edit\n");
        expect(changed(ours.before, ours.after)).toEqual([]);
      }
    });
  },
);
