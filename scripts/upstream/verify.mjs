#!/usr/bin/env node
// Verifies an upstream `@paperclipai/adapter-utils` against this package, in one command
// (`npm run verify-upstream -- <version|path>`; CONTRIBUTING.md, "Following a new upstream
// release"). It installs that upstream into a scratch project under `.verify-upstream/` (a
// published version from npm, or a copy of a local package directory with a built `dist/`),
// then runs against it, module by module of the ones we cover:
//
//   admission     whether the module's closure is identical to a verified upstream's
//                 (lib/activation/admission.js), and whether it carries a marker of behaviour
//                 this package does not implement (a marker fails the module); whether it
//                 still exports every name we implement;
//   differential  the differential tests (__test__/*.diff.test.js) with that upstream as the
//                 oracle (PAPERCLIP_NATIVE_ORACLE, __test__/helpers/oracle.js);
//   swapped       upstream's own suites with our exports swapped in (scripts/upstream/swap.mjs
//                 --upstream);
//   activation    upstream's own suites through the activation (scripts/upstream/activation-suites.mjs
//                 --package-dir), loaded from a copy of this package whose verified list holds
//                 that upstream, as it would once added. Its baselines run live (a new
//                 version matches no record); with --write they are recorded (--record).
//
// It prints per module whether ours matches, and what adding the upstream to the verified
// list (lib/activation/verified-upstream.json) needs; `--write` adds it when everything
// passed. Exit code 0 only when every module matches and every part ran tests.
//
// Suites are attributed to the module of the same name; the other suites (upstream's
// orchestration: execution-target, …) form the row "(composition)". As root, what needs an
// unprivileged user (the SSH suites: sshd refuses root) is left out and said so.
//
// Usage: node scripts/upstream/verify.mjs <version|path> [--modules a,b] [--quick]
//          [--parts admission,differential,swapped,activation] [--write] [--keep] [--json out.json]
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { moduleAdmission } from "../../lib/activation/admission.js";
import {
  coveredModules,
  UPSTREAM_PACKAGE,
  VERIFIED_UPSTREAM_FILE,
  verifiedUpstreams,
} from "../../lib/activation/coverage.js";
import { packageFingerprints } from "../../lib/activation/fingerprint.js";
import { parseArgs, repo, usageError } from "../lib/shared.mjs";

const PARTS = ["admission", "differential", "swapped", "activation"];
const COMPOSITION = "(composition)";
// The activated modes run (each against its unactivated baseline): the Node hook (upstream
// externalized) and the vitest plugin (upstream inlined), as the test command runs upstream's.
const ACTIVATION_MODES = "hook,plugin-inline";
const asRoot = typeof process.getuid === "function" && process.getuid() === 0;
// What needs an unprivileged user: sshd refuses root logins (CONTRIBUTING.md, the SSH suites).
const ROOTLESS_SUITES = ["ssh-fixture"];
const ROOTLESS_DIFFERENTIAL = /^ssh/;

const HELP = `Usage: npm run verify-upstream -- <version|path> [options]

Verifies @paperclipai/adapter-utils <version> (from npm) or the package directory <path> (a
built upstream package: package.json and dist/) against this package: admission, the
differential tests, upstream's suites swapped and through the activation; prints per module
whether ours matches and what adding it to the verified list needs.

Options:
  --modules a,b     only these covered modules (and the suites named after them)
  --quick           only the suites named after a module (no orchestration suites), the
                    activation through the Node hook only
  --parts a,b       only these parts: ${PARTS.join(", ")}
  --write           when everything passed, add the upstream to lib/activation/verified-upstream.json;
                    record the baselines of its suites in test-baselines/ either way
  --keep            keep the scratch project (.verify-upstream/<label>)
  --json FILE       write the results as JSON
`;

/** The command line: `{ target, modules, quick, parts, write, keep, json }` (`target` null when not given). */
function commandLine(argv) {
  const { values, positionals } = parseArgs(argv, {
    name: "verify-upstream",
    usage: HELP,
    options: {
      modules: { type: "string" },
      quick: { type: "boolean", default: false },
      parts: { type: "string", default: PARTS.join(",") },
      write: { type: "boolean", default: false },
      keep: { type: "boolean", default: false },
      json: { type: "string" },
    },
    positionals: true,
  });
  if (positionals.length > 1) usageError("verify-upstream", `unexpected argument ${positionals[1]}`, HELP);
  const parts = values.parts.split(",").filter(Boolean);
  for (const part of parts)
    if (!PARTS.includes(part)) usageError("verify-upstream", `unknown part ${part} (${PARTS.join(", ")})`, HELP);
  return {
    target: positionals[0] ?? null,
    modules: values.modules ? values.modules.split(",").filter(Boolean) : null,
    quick: values.quick,
    parts,
    write: values.write,
    keep: values.keep,
    json: values.json ? path.resolve(values.json) : null,
  };
}

const say = (line) => console.log(`verify-upstream: ${line}`);

/** Runs `command args` (output shown as it comes, prefixed); resolves to its exit status. */
function run(command, args, { cwd = repo, env = process.env, label } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    const relay = (stream, out) => {
      let partial = "";
      stream.on("data", (d) => {
        const lines = (partial + d).split("\n");
        partial = lines.pop();
        for (const line of lines) out.write(`  [${label}] ${line}\n`);
      });
      stream.on("end", () => partial && out.write(`  [${label}] ${partial}\n`));
    };
    relay(child.stdout, process.stdout);
    relay(child.stderr, process.stderr);
    child.on("error", reject);
    child.on("close", (status) => resolve(status));
  });
}

/** The scratch project's name for `target` (a version, or a path's hash). */
function scratchLabel(target, isPath) {
  if (!isPath) return target.replace(/[^\w.-]/g, "_");
  return `path-${createHash("sha256").update(path.resolve(target)).digest("hex").slice(0, 12)}`;
}

/** Where a path's package came from: its git commit (and whether the tree was changed), else "directory". */
async function pathSource(dir) {
  const git = (args) =>
    new Promise((resolve) => {
      const child = spawn("git", ["-C", dir, ...args], { stdio: ["ignore", "pipe", "ignore"] });
      let out = "";
      child.stdout.on("data", (d) => {
        out += d;
      });
      child.on("error", () => resolve(null));
      child.on("close", (status) => resolve(status === 0 ? out.trim() : null));
    });
  const commit = await git(["rev-parse", "HEAD"]);
  if (!commit) return "directory";
  const dirty = await git(["status", "--porcelain", "--", "."]);
  return `git:${commit}${dirty ? "+changes" : ""}`;
}

/**
 * Installs the upstream `target` into `.verify-upstream/<label>`: `{ scratch, pkgDir, version,
 * source, published }`.
 */
async function install(target) {
  const isPath = existsSync(target) && statSync(target).isDirectory();
  const scratch = path.join(repo, ".verify-upstream", scratchLabel(target, isPath));
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  writeFileSync(
    path.join(scratch, "package.json"),
    `${JSON.stringify({ name: "verify-upstream-scratch", private: true })}\n`,
  );
  const pkgDir = path.join(scratch, "node_modules", ...UPSTREAM_PACKAGE.split("/"));
  if (isPath) {
    const from = path.resolve(target);
    const manifest = JSON.parse(readFileSync(path.join(from, "package.json"), "utf8"));
    if (manifest.name !== UPSTREAM_PACKAGE) throw new Error(`${from} holds ${manifest.name}, not ${UPSTREAM_PACKAGE}`);
    if (!existsSync(path.join(from, "dist"))) throw new Error(`${from} has no dist/ (build the package first)`);
    // A copy (so this run sees one state of it), its own dependencies linked; the others
    // resolve from this checkout's node_modules above the scratch project.
    cpSync(from, pkgDir, { recursive: true, filter: (source) => path.basename(source) !== "node_modules" });
    if (existsSync(path.join(from, "node_modules")))
      symlinkSync(path.join(from, "node_modules"), path.join(pkgDir, "node_modules"), "dir");
    return { scratch, pkgDir, version: manifest.version, source: await pathSource(from), published: false };
  }
  say(`npm install ${UPSTREAM_PACKAGE}@${target} into ${path.relative(repo, scratch)}`);
  const status = await run(
    "npm",
    ["install", "--no-audit", "--no-fund", "--ignore-scripts", "--legacy-peer-deps", `${UPSTREAM_PACKAGE}@${target}`],
    { cwd: scratch, label: "npm" },
  );
  if (status !== 0) throw new Error(`npm install ${UPSTREAM_PACKAGE}@${target} failed (exit status ${status})`);
  const version = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8")).version;
  const lock = JSON.parse(readFileSync(path.join(scratch, "package-lock.json"), "utf8"));
  const integrity = lock.packages?.[`node_modules/${UPSTREAM_PACKAGE}`]?.integrity;
  return {
    scratch,
    pkgDir,
    version,
    source: `npm:${UPSTREAM_PACKAGE}@${version}${integrity ? ` ${integrity}` : ""}`,
    published: true,
  };
}

/**
 * The admission part: per module `{ ok, summary, details }` (a short verdict for the table,
 * the whole story for a failure).
 */
async function admissionPart(candidate, modules) {
  const results = {};
  const cache = new Map();
  for (const { module, file } of modules) {
    const decision = moduleAdmission({ root: candidate.pkgDir, kind: "dist", module, cache });
    const result = { ok: true, summary: "", details: [] };
    if (decision.admitted) result.summary = `identical to ${decision.version}`;
    else if (decision.reason === "missing") {
      result.ok = false;
      result.summary = "MISSING";
      result.details.push("upstream has no such module");
    } else if (decision.markers.length > 0) {
      result.ok = false;
      const own = decision.markers.filter((m) => m.file === `dist/${module}.js`).map((m) => m.marker);
      result.summary = own.length > 0 ? `REFUSED (carries ${own.join(", ")})` : "REFUSED (its imports carry markers)";
      result.details.push(decision.reason);
    } else {
      result.summary = `changed (${decision.differing.length} file${decision.differing.length === 1 ? "" : "s"})`;
      result.details.push(`files that differ from every verified upstream: ${decision.differing.join(", ")}`);
    }
    if (decision.reason !== "missing") {
      const ours = Object.keys(await import(pathToFileURL(file).href));
      const theirs = await import(pathToFileURL(path.join(candidate.pkgDir, "dist", `${module}.js`)).href);
      const lacking = ours.filter((name) => !(name in theirs));
      if (lacking.length > 0) {
        result.ok = false;
        result.summary = `LACKS ${lacking.length} name${lacking.length === 1 ? "" : "s"}`;
        result.details.push(`upstream no longer exports names we implement: ${lacking.join(", ")}`);
      }
    }
    results[module] = result;
  }
  return results;
}

/** The differential tests and the modules each compares (its `oracle("…")` calls). */
function differentialFiles() {
  const dir = path.join(repo, "__test__");
  return readdirSync(dir)
    .filter((name) => name.endsWith(".diff.test.js"))
    .sort()
    .map((name) => ({
      file: `__test__/${name}`,
      modules: [...readFileSync(path.join(dir, name), "utf8").matchAll(/\boracle\("([^"]+)"\)/g)].map((m) => m[1]),
    }));
}

/** Reads a vitest JSON report: per test file (relative to `base`), its passed and failed test names. */
function vitestReport(file, base) {
  const report = JSON.parse(readFileSync(file, "utf8"));
  const byFile = {};
  for (const result of report.testResults) {
    const name = path.relative(base, result.name).split(path.sep).join("/");
    const entry = (byFile[name] = { passed: 0, failed: [] });
    if (result.assertionResults.length === 0 && result.status === "failed") entry.failed.push("(file failed to load)");
    for (const test of result.assertionResults) {
      if (test.status === "passed") entry.passed += 1;
      else if (test.status === "failed") entry.failed.push(test.fullName);
    }
  }
  return byFile;
}

/**
 * The modules a failing test of a file comparing `compared` is about: those of `compared` one
 * of whose names (our exports) the test's name mentions, else all of `compared`.
 */
function testModules(testName, compared, exportsOf) {
  const named = compared.filter((module) =>
    (exportsOf.get(module) ?? []).some((name) => new RegExp(`\\b${name}\\b`).test(testName)),
  );
  return named.length > 0 ? named : compared;
}

/** The differential part: per module `{ ok, summary, details }`, plus `ran` (tests passed in all). */
async function differentialPart(candidate, modules, notes) {
  const wanted = new Set(modules.map((m) => m.module));
  const exportsOf = new Map();
  for (const { module, file } of coveredModules())
    exportsOf.set(module, Object.keys(await import(pathToFileURL(file).href)));
  const files = differentialFiles().filter(({ modules: compared }) => compared.some((m) => wanted.has(m)));
  const runnable = files.filter(({ file }) => !(asRoot && ROOTLESS_DIFFERENTIAL.test(path.basename(file))));
  for (const { file } of files.filter((f) => !runnable.includes(f)))
    notes.push(`left out as root (needs sshd and an unprivileged user): ${file}`);
  const results = {};
  if (runnable.length === 0) return { results, ran: 0 };
  const out = path.join(candidate.scratch, "differential.json");
  await run(
    process.execPath,
    [
      path.join(repo, "node_modules/vitest/vitest.mjs"),
      "run",
      ...runnable.map(({ file }) => file),
      "--reporter=dot",
      "--reporter=json",
      `--outputFile.json=${out}`,
    ],
    { env: { ...process.env, PAPERCLIP_NATIVE_ORACLE: candidate.pkgDir }, label: "differential" },
  );
  if (!existsSync(out)) throw new Error("the differential tests produced no report");
  const report = vitestReport(out, repo);
  let ran = 0;
  for (const { file, modules: compared } of runnable) {
    const entry = report[file] ?? { passed: 0, failed: ["(file did not run)"] };
    ran += entry.passed;
    const mine = compared.filter((m) => wanted.has(m));
    for (const module of mine)
      (results[module] ??= { ok: true, files: [], details: [] }).files.push(path.basename(file, ".test.js"));
    const failures = entry.failed.length > 0 ? entry.failed : entry.passed === 0 ? ["(no test passed)"] : [];
    for (const test of failures) {
      for (const module of testModules(test, compared, exportsOf).filter((m) => wanted.has(m))) {
        results[module].ok = false;
        results[module].details.push(`${path.basename(file)}: ${test}`);
      }
    }
  }
  for (const result of Object.values(results)) {
    result.summary = result.ok
      ? `ok (${result.files.join(", ")})`
      : `FAILED (${result.details.length} test${result.details.length === 1 ? "" : "s"})`;
  }
  return { results, ran };
}

/** The module a suite (`workspace-restore-merge`, `dist/acpx-engine/execute.test.js`, …) is attributed to. */
function suiteModule(suite, moduleNames) {
  const short = suite.replace(/^dist\//, "").replace(/\.test\.js$/, "");
  return moduleNames.has(short) ? short : COMPOSITION;
}

/** The suites to run: `null` for the runner's own list, else the suites named after `modules`. */
function suiteSelection(args, modules, available) {
  if (!args.quick && !args.modules) return null;
  return modules.map((m) => m.module).filter((m) => available.has(m));
}

/** Upstream's suites in `pkgDir` (short names: `ssh-fixture`, `acpx-engine/execute`). */
function upstreamSuites(pkgDir) {
  const found = new Set();
  const walk = (dir, prefix) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory() && entry.name !== "node_modules")
        walk(path.join(dir, entry.name), `${prefix}${entry.name}/`);
      else if (entry.name.endsWith(".test.js")) found.add(`${prefix}${entry.name.slice(0, -".test.js".length)}`);
    }
  };
  walk(path.join(pkgDir, "dist"), "");
  return found;
}

/** Folds a runner's JSON summary into per-row results: regressions by suite, and skipped lines. */
function suiteResults(summary, moduleNames) {
  const results = {};
  const row = (module) => (results[module] ??= { ok: true, problems: [] });
  for (const line of [...summary.regressions, ...(summary.skipped ?? []), ...(summary.inactive ?? [])]) {
    // Regressions read "<suite> › <test> …", or "<mode>: <suite> › <test> …" (activation).
    const text = line.replace(/^(?:hook|plugin-inline|plugin-external|plain|plain-inline|swapped|unswapped): /, "");
    const suite = text.split(" › ")[0];
    const module = text.includes(" › ") ? suiteModule(suite, moduleNames) : COMPOSITION;
    row(module).ok = false;
    row(module).problems.push(line);
  }
  for (const result of Object.values(results)) {
    result.summary = `FAILED (${result.problems.length})`;
    result.details = result.problems;
  }
  return { results, passed: summary.checks?.passed ?? 0, failed: summary.checks?.failed ?? 0 };
}

/**
 * Runs one of the suite runners beside this script (`scripts/upstream/<script>` with `argv`), leaving out as root what
 * needs an unprivileged user (and saying so in `notes`); resolves to its JSON summary.
 */
async function runSuites({ script, argv, label, selection, candidate, notes }) {
  const json = path.join(candidate.scratch, `${label}.json`);
  const args = [...argv, "--json", json];
  if (selection) args.push("--suites", selection.join(","));
  if (asRoot) {
    args.push("--exclude-suites", ROOTLESS_SUITES.join(","));
    if (!selection || selection.some((s) => ROOTLESS_SUITES.includes(s)))
      notes.push(
        `left out of the ${label} run as root (needs sshd and an unprivileged user): upstream's ${ROOTLESS_SUITES.join(", ")}`,
      );
  }
  await run(process.execPath, [path.join(repo, "scripts", "upstream", script), ...args], { label });
  if (!existsSync(json)) throw new Error(`${script} produced no report`);
  return JSON.parse(readFileSync(json, "utf8"));
}

/** The swapped part: upstream's suites with our exports swapped in. */
async function swappedPart(candidate, args, modules, notes) {
  const moduleNames = new Set(modules.map((m) => m.module));
  const selection = suiteSelection(args, modules, upstreamSuites(candidate.pkgDir));
  if (selection && selection.length === 0) return { results: {}, passed: 0, failed: 0, suites: [] };
  const summary = await runSuites({
    script: "swap.mjs",
    argv: ["--upstream", candidate.pkgDir, "--swap-dir", path.join(candidate.scratch, "swap")],
    label: "swapped",
    selection,
    candidate,
    notes,
  });
  return { ...suiteResults(summary, moduleNames), suites: summary.suites };
}

/**
 * A copy of this package (its lib/ and entry points; the built binary linked) whose verified
 * list also holds the candidate, as a published version: what the activation would serve
 * once the candidate is added.
 */
function candidatePackage(candidate, entry) {
  const dir = path.join(candidate.scratch, "adapter-utils-native");
  mkdirSync(dir, { recursive: true });
  for (const name of ["package.json", "index.js", "index.d.ts", "lib"])
    cpSync(path.join(repo, name), path.join(dir, name), { recursive: true });
  symlinkSync(path.join(repo, "native"), path.join(dir, "native"), "dir");
  const record = JSON.parse(readFileSync(VERIFIED_UPSTREAM_FILE, "utf8"));
  record.verified = [...record.verified, { ...entry, published: true }];
  writeFileSync(path.join(dir, "lib/activation/verified-upstream.json"), `${JSON.stringify(record, null, 2)}\n`);
  return dir;
}

/** The activation part: upstream's suites through the activation (the Node hook and the plugin). */
async function activationPart(candidate, args, modules, entry, notes) {
  const moduleNames = new Set(modules.map((m) => m.module));
  const available = upstreamSuites(candidate.pkgDir);
  const selection = suiteSelection(args, modules, available);
  if (selection && selection.length === 0) return { results: {}, passed: 0, failed: 0, suites: [] };
  const summary = await runSuites({
    script: "activation-suites.mjs",
    argv: [
      "--package",
      UPSTREAM_PACKAGE,
      "--package-dir",
      candidate.pkgDir,
      "--native",
      candidatePackage(candidate, entry),
      "--modes",
      args.quick ? "hook" : ACTIVATION_MODES,
      // --write records the candidate's baselines too (test-baselines/, scripts/upstream/baselines.mjs).
      ...(args.write ? ["--record"] : []),
    ],
    label: "activation",
    selection,
    candidate,
    notes,
  });
  const ran = (selection ?? [...available]).filter((suite) => !(asRoot && ROOTLESS_SUITES.includes(suite)));
  return { ...suiteResults(summary, moduleNames), suites: ran };
}

/** The candidate's entry for lib/activation/verified-upstream.json. */
function verifiedEntry(candidate, modules) {
  return {
    version: candidate.version,
    published: candidate.published,
    source: candidate.source,
    files: packageFingerprints(
      candidate.pkgDir,
      modules.map((m) => m.module),
      UPSTREAM_PACKAGE,
    ),
  };
}

/**
 * Whether two entries of the verified list are the same upstream: a published version by its
 * version (npm never republishes one), a workspace by its version and where it came from.
 */
function sameUpstream(a, b) {
  return a.version === b.version && a.published === b.published && (a.published || a.source === b.source);
}

/** What adding the candidate to the verified list needs, or that it is there already. */
function addingAdvice(entry, allModules) {
  const same = verifiedUpstreams().find((known) => sameUpstream(known, entry));
  if (same && JSON.stringify(same.files) === JSON.stringify(entry.files))
    return {
      present: true,
      lines: [`${entry.version} (${entry.source}) is in the verified list already, with these fingerprints.`],
    };
  const identical = verifiedUpstreams().find((known) => JSON.stringify(known.files) === JSON.stringify(entry.files));
  if (identical && !entry.published)
    return {
      present: true,
      lines: [
        `its covered modules are identical to ${identical.version}'s, which is verified: the workspace opt-in admits them already; nothing to add.`,
      ],
    };
  const lines = [];
  if (!allModules)
    lines.push("this run covered only some modules: run it again without --modules/--quick/--parts before adding it;");
  lines.push(
    `to add it: rerun with --write (adds this entry to ${path.relative(repo, VERIFIED_UPSTREAM_FILE)}), add a CHANGELOG line, and commit;`,
    entry.published
      ? `the activation then serves ${entry.version} by its version (every covered module), and the workspace opt-in admits modules identical to it`
      : `the workspace opt-in (PAPERCLIP_ADAPTER_UTILS_NATIVE_UPSTREAM=workspace) then admits the modules of that workspace identical to it; its version stays unverified for published installs`,
  );
  return { present: false, lines };
}

function table(rows, columns) {
  const widths = columns.map((c) => Math.max(c.title.length, ...rows.map((r) => String(r[c.key] ?? "").length)));
  const cap = (text, width) => String(text ?? "").padEnd(width);
  const line = (cells) =>
    cells
      .map((cell, i) => cap(cell, Math.min(widths[i], 60)))
      .join("  ")
      .trimEnd();
  const out = [line(columns.map((c) => c.title))];
  for (const row of rows) out.push(line(columns.map((c) => row[c.key])));
  return out;
}

/**
 * One row per module (and `(composition)` when upstream's orchestration suites ran or
 * failed): `{ module, ok, parts: { <part>: { ok, summary, details } } }`, from each part's
 * results (`parts`: admission, differential, swapped, activation, each null when not run).
 * Returns `{ rows, names }`.
 */
function verdictRows(modules, { admission, differential, swapped, activation }) {
  const rows = [];
  const ranSuites = [swapped, activation].flatMap((part) => part?.suites ?? []);
  const names = modules.map((m) => m.module);
  const compositionFailed = [swapped, activation].some((part) => part?.results[COMPOSITION]);
  if (compositionFailed || ranSuites.some((suite) => !names.includes(suite))) names.push(COMPOSITION);
  const suiteCell = (part, module) => {
    if (!part) return { ok: true, summary: "not run" };
    if (part.results[module]) return part.results[module];
    if (module === COMPOSITION || part.suites.includes(module)) return { ok: true, summary: "ok" };
    return { ok: true, summary: "— (no suite of its own)" };
  };
  for (const module of names) {
    const composition = module === COMPOSITION;
    const parts = {
      admission: composition ? { ok: true, summary: "—" } : (admission?.[module] ?? { ok: true, summary: "not run" }),
      differential: composition
        ? { ok: true, summary: "—" }
        : (differential?.results[module] ?? {
            ok: true,
            summary: differential ? "— (no differential test)" : "not run",
          }),
      swapped: suiteCell(swapped, module),
      activation: suiteCell(activation, module),
    };
    rows.push({ module, ok: Object.values(parts).every((p) => p.ok), parts });
  }
  return { rows, names };
}

/** The parts that ran and passed no test (a runner that passed nothing proves nothing). */
function emptyParts({ differential, swapped, activation }) {
  const empty = [];
  if (differential && differential.ran === 0 && Object.keys(differential.results).length > 0)
    empty.push("differential");
  for (const [name, part] of [
    ["swapped", swapped],
    ["activation", activation],
  ]) {
    if (part && part.suites.length > 0 && part.passed === 0) empty.push(name);
  }
  return empty;
}

/** Prints the table of `rows` (one column per part run) and every detail of a failure. */
function printRows(candidate, args, rows) {
  console.log("");
  say(`${UPSTREAM_PACKAGE} ${candidate.version} (${candidate.source}): per module, does ours match?`);
  const columns = [
    { key: "module", title: "module" },
    { key: "verdict", title: "ours" },
    ...args.parts.map((p) => ({ key: p, title: p })),
  ];
  for (const line of table(
    rows.map((r) => ({
      module: r.module,
      verdict: r.ok ? "matches" : "DIFFERS",
      ...Object.fromEntries(Object.entries(r.parts).map(([k, v]) => [k, v.summary])),
    })),
    columns,
  ))
    say(line);
  for (const r of rows) {
    for (const [part, result] of Object.entries(r.parts)) {
      // Every detail of a failure; a passing module's admission says which files changed.
      if (result.ok && part !== "admission") continue;
      for (const detail of result.details ?? []) say(`${r.module}: ${part}: ${detail}`);
    }
  }
}

/**
 * After a passing run: what adding the upstream needs, and with --write (refused for a run
 * that covered only part of the checks) its entry added to the verified list.
 */
function adoptPassed(args, entry, names) {
  const partial = Boolean(args.modules) || args.quick || args.parts.length !== PARTS.length;
  const advice = addingAdvice(entry, !partial);
  say(`PASS: every module matches (${names.join(", ")})`);
  for (const line of advice.lines) say(line);
  if (args.write && !advice.present) {
    if (partial) {
      say("--write refused: this run covered only part of the checks");
      process.exitCode = 1;
    } else {
      const record = JSON.parse(readFileSync(VERIFIED_UPSTREAM_FILE, "utf8"));
      record.verified = [...record.verified.filter((known) => !sameUpstream(known, entry)), entry];
      writeFileSync(VERIFIED_UPSTREAM_FILE, `${JSON.stringify(record, null, 2)}\n`);
      say(`added ${entry.version} to ${path.relative(repo, VERIFIED_UPSTREAM_FILE)}`);
    }
  } else if (!advice.present) {
    say(`the entry: ${JSON.stringify({ ...entry, files: `{ ${Object.keys(entry.files).length} fingerprints }` })}`);
  }
}

async function main() {
  const args = commandLine(process.argv.slice(2));
  if (!args.target) {
    process.stdout.write(HELP);
    process.exitCode = 2;
    return;
  }
  const started = Date.now();
  const allCovered = coveredModules();
  const modules = args.modules ? allCovered.filter((m) => args.modules.includes(m.module)) : allCovered;
  for (const name of args.modules ?? [])
    if (!allCovered.some((m) => m.module === name)) throw new Error(`not a covered module: ${name}`);
  const candidate = await install(args.target);
  say(`${UPSTREAM_PACKAGE} ${candidate.version} (${candidate.source}) in ${path.relative(repo, candidate.pkgDir)}`);
  const notes = [];
  const entry = verifiedEntry(candidate, allCovered);
  const timings = {};
  const timed = async (part, fn) => {
    if (!args.parts.includes(part)) return null;
    const t = Date.now();
    say(`${part}…`);
    const result = await fn();
    timings[part] = Math.round((Date.now() - t) / 1000);
    say(`${part}: done in ${timings[part]} s`);
    return result;
  };
  let outcome;
  try {
    const parts = {
      admission: await timed("admission", () => admissionPart(candidate, modules)),
      differential: await timed("differential", () => differentialPart(candidate, modules, notes)),
      swapped: await timed("swapped", () => swappedPart(candidate, args, modules, notes)),
      activation: await timed("activation", () => activationPart(candidate, args, modules, entry, notes)),
    };
    const { rows, names } = verdictRows(modules, parts);
    const empty = emptyParts(parts);
    const differing = rows.filter((r) => !r.ok).map((r) => r.module);
    const pass = differing.length === 0 && empty.length === 0;

    printRows(candidate, args, rows);
    for (const note of notes) say(`note: ${note}`);
    for (const name of empty) say(`FAILED: ${name} ran no passing test`);
    if (pass) adoptPassed(args, entry, names);
    else {
      say(
        `FAIL: ${differing.length ? `differing modules: ${differing.join(", ")}` : "see above"}; ${candidate.version} cannot join the verified list until ours implements what differs (or the difference is understood and the tests say so)`,
      );
    }
    outcome = {
      pass,
      rows,
      notes,
      empty,
      timings,
      candidate: { version: candidate.version, source: candidate.source },
    };
    say(
      `${pass ? "passed" : "failed"} in ${Math.round((Date.now() - started) / 1000)} s (${Object.entries(timings)
        .map(([k, v]) => `${k} ${v} s`)
        .join(", ")})`,
    );
    process.exitCode = pass && !process.exitCode ? 0 : 1;
  } finally {
    if (!args.keep) rmSync(candidate.scratch, { recursive: true, force: true });
  }
  if (args.json) writeFileSync(args.json, JSON.stringify(outcome, null, 2));
}

main().catch((error) => {
  console.error(`verify-upstream: ${error.stack ?? error}`);
  process.exitCode = 2;
});
