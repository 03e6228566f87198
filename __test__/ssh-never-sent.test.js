// The numbered cases of docs/differences.md, "Nothing the agent did not change", that the SSH
// lane meets, against a real sshd as an unprivileged user: an ordinary workspace holding the
// case's ingredient, one unrelated file edited by the agent on the remote, restored through
// the managed runtime (`prepareRemoteManagedRuntime`'s prepare, baseline and restore) by ours,
// with the delta on and off, and by upstream's on a twin. Ours leaves every host path but the
// agent's file as it was (bytes, mode, kind, existence); upstream's loses what the case names.
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/remote-managed-runtime";
import { describe, expect, it } from "vitest";
import { prepareRemoteManagedRuntime } from "../lib/remote-managed-runtime.js";
import { prepareWorkspaceForSshExecution, restoreWorkspaceFromSshExecution } from "../lib/ssh.js";
import { captureDirectorySnapshot } from "../lib/workspace-restore-merge.js";
import { restoreEnvAfterEach } from "./helpers/env.js";
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
  replaceWithStranger,
  sharedCases,
  strangerCase,
  twoRestoresCase,
} from "./helpers/never-sent-cases.js";
import { ruleState } from "./helpers/restore-rule.js";
import { settledRestore, writeFile as write } from "./helpers/restore-rule-gen.js";
import { sshdSuite } from "./helpers/sshd-suite.js";

const suite = sshdSuite("pc-ssh-never-sent-");
restoreEnvAfterEach("PAPERCLIP_NATIVE_SSH_DELTA");
let counter = 0;
const fresh = (label) => mkdtempSync(path.join(suite.work, `${label}-${(counter += 1)}-`));

/** The cases (helpers/never-sent-cases.js). */
const CASES = [
  {
    name: "1. a submodule's .git file and a cloned repository's history (git)",
    kind: "git",
    make(root) {
      write(root, "README.md", "readme\n");
      commitAll(root);
      addSubmodule(root);
      addClone(root, "third_party/clone");
    },
    upstreamLoses: ["mods/sub/.git", "third_party/clone/.git"],
  },
  ...["plain", "git"].flatMap((kind) => sharedCases(kind)),
  ...["plain", "git"].map((kind) => ({
    name: `8. modes 664 and 775 under the remote user's umask (${kind})`,
    kind,
    make(root) {
      write(root, "group.txt", "group\n", 0o664);
      write(root, "tool.sh", "#!/bin/sh\n", 0o775);
      if (kind === "git") commitAll(root);
    },
    upstreamLoses: ["group.txt", "tool.sh"],
  })),
  {
    name: "a host edit made during the run to a file the agent changed too: the host's edit kept, reported (plain)",
    kind: "plain",
    make(root) {
      write(root, "both.txt", "base\n");
    },
    during(local) {
      writeFileSync(path.join(local, "both.txt"), "the host's edit during the run\n");
    },
    agent(remote) {
      writeFileSync(path.join(remote, "both.txt"), "the agent's version\n");
    },
    upstreamLoses: ["both.txt"],
  },
];

/** A case's workspace with the agent's file. */
function workspaceOf(testCase) {
  const root = fresh("ws");
  testCase.make(root);
  addAgentsFile(root, testCase.kind);
  return root;
}

/** One managed run of a case through `impl`: the host before and after the restore, its error and lines. */
async function runCase(impl, testCase, delta = "1") {
  process.env.PAPERCLIP_NATIVE_SSH_DELTA = delta;
  const root = workspaceOf(testCase);
  const prepared = await impl.prepareRemoteManagedRuntime({
    spec: { ...suite.server.spec, remoteCwd: fresh("remote-base") },
    runId: "run-1",
    adapterKey: "case",
    workspaceLocalDir: root,
  });
  const remote = prepared.workspaceRemoteDir;
  writeFileSync(path.join(remote, "edit-me.txt"), "the agent's edit\n");
  testCase.agent?.(remote);
  testCase.during?.(root);
  const before = ruleState(root);
  const { error, lines } = await settledRestore(prepared);
  return { root, remote, before, after: ruleState(root), error, lines };
}

describe(
  "the numbered cases through the SSH lane: the host keeps what the agent never touched",
  { timeout: 120_000 },
  () => {
    for (const testCase of CASES) {
      it(`${testCase.name}`, async () => {
        for (const delta of ["1", "0"]) {
          const ours = await runCase({ prepareRemoteManagedRuntime }, testCase, delta);
          expectKept(ours, testCase, `delta ${delta === "1" ? "on" : "off"}`);
        }
        expectUpstreamLoses(await runCase(upstream, testCase), testCase);
      });
    }

    it("10. a workspace replaced by a link to another directory: refused, the host untouched", async () => {
      for (const kind of ["plain", "git"]) {
        const root = workspaceOf(strangerCase(kind));
        const prepared = await prepareRemoteManagedRuntime({
          spec: { ...suite.server.spec, remoteCwd: fresh("remote-base") },
          runId: "run-1",
          adapterKey: "case",
          workspaceLocalDir: root,
        });
        replaceWithStranger(prepared.workspaceRemoteDir, fresh("stranger"));
        const before = ruleState(root);
        const { error } = await settledRestore(prepared);
        expectRefusedReplaced(error, root, before, kind);
      }
    });

    it("two restores of one run: the second starts from what the first wrote, a host edit made between them kept", async () => {
      for (const kind of ["plain", "git"]) {
        for (const delta of ["1", "0"]) {
          process.env.PAPERCLIP_NATIVE_SSH_DELTA = delta;
          const root = workspaceOf(twoRestoresCase(kind));
          const prepared = await prepareRemoteManagedRuntime({
            spec: { ...suite.server.spec, remoteCwd: fresh("remote-base") },
            runId: "run-1",
            adapterKey: "case",
            workspaceLocalDir: root,
          });
          const remote = prepared.workspaceRemoteDir;
          await expectSecondRestoreFollows({ root, remote, restore: () => settledRestore(prepared) });
        }
      }
    });

    it("one baseline object restoring twin workspaces: what a restore wrote into one is not the other's start", async () => {
      const local = fresh("twin-a");
      write(local, "a.txt", "a\n");
      const remoteDir = fresh("twin-remote");
      await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
      const baselineSnapshot = await captureDirectorySnapshot(local, { exclude: [".paperclip-runtime"] });
      const twin = fresh("twin-b");
      cpSync(local, twin, { recursive: true });
      write(remoteDir, "new/made.txt", "the agent's\n");
      for (const localDir of [local, twin]) {
        await restoreWorkspaceFromSshExecution({ spec: suite.server.spec, localDir, remoteDir, baselineSnapshot });
        expect(readFileSync(path.join(localDir, "new", "made.txt"), "utf8"), localDir).toBe("the agent's\n");
      }
    });

    it("a FIFO in the workspace: left alone, and the agent's work arrives", async () => {
      expectFifoKept(await runCase({ prepareRemoteManagedRuntime }, FIFO_CASE));
    });
  },
);
