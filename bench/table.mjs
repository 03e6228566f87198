// Writes the benchmark tables of docs/benchmarks.md: one table per machine kind (platform,
// cores, CPU, the file system the corpora live on), each from a saved results file in
// bench/results/, between the `<!-- bench-tables:start -->` and `<!-- bench-tables:end -->`
// markers; and the README's "Speed" lines (bench/speed.mjs: one per hot path, its speed-up
// per machine kind) between `<!-- speed:start -->` and `<!-- speed:end -->`. Neither is ever
// edited by hand: run the benchmarks through this script.
//
// Usage:
//   node bench/table.mjs -- <bench/run.mjs arguments>   run bench/run.mjs with them, save its
//                                                       summary rows as bench/results/<kind>.json
//                                                       (replacing that kind's), rewrite the tables
//   node bench/table.mjs                                rewrite the tables and the README lines
//                                                       from bench/results/
//   node bench/table.mjs --check                        exit 1 when the tables or the README
//                                                       lines differ from what bench/results/
//                                                       gives (nothing written)
// Options: --doc FILE (default docs/benchmarks.md), --readme FILE (default README.md),
// --results DIR (default bench/results).
// Example: node bench/table.mjs -- --runs 3 --dir /dev/shm/pc-bench
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { markdownTable, withBlock } from "../scripts/lib/shared.mjs";
import { speedLines } from "./speed.mjs";
import { fsType, summaryColumns } from "./summary.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.join(here, "..");
const argv = process.argv.slice(2);
const split = argv.indexOf("--");
const own = split >= 0 ? argv.slice(0, split) : argv;
const runArgs = split >= 0 ? argv.slice(split + 1) : null;
const option = (name, fallback) => (own.includes(name) ? own[own.indexOf(name) + 1] : fallback);
const docFile = path.resolve(option("--doc", path.join(repo, "docs", "benchmarks.md")));
const readmeFile = path.resolve(option("--readme", path.join(repo, "README.md")));
const resultsDir = path.resolve(option("--results", path.join(here, "results")));

/** The machine kind the run measured: what the table's heading names and its file is called. */
function machineKind(corporaDir) {
  const type = fsType(corporaDir);
  const fs = type === "tmpfs" ? "tmpfs" : type ? `disk (${type})` : "an unknown file system";
  const cores = os.cpus().length;
  const cpu = os.cpus()[0]?.model?.trim() || "unknown CPU";
  return {
    kind: `${process.platform} ${process.arch}, ${cores} cores (${cpu}), corpora on ${fs}`,
    slug: `${process.platform}-${process.arch}-${cores}cores-${type === "tmpfs" ? "tmpfs" : "disk"}`,
  };
}

/** Runs bench/run.mjs with `args` (its output shown); returns { status, rows }. */
function runBenchmarks(args) {
  const tmp = mkdtempSync(path.join(os.tmpdir(), "pc-bench-table-"));
  const saved = path.join(tmp, "rows.json");
  try {
    const { status } = spawnSync(process.execPath, [path.join(here, "run.mjs"), ...args, "--save", saved], {
      stdio: "inherit",
    });
    return { status, rows: existsSync(saved) ? JSON.parse(readFileSync(saved, "utf8")).rows : [] };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

const quote = (arg) => (/^[\w./,=:@%+-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", "'\\''")}'`);

/** One saved result as a markdown section: heading, the command that made it, the table. */
function renderResult(result) {
  const columns = result.rows.map(summaryColumns);
  const names = Object.keys(summaryColumns({ path: "", ours: 0 }));
  return [
    `### ${result.machine.kind}`,
    "",
    `Made by \`${result.command}\` (Node ${result.node}, upstream ${result.upstream}); medians in ms.`,
    "",
    ...markdownTable(names, columns),
  ].join("\n");
}

/** The saved results, one per machine kind, in the order of their file names. */
function savedResults() {
  const files = existsSync(resultsDir)
    ? readdirSync(resultsDir)
        .filter((f) => f.endsWith(".json"))
        .sort()
    : [];
  return files.map((f) => JSON.parse(readFileSync(path.join(resultsDir, f), "utf8")));
}

/** The generated blocks: in which file, between which markers, what. */
function blocks() {
  const results = savedResults();
  const written = `<!-- written by \`node bench/table.mjs\` from ${path.relative(repo, resultsDir)}/*.json: do not edit by hand -->`;
  const none = ["No saved results yet."];
  const tables = results.length > 0 ? results.map(renderResult).join("\n\n").split("\n") : none;
  const link = `${path.relative(path.dirname(readmeFile), docFile)}#current-results`;
  const speed = speedLines(results, link);
  return [
    {
      file: docFile,
      start: "<!-- bench-tables:start -->",
      end: "<!-- bench-tables:end -->",
      lines: [written, "", ...tables],
    },
    {
      file: readmeFile,
      start: "<!-- speed:start -->",
      end: "<!-- speed:end -->",
      lines: [written, ...(speed.length > 0 ? speed : none)],
    },
  ];
}

if (runArgs) {
  const { status, rows } = runBenchmarks(runArgs);
  if (status !== 0 || rows.length === 0) {
    console.error(
      `bench/table.mjs: bench/run.mjs ${status !== 0 ? `exited with ${status}` : "printed no summary rows"}; nothing saved`,
    );
    process.exit(1);
  }
  const dirIndex = runArgs.indexOf("--dir");
  const corporaDir = path.resolve(
    dirIndex >= 0 ? runArgs[dirIndex + 1] : (process.env.PC_BENCH_DIR ?? path.join(repo, ".bench")),
  );
  const machine = machineKind(corporaDir);
  const upstream = JSON.parse(
    readFileSync(path.join(repo, "node_modules", "@paperclipai", "adapter-utils", "package.json"), "utf8"),
  ).version;
  const result = {
    command: ["node bench/table.mjs --", ...runArgs.map(quote)].join(" "),
    machine,
    node: process.version,
    upstream,
    rows,
  };
  mkdirSync(resultsDir, { recursive: true });
  const file = path.join(resultsDir, `${machine.slug}.json`);
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`\nsaved ${path.relative(process.cwd(), file)}`);
}

const stale = blocks()
  .map(withBlock)
  .filter(({ doc, updated }) => doc !== updated);
const names = stale.map(({ file }) => path.relative(process.cwd(), file)).join(" and ");
if (own.includes("--check")) {
  if (stale.length > 0) {
    console.error(
      `${names}: the benchmark tables or speed lines differ from ${path.relative(process.cwd(), resultsDir)}/; run node bench/table.mjs`,
    );
    process.exit(1);
  }
  console.log("benchmark tables and speed lines: up to date");
} else {
  for (const { file, updated } of stale) writeFileSync(file, updated);
  console.log(stale.length > 0 ? `rewrote ${names}` : "benchmark tables and speed lines: already up to date");
}
