// Watched snapshots: seeded random change batches applied to a tree, and after each batch the
// watcher's capture() compared with a cold capture (ours and upstream's): entries in order,
// serialized form, digest; the counters checked to have moved as the batch implies. Plus
// the fallbacks (queue overflow, watch limit), abort, close, leaks (threads, inotify
// descriptors), a process that never closes its watcher, and the environment switch through
// the --import hook.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import * as upstream from "@paperclipai/adapter-utils/workspace-restore-merge";
import * as ours from "@paperclipai/adapter-utils-native/workspace-restore-merge";
import { createSnapshotWatcher } from "@paperclipai/adapter-utils-native";
import { createRandom, runSeed } from "./helpers/random.js";

const SEED = runSeed();
const here = path.dirname(fileURLToPath(import.meta.url));
const packageRoot = path.join(here, "..");
const base = existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
const work = mkdtempSync(path.join(base, "pc-native-watch-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function ordered(snapshot) {
  return { exclude: snapshot.exclude, entries: [...snapshot.entries] };
}

async function expectSameAsCold(watched, root, exclude, where) {
  const cold = await ours.captureDirectorySnapshot(root, { exclude });
  const theirs = await upstream.captureDirectorySnapshot(root, { exclude });
  expect(ordered(watched), where).toEqual(ordered(cold));
  expect(ordered(watched), where).toEqual(ordered(theirs));
  expect(ours.serializeDirectorySnapshot(watched), where).toEqual(upstream.serializeDirectorySnapshot(theirs));
  expect(ours.directorySnapshotSha256(watched), where).toBe(upstream.directorySnapshotSha256(theirs));
}

const NAMES = ["a", "B", "b", "é", "e", "z", "Z-1", "z.1", "x y", "ß", "中", "😀", "node_modules", "x.log", "a.b"];

function name(rng) {
  return `${rng.pick(NAMES)}${rng.chance(0.5) ? rng.int(20) : ""}`;
}

/** Every directory and file under `root` (relative paths; symlinks counted as files). */
function listTree(root) {
  const dirs = [""];
  const files = [];
  for (let i = 0; i < dirs.length; i += 1) {
    for (const entry of readdirSync(path.join(root, dirs[i]), { withFileTypes: true })) {
      const rel = dirs[i] ? `${dirs[i]}/${entry.name}` : entry.name;
      if (entry.isDirectory()) dirs.push(rel);
      else files.push({ rel, link: entry.isSymbolicLink() });
    }
  }
  return { dirs, files };
}

function writeSubtree(rng, dir, depth) {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < 1 + rng.int(4); i += 1)
    writeFileSync(path.join(dir, name(rng)), `f${rng.next()}`.repeat(rng.int(50)));
  // ".d" never ends a generated file name, so a subdirectory never collides with a file.
  if (depth > 0 && rng.chance(0.7)) writeSubtree(rng, path.join(dir, `${name(rng)}.d`), depth - 1);
}

/** Whether anything (a dangling or looping symlink included) is at `p`. */
function present(p) {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/** Applies one random change to the tree; returns what it did (for failure messages). */
function randomChange(rng, root, outside, links) {
  const { dirs, files } = listTree(root);
  const dir = rng.pick(dirs);
  const real = files.filter((f) => !f.link);
  const op = rng.pick([
    "create",
    "create",
    "delete",
    "rename",
    "renameDir",
    "replaceDir",
    "chmod",
    "touch",
    "moveIn",
    "mkdir",
    "symlink",
    "rewrite",
    "writeViaLink",
  ]);
  const abs = (rel) => path.join(root, rel);
  try {
    switch (op) {
      case "create": {
        const target = path.join(dir, name(rng));
        if (!present(abs(target))) writeFileSync(abs(target), `new ${rng.next()}`);
        return `${op} ${target}`;
      }
      case "delete": {
        if (files.length === 0) return "noop";
        const f = rng.pick(files);
        unlinkSync(abs(f.rel));
        return `${op} ${f.rel}`;
      }
      case "rename": {
        if (files.length === 0) return "noop";
        const f = rng.pick(files);
        const to = path.join(rng.pick(dirs), name(rng));
        if (present(abs(to))) return "noop";
        renameSync(abs(f.rel), abs(to));
        return `${op} ${f.rel} -> ${to}`;
      }
      case "renameDir": {
        const from = rng.pick(dirs.filter(Boolean));
        if (!from) return "noop";
        const into = rng.pick(dirs.filter((d) => d !== from && !d.startsWith(`${from}/`)));
        const to = path.join(into, name(rng));
        if (present(abs(to))) return "noop";
        renameSync(abs(from), abs(to));
        return `${op} ${from} -> ${to}`;
      }
      case "replaceDir": {
        const victim = rng.pick(dirs.filter(Boolean));
        if (!victim) return "noop";
        rmSync(abs(victim), { recursive: true });
        if (rng.chance(0.5)) writeFileSync(abs(victim), "was a directory");
        else symlinkSync(rng.chance(0.5) ? "/etc" : "..", abs(victim));
        return `${op} ${victim}`;
      }
      case "chmod": {
        if (real.length === 0) return "noop";
        const f = rng.pick(real);
        chmodSync(abs(f.rel), rng.pick([0o644, 0o755, 0o600, 0o444]));
        return `${op} ${f.rel}`;
      }
      case "touch": {
        // Within the racy window of the last capture: same size, new bytes, old mtime back.
        if (real.length === 0) return "noop";
        const f = rng.pick(real);
        const before = readFileSync(abs(f.rel));
        const after = Buffer.from(before.map((b) => b ^ 1));
        writeFileSync(abs(f.rel), after);
        const now = new Date();
        utimesSync(abs(f.rel), now, now);
        return `${op} ${f.rel}`;
      }
      case "moveIn": {
        const sub = path.join(outside, `sub-${rng.int(1e9)}`);
        writeSubtree(rng, sub, 2);
        const to = path.join(dir, name(rng));
        if (present(abs(to))) return "noop";
        renameSync(sub, abs(to));
        return `${op} ${to}`;
      }
      case "mkdir": {
        const to = path.join(dir, name(rng));
        if (present(abs(to))) return "noop";
        writeSubtree(rng, abs(to), 1);
        return `${op} ${to}`;
      }
      case "symlink": {
        const to = path.join(dir, name(rng));
        if (present(abs(to))) return "noop";
        symlinkSync(rng.pick(["../x", "/nowhere", "a/b", "😀"]), abs(to));
        return `${op} ${to}`;
      }
      case "writeViaLink": {
        // A write through a hard link outside the tree (made before the first capture)
        // raises no event inside it.
        if (links.length === 0) return "noop";
        const other = rng.pick(links);
        writeFileSync(other, `through a link ${rng.next()}`);
        return `${op} ${path.basename(other)}`;
      }
      default: {
        if (real.length === 0) return "noop";
        const f = rng.pick(real);
        writeFileSync(abs(f.rel), `rewritten ${rng.next()}`);
        return `${op} ${f.rel}`;
      }
    }
  } catch (error) {
    if (
      error.code === "ENOENT" ||
      error.code === "EEXIST" ||
      error.code === "ENOTDIR" ||
      error.code === "ENOTEMPTY" ||
      error.code === "ELOOP"
    )
      return `${op} failed (${error.code})`;
    throw error;
  }
}

function maxQueuedEvents() {
  try {
    return Number(readFileSync("/proc/sys/fs/inotify/max_queued_events", "utf8").trim()) || 16384;
  } catch {
    return 16384;
  }
}

const linux = process.platform === "linux";

describe(`watched snapshots (DIFF_SEED=${SEED})`, () => {
  it("equals a cold capture after every random change batch, and the counters say what happened", async () => {
    const rng = createRandom(SEED);
    const root = path.join(work, "stress");
    const outside = path.join(work, "outside");
    mkdirSync(outside);
    writeSubtree(rng, root, 3);
    rmSync(path.join(root, "node_modules"), { recursive: true, force: true });
    writeSubtree(rng, path.join(root, "node_modules", "pkg"), 1);
    const exclude = rng.pick([[], ["node_modules", "*/node_modules"], ["*.log", "node_modules"], ["a*"]]);
    const links = [];
    for (const f of listTree(root)
      .files.filter((f) => !f.link)
      .slice(0, 6)) {
      const other = path.join(outside, `link-${links.length}`);
      linkSync(path.join(root, f.rel), other);
      links.push(other);
    }
    const watcher = createSnapshotWatcher(root, { exclude });
    try {
      await expectSameAsCold(await watcher.capture(), root, exclude, `DIFF_SEED=${SEED} first capture`);
      let previous = watcher.stats();
      expect(previous.fullWalks).toBe(1);
      if (linux) expect(previous.watching).toBe(true);
      for (let batch = 0; batch < 40; batch += 1) {
        // Batch 20 creates more files than the kernel queues events for, in a directory
        // watched since batch 19; batch 21 starts by deleting them: two overflows.
        const burst = batch === 20 || batch === 21;
        const done = [];
        if (batch === 19) {
          mkdirSync(path.join(root, "burst"));
          done.push("mkdir burst");
        } else if (batch === 20) {
          const dir = path.join(root, "burst");
          for (let i = 0; i < maxQueuedEvents() + 100; i += 1) writeFileSync(path.join(dir, `f${i}`), "");
          done.push("burst");
        } else if (batch === 21) {
          rmSync(path.join(root, "burst"), { recursive: true });
          done.push("burst removed");
        } else {
          for (let k = 1 + rng.int(6); k > 0; k -= 1) done.push(randomChange(rng, root, outside, links));
        }
        const where = `DIFF_SEED=${SEED} batch=${batch} exclude=${JSON.stringify(exclude)} changes=${JSON.stringify(done)}`;
        await expectSameAsCold(await watcher.capture(), root, exclude, where);
        const now = watcher.stats();
        expect(now.captures, where).toBe(previous.captures + 1);
        if (linux) {
          if (burst) {
            expect(now.fallbacks.overflow, where).toBe(previous.fallbacks.overflow + 1);
            expect(now.fullWalks, where).toBe(previous.fullWalks + 1);
          } else {
            expect(now.fullWalks, where).toBe(previous.fullWalks);
            expect(now.fallbacks.overflow, where).toBe(previous.fallbacks.overflow);
          }
        }
        previous = now;
      }
      const end = watcher.stats();
      if (linux) {
        expect(end.dirsReread).toBeGreaterThan(20);
        expect(end.subtreeRewalks).toBeGreaterThan(0);
        expect(end.fallbacks.overflow).toBe(2);
      }
    } finally {
      watcher.close();
    }
  }, 300_000);

  it("files changed within the racy window are re-hashed by the next capture", async () => {
    const root = path.join(work, "racy");
    mkdirSync(path.join(root, "d"), { recursive: true });
    writeFileSync(path.join(root, "d", "f"), "one");
    // A modification time ahead of the clock is inside the racy window of any capture.
    const ahead = new Date(Date.now() + 3_600_000);
    utimesSync(path.join(root, "d", "f"), ahead, ahead);
    const watcher = createSnapshotWatcher(root);
    try {
      await watcher.capture();
      const first = watcher.stats();
      // Nothing changed, but "d/f" was modified within 2 s of (here: after) the first capture's start.
      const again = await watcher.capture();
      await expectSameAsCold(again, root, [], "racy");
      const second = watcher.stats();
      if (linux) {
        expect(second.events).toBe(first.events);
        expect(second.fallbacks.racyWindow).toBeGreaterThan(first.fallbacks.racyWindow);
        expect(second.dirsReread).toBeGreaterThan(first.dirsReread);
      }
    } finally {
      watcher.close();
    }
  });

  it("past its watch limit it stops watching and every capture walks the tree, still exact", async () => {
    const rng = createRandom(SEED ^ 0x5eed);
    const root = path.join(work, "limit");
    writeSubtree(rng, root, 3);
    mkdirSync(path.join(root, "x", "y"), { recursive: true });
    const watcher = createSnapshotWatcher(root, { maxWatches: 2 });
    try {
      await expectSameAsCold(await watcher.capture(), root, [], "limit first");
      writeFileSync(path.join(root, "x", "y", "new"), "new");
      await expectSameAsCold(await watcher.capture(), root, [], "limit second");
      const stats = watcher.stats();
      expect(stats.watching).toBe(false);
      expect(stats.fullWalks).toBe(2);
      if (linux) {
        expect(stats.reason).toBe("watch-limit");
        expect(stats.fallbacks.watchLimit).toBe(1);
        expect(stats.watches).toBe(0);
      }
    } finally {
      watcher.close();
    }
  });

  it("aborts with an AbortError, then walks the whole tree again; rejects after close()", async () => {
    const root = path.join(work, "abort");
    mkdirSync(path.join(root, "d"), { recursive: true });
    writeFileSync(path.join(root, "d", "f"), "x");
    const watcher = createSnapshotWatcher(root);
    await expect(watcher.capture({ signal: AbortSignal.abort() })).rejects.toMatchObject({
      name: "AbortError",
      code: "ABORT_ERR",
    });
    await expectSameAsCold(await watcher.capture(), root, [], "after abort");
    expect(() => createSnapshotWatcher(root, { exlude: [] })).toThrow(
      expect.objectContaining({ code: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT" }),
    );
    watcher.close();
    watcher.close();
    expect(watcher.stats()).toMatchObject({ closed: true, watches: 0, watching: false });
    await expect(watcher.capture()).rejects.toMatchObject({ code: "ERR_PAPERCLIP_NATIVE_WATCHER_CLOSED" });
  });

  it("captureDirectorySnapshot(dir, { watch: true }) serves repeat captures from the pool, equal to cold ones", async () => {
    const { snapshotWatchPool, closeSnapshotWatchPool } = await import("@paperclipai/adapter-utils-native");
    const root = path.join(work, "watch-option");
    writeSubtree(createRandom(SEED ^ 7), root, 2);
    try {
      const first = await ours.captureDirectorySnapshot(root, { exclude: ["x.log"], watch: true });
      await expectSameAsCold(first, root, ["x.log"], "watch: true first");
      writeFileSync(path.join(root, "added"), "added");
      const second = await ours.captureDirectorySnapshot(root, { exclude: ["x.log"], watch: true });
      await expectSameAsCold(second, root, ["x.log"], "watch: true second");
      const [stats] = snapshotWatchPool().filter((s) => s.root === root);
      expect(stats).toMatchObject({ captures: 2, fullWalks: 1 });
    } finally {
      closeSnapshotWatchPool();
    }
    expect(snapshotWatchPool()).toEqual([]);
  });

  it.runIf(linux)("close() leaves no thread and no inotify descriptor behind", () => {
    const root = path.join(work, "leak");
    writeSubtree(createRandom(SEED), root, 2);
    const script = `
      import { readdirSync, readFileSync, readlinkSync } from "node:fs";
      import { createSnapshotWatcher, captureDirectorySnapshot } from "@paperclipai/adapter-utils-native";
      // Threads other than the native runtime's shared, bounded pool ("paperclip-native").
      const threads = () => readdirSync("/proc/self/task")
        .filter((t) => !readFileSync("/proc/self/task/" + t + "/comm", "utf8").startsWith("paperclip-nati")).length;
      const inotifyFds = () => readdirSync("/proc/self/fd").filter((fd) => {
        try { return readlinkSync("/proc/self/fd/" + fd) === "anon_inode:inotify"; } catch { return false; }
      }).length;
      const root = process.argv[1];
      await captureDirectorySnapshot(root); // warms the native pool
      const before = { threads: threads(), fds: inotifyFds() };
      const watchers = Array.from({ length: 4 }, () => createSnapshotWatcher(root));
      for (const w of watchers) { await w.capture(); await w.capture(); }
      const during = { threads: threads(), fds: inotifyFds() };
      for (const w of watchers) w.close();
      const after = { threads: threads(), fds: inotifyFds() };
      console.log(JSON.stringify({ before, during, after }));
    `;
    const out = spawnSync(process.execPath, ["--input-type=module", "-e", script, root], {
      cwd: packageRoot,
      encoding: "utf8",
      timeout: 120_000,
    });
    expect(out.status, out.stderr).toBe(0);
    const { before, during, after } = JSON.parse(out.stdout.trim().split("\n").pop());
    expect(during.fds).toBe(before.fds + 4);
    expect(after.fds).toBe(before.fds);
    expect(during.threads).toBe(before.threads); // no thread per watcher
    expect(after.threads).toBe(before.threads);
  });

  it("a process that never closes its watcher still exits", () => {
    const root = path.join(work, "exit");
    writeSubtree(createRandom(SEED), root, 2);
    const script = `
      import { createSnapshotWatcher } from "@paperclipai/adapter-utils-native";
      const watcher = createSnapshotWatcher(process.argv[1]);
      await watcher.capture();
      await watcher.capture();
      console.log("captured", watcher.stats().watches > 0);
    `;
    const out = spawnSync(process.execPath, ["--input-type=module", "-e", script, root], {
      cwd: packageRoot,
      encoding: "utf8",
      timeout: 120_000,
    });
    expect(out.error).toBeUndefined();
    expect(out.status, out.stderr).toBe(0);
    expect(out.stdout.trim()).toBe(`captured ${linux}`);
  });

  it("PAPERCLIP_NATIVE_WATCH_SNAPSHOTS=1 serves upstream's captureDirectorySnapshot from a capped pool through the --import hook", () => {
    const roots = ["one", "two", "three"].map((n) => path.join(work, `pool-${n}`));
    roots.forEach((r, i) => writeSubtree(createRandom(SEED + i), r, 2));
    const script = `
      import { writeFileSync } from "node:fs";
      import path from "node:path";
      import { captureDirectorySnapshot, directorySnapshotSha256 } from "@paperclipai/adapter-utils/workspace-restore-merge";
      import { snapshotWatchPool } from "@paperclipai/adapter-utils-native";
      const roots = JSON.parse(process.argv[1]);
      const exclude = ["node_modules"];
      const digests = [];
      for (const root of roots) digests.push(directorySnapshotSha256(await captureDirectorySnapshot(root, { exclude })));
      writeFileSync(path.join(roots[2], "added"), "added");
      digests.push(directorySnapshotSha256(await captureDirectorySnapshot(roots[2], { exclude })));
      console.log(JSON.stringify({ digests, pool: snapshotWatchPool() }));
    `;
    const run = (env) => {
      const out = spawnSync(
        process.execPath,
        [
          "--import",
          "@paperclipai/adapter-utils-native/register",
          "--input-type=module",
          "-e",
          script,
          JSON.stringify(roots),
        ],
        {
          cwd: packageRoot,
          encoding: "utf8",
          timeout: 120_000,
          env: { ...process.env, ...env },
        },
      );
      expect(out.status, out.stderr).toBe(0);
      return JSON.parse(out.stdout.trim().split("\n").pop());
    };
    const watched = run({ PAPERCLIP_NATIVE_WATCH_SNAPSHOTS: "1", PAPERCLIP_NATIVE_WATCH_MAX_ROOTS: "2" });
    rmSync(path.join(roots[2], "added"));
    const plain = run({ PAPERCLIP_NATIVE_WATCH_SNAPSHOTS: "0" });
    expect(watched.digests).toEqual(plain.digests);
    expect(plain.pool).toEqual([]);
    // The cap of two closed the first root's watcher; the third root was captured twice.
    expect(watched.pool.map((s) => s.root)).toEqual([roots[1], roots[2]]);
    expect(watched.pool[1]).toMatchObject({ captures: 2, fullWalks: 1 });
  });
});

describe(`a capture the watcher accepted always resolves (DIFF_SEED=${SEED})`, () => {
  it("capture() then close() at once: the capture resolves, equal to a cold capture; later captures reject", async () => {
    const root = path.join(work, "close-queued");
    writeSubtree(createRandom(SEED ^ 11), root, 2);
    const watcher = createSnapshotWatcher(root);
    const first = watcher.capture();
    const second = watcher.capture();
    watcher.close();
    expect(watcher.stats()).toMatchObject({ closed: true });
    await expectSameAsCold(await first, root, [], "queued before close (1)");
    await expectSameAsCold(await second, root, [], "queued before close (2)");
    await expect(watcher.capture()).rejects.toMatchObject({ code: "ERR_PAPERCLIP_NATIVE_WATCHER_CLOSED" });
    expect(watcher.stats()).toMatchObject({ closed: true, watches: 0, watching: false });
  });

  it("more roots than the pool's cap, captured concurrently: none rejects (an evicted watcher finishes what it accepted)", async () => {
    const { closeSnapshotWatchPool } = await import("@paperclipai/adapter-utils-native");
    const saved = process.env.PAPERCLIP_NATIVE_WATCH_MAX_ROOTS;
    process.env.PAPERCLIP_NATIVE_WATCH_MAX_ROOTS = "2";
    const roots = [0, 1, 2].map((i) => path.join(work, `evict-${i}`));
    roots.forEach((root, i) => writeSubtree(createRandom(SEED + 100 + i), root, 2));
    try {
      const settled = await Promise.allSettled(
        roots.map((root) => ours.captureDirectorySnapshot(root, { watch: true })),
      );
      expect(settled.map((s) => (s.status === "fulfilled" ? "ok" : s.reason?.code))).toEqual(["ok", "ok", "ok"]);
      for (const [i, s] of settled.entries()) await expectSameAsCold(s.value, roots[i], [], `root ${i}`);
    } finally {
      closeSnapshotWatchPool();
      if (saved === undefined) delete process.env.PAPERCLIP_NATIVE_WATCH_MAX_ROOTS;
      else process.env.PAPERCLIP_NATIVE_WATCH_MAX_ROOTS = saved;
    }
  });

  it("stress: more roots than the cap, captures in random order with random closes, every capture equals a cold one", async () => {
    const { closeSnapshotWatchPool, snapshotWatchPool } = await import("@paperclipai/adapter-utils-native");
    const rng = createRandom(SEED ^ 0x57e55);
    const saved = process.env.PAPERCLIP_NATIVE_WATCH_MAX_ROOTS;
    process.env.PAPERCLIP_NATIVE_WATCH_MAX_ROOTS = "3";
    const roots = Array.from({ length: 7 }, (_, i) => path.join(work, `stress-${i}`));
    roots.forEach((root, i) => writeSubtree(createRandom(SEED + 200 + i), root, 2));
    const outside = path.join(work, "stress-outside");
    mkdirSync(outside, { recursive: true });
    const direct = roots.map((root) => createSnapshotWatcher(root));
    try {
      for (let round = 0; round < 6; round += 1) {
        for (let i = 0; i < 4; i += 1) randomChange(rng, rng.pick(roots), outside, []);
        const pending = [];
        for (let op = 0; op < 40; op += 1) {
          const i = rng.int(roots.length);
          const what = rng.pick(["pool", "pool", "direct", "closeDirect", "closePool"]);
          if (what === "pool")
            pending.push([i, `pool ${op}`, ours.captureDirectorySnapshot(roots[i], { watch: true })]);
          else if (what === "direct") pending.push([i, `direct ${op}`, direct[i].capture()]);
          else if (what === "closeDirect") {
            direct[i].close();
            direct[i] = createSnapshotWatcher(roots[i]);
          } else closeSnapshotWatchPool();
          if (rng.chance(0.3)) await new Promise((resolve) => setImmediate(resolve));
        }
        const settled = await Promise.allSettled(pending.map(([, , p]) => p));
        const where = `round ${round}`;
        expect(
          settled.filter((s) => s.status === "rejected").map((s) => `${s.reason?.code}: ${s.reason?.message}`),
          where,
        ).toEqual([]);
        for (const [k, [i, label]] of pending.entries()) {
          const cold = await ours.captureDirectorySnapshot(roots[i], {});
          expect(ordered(settled[k].value), `${where}, ${label}, root ${i}`).toEqual(ordered(cold));
        }
        expect(snapshotWatchPool().length, where).toBeLessThanOrEqual(3);
      }
    } finally {
      direct.forEach((watcher) => watcher.close());
      closeSnapshotWatchPool();
      if (saved === undefined) delete process.env.PAPERCLIP_NATIVE_WATCH_MAX_ROOTS;
      else process.env.PAPERCLIP_NATIVE_WATCH_MAX_ROOTS = saved;
    }
  }, 120_000);
});

describe(`mounts under watched roots (DIFF_SEED=${SEED})`, () => {
  // Mounting needs root and a private mount namespace (`unshare -m`): the scenario runs in a
  // child process there. Elsewhere the test is skipped, and says why.
  const isRoot = process.getuid?.() === 0;
  const probe =
    linux && isRoot ? spawnSync("unshare", ["-m", "--propagation", "private", "true"], { encoding: "utf8" }) : null;
  const why = !linux
    ? "not Linux"
    : !isRoot
      ? "mounting needs root"
      : probe.error
        ? `unshare: ${probe.error.message}`
        : probe.status !== 0
          ? `unshare -m failed: ${probe.stderr.trim()}`
          : null;
  if (why) console.log(`skipped the mount scenarios: ${why}`);

  it.skipIf(why !== null)(
    "tmpfs and bind mounts, writes through a bind's source, unmounts, between concurrent pooled and direct captures with random closes: every capture equals a cold one",
    () => {
      const base = path.join(work, "mounts");
      mkdirSync(base, { recursive: true });
      const script = `
      import { execFileSync } from "node:child_process";
      import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
      import path from "node:path";
      import { captureDirectorySnapshot } from "@paperclipai/adapter-utils-native/workspace-restore-merge";
      import { closeSnapshotWatchPool, createSnapshotWatcher, snapshotWatchPool } from "@paperclipai/adapter-utils-native";
      const [base, seedText] = process.argv.slice(1);
      let seed = Number(seedText) >>> 0;
      const rand = (n) => { seed = (Math.imul(seed ^ (seed >>> 15), 2246822519) + 0x9e3779b9) >>> 0; return seed % n; };
      const sh = (cmd, ...args) => execFileSync(cmd, args, { stdio: "pipe" });
      const roots = [0, 1, 2].map((i) => path.join(base, "root-" + i));
      const outside = path.join(base, "outside");
      for (const root of roots) {
        for (const sub of ["a", "b", "c"]) {
          mkdirSync(path.join(root, sub, "deep"), { recursive: true });
          writeFileSync(path.join(root, sub, "deep", "f.txt"), root + sub);
        }
        writeFileSync(path.join(root, "file.txt"), "file of " + root);
      }
      mkdirSync(path.join(outside, "src", "nested"), { recursive: true });
      writeFileSync(path.join(outside, "src", "nested", "s.txt"), "source");
      writeFileSync(path.join(outside, "single"), "single");
      const mounted = [];
      const ops = [];
      const mountOp = () => {
        const root = roots[rand(roots.length)];
        const kind = ["tmpfs", "bind-outside", "bind-inside", "bind-file", "write-source", "umount"][rand(6)];
        const target = path.join(root, ["a", "b", "c"][rand(3)]);
        if (kind === "umount") {
          if (mounted.length === 0) return "noop";
          const at = mounted.splice(rand(mounted.length), 1)[0];
          sh("umount", at);
          return "umount " + at;
        }
        if (kind === "write-source") {
          writeFileSync(path.join(outside, "src", "nested", "w" + rand(5) + ".txt"), "through the source " + rand(1000));
          writeFileSync(path.join(outside, "single"), "single, changed " + rand(1000));
          return kind;
        }
        if (kind === "tmpfs") {
          sh("mount", "-t", "tmpfs", "tmpfs", target);
          writeFileSync(path.join(target, "on-tmpfs.txt"), "tmpfs " + rand(1000));
        } else if (kind === "bind-outside") sh("mount", "--bind", path.join(outside, "src"), target);
        else if (kind === "bind-inside") sh("mount", "--bind", path.join(root, ["a", "b", "c"][rand(3)]), target);
        else sh("mount", "--bind", path.join(outside, "single"), path.join(root, "file.txt"));
        mounted.push(kind === "bind-file" ? path.join(root, "file.txt") : target);
        return kind + " " + target;
      };
      process.env.PAPERCLIP_NATIVE_WATCH_MAX_ROOTS = "2";
      const direct = roots.map((root) => createSnapshotWatcher(root));
      // One watcher per root that is never closed: it sees every mount change between rounds.
      const witnesses = roots.map((root) => createSnapshotWatcher(root));
      const ordered = (s) => JSON.stringify([...s.entries]);
      const failures = [];
      const seen = { mountChanges: 0, mountedFiles: 0 };
      for (let round = 0; round < 12; round += 1) {
        for (let k = 0, n = 1 + rand(3); k < n; k += 1) ops.push(mountOp());
        const pending = [];
        for (let op = 0; op < 12; op += 1) {
          const i = rand(roots.length);
          const what = ["pool", "pool", "direct", "closeDirect", "closePool"][rand(5)];
          if (what === "pool") pending.push([i, captureDirectorySnapshot(roots[i], { watch: true })]);
          else if (what === "direct") pending.push([i, direct[i].capture()]);
          else if (what === "closeDirect") {
            const stats = direct[i].stats();
            seen.mountChanges += stats.fallbacks.mountChanges;
            seen.mountedFiles += stats.fallbacks.mountedFiles;
            direct[i].close();
            direct[i] = createSnapshotWatcher(roots[i]);
          } else closeSnapshotWatchPool();
          if (rand(3) === 0) await new Promise((resolve) => setImmediate(resolve));
        }
        for (const [i, witness] of witnesses.entries()) pending.push([i, witness.capture()]);
        const settled = await Promise.allSettled(pending.map(([, p]) => p));
        for (const [k, [i]] of pending.entries()) {
          const cold = await captureDirectorySnapshot(roots[i], {});
          if (settled[k].status === "rejected") failures.push({ round, root: i, rejected: String(settled[k].reason?.code) });
          else if (ordered(settled[k].value) !== ordered(cold)) failures.push({ round, root: i, ops: ops.slice(-4) });
        }
      }
      for (const w of [...direct, ...witnesses]) {
        seen.mountChanges += w.stats().fallbacks.mountChanges;
        seen.mountedFiles += w.stats().fallbacks.mountedFiles;
      }
      for (const s of snapshotWatchPool()) seen.mountChanges += s.fallbacks.mountChanges;
      [...direct, ...witnesses].forEach((w) => w.close());
      closeSnapshotWatchPool();
      while (mounted.length > 0) sh("umount", mounted.pop());
      console.log(JSON.stringify({ failures, ops, seen }));
    `;
      const out = spawnSync(
        "unshare",
        ["-m", "--propagation", "private", process.execPath, "--input-type=module", "-e", script, base, String(SEED)],
        {
          cwd: packageRoot,
          encoding: "utf8",
          timeout: 240_000,
        },
      );
      expect(out.status, out.stderr).toBe(0);
      const { failures, ops, seen } = JSON.parse(out.stdout.trim().split("\n").pop());
      expect(failures, JSON.stringify(ops)).toEqual([]);
      expect(ops.filter((op) => op !== "noop").length).toBeGreaterThan(10);
      expect(seen.mountChanges, "mount changes were seen and counted").toBeGreaterThan(0);
    },
    300_000,
  );
});
