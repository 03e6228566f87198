// The directory-merge lock (interoperability with upstream's TypeScript lock, in one
// process and across processes, staleness, refusals, timeout) and the merge's own
// behaviour around it (hooks, failures releasing the lock, safety refusals, opt-in options).
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import * as upstream from "@paperclipai/adapter-utils/workspace-restore-merge";
import * as ours from "@paperclipai/adapter-utils-native/workspace-restore-merge";
import { withDirectoryMergeLockWaiting } from "../lib/merge-lock.js";
import { spawnLockHolder } from "./helpers/lock-holders.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-lock-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

let dir;
let env;
let counter = 0;
const children = [];
beforeEach(() => {
  counter += 1;
  dir = path.join(work, `case-${counter}`);
  mkdirSync(path.join(dir, "target"), { recursive: true });
  env = { PAPERCLIP_HOME: path.join(dir, "home"), PAPERCLIP_INSTANCE_ID: "lock-test" };
});
afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
});

const lockRoot = () => path.join(env.PAPERCLIP_HOME, "instances", "lock-test", "locks", "directory-merge");
const lockDirOf = (target) =>
  path.join(lockRoot(), `${createHash("sha256").update(realpathSync(target)).digest("hex")}.lock`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A process holding the lock through `impl` ("ours" or "upstream"; helpers/lock-holders.js). */
const spawnHolder = (impl, target) => spawnLockHolder(impl, target, env, { children });

async function expectTimeout(target, waitMs = 300) {
  const started = Date.now();
  const error = await withDirectoryMergeLockWaiting(target, async () => "entered", env, waitMs).then(
    () => null,
    (e) => e,
  );
  expect(error?.code).toBe(ours.WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE);
  expect(Date.now() - started).toBeGreaterThanOrEqual(waitMs);
  return error;
}

describe("withDirectoryMergeLock: protocol", () => {
  it("writes upstream's lock layout: a 0700 root, a sha256-named lock dir with owner.json, removed on release", async () => {
    const target = path.join(dir, "target");
    let during;
    const result = await ours.withDirectoryMergeLock(
      target,
      async (canonical) => {
        during = {
          canonical,
          entries: readdirSync(lockRoot()),
          owner: readFileSync(path.join(lockDirOf(target), "owner.json"), "utf8"),
        };
        return 42;
      },
      env,
    );
    expect(result).toBe(42);
    expect(during.canonical).toBe(realpathSync(target));
    expect(during.entries).toEqual([path.basename(lockDirOf(target))]);
    expect(during.owner).toMatch(/^\{"pid":\d+,"createdAt":"[^"]+"\}\n$/);
    expect(JSON.parse(during.owner).pid).toBe(process.pid);
    expect(statSync(lockRoot()).mode & 0o777).toBe(0o700);
    expect(readdirSync(lockRoot())).toEqual([]);
  });

  it("refuses a symlinked or non-directory lock root, and an invalid instance id", async () => {
    const target = path.join(dir, "target");
    mkdirSync(path.dirname(lockRoot()), { recursive: true });
    mkdirSync(path.join(dir, "decoy"));
    symlinkSync(path.join(dir, "decoy"), lockRoot());
    await expect(ours.withDirectoryMergeLock(target, async () => undefined, env)).rejects.toThrow(
      /not a plain directory/,
    );
    unlinkSync(lockRoot());
    writeFileSync(lockRoot(), "file");
    await expect(ours.withDirectoryMergeLock(target, async () => undefined, env)).rejects.toThrow(
      /not a plain directory/,
    );
    await expect(
      ours.withDirectoryMergeLock(target, async () => undefined, { ...env, PAPERCLIP_INSTANCE_ID: "../x" }),
    ).rejects.toThrow("Invalid PAPERCLIP_INSTANCE_ID '../x'.");
    expect(readdirSync(path.join(dir, "decoy"))).toEqual([]);
  });

  it("rejects a missing target with ENOENT, like upstream", async () => {
    const missing = path.join(dir, "missing");
    const mine = await ours.withDirectoryMergeLock(missing, async () => undefined, env).catch((e) => e.code);
    const theirs = await upstream.withDirectoryMergeLock(missing, async () => undefined, env).catch((e) => e.code);
    expect(mine).toBe("ENOENT");
    expect(mine).toBe(theirs);
  });

  it("times out with the stable code, classified as a lock timeout; the holder keeps its lock", async () => {
    const target = path.join(dir, "target");
    await ours.withDirectoryMergeLock(
      target,
      async () => {
        const error = await expectTimeout(target);
        expect(error.message).toBe(`Timed out waiting for workspace restore lock at ${lockDirOf(target)}`);
        expect(ours.classifyWorkspaceRestoreFailure(error)).toBe("restore_lock_timeout");
        expect(existsSync(path.join(lockDirOf(target), "owner.json"))).toBe(true);
      },
      env,
    );
  });

  it("serializes native callers contending for one target through aliases", async () => {
    const target = path.join(dir, "target");
    symlinkSync(target, path.join(dir, "alias"));
    let active = 0;
    let overlap = 0;
    const order = [];
    const writer = (p, name) =>
      ours.withDirectoryMergeLock(
        p,
        async () => {
          active += 1;
          if (active > 1) overlap += 1;
          order.push(name);
          await sleep(60);
          active -= 1;
        },
        env,
      );
    await Promise.all([writer(target, "a"), writer(path.join(dir, "alias"), "b"), writer(target, "c")]);
    expect(overlap).toBe(0);
    expect(order.sort()).toEqual(["a", "b", "c"]);
  });
});

describe("withDirectoryMergeLock: interoperability with upstream's lock", () => {
  it("excludes upstream's lock in one process, both ways", async () => {
    const target = path.join(dir, "target");
    for (const [first, second] of [
      [ours, upstream],
      [upstream, ours],
    ]) {
      const events = [];
      const holder = first.withDirectoryMergeLock(
        target,
        async () => {
          events.push("first-in");
          await sleep(300);
          events.push("first-out");
        },
        env,
      );
      await sleep(50);
      const waiter = second.withDirectoryMergeLock(
        target,
        async () => {
          events.push("second-in");
        },
        env,
      );
      await Promise.all([holder, waiter]);
      expect(events).toEqual(["first-in", "first-out", "second-in"]);
    }
  });

  for (const impl of ["upstream", "ours"]) {
    it(`a ${impl} lock held by another process blocks ours until released`, async () => {
      const target = path.join(dir, "target");
      const holder = await spawnHolder(impl, target);
      await expectTimeout(target);
      let enteredAt = 0;
      const waiting = ours.withDirectoryMergeLock(
        target,
        async () => {
          enteredAt = Date.now();
        },
        env,
      );
      await sleep(200);
      expect(enteredAt).toBe(0);
      await holder.release();
      const releasedAt = Date.now();
      await waiting;
      expect(enteredAt).toBeGreaterThan(0);
      expect(enteredAt).toBeGreaterThanOrEqual(releasedAt - 60);
    });
  }

  it("our lock held by another process blocks upstream's until released", async () => {
    const target = path.join(dir, "target");
    const holder = await spawnHolder("ours", target);
    let entered = false;
    const waiting = upstream.withDirectoryMergeLock(
      target,
      async () => {
        entered = true;
      },
      env,
    );
    await sleep(300);
    expect(entered).toBe(false);
    await holder.release();
    await waiting;
    expect(entered).toBe(true);
  });

  for (const impl of ["upstream", "ours"]) {
    it(`takes over a lock whose ${impl} holder was killed with SIGKILL`, async () => {
      const target = path.join(dir, "target");
      const holder = await spawnHolder(impl, target);
      holder.child.kill("SIGKILL");
      await holder.exited;
      expect(existsSync(path.join(lockDirOf(target), "owner.json"))).toBe(true);
      const started = Date.now();
      await withDirectoryMergeLockWaiting(target, async () => undefined, env, 5_000);
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(readdirSync(lockRoot())).toEqual([]);
    });
  }

  it("a lock directory without owner.json is live until its mtime is 30 s old", async () => {
    const target = path.join(dir, "target");
    await ours.withDirectoryMergeLock(target, async () => undefined, env); // creates the root
    mkdirSync(lockDirOf(target));
    await expectTimeout(target);
    const old = new Date(Date.now() - 31_000);
    utimesSync(lockDirOf(target), old, old);
    let entered = false;
    await withDirectoryMergeLockWaiting(
      target,
      async () => {
        entered = true;
      },
      env,
      1_000,
    );
    expect(entered).toBe(true);
  });

  it("an owner.json without a usable pid is stale at once; an unparsable one falls back to mtime", async () => {
    const target = path.join(dir, "target");
    await ours.withDirectoryMergeLock(target, async () => undefined, env);
    mkdirSync(lockDirOf(target));
    writeFileSync(path.join(lockDirOf(target), "owner.json"), JSON.stringify({ pid: 0 }));
    await withDirectoryMergeLockWaiting(target, async () => undefined, env, 300);
    mkdirSync(lockDirOf(target));
    writeFileSync(path.join(lockDirOf(target), "owner.json"), "{not json");
    await expectTimeout(target);
  });
});

describe("mergeDirectoryWithBaseline around the lock", () => {
  const setup = async () => {
    const source = path.join(dir, "source");
    const target = path.join(dir, "target");
    writeFileSync(path.join(target, "kept.txt"), "base");
    mkdirSync(path.join(target, "sub"));
    const baseline = await ours.captureDirectorySnapshot(target);
    mkdirSync(source);
    writeFileSync(path.join(source, "kept.txt"), "base");
    mkdirSync(path.join(source, "sub"));
    return { source, target, baseline };
  };
  const withHome = async (fn) => {
    const saved = process.env.PAPERCLIP_HOME;
    const savedId = process.env.PAPERCLIP_INSTANCE_ID;
    process.env.PAPERCLIP_HOME = env.PAPERCLIP_HOME;
    process.env.PAPERCLIP_INSTANCE_ID = env.PAPERCLIP_INSTANCE_ID;
    try {
      return await fn();
    } finally {
      if (saved === undefined) delete process.env.PAPERCLIP_HOME;
      else process.env.PAPERCLIP_HOME = saved;
      if (savedId === undefined) delete process.env.PAPERCLIP_INSTANCE_ID;
      else process.env.PAPERCLIP_INSTANCE_ID = savedId;
    }
  };

  it("awaits the hooks inside the lock and releases it after a failure mid-merge", () =>
    withHome(async () => {
      const { source, target, baseline } = await setup();
      const events = [];
      writeFileSync(path.join(source, "new.txt"), "remote");
      await ours.mergeDirectoryWithBaseline({
        baseline,
        sourceDir: source,
        targetDir: target,
        beforeApply: async () => {
          events.push(["before", readdirSync(lockRoot()).length, existsSync(path.join(target, "new.txt"))]);
        },
        afterApply: async () => {
          events.push(["after", readdirSync(lockRoot()).length, existsSync(path.join(target, "new.txt"))]);
        },
      });
      expect(events).toEqual([
        ["before", 1, false],
        ["after", 1, true],
      ]);
      expect(readdirSync(lockRoot())).toEqual([]);

      // The host replaced sub/ by a file; the remote writes below it: ENOTDIR/EEXIST as upstream.
      rmSync(path.join(target, "sub"), { recursive: true });
      writeFileSync(path.join(target, "sub"), "host file");
      writeFileSync(path.join(source, "sub", "x"), "remote");
      let after = false;
      const error = await ours
        .mergeDirectoryWithBaseline({
          baseline,
          sourceDir: source,
          targetDir: target,
          afterApply: async () => {
            after = true;
          },
        })
        .catch((e) => e);
      expect(error.code).toBe("EEXIST");
      expect(error.syscall).toBe("mkdir");
      expect(ours.classifyWorkspaceRestoreFailure(error)).toBe("restore_failed");
      expect(after).toBe(false);
      expect(readdirSync(lockRoot())).toEqual([]);
      const failing = await ours
        .mergeDirectoryWithBaseline({
          baseline,
          sourceDir: source,
          targetDir: target,
          beforeApply: async () => {
            throw new Error("hook failed");
          },
        })
        .catch((e) => e);
      expect(failing.message).toBe("hook failed");
      expect(readdirSync(lockRoot())).toEqual([]);
    }));

  it("maps a permission failure to EACCES (restore_permission_denied) as upstream (as an unprivileged user)", () => {
    const asRoot = process.getuid?.() === 0;
    // Root writes everywhere, so the probe runs as `nobody` there.
    const out = JSON.parse(
      execFileSync(process.execPath, [path.join(here, "helpers", "eacces-merge-probe.mjs")], {
        encoding: "utf8",
        ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
        cwd: os.tmpdir(),
      }),
    );
    expect(out.ours).toEqual({ code: "EACCES", classified: "restore_permission_denied" });
    expect(out.ours).toEqual(out.upstream);
  });

  it("never writes through a symlinked directory of the target (upstream does)", () =>
    withHome(async () => {
      const { source, target, baseline } = await setup();
      const outside = path.join(dir, "outside");
      mkdirSync(outside);
      rmSync(path.join(target, "sub"), { recursive: true });
      symlinkSync(outside, path.join(target, "sub"));
      writeFileSync(path.join(source, "sub", "x"), "payload");
      writeFileSync(path.join(source, "top.txt"), "remote");
      const error = await ours
        .mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: target })
        .catch((e) => e);
      expect(error.code).toBe("ERR_PAPERCLIP_NATIVE_SYMLINKED_ANCESTOR");
      expect(error.paths).toEqual(["sub"]);
      expect(readdirSync(outside)).toEqual([]);
      expect(existsSync(path.join(target, "top.txt"))).toBe(false); // refused before any change
      expect(readdirSync(lockRoot())).toEqual([]);
      // The gap this closes: upstream writes the payload outside the target.
      await upstream.mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: target });
      expect(readdirSync(outside)).toEqual(["x"]);
    }));

  it("conflictPolicy: 'reject' refuses paths both sides changed, before any change", () =>
    withHome(async () => {
      const { source, target, baseline } = await setup();
      writeFileSync(path.join(source, "kept.txt"), "remote");
      writeFileSync(path.join(target, "kept.txt"), "host");
      writeFileSync(path.join(source, "other.txt"), "remote only");
      const hooks = [];
      const error = await ours
        .mergeDirectoryWithBaseline({
          baseline,
          sourceDir: source,
          targetDir: target,
          conflictPolicy: "reject",
          beforeApply: async () => {
            hooks.push("before");
          },
          afterApply: async () => {
            hooks.push("after");
          },
        })
        .catch((e) => e);
      expect(error.code).toBe("DIRECTORY_MERGE_CONFLICT");
      expect(error.name).toBe("DirectoryMergeConflict");
      expect(error.message).toBe("Directory contents changed concurrently");
      expect(error.paths).toEqual(["kept.txt"]);
      expect(hooks).toEqual(["before"]);
      expect(existsSync(path.join(target, "other.txt"))).toBe(false);
      expect(readdirSync(lockRoot())).toEqual([]);
      await expect(
        ours.mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: target, conflictPolicy: "bogus" }),
      ).rejects.toMatchObject({ code: "ERR_INVALID_ARG_VALUE" });
      await ours.mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: target });
      expect(readFileSync(path.join(target, "kept.txt"), "utf8")).toBe("remote");
    }));

  it("refuseEmptySource: an empty or missing source never empties the target", () =>
    withHome(async () => {
      const { target, baseline } = await setup();
      const empty = path.join(dir, "empty");
      mkdirSync(empty);
      let hooked = false;
      // A missing source fails its capture (ENOENT) whatever the option: it is not read as empty.
      for (const [sourceDir, code] of [
        [empty, "ERR_PAPERCLIP_NATIVE_EMPTY_SOURCE"],
        [path.join(dir, "missing"), "ENOENT"],
      ]) {
        const error = await ours
          .mergeDirectoryWithBaseline({
            baseline,
            sourceDir,
            targetDir: target,
            refuseEmptySource: true,
            beforeApply: async () => {
              hooked = true;
            },
          })
          .catch((e) => e);
        expect(error.code).toBe(code);
      }
      const missing = await ours
        .mergeDirectoryWithBaseline({ baseline, sourceDir: path.join(dir, "missing"), targetDir: target })
        .catch((e) => e);
      expect([missing.code, missing.syscall]).toEqual(["ENOENT", "scandir"]);
      expect(hooked).toBe(false);
      expect(existsSync(path.join(target, "kept.txt"))).toBe(true);
      // Upstream's default: the emptied source deletes what still matches the baseline.
      await ours.mergeDirectoryWithBaseline({ baseline, sourceDir: empty, targetDir: target });
      expect(readdirSync(target)).toEqual([]);
      expect(lstatSync(target).isDirectory()).toBe(true);
    }));
});
