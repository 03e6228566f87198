// Ignore-resolution benchmark: our readReferencedSourceGitIgnoredPaths (in-process) vs
// upstream's (two hardened git processes), on a generated repository, the demo's workspace
// and a real checkout, in one run, runs interleaved. Asserts identical output, prints medians
// and ratios. The floor: our walker alone over the part of the tree the answer cannot skip
// (everything but .git and the ignored paths it reports, which a scan need not enter).
// "first call": resolveReferencedSourceIgnore once in a fresh process (both modules
// imported, nothing else done: what a host's first resolution pays, ICU's collation data
// included), ours and upstream's alternately, medians.
//
// Usage: node bench/ignore.mjs [--runs N] [--checkout DIR]
//   generated: 5 000 tracked files, 100 000 ignored files (a node_modules tree, per-package
//              dist/ trees, nested .gitignore files ignoring logs, with a negation)
//   demo:      the workspace of `paperclip-sync demo` (4 000 sources, 8 000 ignored files)
//   checkout:  DIR (default: this repository)
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as upstream from "@paperclipai/adapter-utils/git-workspace-sync";
import * as upstreamSandbox from "@paperclipai/adapter-utils/sandbox-managed-runtime";
import * as ours from "@paperclipai/adapter-utils-native/git-workspace-sync";
import * as oursSandbox from "@paperclipai/adapter-utils-native/sandbox-managed-runtime";
import { createDemoWorkspace } from "../cli/commands/demo.js";
import { BENCH_DIR } from "./corpus.mjs";
import { emitRows, walkFloor } from "./summary.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);

// `--first-call <ours|upstream> <dir>`: one resolution in this fresh process, its ms printed.
if (args[0] === "--first-call") {
  const resolve = (args[1] === "ours" ? oursSandbox : upstreamSandbox).resolveReferencedSourceIgnore;
  const start = process.hrtime.bigint();
  await resolve(args[2]);
  console.log(Number(process.hrtime.bigint() - start) / 1e6);
  process.exit(0);
}

const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const runs = Number(option("--runs", 7));
const checkout = path.resolve(option("--checkout", path.join(here, "..")));
const checkoutLabel =
  checkout === path.resolve(here, "..") ? "this repository's checkout" : `checkout ${path.basename(checkout)}`;

const TRACKED = 5_000;
const IGNORED = 100_000;

function git(dir, ...argv) {
  return execFileSync(
    "git",
    [
      "-C",
      dir,
      "-c",
      "user.name=bench",
      "-c",
      "user.email=bench@example.invalid",
      "-c",
      "init.defaultBranch=main",
      ...argv,
    ],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" },
    },
  );
}

/** The generated repository (written once under .bench/, reused while complete). */
function generatedRepository() {
  const root = path.join(BENCH_DIR, "ignore-repo");
  const done = path.join(BENCH_DIR, "ignore-repo.done");
  if (existsSync(done)) return root;
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  git(root, "init", "-q");
  writeFileSync(path.join(root, ".gitignore"), "node_modules/\ndist/\n*.log\n!keep.log\n.env\n");
  let ignored = 0;
  const write = (rel, body = "") => {
    mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    writeFileSync(path.join(root, rel), body);
  };
  // 5 000 tracked sources in 25 packages × 25 modules × 8 files; every 3rd module has logs
  // (ignored one by one), a keep.log (re-included by the negation) and a nested .gitignore.
  for (let p = 0; p < 25; p += 1) {
    for (let m = 0; m < 25; m += 1) {
      const dir = `packages/pkg${p}/src/mod${m}`;
      for (let f = 0; f < 8; f += 1) write(`${dir}/file${f}.ts`, `export const v${f} = ${p * m};\n`);
      if (m % 3 === 0) {
        write(`${dir}/.gitignore`, "*.tmp\n!important.tmp\n/generated/\n");
        for (let l = 0; l < 4; l += 1, ignored += 1) write(`${dir}/debug${l}.log`);
        write(`${dir}/keep.log`);
        for (let t = 0; t < 2; t += 1, ignored += 1) write(`${dir}/scratch${t}.tmp`);
        write(`${dir}/important.tmp`);
        for (let g = 0; g < 4; g += 1, ignored += 1) write(`${dir}/generated/out${g}.js`);
      }
    }
    for (let f = 0; f < 200; f += 1, ignored += 1) write(`packages/pkg${p}/dist/chunk${f}.js`);
  }
  git(root, "add", "-A");
  git(root, "commit", "-qm", "sources");
  // The rest of the ignored files: a node_modules tree (packages with nested node_modules).
  let pkg = 0;
  while (ignored < IGNORED) {
    const base = pkg % 5 === 4 ? `node_modules/pkg${pkg - 1}/node_modules/dep${pkg}` : `node_modules/pkg${pkg}`;
    for (let f = 0; f < 40 && ignored < IGNORED; f += 1, ignored += 1) write(`${base}/lib/f${f}.js`);
    pkg += 1;
  }
  write(".env", "SECRET=1\n");
  writeFileSync(done, `${TRACKED} tracked, ${ignored} ignored\n`);
  return root;
}

/** The demo's workspace (written once under .bench/, reused while complete). */
function demoWorkspace() {
  const root = path.join(BENCH_DIR, "ignore-demo");
  const done = path.join(BENCH_DIR, "ignore-demo.done");
  if (existsSync(done)) return root;
  rmSync(root, { recursive: true, force: true });
  createDemoWorkspace(root, 4000);
  writeFileSync(done, "the demo's workspace, 4000 source files\n");
  return root;
}

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** First-call medians in fresh processes, ours and upstream's alternately: { ours, upstream }. */
function firstCalls(dir) {
  const once = (which) => {
    const run = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--first-call", which, dir], {
      encoding: "utf8",
      env: { ...process.env, NODE_OPTIONS: "" },
    });
    if (run.status !== 0) throw new Error(`first call (${which}) failed: ${run.stderr}`);
    return Number(run.stdout.trim());
  };
  const ours = [];
  const theirs = [];
  for (let i = 0; i < runs; i += 1) {
    ours.push(once("ours"));
    theirs.push(once("upstream"));
  }
  return { ours: median(ours), upstream: median(theirs) };
}

async function time(fn) {
  const start = process.hrtime.bigint();
  const value = await fn();
  return { ms: Number(process.hrtime.bigint() - start) / 1e6, value };
}

async function compare(label, caseLabel, dir) {
  const mine = [];
  const theirs = [];
  let expected;
  for (let i = 0; i < runs + 1; i += 1) {
    const a = await time(() => ours.readReferencedSourceGitIgnoredPaths(dir));
    const b = await time(() => upstream.readReferencedSourceGitIgnoredPaths(dir));
    if (!isDeepStrictEqual(a.value, b.value)) {
      throw new Error(
        `${label}: outputs differ\nours: ${JSON.stringify(a.value).slice(0, 500)}\nupstream: ${JSON.stringify(b.value).slice(0, 500)}`,
      );
    }
    expected = b.value;
    if (i === 0) continue; // warm-up
    mine.push(a.ms);
    theirs.push(b.ms);
  }
  const sub = path.join(dir, "packages", "pkg3");
  const resolveDir = existsSync(sub) ? sub : dir;
  const r1 = await time(() => oursSandbox.resolveReferencedSourceIgnore(resolveDir));
  const r2 = await time(() => upstreamSandbox.resolveReferencedSourceIgnore(resolveDir));
  if (!isDeepStrictEqual(r1.value, r2.value)) throw new Error(`${label}: resolutions differ`);
  // Eight projects at once (ours runs four at a time, upstream spawns sixteen git processes).
  const c1 = await time(() =>
    Promise.all(Array.from({ length: 8 }, () => ours.readReferencedSourceGitIgnoredPaths(dir))),
  );
  const c2 = await time(() =>
    Promise.all(Array.from({ length: 8 }, () => upstream.readReferencedSourceGitIgnoredPaths(dir))),
  );
  const first = firstCalls(dir);
  const oursMs = median(mine);
  const upstreamMs = median(theirs);
  const floor = walkFloor(dir, { runs, skip: [".git", ...(expected?.ignoredPaths ?? [])] });
  summary.push({
    path: `ignore resolution, ${label}`,
    hotPath: "Ignore resolution",
    case: caseLabel,
    ours: oursMs,
    upstream: upstreamMs,
    floor: floor.ms,
    floorIs: `walk of the ${floor.entries} entries not ignored`,
  });
  return {
    repository: label,
    "ignored entries": expected?.ignoredPaths.length ?? "null",
    "ours ms": oursMs.toFixed(1),
    "upstream ms": upstreamMs.toFixed(1),
    "upstream/ours": `${(upstreamMs / oursMs).toFixed(1)}x`,
    "first call: ours ms": first.ours.toFixed(1),
    "first call: upstream ms": first.upstream.toFixed(1),
    "8 at once: ours ms": c1.ms.toFixed(0),
    "8 at once: upstream ms": c2.ms.toFixed(0),
    "8 at once: ratio": `${(c2.ms / c1.ms).toFixed(1)}x`,
    identical: "yes",
    "floor ms": floor.ms.toFixed(1),
    "ours/floor": (oursMs / floor.ms).toFixed(2),
  };
}

const summary = [];
const generated = generatedRepository();
const rows = [
  await compare(`generated (${TRACKED} tracked, ${IGNORED} ignored files)`, `${IGNORED} ignored files`, generated),
  await compare("the demo's workspace (4000 sources, 8000 ignored files)", "the demo's workspace", demoWorkspace()),
  await compare(checkoutLabel, checkoutLabel, checkout),
];
console.log(`ignore benchmark: median of ${runs} runs each (after one warm-up), outputs asserted identical`);
console.table(rows);
console.log(`peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB (both implementations in this process)`);
emitRows(summary);
