// The workspace lifecycle written once for both lanes (lib/lifecycle/): the restore's steps
// over a lane's remote, and the rules every lane's remote obeys there (the workspace guard
// on every command). The lanes' own suites run it through SSH and sandboxes; these tests
// drive it with a lane made here, so a rule added to the lifecycle is tested once.
import { execFileSync } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { guardRemote } from "../lib/lifecycle/remote.js";
import { restoreRun } from "../lib/lifecycle/restore.js";
import { listingOrFallback, stageDelta } from "../lib/lifecycle/stage.js";
import { captureDirectorySnapshot } from "../lib/workspace-restore-merge.js";

const GONE = "ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE";
const dirs = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

async function tempDir() {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "pc-lifecycle-"));
  dirs.push(dir);
  return dir;
}

async function write(root, files) {
  for (const [name, text] of Object.entries(files)) {
    await fs.mkdir(path.dirname(path.join(root, name)), { recursive: true });
    await fs.writeFile(path.join(root, name), text);
  }
}

async function tree(root) {
  const out = {};
  const visit = async (relative) => {
    for (const entry of await fs.readdir(path.join(root, relative), { withFileTypes: true })) {
      const member = relative ? `${relative}/${entry.name}` : entry.name;
      if (entry.isDirectory()) await visit(member);
      else out[member] = await fs.readFile(path.join(root, member), "utf8");
    }
  };
  await visit("");
  return out;
}

/** A remote that runs each script with sh in `remoteDir`'s parent and records it; pulls copy `remoteDir`. */
function shellRemote(remoteDir, scripts) {
  const run = async (script) => {
    scripts.push(script);
    try {
      return execFileSync("sh", ["-c", script], { cwd: path.dirname(remoteDir), stdio: "pipe" });
    } catch (error) {
      throw Object.assign(new Error(`remote command failed: ${error.stderr}`), { stderr: String(error.stderr) });
    }
  };
  return {
    run,
    list: async (script) => ({ header: [], entries: new Map(), script: String(await run(script)) }),
    pull: async (tree, options = {}) => {
      await run(`${options.first ?? ""}\n:`);
      await fs.cp(remoteDir, tree.localDir, { recursive: true });
    },
  };
}

/** A lane over `shellRemote`: the whole remote tree pulled into the staging directory; the steps it ran, in order. */
function testLane({ localDir, remoteDir, baseline, untransferred = [], steps, scripts, bring }) {
  let walkSettled = false;
  const lane = {
    remote: shellRemote(remoteDir, scripts),
    guard: { dir: remoteDir, staged: true },
    localDir,
    runBaseline: baseline,
    sink: undefined,
    startWalk: () => {
      steps.push("walk");
      return new Promise((resolve) => setTimeout(resolve, 20)).then(() => {
        walkSettled = true;
        return "[]";
      });
    },
    mask: async () => null,
    remoteStart: async () => {
      steps.push("start");
      return { untransferred };
    },
    stagingFallback: async () => {
      throw new Error("the workspace has room for a staging directory");
    },
    before: async () => steps.push("before"),
    bring:
      bring ??
      (async (context, state) => {
        steps.push("bring");
        lane.stagingDir = state.stagingDir;
        await context.remote.pull({ localDir: state.stagingDir });
      }),
    record: async () => steps.push("record"),
    finish: async () => steps.push(`finish (walk settled: ${walkSettled})`),
  };
  return lane;
}

/** A host workspace holding `files`, its baseline, and where its remote copy goes (not made). */
async function hostAndRemote(files) {
  const localDir = await tempDir();
  const remoteDir = path.join(await tempDir(), "ws");
  await write(localDir, files);
  return { localDir, remoteDir, baseline: await captureDirectorySnapshot(localDir, {}) };
}

describe("the restore lifecycle (lib/lifecycle/restore.js)", () => {
  it("runs a lane's steps in order, merges what the agent changed, keeps what never travelled, and leaves no staging directory", async () => {
    // `kept/` is in the baseline but was never sent (the lane's send excluded it): the remote
    // lacking it is not the agent's removal (the never-sent rule, lib/lifecycle/remote-start.js).
    const { localDir, remoteDir, baseline } = await hostAndRemote({
      "a.txt": "a",
      "b.txt": "b",
      "kept/never-sent.txt": "host only",
    });
    // What the prepare sent, then the agent's run: a.txt edited, b.txt removed, c.txt new.
    await write(remoteDir, { "a.txt": "agent", "c.txt": "new", ".paperclip-runtime/x": "" });
    const steps = [];
    const scripts = [];
    const lane = testLane({
      localDir,
      remoteDir,
      baseline,
      untransferred: ["kept", ".paperclip-runtime"],
      steps,
      scripts,
    });
    await restoreRun(lane);
    expect(steps).toEqual(["walk", "start", "before", "bring", "record", "finish (walk settled: true)"]);
    const after = await tree(localDir);
    expect(after).toMatchObject({ "a.txt": "agent", "c.txt": "new", "kept/never-sent.txt": "host only" });
    expect(after["b.txt"]).toBeUndefined();
    // The staging directory was inside the workspace, and is gone.
    expect(path.dirname(lane.stagingDir)).toBe(localDir);
    await expect(fs.stat(lane.stagingDir)).rejects.toThrow();
    // Every command the remote ran began with the workspace guard, witnesses included.
    expect(scripts.length).toBeGreaterThan(0);
    for (const script of scripts) expect(script.startsWith(`if [ ! -d '${remoteDir}' ]`)).toBe(true);
    expect(scripts[0]).toContain("a.txt");
  });

  it("refuses a vanished workspace with the coded error, the host untouched, and still cleans up", async () => {
    const { localDir, remoteDir, baseline } = await hostAndRemote({ "a.txt": "a" });
    const steps = [];
    const scripts = [];
    const lane = testLane({ localDir, remoteDir, baseline, steps, scripts });
    const error = await restoreRun(lane).catch((caught) => caught);
    expect(error?.code).toBe(GONE);
    expect(error.reason).toBe("missing");
    expect(steps).toEqual(["walk", "start", "before", "bring", "finish (walk settled: true)"]);
    expect(await tree(localDir)).toEqual({ "a.txt": "a" });
    await expect(fs.stat(lane.stagingDir)).rejects.toThrow();
  });

  it("settles the walk and skips the lane's finish when a step before the workspace's own fails", async () => {
    const { localDir, remoteDir, baseline } = await hostAndRemote({ "a.txt": "a" });
    const steps = [];
    const lane = testLane({ localDir, remoteDir, baseline, steps, scripts: [] });
    lane.before = async () => {
      throw new Error("a project repository's restore failed");
    };
    await expect(restoreRun(lane)).rejects.toThrow("a project repository's restore failed");
    expect(steps).toEqual(["walk", "start"]);
    expect((await fs.readdir(localDir)).sort()).toEqual(["a.txt"]);
  });
});

describe("a restore's remote (lib/lifecycle/remote.js guardRemote)", () => {
  it("puts the guard first in every command and turns the guard's answer into the coded refusal", async () => {
    const remoteParent = await tempDir();
    const remoteDir = path.join(remoteParent, "ws");
    await write(remoteDir, { "a.txt": "a" });
    const scripts = [];
    const remote = guardRemote(shellRemote(remoteDir, scripts), { dir: remoteDir, staged: true, witnesses: ["a.txt"] });
    expect(String(await remote.run("echo ran"))).toBe("ran\n");
    expect((await remote.list("echo listed")).script).toBe("listed\n");
    await remote.pull({ localDir: path.join(remoteParent, "copy") }, { first: "echo first" });
    expect(scripts).toHaveLength(3);
    for (const script of scripts) expect(script.split("\n")[0]).toContain("pcguard");
    expect(scripts[2].split("\n")[1]).toBe("echo first");
    // The workspace replaced by another tree: neither the runtime directory nor a witness.
    await fs.rm(remoteDir, { recursive: true });
    await write(remoteDir, { "other.txt": "x" });
    for (const call of [
      () => remote.run("true"),
      () => remote.list("true"),
      () => remote.pull({ localDir: remoteParent }),
    ]) {
      const error = await call().catch((caught) => caught);
      expect(error?.code).toBe(GONE);
      expect(error.reason).toBe("replaced");
    }
    // A failure the guard did not cause stays as it was.
    await write(remoteDir, { ".paperclip-runtime/x": "" });
    await expect(remote.run("exit 3")).rejects.toThrow("remote command failed");
    // Without a guard: the remote itself.
    const plain = shellRemote(remoteDir, []);
    expect(guardRemote(plain, null)).toBe(plain);
  });
});

describe("a prepare's delta (lib/lifecycle/stage.js stageDelta)", () => {
  /** A delta kind whose steps record what ran; `ready` and `apply` as given. */
  function kindOf(steps, { ready, apply, recordFull }) {
    return {
      ready: async (run) => {
        steps.push("ready");
        return await ready(run);
      },
      apply: async (run, answer, full) => {
        steps.push("apply");
        return await apply(run, answer, full);
      },
      upload: async () => {
        steps.push("upload");
        return ["members"];
      },
      recordFull:
        recordFull ??
        (async (run, uploaded) => {
          steps.push(`record ${uploaded.join(",")}`);
          await fs.writeFile(run.file, "new manifest");
        }),
      countFull: (reason) => steps.push(`count ${reason}`),
      settle: async () => steps.push("settle"),
    };
  }

  async function runWithManifest() {
    const dir = await tempDir();
    const file = path.join(dir, "manifest.json");
    await fs.writeFile(file, "old manifest");
    return { file };
  }

  it("applies a delta the remote can take, the walk settled after", async () => {
    const steps = [];
    const run = await runWithManifest();
    const kind = kindOf(steps, { ready: async () => ({ plan: 1 }), apply: async () => ({ mode: "delta" }) });
    expect(await stageDelta(kind, run)).toEqual({ mode: "delta" });
    expect(steps).toEqual(["ready", "apply", "settle"]);
    expect(await fs.readFile(run.file, "utf8")).toBe("old manifest");
  });

  it("falls back to the full upload, counted, with the manifest dropped before it and recorded after", async () => {
    for (const [fallback, ready, apply, expected] of [
      ["preserved-pattern", null, null, ["count preserved-pattern", "upload", "record members", "settle"]],
      [
        null,
        async () => ({ fallback: "no-manifest" }),
        null,
        ["ready", "count no-manifest", "upload", "record members", "settle"],
      ],
      [
        null,
        async () => ({}),
        (run, answer, full) => full("delta-failed"),
        ["ready", "apply", "count delta-failed", "upload", "record members", "settle"],
      ],
    ]) {
      const steps = [];
      const run = await runWithManifest();
      let seen = null;
      const kind = kindOf(steps, { ready, apply });
      kind.upload = async () => {
        seen = await fs.readFile(run.file, "utf8").catch((error) => error.code);
        steps.push("upload");
        return ["members"];
      };
      const reason = fallback ?? (expected.find((step) => step.startsWith("count ")) ?? "").slice(6);
      expect(await stageDelta(kind, run, fallback)).toEqual({ mode: "full", reason });
      expect(steps).toEqual(expected);
      expect(seen).toBe("ENOENT");
      expect(await fs.readFile(run.file, "utf8")).toBe("new manifest");
    }
  });

  it("leaves no manifest when the full upload's record fails, and settles the walk when a step rejects", async () => {
    const steps = [];
    const run = await runWithManifest();
    const failing = kindOf(steps, {
      ready: async () => ({ fallback: "remote-absent" }),
      recordFull: async () => {
        throw new Error("the listing after the upload failed");
      },
    });
    expect(await stageDelta(failing, run)).toEqual({ mode: "full", reason: "remote-absent" });
    await expect(fs.stat(run.file)).rejects.toThrow();
    const ended = [];
    const aborted = kindOf(ended, {
      ready: async () => {
        throw Object.assign(new Error("aborted"), { name: "AbortError" });
      },
    });
    await expect(stageDelta(aborted, await runWithManifest())).rejects.toThrow("aborted");
    expect(ended).toEqual(["ready", "settle"]);
  });
});

describe("a delta's listing (lib/lifecycle/stage.js listingOrFallback)", () => {
  it("gives the listing, or the full upload's reason, and rejects with what ends the call", async () => {
    const ends = (error) => error?.name === "AbortError";
    const entries = new Map([["a.txt", { kind: "f" }]]);
    expect(await listingOrFallback(async () => ({ header: ["pcdelta", "ok"], entries }), ends)).toEqual({
      listing: { header: ["pcdelta", "ok"], entries },
    });
    expect(await listingOrFallback(async () => ({ header: ["pcdelta", "absent"], entries: null }), ends)).toEqual({
      fallback: "remote-absent",
    });
    expect(await listingOrFallback(async () => ({ header: ["pcdelta", "no-gnu-tar"], entries: null }), ends)).toEqual({
      fallback: "remote-cannot-answer",
    });
    // A listing started earlier that failed: its error, as the answer.
    expect(await listingOrFallback(async () => new Error("exit 2"), ends)).toEqual({
      fallback: "remote-cannot-answer",
    });
    const abort = Object.assign(new Error("aborted"), { name: "AbortError" });
    await expect(listingOrFallback(async () => abort, ends)).rejects.toBe(abort);
    await expect(
      listingOrFallback(async () => {
        throw abort;
      }, ends),
    ).rejects.toBe(abort);
  });
});
