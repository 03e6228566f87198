// The numbered cases of docs/differences.md, "Nothing the agent did not change", that the SSH
// lane meets, against a real sshd as an unprivileged user: an ordinary workspace holding the
// case's ingredient, one unrelated file edited by the agent on the remote, restored through
// the managed runtime (`prepareRemoteManagedRuntime`'s prepare, baseline and restore) by ours,
// with the delta on and off, and by upstream's on a twin. Ours leaves every host path but the
// agent's file as it was (bytes, mode, kind, existence); upstream's loses what the case names.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/remote-managed-runtime";
import { afterEach, describe, expect, it } from "vitest";
import { prepareRemoteManagedRuntime } from "../lib/remote-managed-runtime.js";
import { pinnedGit } from "./helpers/git-state.js";
import { ruleState } from "./helpers/restore-rule.js";
import { sshdSuite } from "./helpers/sshd-suite.js";

const suite = sshdSuite("pc-ssh-never-sent-");
let counter = 0;
const fresh = (label) => mkdtempSync(path.join(suite.work, `${label}-${(counter += 1)}-`));
const savedDelta = process.env.PAPERCLIP_NATIVE_SSH_DELTA;
afterEach(() => {
  if (savedDelta === undefined) delete process.env.PAPERCLIP_NATIVE_SSH_DELTA;
  else process.env.PAPERCLIP_NATIVE_SSH_DELTA = savedDelta;
});

function write(root, relative, text, mode = 0o644) {
  mkdirSync(path.dirname(path.join(root, relative)), { recursive: true });
  writeFileSync(path.join(root, relative), text);
  chmodSync(path.join(root, relative), mode);
}
const git = (dir, ...args) => pinnedGit(dir, args);
function commitAll(dir) {
  git(dir, "init", "-q");
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", "initial");
}

/** The cases (see never-sent.test.js): `make(root)`, `during(local)`, `agent(remote)`, `upstreamLoses`. */
const CASES = [
  {
    name: "1. a submodule's .git file and a cloned repository's history (git)",
    kind: "git",
    make(root) {
      const source = `${root}-submodule-source`;
      write(source, "lib.c", "int lib;\n");
      commitAll(source);
      commitAll(root);
      git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", source, "mods/sub");
      git(root, "commit", "-q", "-m", "a submodule");
      write(root, "third_party/clone/x.txt", "cloned\n");
      commitAll(path.join(root, "third_party", "clone"));
    },
    upstreamLoses: ["mods/sub/.git", "third_party/clone/.git"],
  },
  ...["plain", "git"].map((kind) => ({
    name: `2. AppleDouble names at any depth (${kind}, committed in git)`,
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
    name: `8. modes 664 and 775 under the remote user's umask (${kind})`,
    kind,
    make(root) {
      write(root, "group.txt", "group\n", 0o664);
      write(root, "tool.sh", "#!/bin/sh\n", 0o775);
      if (kind === "git") commitAll(root);
    },
    upstreamLoses: ["group.txt", "tool.sh"],
  })),
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
  write(root, "edit-me.txt", "before\n");
  testCase.make(root);
  if (testCase.kind === "git") {
    git(root, "add", "edit-me.txt");
    git(root, "commit", "-q", "--allow-empty", "-m", "edit-me");
  }
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
  const lines = [];
  const error = await prepared
    .restoreWorkspace((line) => lines.push(line))
    .then(
      () => null,
      (failed) => failed,
    );
  return { root, remote, before, after: ruleState(root), error, lines };
}

const changed = (before, after) =>
  [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((key) => key !== "edit-me.txt" && before[key] !== after[key])
    .sort();

describe(
  "the numbered cases through the SSH lane: the host keeps what the agent never touched",
  { timeout: 120_000 },
  () => {
    for (const testCase of CASES) {
      it(`${testCase.name}`, async () => {
        for (const delta of ["1", "0"]) {
          const ours = await runCase({ prepareRemoteManagedRuntime }, testCase, delta);
          const label = `delta ${delta === "1" ? "on" : "off"}`;
          expect(ours.error, label).toBeNull();
          expect(readFileSync(path.join(ours.root, "edit-me.txt"), "utf8"), label).toBe("the agent's edit\n");
          // Case 9: the agent's other file goes with the directory; the host's edited one stays.
          const moved = changed(ours.before, ours.after).filter((key) => !(key === "notes/b.md"));
          expect(moved, label).toEqual([]);
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

    it("10. a workspace replaced by a link to another directory: refused, the host untouched", async () => {
      for (const kind of ["plain", "git"]) {
        const root = workspaceOf({ kind, make: (dir) => kind === "git" && commitAll(dir) });
        const prepared = await prepareRemoteManagedRuntime({
          spec: { ...suite.server.spec, remoteCwd: fresh("remote-base") },
          runId: "run-1",
          adapterKey: "case",
          workspaceLocalDir: root,
        });
        const remote = prepared.workspaceRemoteDir;
        const stranger = fresh("stranger");
        writeFileSync(path.join(stranger, "unrelated.txt"), "someone else's\n");
        rmSync(remote, { recursive: true });
        symlinkSync(stranger, remote);
        const before = ruleState(root);
        const error = await prepared.restoreWorkspace().then(
          () => null,
          (failed) => failed,
        );
        expect(error?.code, kind).toBe("ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE");
        expect(error.reason, kind).toBe("replaced");
        expect(ruleState(root), kind).toEqual(before);
      }
    });

    it("a FIFO in the workspace: left alone, and the agent's work arrives", async () => {
      const testCase = {
        kind: "plain",
        make: (root) => {
          mkdirSync(path.join(root, "run"), { recursive: true });
          execFileSync("mkfifo", [path.join(root, "run", "pipe")]);
        },
      };
      const ours = await runCase({ prepareRemoteManagedRuntime }, testCase);
      expect(ours.error).toBeNull();
      expect(ours.after["run/pipe"]).toMatch(/^special 1/);
      expect(readFileSync(path.join(ours.root, "edit-me.txt"), "utf8")).toBe("the agent's edit\n");
      expect(changed(ours.before, ours.after)).toEqual([]);
    });
  },
);
