// Deep-archive benchmark: extracting an archive 3 000 levels deep (1-byte directory names, a
// file every 100 levels, made by GNU tar: ~13 MB, mostly long-name records) with our
// extractTarballToDirectory, against bsdtar (GNU tar cannot extract past PATH_MAX, so
// upstream's `tar -x` fails on it). Runs are interleaved, on tmpfs (/dev/shm) and on disk
// (os.tmpdir()), or where `--fs` says; prints the median wall time and MB/s of each, then the
// summary rows (bench/summary.mjs: ours against bsdtar; both in this process's time, no RSS).
// Usage: node bench/deep-tar.mjs [--runs N] [--levels N] [--fs tmpfs,disk]
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { extractTarballToDirectory } from "@paperclipai/adapter-utils-native";
import { emitRows, median } from "./summary.mjs";

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const runs = option("--runs", 3);
const levels = option("--levels", 3000);
const places = (args.includes("--fs") ? args[args.indexOf("--fs") + 1] : "tmpfs,disk").split(",");
const PLACES = { tmpfs: "/dev/shm", disk: os.tmpdir() };

/** A tree `levels` deep built by cd-ing down (path-based calls fail past PATH_MAX), archived by GNU tar. */
function deepArchive(base) {
  const tree = path.join(base, "tree");
  mkdirSync(tree);
  // 100 levels per `mkdir -p` and `cd` (bash's cd slows down badly past PATH_MAX one level at a time).
  const chunk = "d/".repeat(100);
  execFileSync("bash", [
    "-c",
    'cd "$1" && for ((i = 0; i < $2; i += 100)); do echo "level $i" > f; mkdir -p "$3" && cd "$3" || exit 1; done',
    "_",
    tree,
    String(levels),
    chunk,
  ]);
  const archive = path.join(base, "deep.tar");
  execFileSync("tar", ["-cf", archive, "-C", tree, "."]);
  return archive;
}

const rows = [];
const summary = [];
for (const label of places) {
  const parent = PLACES[label];
  if (!parent) throw new Error(`--fs: tmpfs or disk, not ${label}`);
  const base = mkdtempSync(path.join(parent, "pc-bench-deep-"));
  try {
    const archive = deepArchive(base);
    const mb = statSync(archive).size / 1e6;
    const times = { ours: [], bsdtar: [] };
    for (let run = 0; run < runs; run += 1) {
      for (const kind of ["ours", "bsdtar"]) {
        const dest = path.join(base, `out-${kind}-${run}`);
        mkdirSync(dest);
        const started = process.hrtime.bigint();
        if (kind === "ours") await extractTarballToDirectory({ source: archive, localDir: dest });
        else {
          const out = spawnSync("bsdtar", ["-xf", archive, "-C", dest]);
          if (out.status !== 0) throw new Error(`bsdtar: ${out.stderr}`);
        }
        times[kind].push(Number(process.hrtime.bigint() - started) / 1e6);
        execFileSync("rm", ["-rf", dest]);
      }
    }
    for (const kind of ["ours", "bsdtar"]) {
      const ms = median(times[kind]);
      rows.push({
        where: label,
        tool: kind,
        levels,
        archiveMb: mb.toFixed(1),
        medianMs: ms.toFixed(0),
        mbPerS: (mb / (ms / 1000)).toFixed(1),
      });
    }
    const where = places.length > 1 ? `, ${label}` : "";
    summary.push({
      path: `deep archive extract (${levels} levels, ${mb.toFixed(0)} MB${where})`,
      hotPath: "Deep archive extract",
      case: `${levels} levels${where}`,
      ours: median(times.ours),
      upstream: null,
      floor: median(times.bsdtar),
      floorIs: "bsdtar -xf",
      floorTool: true,
    });
  } finally {
    execFileSync("rm", ["-rf", base]);
  }
}
console.table(rows);
emitRows(summary);
