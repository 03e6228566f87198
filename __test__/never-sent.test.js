// Each numbered case of docs/differences.md, "Nothing the agent did not change", through the
// sandbox lane: an ordinary workspace holding the case's ingredient, one unrelated file edited by
// the agent in the sandbox, restored by ours (base64 slices with the delta on and off, a
// provider's native syncIn/syncOut) and by upstream's on a twin. Ours leaves every host path
// but the agent's file as it was (bytes, mode, kind, existence) and brings the agent's edit;
// upstream's loses what the case names (the differential: the loss ours does not copy).
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/command-managed-runtime";
import { afterAll, describe, expect, it } from "vitest";
import { prepareCommandManagedRuntime } from "../lib/command-managed-runtime.js";
import { envForSuite, restoreEnvAfterEach } from "./helpers/env.js";
import {
  addAgentsFile,
  addClone,
  addSubmodule,
  commitAll,
  expectFifoKept,
  expectKept,
  expectRefusedReplaced,
  expectSecondRestoreFollows,
  expectUpstreamLoses,
  FIFO_CASE,
  git,
  makeDir,
  replaceWithStranger,
  sharedCases,
  strangerCase,
  twoRestoresCase,
} from "./helpers/never-sent-cases.js";
import { ruleState } from "./helpers/restore-rule.js";
import { settledRestore, writeFile as write } from "./helpers/restore-rule-gen.js";
import { nativeSyncRunner, spawnRunner } from "./helpers/sandbox-runner.js";

const work = mkdtempSync(path.join(os.tmpdir(), "pc-never-sent-"));
envForSuite({ PAPERCLIP_HOME: path.join(work, "home") });
restoreEnvAfterEach("PAPERCLIP_NATIVE_SANDBOX_DELTA", "TAR_OPTIONS");
afterAll(() => rmSync(work, { recursive: true, force: true }));
let counter = 0;
const fresh = (label) => mkdtempSync(path.join(work, `${label}-${(counter += 1)}-`));

/** The cases (helpers/never-sent-cases.js), with `options` for the prepare and `sub` for a subfolder workspace. */
const CASES = [
  {
    name: "1. a cloned repository's .git and a submodule's .git file (plain)",
    kind: "plain",
    make(root) {
      addClone(root, "third_party/clone");
      write(root, "mods/lib/.git", "gitdir: ../../.git/modules/lib\n");
      write(root, "mods/lib/lib.c", "int lib;\n");
    },
    upstreamLoses: ["third_party/clone/.git", "mods/lib/.git"],
  },
  {
    name: "1. a submodule and a cloned repository (git)",
    kind: "git",
    make(root) {
      write(root, "README.md", "readme\n");
      commitAll(root);
      addSubmodule(root);
      addClone(root, "third_party/clone");
    },
    upstreamLoses: ["mods/sub/.git", "mods/sub/lib.c", "third_party/clone/.git", "third_party/clone/x.txt"],
  },
  ...["plain", "git"].flatMap((kind) => sharedCases(kind)),
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
      write(root, ".gitignore", "/gen/\nreport\\[1\\].csv\na\\*\n");
      write(root, "gen/out.o", "ignored\n");
      write(root, "report[1].csv", "ignored report\n");
      write(root, "a*", "an ignored star\n");
      const committed = ["src/gen/gen.c", "report1.csv", "abc.txt", "lib/alpha.txt"];
      for (const file of committed) write(root, file, `committed ${file}\n`);
      commitAll(sub ? path.dirname(root) : root, ...committed.map((file) => path.join(root, file)));
    },
    upstreamLoses: ["src/gen/gen.c", "report1.csv", "abc.txt", "lib/alpha.txt"],
  })),
  {
    name: "6. empty directories (git)",
    kind: "git",
    make(root) {
      write(root, "README.md", "readme\n");
      commitAll(root);
      makeDir(root, "empty/inner");
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
      write(root, "skip.txt", "a local edit git does not see\n");
      git(root, "update-index", "--assume-unchanged", "assumed.txt");
      write(root, "assumed.txt", "another edit git does not see\n");
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
    // The sandbox's tar applies its umask, as a non-root user's does.
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
];

/** Builds a case's workspace (in `<dir>/sub` for a subfolder case) and returns its root. */
function workspaceOf(testCase) {
  const top = fresh("ws");
  const root = testCase.sub ? path.join(top, testCase.sub) : top;
  makeDir(root, "");
  testCase.make(root);
  addAgentsFile(root, testCase.sub ? "plain" : testCase.kind);
  return root;
}

/** One run of a case through `impl`: resolves the host before and after the restore, its error and lines. */
async function runCase(impl, testCase, { transport = "base64", delta = "auto" } = {}) {
  process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = delta;
  if (testCase.nonRootRemote) process.env.TAR_OPTIONS = "--no-same-permissions";
  const root = workspaceOf(testCase);
  const remote = fresh("remote");
  const prepared = await impl.prepareCommandManagedRuntime({
    runner: transport === "native" ? nativeSyncRunner().runner : spawnRunner().runner,
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
  const { error, lines } = await settledRestore(prepared);
  return { before, after: ruleState(root), error, lines, root };
}

describe(
  "the numbered cases through the sandbox lane: the host keeps what the agent never touched",
  { timeout: 120_000 },
  () => {
    for (const testCase of CASES) {
      it(`${testCase.name}`, async () => {
        for (const mode of [
          { transport: "base64", delta: "auto" },
          { transport: "base64", delta: "off" },
          { transport: "native", delta: "auto" },
        ]) {
          const ours = await runCase({ prepareCommandManagedRuntime }, testCase, mode);
          expectKept(ours, testCase, `${mode.transport}, delta ${mode.delta}`);
        }
        expectUpstreamLoses(await runCase(upstream, testCase), testCase);
      });
    }

    it("10. a workspace replaced by a link to another directory: refused, the host untouched (upstream's plain restore deletes every file)", async () => {
      for (const kind of ["plain", "git"]) {
        for (const impl of [{ prepareCommandManagedRuntime }, upstream]) {
          const root = workspaceOf(strangerCase(kind));
          const remote = path.join(fresh("remote"), "workspace");
          const prepared = await impl.prepareCommandManagedRuntime({
            runner: spawnRunner().runner,
            spec: { remoteCwd: remote, timeoutMs: 60_000 },
            adapterKey: "case",
            workspaceLocalDir: root,
          });
          replaceWithStranger(remote, fresh("stranger"));
          const before = ruleState(root);
          const { error } = await settledRestore(prepared);
          if (impl !== upstream) expectRefusedReplaced(error, root, before, kind);
          else if (kind === "plain") {
            // Upstream's plain restore takes the stranger's tree for the agent's and deletes
            // every host file (its git restore fails on the stranger's missing repository).
            expect(error).toBeNull();
            expect(Object.keys(ruleState(root))).toEqual(["unrelated.txt"]);
          }
        }
      }
    });

    it("two restores of one run: the second starts from what the first wrote, a host edit made between them kept", async () => {
      for (const kind of ["plain", "git"]) {
        for (const mode of [
          { transport: "base64", delta: "auto" },
          { transport: "base64", delta: "off" },
          { transport: "native", delta: "auto" },
        ]) {
          process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = mode.delta;
          const root = workspaceOf(twoRestoresCase(kind));
          const remote = fresh("remote");
          const prepared = await prepareCommandManagedRuntime({
            runner: mode.transport === "native" ? nativeSyncRunner().runner : spawnRunner().runner,
            spec: { remoteCwd: remote, timeoutMs: 60_000 },
            adapterKey: "case",
            workspaceLocalDir: root,
          });
          await expectSecondRestoreFollows({ root, remote, restore: () => settledRestore(prepared) });
        }
      }
    });

    it("a FIFO in the workspace: left alone, and the agent's work arrives (ours refused the archive before)", async () => {
      for (const mode of [{ transport: "base64" }, { transport: "native" }]) {
        expectFifoKept(await runCase({ prepareCommandManagedRuntime }, FIFO_CASE, mode));
      }
    });
  },
);
