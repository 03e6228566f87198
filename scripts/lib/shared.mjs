// What the scripts share, in one module: the repository's root, the command-line reader,
// running a command, a step's header, the host's Rust triple, Debian packages (what is
// installed; installing the missing ones as root), and the docs' generated blocks (a table a
// script writes between two marker lines, never edited by hand: bench/table.mjs and
// scripts/platforms/test.mjs).
import { execFileSync, spawnSync } from "node:child_process";
import { accessSync, constants, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs as parseCommandLine } from "node:util";

/** The repository's root directory. */
export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Reads a JSON file of this repository (`rel`: its path from the root). */
export function readJson(rel) {
  return JSON.parse(readFileSync(path.join(repo, rel), "utf8"));
}

/** Whether the module of `url` (its `import.meta.url`) is the script Node was started with. */
export function isMain(url) {
  return Boolean(process.argv[1]) && path.resolve(process.argv[1]) === fileURLToPath(url);
}

/** Prints `<name>: <why>` and `usage` to stderr and exits 2: the command line is wrong. */
export function usageError(name, why, usage) {
  process.stderr.write(`${name}: ${why}\n${usage}\n`);
  process.exit(2);
}

/**
 * A script's command line `argv`, read by node:util's parseArgs with `options` (its option
 * specs: `{ type: "string" | "boolean", multiple, default }`) and, when `positionals`, plain
 * arguments too. `--help` (`-h`) prints `usage` and exits 0; a wrong argument exits 2 with
 * `<name>: <why>` and `usage` (usageError). Returns `{ values, positionals }`.
 */
export function parseArgs(argv, { name, usage, options = {}, positionals = false }) {
  let parsed;
  try {
    parsed = parseCommandLine({
      args: argv,
      options: { ...options, help: { type: "boolean", short: "h" } },
      allowPositionals: positionals,
      strict: true,
    });
  } catch (error) {
    usageError(name, error.message, usage);
  }
  if (parsed.values.help) {
    process.stdout.write(`${usage.trimEnd()}\n`);
    process.exit(0);
  }
  return parsed;
}

/** `cmd args`'s standard output as text; throws when the command fails. */
export function output(cmd, args, options = {}) {
  return execFileSync(cmd, args, { encoding: "utf8", maxBuffer: 1 << 28, ...options });
}

/** Runs `cmd args` and returns `{ status, stdout, stderr }` (the signal's name as `status` when killed); never throws. */
export function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 1 << 28, ...options });
  return { status: r.status ?? r.signal ?? r.error?.code, stdout: r.stdout ?? "", stderr: r.stderr ?? "" };
}

/** Runs `cmd args` with its output on stderr (a step's progress); throws when it fails. */
export function runShown(cmd, args, options = {}) {
  execFileSync(cmd, args, { stdio: ["ignore", process.stderr, process.stderr], ...options });
}

/** A step's header on stderr: `==> line`. */
export function step(line) {
  process.stderr.write(`\n==> ${line}\n`);
}

/** The last `lines` lines of a command's output on one line, shortened (for a table's cell). */
export function tail(text, lines = 3) {
  return String(text ?? "")
    .trim()
    .split("\n")
    .slice(-lines)
    .join(" / ")
    .slice(0, 300);
}

/** The path of the command `name` on PATH (an executable file), or null. */
export function onPath(name, searchPath = process.env.PATH ?? "") {
  for (const dir of searchPath.split(path.delimiter).filter(Boolean)) {
    const file = path.join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return null;
}

/** `value` of `rustc -vV`'s `host:` line: the triple the Rust `rustc` builds for by default. */
export function hostTriple(rustc = "rustc") {
  return output(rustc, ["-vV"]).match(/^host: (.+)$/m)[1];
}

/**
 * Whether Debian package `pkg` is installed: `name:arch` for that architecture, a bare name
 * for this machine's (or an `all` package). With a foreign architecture added, a bare name
 * also matches the other architectures' copies, one record each.
 */
export function debianInstalled(pkg) {
  const r = run("dpkg-query", ["-W", "-f=${Architecture} ${Status}\\n", pkg]);
  if (r.status !== 0) return false;
  const native = pkg.includes(":") ? null : output("dpkg", ["--print-architecture"]).trim();
  return r.stdout
    .split("\n")
    .map((line) => line.split(" "))
    .some(
      ([arch, ...status]) =>
        status.join(" ") === "install ok installed" && (!native || arch === native || arch === "all"),
    );
}

/**
 * Installs the Debian packages `pkgs` that are missing (apt-get, as root; `name:arm64` adds
 * dpkg's arm64 architecture first), through scripts/setup/system-packages.sh's installer.
 */
export function ensureDebianPackages(pkgs) {
  const missing = pkgs.filter((p) => !debianInstalled(p));
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0 || run("apt-get", ["--version"]).status !== 0) {
    throw new Error(`missing Debian packages: ${missing.join(" ")} (apt-get install them as root)`);
  }
  if (missing.some((p) => p.endsWith(":arm64"))) {
    const foreign = output("dpkg", ["--print-foreign-architectures"]);
    if (!foreign.split("\n").includes("arm64")) execFileSync("dpkg", ["--add-architecture", "arm64"]);
  }
  runShown("bash", ["-c", 'source scripts/setup/system-packages.sh && install_packages "$@"', "install", ...missing], {
    cwd: repo,
  });
  const still = missing.filter((p) => !debianInstalled(p));
  if (still.length) throw new Error(`apt-get did not install ${still.join(" ")}`);
}

/** `file`'s text and its text with the block between `start` and `end` replaced by `lines`. */
export function withBlock({ file, start, end, lines }) {
  const doc = readFileSync(file, "utf8");
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${file} has no ${start} … ${end} block`);
  return { file, doc, updated: doc.slice(0, from) + [start, ...lines, end].join("\n") + doc.slice(to + end.length) };
}

/** A markdown table of `rows` (objects) with `columns` as its header; `|` escaped in cells. */
export function markdownTable(columns, rows) {
  const cell = (value) => String(value).replaceAll("|", "\\|");
  return [
    `| ${columns.join(" | ")} |`,
    `|${columns.map(() => "---").join("|")}|`,
    ...rows.map((row) => `| ${columns.map((name) => cell(row[name])).join(" | ")} |`),
  ];
}
