// Watched re-snapshot benchmark: on a copy of a corpus (bench/corpus.mjs; a unless named), a cold native
// captureDirectorySnapshot against a watcher's capture() after 100 changed files, runs
// interleaved (change 100 files → watched capture → cold capture, whose digests must be
// equal), medians, on tmpfs (/dev/shm) and on disk; plus the watcher's memory per 100 000
// entries (a fresh process, RSS and JS heap after a forced GC). Ends with one JSON line
// `{"rows":[…]}` for the summary runner.
// Usage: node bench/snapshot-watch.mjs [a|c] [--runs N] [--fs tmpfs,disk] [--keep]
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { corpus } from "./corpus.mjs";
import { median } from "./summary.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const name = args.find((a, i) => !a.startsWith("--") && !["--runs", "--fs"].includes(args[i - 1])) ?? "a";
const runs = Number(option("--runs", "5"));
const places = option("--fs", "tmpfs,disk").split(",");
const CHANGED = 100;

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 4294967296;
  };
}

function listFiles(root) {
  const out = [];
  const stack = [""];
  while (stack.length > 0) {
    const rel = stack.pop();
    for (const entry of readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const child = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) stack.push(child);
      else if (entry.isFile()) out.push(child);
    }
  }
  return out;
}

async function measurePlace(place, source) {
  const parent = place === "tmpfs" ? "/dev/shm" : os.tmpdir();
  const dir = path.join(parent, `pc-bench-watch-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  execFileSync("cp", ["-a", source, dir]);
  try {
    const ours = await import("@paperclipai/adapter-utils-native/workspace-restore-merge");
    const { createSnapshotWatcher } = await import("@paperclipai/adapter-utils-native");
    const files = listFiles(dir);
    const next = rng(42);
    const watcher = createSnapshotWatcher(dir);
    let t = process.hrtime.bigint();
    await watcher.capture();
    const firstMs = Number(process.hrtime.bigint() - t) / 1e6;
    await ours.captureDirectorySnapshot(dir); // warm
    const cold = [];
    const watched = [];
    for (let run = 0; run < runs; run += 1) {
      for (let k = 0; k < CHANGED; k += 1) {
        writeFileSync(path.join(dir, files[Math.floor(next() * files.length)]), `changed ${run} ${k} ${next()}\n`);
      }
      t = process.hrtime.bigint();
      const w = await watcher.capture();
      watched.push(Number(process.hrtime.bigint() - t) / 1e6);
      t = process.hrtime.bigint();
      const c = await ours.captureDirectorySnapshot(dir);
      cold.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (ours.directorySnapshotSha256(w) !== ours.directorySnapshotSha256(c))
        throw new Error(`${place} run ${run}: watched digest differs from cold`);
    }
    const stats = watcher.stats();
    watcher.close();
    return {
      place,
      entries: stats.entries,
      firstMs,
      coldMs: median(cold),
      watchedMs: median(watched),
      cold,
      watched,
      stats,
    };
  } finally {
    if (!args.includes("--keep")) rmSync(dir, { recursive: true, force: true });
  }
}

/** The watcher's memory on `dir`, in a fresh process (RSS and heap deltas after GC). */
function measureMemory(dir) {
  const script = `
    import { createSnapshotWatcher } from "@paperclipai/adapter-utils-native";
    const gc = () => { globalThis.gc(); globalThis.gc(); };
    const { captureDirectorySnapshot } = await import("@paperclipai/adapter-utils-native/workspace-restore-merge");
    await captureDirectorySnapshot(${JSON.stringify(dir)}, { exclude: ["*"] }); // load the binary, warm the pool
    gc();
    const before = process.memoryUsage();
    const watcher = createSnapshotWatcher(${JSON.stringify(dir)});
    let snapshot = await watcher.capture();
    snapshot = null;
    gc();
    await new Promise((r) => setTimeout(r, 200));
    gc();
    const after = process.memoryUsage();
    const stats = watcher.stats();
    console.log(JSON.stringify({ entries: stats.entries, directories: stats.directories, watches: stats.watches,
      rssMb: (after.rss - before.rss) / 2 ** 20, heapMb: (after.heapUsed - before.heapUsed) / 2 ** 20 }));
  `;
  const out = spawnSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], {
    cwd: path.join(here, ".."),
    encoding: "utf8",
  });
  if (out.status !== 0) throw new Error(out.stderr);
  return JSON.parse(out.stdout.trim().split("\n").pop());
}

const { dir: source, describe } = corpus(name);
console.error(
  `corpus ${name}: ${describe}; ${runs} interleaved runs per file system; ${CHANGED} files changed before each watched capture`,
);
const results = [];
for (const place of places) {
  if (place === "tmpfs" && !existsSync("/dev/shm")) continue;
  const r = await measurePlace(place, source);
  results.push(r);
  console.error(
    `${place}: entries ${r.entries}, first capture ${r.firstMs.toFixed(0)} ms, cold ${r.coldMs.toFixed(0)} ms (${r.cold.map((x) => x.toFixed(0)).join(" ")}), watched ${r.watchedMs.toFixed(1)} ms (${r.watched.map((x) => x.toFixed(1)).join(" ")}), cold/watched ${(r.coldMs / r.watchedMs).toFixed(1)}x; dirs re-read ${r.stats.dirsReread}, files hashed ${r.stats.filesHashed}, racy re-hashes ${r.stats.fallbacks.racyWindow}`,
  );
}
const memory = measureMemory(source);
console.error(
  `memory: ${memory.entries} entries, ${memory.directories} directories, ${memory.watches} watches: RSS +${memory.rssMb.toFixed(1)} MB, JS heap +${memory.heapMb.toFixed(1)} MB → per 100 000 entries RSS ${((memory.rssMb * 1e5) / memory.entries).toFixed(1)} MB, heap ${((memory.heapMb * 1e5) / memory.entries).toFixed(1)} MB`,
);
console.table(
  results.map((r) => ({
    "file system": r.place,
    entries: r.entries,
    "cold native ms": r.coldMs.toFixed(0),
    "watched (100 changed) ms": r.watchedMs.toFixed(1),
    "cold / watched": `${(r.coldMs / r.watchedMs).toFixed(1)}x`,
    "first capture ms": r.firstMs.toFixed(0),
  })),
);
const main = results.find((r) => r.place === "tmpfs") ?? results[0];
console.log(
  JSON.stringify({
    rows: results.map((r) => ({
      path: `watched re-snapshot (100 changed${r === main ? "" : `, ${r.place}`}), corpus ${name}`,
      hotPath: `Watched re-snapshot (${CHANGED} changed)`,
      case: `corpus ${name}${r === main ? "" : `, ${r.place}`}`,
      ours: Number(r.watchedMs.toFixed(1)),
      upstream: null,
      floor: null,
      baseline: "a cold native capture",
      baselineMs: Number(r.coldMs.toFixed(0)),
    })),
    memory,
  }),
);
