#!/usr/bin/env node
// paperclip-sync: the operator's command line for @paperclipai/adapter-utils-native.
//
// Exit codes: 0 success; 1 the operation failed (one line `paperclip-sync: CODE: message`);
// 2 bad usage (unknown command or option, missing argument).
import { execFileSync } from "node:child_process";
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  captureDirectorySnapshot,
  createRuntimeProgressReporter,
  createTarballStreamFromDirectory,
  directorySnapshotSha256,
  extractTarballToDirectory,
  mergeDirectoryWithBaseline,
  mergeExcludes,
  packDirectoryToFile,
  parseDirectorySnapshot,
  referencedSourceContentSignature,
  referencedSourceIgnoreExcludeEntries,
  resolveReferencedSourceIgnore,
  serializeDirectorySnapshot,
  snapshotReusedHashCount,
  syncDirectoryFromSsh,
  syncDirectoryToSsh,
} from "../index.js";

const PROGRAM = "paperclip-sync";

class UsageError extends Error {}

const SSH_OPTIONS_HELP = `SSH options:
  --host HOST --user USER [--port 22]   the server
  --key FILE                            the private key (OpenSSH format)
  --known-hosts FILE                    host keys to trust (strict checking)
  --no-host-key-check                   trust any host key (explicit; upstream's StrictHostKeyChecking=no)
  --remote-dir DIR                      the remote directory (absolute)
  --json                                print a summary as JSON when done`;

const HELP = {
  main: `Usage: ${PROGRAM} <command> [options]

Workspace-staging jobs of Paperclip's adapters, done natively.

Commands:
  demo                     run the full cycle on a generated workspace, timed against upstream
  doctor                   is the activation (--import …/register) on, and what would it serve here
  ignored <dir>            the Git-ignored paths of a project (or why they cannot be resolved)
  snapshot <dir>           capture a directory snapshot (entries, bytes, digest)
  diff <a.json> <b.json>   compare two serialized snapshots
  signature <dir>          the content signature of a referenced project
  pack <dir>               archive a directory as tar (optionally gzip), with progress
  extract <archive> <dir>  safely extract a tar or tar.gz archive into a directory
  merge                    merge a remote result back into a workspace against a baseline
  push <dir>               upload a directory to a remote directory over SSH (no ssh/tar child)
  pull <dir>               download a remote directory over SSH into a local directory

Run '${PROGRAM} <command> --help' for a command's options.
Exit codes: 0 ok, 1 the operation failed, 2 bad usage.`,
  snapshot: `Usage: ${PROGRAM} snapshot <dir> [--exclude PATTERN]... [--json] [--out FILE]

Captures <dir> like captureDirectorySnapshot and prints a summary.
  --exclude PATTERN  upstream exclude entry (X, X/*, */X, */X/*); repeatable
  --out FILE         also write the serialized snapshot (JSON) to FILE
  --json             print the summary as JSON`,
  diff: `Usage: ${PROGRAM} diff <a.json> <b.json> [--json]

Compares two serialized snapshots (as written by 'snapshot --out') and lists what was
added, removed and changed (content, mode, kind, link target).`,
  signature: `Usage: ${PROGRAM} signature <dir> [--ignored PATH]... [--json]

Prints referencedSourceContentSignature(<dir>) for a 'git' resolution with the given
ignored paths, or an 'other' resolution when none is given.`,
  ignored: `Usage: ${PROGRAM} ignored <dir> [--json] [-z]

Resolves <dir>'s Git-ignored paths in-process (read-only, hardened, bounded), relative to
<dir>, one per line (-z: NUL-terminated). Exit 0 with the list for a Git project, exit 0
with a note on stderr when <dir> is not in a Git work tree, exit 1 with the fixed reason
(git-ignore-scan-failed, git-ignore-scan-limit-exceeded, git-toplevel-not-descendant)
when the resolution failed closed.`,
  pack: `Usage: ${PROGRAM} pack <dir> --out FILE|- [--gzip[=LEVEL]] [--exclude PATTERN]... [--follow-symlinks]

Archives <dir> in-process with the members 'tar -c --exclude ._* --exclude PATTERN … -C <dir>'
would archive (GNU tar --exclude semantics). --out - streams to stdout. Progress goes to
stderr: a bar on a terminal, upstream-format '[paperclip] …' lines otherwise.
  --gzip[=LEVEL]     compress (level 0-9, default 6)
  --follow-symlinks  archive what symlinks point at (loops are an error)
  --json             print a summary as JSON on stderr when done`,
  extract: `Usage: ${PROGRAM} extract <archive|-> <dir> [--json]

Extracts a tar or tar.gz archive (gzip detected) into <dir>, refusing members that would
land or point outside it (absolute names, '..', escaping links, devices) with
ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY, and truncated archives with
ERR_PAPERCLIP_NATIVE_BAD_ARCHIVE. '-' reads the archive from stdin.`,
  merge: `Usage: ${PROGRAM} merge --baseline SNAPSHOT.json --source DIR --target DIR [--conflict-policy overwrite|reject] [--refuse-empty-source] [--json]

Three-way merge of a remote result (--source) into a workspace (--target) against the
baseline snapshot taken when the workspace was staged (as written by 'snapshot --out'),
under the workspace merge lock shared with upstream's TypeScript. Remote changes win;
local edits of files the remote deleted are kept.
  --conflict-policy reject  refuse (DIRECTORY_MERGE_CONFLICT, listing the paths) when the
                            workspace and the remote both changed a path
  --refuse-empty-source     refuse when the source is empty but the baseline is not`,
  push: `Usage: ${PROGRAM} push <dir> --host HOST --user USER --key FILE (--known-hosts FILE | --no-host-key-check) --remote-dir DIR [--port N] [--exclude P]... [--follow-symlinks] [--json]

Uploads <dir> into the remote directory like syncDirectoryToSsh: one in-process SSH session,
the archive streamed from the packer into the remote's tar, progress lines on stderr.

${SSH_OPTIONS_HELP}`,
  pull: `Usage: ${PROGRAM} pull <dir> --host HOST --user USER --key FILE (--known-hosts FILE | --no-host-key-check) --remote-dir DIR [--port N] [--exclude P]... [--preserve NAME]... [--json]

Downloads the remote directory into <dir> like syncDirectoryFromSsh: the remote's tar
streamed into the safe extractor; local entries named with --preserve are kept.

${SSH_OPTIONS_HELP}`,
  demo: `Usage: ${PROGRAM} demo [--files N] [--keep] [--json]

Generates a realistic workspace (a git repository with sources and an ignored dependency
tree), then runs the staging cycle: ignore resolution, baseline snapshot, content
signature, a simulated remote edit and the re-snapshot, timing each step natively next to
the upstream TypeScript (when @paperclipai/adapter-utils is installed) and checking that
both give the same result.
  --files N  source files to generate (default 4000; dependencies get twice as many)
  --keep     keep the generated workspace and print where it is

Last, when sshd is installed, upstream's own prepareAdapterExecutionTargetRuntime (unmodified)
stages and restores a copy of the workspace over SSH twice, with and without
--import @paperclipai/adapter-utils-native/register, timed, checking equal results.
  --no-ssh   skip that step`,
  doctor: `Usage: ${PROGRAM} doctor [--json]

Reports whether the native binary loads here, the installed @paperclipai/adapter-utils
(found from the working directory) and whether its version is one this package was verified
against, the upstream modules and names the activation serves, whether the activation is
on in this process (nativeActivation()), and what a Node started with
--import @paperclipai/adapter-utils-native/register gets (checked in a child process).
Exit code 1 when the activation would stay off.`,
};

/** Parses `argv` against a spec of flags: { name: "bool" | "string" | "list" }. */
function parseArgs(argv, spec) {
  const out = { _: [] };
  for (const [name, kind] of Object.entries(spec)) out[name] = kind === "list" ? [] : kind === "bool" ? false : undefined;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === "--help" || arg === "-h") {
      out.help = true;
      continue;
    }
    if (spec.z && arg === "-z") {
      out.z = true;
      continue;
    }
    if (!arg.startsWith("--") || arg === "-") {
      out._.push(arg);
      continue;
    }
    const [flag, inline] = arg.slice(2).split(/=(.*)/s, 2);
    const kind = spec[flag];
    if (!kind) throw new UsageError(`unknown option --${flag}`);
    if (kind === "bool") {
      if (inline !== undefined) throw new UsageError(`--${flag} takes no value`);
      out[flag] = true;
      continue;
    }
    if (kind === "optional") {
      out[flag] = inline ?? true;
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw new UsageError(`--${flag} needs a value`);
    if (kind === "list") out[flag].push(value);
    else out[flag] = value;
  }
  return out;
}

function table(rows, columns) {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? "").length)));
  const line = (cells) => cells.map((cell, i) => String(cell ?? "").padEnd(widths[i])).join("  ").trimEnd();
  return [line(columns), line(widths.map((w) => "-".repeat(w))), ...rows.map((r) => line(columns.map((c) => r[c])))].join("\n");
}

function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

function summarize(snapshot, root) {
  let files = 0;
  let dirs = 0;
  let symlinks = 0;
  let bytes = 0;
  for (const [rel, entry] of snapshot.entries) {
    if (entry.kind === "dir") dirs += 1;
    else if (entry.kind === "symlink") symlinks += 1;
    else {
      files += 1;
      try {
        bytes += statSync(path.join(root, rel)).size;
      } catch {
        // raced away since the capture; not counted
      }
    }
  }
  return { entries: snapshot.entries.size, files, dirs, symlinks, bytes };
}

async function timed(fn) {
  const start = process.hrtime.bigint();
  const value = await fn();
  return { value, ms: Number(process.hrtime.bigint() - start) / 1e6 };
}

function requireDir(dir) {
  if (!dir) throw new UsageError("a directory is required");
  if (!existsSync(dir)) {
    const error = new Error(`no such directory: ${dir}`);
    error.code = "ENOENT";
    throw error;
  }
}

async function cmdSnapshot(argv) {
  const opts = parseArgs(argv, { exclude: "list", out: "string", json: "bool" });
  if (opts.help) return console.log(HELP.snapshot);
  const [dir] = opts._;
  requireDir(dir);
  const { value: snapshot, ms } = await timed(() => captureDirectorySnapshot(dir, { exclude: opts.exclude }));
  const digest = directorySnapshotSha256(snapshot);
  if (opts.out) writeFileSync(opts.out, `${JSON.stringify(serializeDirectorySnapshot(snapshot))}\n`);
  const summary = { dir: path.resolve(dir), ...summarize(snapshot, dir), ms: Math.round(ms), digest, out: opts.out ?? null };
  if (opts.json) return console.log(JSON.stringify(summary));
  console.log(table([
    { field: "directory", value: summary.dir },
    { field: "entries", value: summary.entries },
    { field: "files", value: summary.files },
    { field: "directories", value: summary.dirs },
    { field: "symlinks", value: summary.symlinks },
    { field: "bytes", value: formatBytes(summary.bytes) },
    { field: "time", value: `${summary.ms} ms` },
    { field: "digest (sha256)", value: digest },
    ...(opts.out ? [{ field: "written to", value: opts.out }] : []),
  ], ["field", "value"]));
}

function loadSnapshot(file) {
  if (!file) throw new UsageError("two snapshot files are required");
  let raw;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    const wrapped = new Error(`cannot read snapshot ${file}: ${error.message}`);
    wrapped.code = error.code ?? "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT";
    throw wrapped;
  }
  const snapshot = parseDirectorySnapshot(raw);
  if (!snapshot) {
    const error = new Error(`${file} is not a valid serialized snapshot`);
    error.code = "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT";
    throw error;
  }
  return snapshot;
}

/** What changed from `a` to `b`, one row per path, in `localeCompare` order. */
function diffSnapshots(a, b) {
  const rows = [];
  const paths = new Set([...a.entries.keys(), ...b.entries.keys()]);
  for (const rel of [...paths].sort((x, y) => x.localeCompare(y))) {
    const before = a.entries.get(rel);
    const after = b.entries.get(rel);
    if (!before) rows.push({ change: "added", path: rel, detail: after.kind });
    else if (!after) rows.push({ change: "removed", path: rel, detail: before.kind });
    else if (before.kind !== after.kind) rows.push({ change: "retyped", path: rel, detail: `${before.kind} -> ${after.kind}` });
    else if (before.kind === "symlink" && before.target !== after.target) rows.push({ change: "modified", path: rel, detail: `target ${before.target} -> ${after.target}` });
    else if (before.kind === "file") {
      const what = [];
      if (before.hash !== after.hash) what.push("content");
      if (before.mode !== after.mode) what.push(`mode ${before.mode.toString(8)} -> ${after.mode.toString(8)}`);
      if (what.length) rows.push({ change: "modified", path: rel, detail: what.join(", ") });
    }
  }
  return rows;
}

async function cmdDiff(argv) {
  const opts = parseArgs(argv, { json: "bool" });
  if (opts.help) return console.log(HELP.diff);
  const [fileA, fileB] = opts._;
  if (!fileA || !fileB) throw new UsageError("two snapshot files are required");
  const rows = diffSnapshots(loadSnapshot(fileA), loadSnapshot(fileB));
  if (opts.json) return console.log(JSON.stringify({ changes: rows }));
  if (rows.length === 0) return console.log("no changes");
  console.log(table(rows, ["change", "path", "detail"]));
  const count = (c) => rows.filter((r) => r.change === c).length;
  console.log(`\n${count("added")} added, ${count("removed")} removed, ${count("modified")} modified, ${count("retyped")} retyped`);
}

async function cmdSignature(argv) {
  const opts = parseArgs(argv, { ignored: "list", json: "bool" });
  if (opts.help) return console.log(HELP.signature);
  const [dir] = opts._;
  requireDir(dir);
  const resolution = opts.ignored.length > 0 ? { kind: "git", ignoredPaths: opts.ignored } : { kind: "other" };
  const signature = await referencedSourceContentSignature(dir, resolution);
  if (opts.json) return console.log(JSON.stringify({ dir: path.resolve(dir), signature }));
  console.log(signature);
}

async function cmdIgnored(argv) {
  const opts = parseArgs(argv, { json: "bool", z: "bool" });
  if (opts.help) return console.log(HELP.ignored);
  const [dir] = opts._;
  requireDir(dir);
  const { value: resolution, ms } = await timed(() => resolveReferencedSourceIgnore(dir));
  if (opts.json) {
    console.log(JSON.stringify({ dir: path.resolve(dir), ...resolution, ms: Math.round(ms) }));
  } else if (resolution.kind === "git") {
    process.stdout.write(resolution.ignoredPaths.map((p) => p + (opts.z ? "\0" : "\n")).join(""));
  } else if (resolution.kind === "other") {
    console.error(`${PROGRAM}: ${dir} is not in a Git work tree (kind: other): nothing is ignored beyond the fixed excludes`);
  }
  if (resolution.kind === "failed") {
    if (!opts.json) console.error(`${PROGRAM}: ${resolution.reason}`);
    return 1;
  }
  return 0;
}

/**
 * Progress for a long transfer on stderr: a redrawn bar on a terminal, otherwise upstream's
 * `[paperclip] …` lines (throttled by createRuntimeProgressReporter).
 */
function progressReporter(label, phase = "Syncing", direction = "to") {
  if (!process.stderr.isTTY) {
    return createRuntimeProgressReporter({
      sink: (line) => { process.stderr.write(line); },
      phase,
      label,
      direction,
      target: "sandbox",
    });
  }
  let last = 0;
  let finished = false;
  const draw = (done, total, suffix = "") => {
    const mb = (n) => (n / 1048576).toFixed(1);
    if (total > 0) {
      const ratio = Math.min(1, done / total);
      const width = 30;
      const filled = Math.round(ratio * width);
      process.stderr.write(`\r${label} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${String(Math.round(ratio * 100)).padStart(3)}% ${mb(done)}/${mb(total)} MB${suffix}`);
    } else {
      process.stderr.write(`\r${label} ${mb(done)} MB${suffix}`);
    }
  };
  return {
    async report(done, total) {
      if (finished) return;
      const now = Date.now();
      if (now - last < 100 && done !== total) return;
      last = now;
      draw(done, total);
    },
    async complete(done, total) {
      if (finished) return;
      finished = true;
      draw(done ?? total ?? 0, total ?? 0, " done\n");
    },
    async fail(done, total) {
      if (finished) return;
      finished = true;
      draw(done ?? 0, total ?? 0, " failed\n");
    },
  };
}

function parseGzip(value) {
  if (value === undefined || value === false) return undefined;
  if (value === true) return 6;
  const level = Number(value);
  if (!Number.isInteger(level) || level < 0 || level > 9) throw new UsageError("--gzip takes a level from 0 to 9");
  return level;
}

async function cmdPack(argv) {
  const opts = parseArgs(argv, { out: "string", gzip: "optional", exclude: "list", "follow-symlinks": "bool", json: "bool" });
  if (opts.help) return console.log(HELP.pack);
  const [dir] = opts._;
  if (!opts.out) throw new UsageError("--out FILE (or --out - for stdout) is required");
  requireDir(dir);
  const gzip = parseGzip(opts.gzip);
  const progress = progressReporter("workspace");
  const common = { localDir: dir, exclude: opts.exclude, followSymlinks: opts["follow-symlinks"], gzip, progress };
  const start = process.hrtime.bigint();
  let summary;
  if (opts.out === "-") {
    const stream = await createTarballStreamFromDirectory({ ...common, precomputeSize: true });
    for await (const chunk of stream) {
      if (!process.stdout.write(chunk)) await new Promise((resolve) => process.stdout.once("drain", resolve));
    }
    summary = stream.summary;
  } else {
    summary = await packDirectoryToFile({ ...common, archivePath: opts.out, precomputeSize: true });
  }
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (opts.json) console.error(JSON.stringify({ dir: path.resolve(dir), out: opts.out, gzip: gzip ?? null, ...summary, ms: Math.round(ms) }));
  return 0;
}

async function cmdExtract(argv) {
  const opts = parseArgs(argv, { json: "bool" });
  if (opts.help) return console.log(HELP.extract);
  const [archive, dir] = opts._;
  if (!archive || !dir) throw new UsageError("an archive (or -) and a target directory are required");
  if (archive !== "-" && !existsSync(archive)) {
    const error = new Error(`no such archive: ${archive}`);
    error.code = "ENOENT";
    throw error;
  }
  mkdirSync(dir, { recursive: true });
  const totalBytes = archive === "-" ? undefined : statSync(archive).size;
  const summary = await extractTarballToDirectory({
    source: archive === "-" ? process.stdin : archive,
    localDir: dir,
    totalBytes,
    progress: progressReporter("archive", "Restoring", "from"),
  });
  if (opts.json) console.log(JSON.stringify({ dir: path.resolve(dir), ...summary }));
  return 0;
}

async function cmdMerge(argv) {
  const opts = parseArgs(argv, { baseline: "string", source: "string", target: "string", "conflict-policy": "string", "refuse-empty-source": "bool", json: "bool" });
  if (opts.help) return console.log(HELP.merge);
  if (!opts.baseline || !opts.source || !opts.target) throw new UsageError("--baseline, --source and --target are required");
  const policy = opts["conflict-policy"] ?? "overwrite";
  if (policy !== "overwrite" && policy !== "reject") throw new UsageError("--conflict-policy is overwrite or reject");
  const baseline = loadSnapshot(opts.baseline);
  requireDir(opts.target);
  const before = await captureDirectorySnapshot(opts.target, { exclude: baseline.exclude });
  try {
    const { ms } = await timed(() => mergeDirectoryWithBaseline({
      baseline, sourceDir: opts.source, targetDir: opts.target, conflictPolicy: policy, refuseEmptySource: opts["refuse-empty-source"],
    }));
    const after = await captureDirectorySnapshot(opts.target, { exclude: baseline.exclude });
    const changes = diffSnapshots(before, after);
    if (opts.json) return console.log(JSON.stringify({ target: path.resolve(opts.target), ms: Math.round(ms), changes }));
    if (changes.length === 0) console.log("merged: the workspace already matched");
    else console.log(`${table(changes, ["change", "path", "detail"])}\n\nmerged in ${Math.round(ms)} ms: ${changes.length} paths changed in the workspace`);
  } catch (error) {
    if (error?.code === "DIRECTORY_MERGE_CONFLICT" && Array.isArray(error.paths)) {
      error.message = `${error.message}: ${error.paths.join(", ")}`;
    }
    throw error;
  }
}

const SSH_SPEC = {
  host: "string", port: "string", user: "string", key: "string", "known-hosts": "string",
  "no-host-key-check": "bool", "remote-dir": "string", exclude: "list", json: "bool",
};

/** The upstream `SshRemoteExecutionSpec` for the SSH options of push/pull. */
function sshSpec(opts) {
  for (const flag of ["host", "user", "key", "remote-dir"]) if (!opts[flag]) throw new UsageError(`--${flag} is required`);
  if (!opts["known-hosts"] && !opts["no-host-key-check"]) throw new UsageError("--known-hosts FILE is required (or --no-host-key-check)");
  if (opts["known-hosts"] && opts["no-host-key-check"]) throw new UsageError("--known-hosts and --no-host-key-check exclude each other");
  const port = opts.port === undefined ? 22 : Number(opts.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError("--port takes a port number");
  if (!path.isAbsolute(opts["remote-dir"])) throw new UsageError("--remote-dir must be absolute");
  const read = (file) => readFileSync(file, "utf8");
  return {
    host: opts.host,
    port,
    username: opts.user,
    privateKey: read(opts.key),
    knownHosts: opts["known-hosts"] ? read(opts["known-hosts"]) : null,
    strictHostKeyChecking: !opts["no-host-key-check"],
    remoteWorkspacePath: opts["remote-dir"],
    remoteCwd: opts["remote-dir"],
  };
}

/** Aborts the transfer on Ctrl-C instead of leaving the remote half-written silently. */
function interruptSignal() {
  const controller = new AbortController();
  process.once("SIGINT", () => controller.abort(new Error("interrupted")));
  return controller.signal;
}

async function cmdPush(argv) {
  const opts = parseArgs(argv, { ...SSH_SPEC, "follow-symlinks": "bool" });
  if (opts.help) return console.log(HELP.push);
  const [dir] = opts._;
  requireDir(dir);
  const spec = sshSpec(opts);
  const { ms } = await timed(() => syncDirectoryToSsh({
    spec, localDir: dir, remoteDir: opts["remote-dir"], exclude: opts.exclude, followSymlinks: opts["follow-symlinks"],
    onProgress: (line) => { process.stderr.write(line); }, progressLabel: "workspace", signal: interruptSignal(),
  }));
  if (opts.json) console.log(JSON.stringify({ dir: path.resolve(dir), remoteDir: opts["remote-dir"], host: spec.host, ms: Math.round(ms) }));
}

async function cmdPull(argv) {
  const opts = parseArgs(argv, { ...SSH_SPEC, preserve: "list" });
  if (opts.help) return console.log(HELP.pull);
  const [dir] = opts._;
  if (!dir) throw new UsageError("a local directory is required");
  const spec = sshSpec(opts);
  mkdirSync(dir, { recursive: true });
  const { ms } = await timed(() => syncDirectoryFromSsh({
    spec, remoteDir: opts["remote-dir"], localDir: dir, exclude: opts.exclude, preserveLocalEntries: opts.preserve,
    onProgress: (line) => { process.stderr.write(line); }, progressLabel: "workspace", signal: interruptSignal(),
  }));
  if (opts.json) console.log(JSON.stringify({ dir: path.resolve(dir), remoteDir: opts["remote-dir"], host: spec.host, ms: Math.round(ms) }));
}

// ---- demo ------------------------------------------------------------------------------

const HEAVY = ["node_modules", "vendor", "dist", "build", "out", "coverage", ".next", ".turbo", ".cache"];
const HEAVY_EXCLUDES = HEAVY.flatMap((n) => [n, `${n}/*`, `*/${n}`, `*/${n}/*`]);

function generateWorkspace(root, files) {
  let seed = 12345;
  const rand = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 4294967296;
  };
  const text = (n) => {
    let s = "";
    while (s.length < n) s += `export const v${Math.floor(rand() * 1e6)} = ${Math.floor(rand() * 1e9)};\n`;
    return s.slice(0, n);
  };
  const write = (rel, body) => {
    mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    writeFileSync(path.join(root, rel), body);
  };
  for (let i = 0; i < files; i += 1) write(`src/mod${i % 40}/sub${i % 7}/file${i}.ts`, text(200 + Math.floor(rand() * 6000)));
  for (let i = 0; i < files * 2; i += 1) write(`node_modules/pkg${i % 150}/lib/f${i}.js`, text(100 + Math.floor(rand() * 3000)));
  write(".gitignore", "node_modules/\n*.log\n.env\n");
  write(".env", "SECRET=do-not-ship\n");
  write("debug.log", "noise\n");
  write("README.md", "# demo workspace\n");
}

function git(dir, ...args) {
  return execFileSync("git", ["-C", dir, "-c", "user.name=demo", "-c", "user.email=demo@example.invalid", ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

async function loadUpstream() {
  try {
    return {
      merge: await import("@paperclipai/adapter-utils/workspace-restore-merge"),
      sandbox: await import("@paperclipai/adapter-utils/sandbox-managed-runtime"),
      execute: await import("@paperclipai/adapter-utils/acpx-engine/execute"),
    };
  } catch {
    return null;
  }
}

// git's racy-clean window, plus a margin: see `captureDirectorySnapshot({ previous })`.
const RACY_WINDOW_MS = 2100;

/**
 * The demo's last step: upstream's `prepareAdapterExecutionTargetRuntime` + `restoreWorkspace()`
 * for an SSH target (a throwaway sshd on 127.0.0.1) on two copies of the workspace, run by
 * scripts/execution-target-probe.mjs with and without `--import …/register`; records the
 * timings, whether the remote trees and restored workspaces are equal, and the host `ssh`/`tar`
 * processes each run started.
 */
async function demoExecutionTarget(work, workspace, record, log) {
  const repoRoot = new URL("..", import.meta.url);
  const probe = new URL("scripts/execution-target-probe.mjs", repoRoot);
  const helper = new URL("__test__/helpers/sshd.js", repoRoot);
  if (!existsSync(probe) || !existsSync(helper) || !["/usr/sbin/sshd", "/usr/local/sbin/sshd"].some((f) => existsSync(f))) {
    record("execution target over SSH (upstream code)", null, null, null, "skipped: needs sshd and a checkout of this repository");
    return;
  }
  const { startSshd } = await import(helper.href);
  let server;
  try {
    server = await startSshd(path.join(work, "sshd"));
  } catch (error) {
    record("execution target over SSH (upstream code)", null, null, null, `skipped: sshd did not start (${String(error.message).split("\n")[0]})`);
    return;
  }
  try {
    log("  (upstream's prepareAdapterExecutionTargetRuntime over SSH, with and without --import …/register)");
    const specFile = path.join(work, "ssh-spec.json");
    writeFileSync(specFile, JSON.stringify(server.spec));
    const pinned = { GIT_AUTHOR_DATE: "2026-01-02T03:04:05Z", GIT_COMMITTER_DATE: "2026-01-02T03:04:05Z" };
    const runs = {};
    for (const [name, activated] of [["plain", false], ["native", true]]) {
      const dir = path.join(work, `target-${name}`);
      cpSync(workspace, dir, { recursive: true, verbatimSymlinks: true });
      const args = [...(activated ? ["--import", new URL("lib/activation/register.js", repoRoot).href] : []), probe.pathname, specFile, dir, `demo-${name}`, "--agent"];
      const out = execFileSync(process.execPath, args, { encoding: "utf8", env: { ...process.env, ...pinned, NODE_OPTIONS: "" }, maxBuffer: 1 << 26 });
      runs[name] = JSON.parse(out.trim().split("\n").pop());
    }
    const { plain, native } = runs;
    const same = JSON.stringify([plain.remote, plain.local]) === JSON.stringify([native.remote, native.local]);
    const hostTools = (r) => ["ssh", "tar"].map((t) => `${t} ${(r.prepare.children[t] ?? 0) + (r.restore.children[t] ?? 0)}`).join(", ");
    record("execution target over SSH (upstream code)", native.prepare.ms + native.restore.ms, plain.prepare.ms + plain.restore.ms, same && native.activation.active,
      `prepare ${native.prepare.ms.toFixed(0)} vs ${plain.prepare.ms.toFixed(0)} ms, restore ${native.restore.ms.toFixed(0)} vs ${plain.restore.ms.toFixed(0)} ms; host children: activated ${hostTools(native)}, plain ${hostTools(plain)}`);
  } finally {
    await server.stop();
  }
}

async function cmdDemo(argv) {
  const opts = parseArgs(argv, { files: "string", keep: "bool", json: "bool", "no-ssh": "bool" });
  if (opts.help) return console.log(HELP.demo);
  const files = opts.files === undefined ? 4000 : Number(opts.files);
  if (!Number.isInteger(files) || files < 1) throw new UsageError("--files takes a whole number >= 1");
  const log = (line) => { if (!opts.json) console.log(line); };
  const upstream = await loadUpstream();
  const work = mkdtempSync(path.join(os.tmpdir(), "paperclip-sync-demo-"));
  const workspace = path.join(work, "workspace");
  const remote = path.join(work, "remote");
  const rows = [];
  const record = (step, native, theirs, same, note = "") => {
    rows.push({
      step,
      "native ms": native === null ? "-" : native.toFixed(0),
      "upstream ms": theirs === null ? "-" : theirs.toFixed(0),
      speedup: native !== null && theirs !== null ? `${(theirs / Math.max(native, 0.01)).toFixed(1)}x` : "-",
      "same result": same === null ? "-" : same ? "yes" : "NO",
      note,
    });
    const parts = [];
    if (native !== null) parts.push(`native ${native.toFixed(0)} ms`);
    if (theirs !== null) parts.push(`upstream ${theirs.toFixed(0)} ms`);
    if (note) parts.push(note);
    log(`  ${step}: ${parts.join(", ")}`);
  };
  try {
    log(`Generating a workspace in ${workspace}: ${files} source files, ${files * 2} ignored dependency files …`);
    generateWorkspace(workspace, files);
    git(workspace, "init", "-q", "-b", "main");
    git(workspace, "add", "-A");
    git(workspace, "commit", "-q", "-m", "initial");
    // Wait out the racy-timestamp window (a file modified within 2 s before a capture is
    // always re-read), so the incremental re-snapshot below measures reuse, as on a real host.
    await new Promise((resolve) => setTimeout(resolve, RACY_WINDOW_MS));
    log("Running the staging cycle:");

    // 1. Ignore resolution: in-process, read-only (upstream spawns git twice).
    const resolved = await timed(() => resolveReferencedSourceIgnore(workspace));
    if (resolved.value.kind !== "git") throw new Error(`ignore resolution gave ${JSON.stringify(resolved.value)}`);
    const ignored = resolved.value.ignoredPaths;
    const note = `${ignored.length} ignored: ${ignored.join(", ")}`;
    if (upstream) {
      const theirs = await timed(() => upstream.sandbox.resolveReferencedSourceIgnore(workspace));
      record("resolve ignored paths", resolved.ms, theirs.ms, JSON.stringify(theirs.value) === JSON.stringify(resolved.value), note);
    } else record("resolve ignored paths", resolved.ms, null, null, note);
    const exclude = mergeExcludes(HEAVY_EXCLUDES, [".git", ".git/*"], ignored);

    // 2. Baseline snapshot.
    const ours = await timed(() => captureDirectorySnapshot(workspace, { exclude, incremental: true }));
    const digest = directorySnapshotSha256(ours.value);
    if (upstream) {
      const theirs = await timed(() => upstream.merge.captureDirectorySnapshot(workspace, { exclude }));
      record("baseline snapshot", ours.ms, theirs.ms, upstream.merge.directorySnapshotSha256(theirs.value) === digest, `${ours.value.entries.size} entries`);
    } else record("baseline snapshot", ours.ms, null, null, `${ours.value.entries.size} entries`);

    // 3. Content signature of the workspace as a referenced project.
    const resolution = { kind: "git", ignoredPaths: ignored };
    const sig = await timed(() => referencedSourceContentSignature(workspace, resolution));
    if (upstream) {
      const theirs = await timed(() => upstream.execute.referencedSourceContentSignature(workspace, resolution));
      record("content signature", sig.ms, theirs.ms, theirs.value === sig.value, sig.value);
    } else record("content signature", sig.ms, null, null, sig.value);

    // 4. Pack the workspace for the sandbox (upstream runs tar; we archive in-process).
    const archives = path.join(work, "archives");
    mkdirSync(archives);
    // The sandbox lane's excludes: heavy directories, .git, and the escaped ignored paths.
    const tarExclude = mergeExcludes(HEAVY_EXCLUDES, [".git"], referencedSourceIgnoreExcludeEntries(resolved.value));
    const ourTar = path.join(archives, "ours.tar");
    const packed = await timed(() => packDirectoryToFile({ localDir: workspace, archivePath: ourTar, exclude: tarExclude, progress: opts.json ? undefined : progressReporter("workspace") }));
    if (upstream) {
      const theirTar = path.join(archives, "upstream.tar");
      const theirs = await timed(() => upstream.sandbox.createTarballFromDirectory({ localDir: workspace, archivePath: theirTar, exclude: tarExclude }));
      const members = (file) => execFileSync("tar", ["-tf", file], { encoding: "utf8", maxBuffer: 1 << 28 }).split("\n").filter(Boolean).sort().join("\n");
      record("pack workspace (tar)", packed.ms, theirs.ms, members(ourTar) === members(theirTar), `${packed.value.entries} members, ${formatBytes(packed.value.tarBytes)}`);
    } else record("pack workspace (tar)", packed.ms, null, null, `${packed.value.entries} members, ${formatBytes(packed.value.tarBytes)}`);

    // 5. The "remote" edits a copy: modifies, adds and deletes files. (The host as it was
    //    is kept aside, so upstream can merge into an identical copy.)
    if (upstream) cpSync(workspace, path.join(work, "workspace-before-merge"), { recursive: true, verbatimSymlinks: true });
    cpSync(workspace, remote, { recursive: true, filter: (src) => !src.includes(`${path.sep}node_modules`) });
    let edits = 0;
    for (const [rel, entry] of ours.value.entries) {
      if (entry.kind !== "file" || !rel.startsWith("src/")) continue;
      edits += 1;
      if (edits % 100 === 0) appendFileSync(path.join(remote, rel), "\n// edited remotely\n");
      else if (edits % 173 === 0) rmSync(path.join(remote, rel));
    }
    writeFileSync(path.join(remote, "src", "added-remotely.ts"), "export const added = true;\n");
    record("simulate remote edit", null, null, null, "copy without dependencies; edit 1%, delete ~0.6%, add 1");

    // 6. Re-snapshot of the remote result, and an incremental re-snapshot of the unchanged host.
    const remoteSnap = await timed(() => captureDirectorySnapshot(remote, { exclude }));
    if (upstream) {
      const theirs = await timed(() => upstream.merge.captureDirectorySnapshot(remote, { exclude }));
      record("snapshot remote result", remoteSnap.ms, theirs.ms, upstream.merge.directorySnapshotSha256(theirs.value) === directorySnapshotSha256(remoteSnap.value));
    } else record("snapshot remote result", remoteSnap.ms, null, null);
    const again = await timed(() => captureDirectorySnapshot(workspace, { exclude, previous: ours.value }));
    record("incremental host re-snapshot", again.ms, null, directorySnapshotSha256(again.value) === digest, `${snapshotReusedHashCount(again.value)} hashes reused`);

    const changes = diffSnapshots(ours.value, remoteSnap.value);
    record("diff baseline -> remote", null, null, null, `${changes.length} changes`);

    // 7. Merge back: natively into the workspace, upstream into a copy of it; both must
    //    end equal to the remote result (the excluded dependency tree kept).
    const merged = await timed(() => mergeDirectoryWithBaseline({ baseline: ours.value, sourceDir: remote, targetDir: workspace }));
    const after = directorySnapshotSha256(await captureDirectorySnapshot(workspace, { exclude }));
    const matchesRemote = after === directorySnapshotSha256(remoteSnap.value);
    if (upstream) {
      const hostCopy = path.join(work, "workspace-upstream");
      cpSync(path.join(work, "workspace-before-merge"), hostCopy, { recursive: true, verbatimSymlinks: true });
      const theirs = await timed(() => upstream.merge.mergeDirectoryWithBaseline({ baseline: ours.value, sourceDir: remote, targetDir: hostCopy }));
      const full = async (dir) => directorySnapshotSha256(await captureDirectorySnapshot(dir));
      const same = matchesRemote && (await full(hostCopy)) === (await full(workspace));
      record("merge remote result back", merged.ms, theirs.ms, same, "whole trees equal, node_modules kept");
    } else record("merge remote result back", merged.ms, null, matchesRemote);

    // 8. Upstream's own execution-target code, unmodified, with and without the activation.
    if (!opts["no-ssh"]) await demoExecutionTarget(work, workspace, record, log);

    if (opts.json) {
      console.log(JSON.stringify({ workspace: opts.keep ? workspace : null, steps: rows }));
    } else {
      console.log(`\n${table(rows, ["step", "native ms", "upstream ms", "speedup", "same result", "note"])}`);
      if (!upstream) console.log("\n(upstream @paperclipai/adapter-utils is not installed: native timings only)");
      if (opts.keep) console.log(`\nworkspace kept in ${work}`);
    }
    if (rows.some((r) => r["same result"] === "NO")) {
      const error = new Error("a native step gave a different result than upstream");
      error.code = "ERR_PAPERCLIP_NATIVE_DEMO_MISMATCH";
      throw error;
    }
  } finally {
    if (!opts.keep) rmSync(work, { recursive: true, force: true });
  }
}

/** `doctor`: what the activation does here (self-contained: imports what it needs). */
async function cmdDoctor(argv) {
  const opts = parseArgs(argv, { json: "bool" });
  if (opts.help) return console.log(HELP.doctor);
  const { nativeActivation } = await import("../lib/activation/state.js");
  const { ACTIVATION_ENV, VERIFIED_UPSTREAM_VERSIONS, compositionPlan, isVerifiedUpstreamVersion } = await import("../lib/activation/coverage.js");
  const { findInstalledUpstream } = await import("../lib/activation/node.js");
  const { nativeLoadError, nativePlatform } = await import("../lib/native.js");
  const installed = findInstalledUpstream();
  let plan = [];
  if (!nativeLoadError) plan = (await compositionPlan()).map(({ module, names }) => ({ module, names }));
  // What a process started with the hook gets: a child loads every covered module.
  const register = new URL("../lib/activation/register.js", import.meta.url).href;
  const state = new URL("../lib/activation/state.js", import.meta.url).href;
  const probe = `for (const m of ${JSON.stringify(plan.map((p) => p.module))}) await import("@paperclipai/adapter-utils/" + m).catch(() => {});
    const { nativeActivation } = await import(${JSON.stringify(state)}); console.log(JSON.stringify(nativeActivation()));`;
  let child = null;
  let childStderr = "";
  try {
    const { spawnSync } = await import("node:child_process");
    const run = spawnSync(process.execPath, ["--import", register, "--input-type=module", "-e", probe], { encoding: "utf8", cwd: process.cwd(), timeout: 60_000 });
    childStderr = run.stderr.trim();
    child = JSON.parse(run.stdout.trim().split("\n").pop());
  } catch {
    child = null;
  }
  const report = {
    platform: nativePlatform(),
    node: process.versions.node,
    nativeBinary: nativeLoadError ? `unavailable: ${nativeLoadError.message}` : "loads",
    upstream: installed ? { root: installed.root, version: installed.version, verified: isVerifiedUpstreamVersion(installed.version) } : null,
    verifiedVersions: VERIFIED_UPSTREAM_VERSIONS,
    turnedOff: process.env[ACTIVATION_ENV] === "0",
    covered: plan,
    thisProcess: nativeActivation(),
    withRegister: child ? { active: child.active, reason: child.reason, stderr: childStderr || null, modules: Object.fromEntries(child.upstream.flatMap((u) => Object.entries(u.modules).map(([m, names]) => [m, names.length]))) } : null,
  };
  const on = Boolean(report.withRegister?.active && Object.keys(report.withRegister.modules).length > 0);
  if (opts.json) {
    console.log(JSON.stringify(report));
    return on ? 0 : 1;
  }
  console.log(`platform            ${report.platform} (Node ${report.node})`);
  console.log(`native binary       ${report.nativeBinary}`);
  console.log(`upstream            ${installed ? `${installed.version} at ${installed.root} (${report.upstream.verified ? "verified" : `not verified; verified: ${VERIFIED_UPSTREAM_VERSIONS.join(", ")}`})` : "not found from this directory"}`);
  console.log(`${ACTIVATION_ENV}  ${process.env[ACTIVATION_ENV] ?? "(unset)"}`);
  console.log(`this process        ${report.thisProcess.active ? `active (${report.thisProcess.mechanism})` : `not active${report.thisProcess.reason ? ` (${report.thisProcess.reason})` : ""}`}`);
  console.log(`with --import …/register: ${on ? "active" : `off${report.withRegister?.stderr ? ` (${report.withRegister.stderr})` : ""}`}`);
  if (plan.length) {
    console.log(`\n${table(plan.map(({ module, names }) => ({ "upstream module": module, "served natively": report.withRegister?.modules?.[module] ? `${names.length} names` : "no", names: names.join(", ") })), ["upstream module", "served natively", "names"])}`);
  }
  console.log("\nEnable: NODE_OPTIONS=\"--import @paperclipai/adapter-utils-native/register\"; turn off: PAPERCLIP_ADAPTER_UTILS_NATIVE=0");
  return on ? 0 : 1;
}

const COMMANDS = {
  doctor: cmdDoctor,
  demo: cmdDemo,
  merge: cmdMerge,
  push: cmdPush,
  pull: cmdPull,
  ignored: cmdIgnored,
  snapshot: cmdSnapshot,
  diff: cmdDiff,
  signature: cmdSignature,
  pack: cmdPack,
  extract: cmdExtract,
};

async function main(argv) {
  const [command, ...rest] = argv;
  if (!command || command === "--help" || command === "-h" || command === "help") {
    console.log(HELP.main);
    return command ? 0 : 2;
  }
  const run = COMMANDS[command];
  if (!run) throw new UsageError(`unknown command '${command}'`);
  return (await run(rest)) ?? 0;
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (error) => {
    if (error instanceof UsageError) {
      console.error(`${PROGRAM}: ${error.message}\nRun '${PROGRAM} --help' for usage.`);
      process.exitCode = 2;
      return;
    }
    const code = error?.code ?? "ERR_PAPERCLIP_NATIVE_INTERNAL";
    // One line, whatever the message holds (remote stderr, OpenSSH-style warnings).
    const message = String(error?.message ?? error).split("\n").map((line) => line.trim()).filter(Boolean).join(" ");
    console.error(`${PROGRAM}: ${code}: ${message}`);
    process.exitCode = 1;
  },
);
