// Drop-in for the transport part of `@paperclipai/adapter-utils/ssh` (docs/ssh.md):
// `runSshCommand`, `syncDirectoryToSsh` and `syncDirectoryFromSsh`, each on one in-process SSH
// session leased from the native pool (libssh2, src/ssh.rs; reused across calls unless
// `PAPERCLIP_NATIVE_SSH_REUSE=0`). The host spawns nothing: no `ssh`, no `tar`. The
// archive goes from our packer straight into the channel, or from the channel into our safe
// extractor; the remote side is still the remote's own `sh` and `tar`, given upstream's
// command lines with upstream's quoting.
import { promises as fs } from "node:fs";
import path from "node:path";
import { abortError, codes, constants, native, runCancellable, toJsError } from "./native.js";
import {
  CONNECT_BUDGET,
  shellQuote,
  sshTarget,
  transferProgress,
  transferTarget,
  uploadProgress,
  withConnectBudget,
} from "./ssh-common.js";
import { parseMembers, pullArguments } from "./tree-delta.js";
import { prepareWorkspaceOverSsh, restoreWorkspaceOverSsh } from "./ssh-workspace.js";
import { archiveLimits, checkSignal, invalidArgument, requireString } from "./arguments.js";
import { isReservedName, reportForeignStaging } from "./staging.js";
import { packInput } from "./tar-common.js";

/** Upstream's default `timeoutMs` and `maxBuffer` for `runSshCommand`. */
const DEFAULT_COMMAND_TIMEOUT_MS = 15_000;
const DEFAULT_MAX_BUFFER = 128 * 1024;
/** Upstream's limits for the remote size probe of a restore. */
const PROBE_TIMEOUT_MS = 15_000;
const PROBE_MAX_BUFFER = 16 * 1024;
/** The exclude every upstream tar invocation starts with (macOS AppleDouble files). */
const APPLE_DOUBLE = constants.appleDoubleExclude;

const TIMEOUT_CODE = codes.SSH_TIMEOUT;
const MAX_BUFFER_CODE = codes.MAX_BUFFER;

/** Upstream's environment-key rule. */
function isValidShellEnvKey(value) {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(value);
}

/**
 * The script `runSshCommand` runs: the login profiles sourced first (guarded, silenced),
 * then `exec [env K='v' …] sh -c '<command>'`, exactly upstream's.
 */
function loginScript(remoteCommand, envArgs) {
  return [
    "if [ -f /etc/profile ]; then . /etc/profile >/dev/null 2>&1 || true; fi",
    'if [ -f "$HOME/.profile" ]; then . "$HOME/.profile" >/dev/null 2>&1 || true; fi',
    'if [ -f "$HOME/.bash_profile" ]; then . "$HOME/.bash_profile" >/dev/null 2>&1 || true; elif [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc" >/dev/null 2>&1 || true; fi',
    'if [ -f "$HOME/.zprofile" ]; then . "$HOME/.zprofile" >/dev/null 2>&1 || true; fi',
    envArgs.length > 0
      ? `exec env ${envArgs.join(" ")} sh -c ${shellQuote(remoteCommand)}`
      : `exec sh -c ${shellQuote(remoteCommand)}`,
  ].join(" && ");
}

/** Adds upstream's failure fields (`stdout`, `stderr`, `code`, `signal`, `killed`) to an error. */
function commandFailure(error, { stdout = "", stderr, code, signal = null, killed = false }) {
  return Object.assign(error, { stdout, stderr: stderr ?? "", code: code ?? error.code ?? null, signal, killed });
}

/**
 * Runs `remoteCommand` on the host of `config` (see ssh.d.ts). Resolves `{ stdout, stderr }`
 * on exit status 0; rejects like upstream otherwise.
 */
export async function runSshCommand(config, remoteCommand, options = {}) {
  return await withConnectBudget(options, (withBudget) => runCommand(config, remoteCommand, withBudget));
}

async function runCommand(config, remoteCommand, options) {
  if (typeof remoteCommand !== "string") throw invalidArgument("remoteCommand must be a string");
  const envEntries = Object.entries(options.env ?? {}).filter((entry) => typeof entry[1] === "string");
  for (const [key] of envEntries) {
    if (!isValidShellEnvKey(key)) throw new Error(`Invalid SSH environment variable key: ${key}`);
  }
  const signal = checkSignal(options.signal);
  const target = sshTarget(config, options);
  const envArgs = envEntries.map(([key, value]) => `${key}=${shellQuote(value)}`);
  const command = `sh -c ${shellQuote(loginScript(remoteCommand, envArgs))}`;
  const stdin = options.stdin != null ? Buffer.from(String(options.stdin), "utf8") : undefined;
  const timeoutMs = options.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  const maxBuffer = options.maxBuffer ?? DEFAULT_MAX_BUFFER;
  let result;
  try {
    result = await runCancellable(signal, (id) => native.sshExec(target, command, stdin, timeoutMs, maxBuffer, id));
  } catch (error) {
    if (error?.name === "AbortError") throw error;
    if (error?.code === TIMEOUT_CODE) {
      throw commandFailure(error, { code: TIMEOUT_CODE, killed: true, signal: "SIGTERM" });
    }
    if (error?.code === MAX_BUFFER_CODE) throw commandFailure(error, {});
    // A connection failure (host key, authentication, network): upstream's ssh would have
    // printed it on stderr.
    throw commandFailure(error, { stderr: error?.message });
  }
  const stdout = result.stdout.toString("utf8");
  const stderr = result.stderr.toString("utf8");
  if (result.exitStatus === 0 && !result.exitSignal) return { stdout, stderr };
  const code = result.exitSignal ? null : result.exitStatus;
  const error = new Error(stderr.trim() || stdout.trim() || `Process exited with code ${code ?? -1}`);
  throw commandFailure(error, { stdout, stderr, code, signal: result.exitSignal ?? null });
}

/**
 * Upstream's `ensureSshWorkspaceReady`: creates `config.remoteWorkspacePath` on the host and
 * resolves `{ remoteCwd }`, the directory as the remote `pwd` prints it; on a pooled
 * in-process session (upstream's own starts a host `ssh`).
 */
export async function ensureSshWorkspaceReady(config) {
  const dir = shellQuote(config.remoteWorkspacePath);
  const result = await runSshCommand(config, `mkdir -p ${dir} && cd ${dir} && pwd`);
  return { remoteCwd: result.stdout.trim() };
}

/** The remote script of one runner command: upstream's `cd` and environment forms. */
function runnerScript(commandInput, defaultCwd) {
  const command = commandInput.command.trim();
  const args = commandInput.args ?? [];
  const cwd = commandInput.cwd?.trim() || defaultCwd;
  const env = Object.entries(commandInput.env ?? {}).filter((entry) => typeof entry[1] === "string");
  const quoted = [shellQuote(command), ...args.map((arg) => shellQuote(arg))].join(" ");
  const envPrefix = env.length > 0 ? `env ${env.map(([key, value]) => `${key}=${shellQuote(value)}`).join(" ")} ` : "";
  const exports =
    env.length > 0 ? `${env.map(([key, value]) => `export ${key}=${shellQuote(value)};`).join(" ")} ` : "";
  // A shell given its script with -c / -lc runs the script itself, after the exports.
  const isShellScript =
    (command === "sh" || command === "bash") && (args[0] === "-c" || args[0] === "-lc") && typeof args[1] === "string";
  const body = isShellScript ? `${exports}${args[1]}` : `${envPrefix}exec ${quoted}`;
  return `cd ${shellQuote(cwd)} && ${body}`;
}

/**
 * Upstream's `createSshCommandManagedRuntimeRunner`: a sandbox-style runner whose
 * `execute` runs each command on the host of `input.spec` (in `cwd`, default
 * `input.defaultCwd` or `spec.remoteCwd`, with its `env` and `stdin`) through
 * {@link runSshCommand}, so on a pooled in-process session; output is bounded by
 * `maxBufferBytes` (default 1 MiB). Resolves upstream's result shape, a failure included
 * (`exitCode`, `signal`, `timedOut`, both outputs, also passed to `onLog`).
 */
export function createSshCommandManagedRuntimeRunner(input) {
  const defaultCwd = input.defaultCwd?.trim() || input.spec.remoteCwd;
  const maxBuffer =
    typeof input.maxBufferBytes === "number" && Number.isFinite(input.maxBufferBytes) && input.maxBufferBytes > 0
      ? Math.trunc(input.maxBufferBytes)
      : 1024 * 1024;
  return {
    execute: async (commandInput) => {
      const startedAt = new Date().toISOString();
      const remoteCommand = runnerScript(commandInput, defaultCwd);
      let outcome;
      try {
        const result = await runSshCommand(input.spec, remoteCommand, {
          stdin: commandInput.stdin,
          timeoutMs: commandInput.timeoutMs,
          maxBuffer,
        });
        outcome = { exitCode: 0, signal: null, timedOut: false, stdout: result.stdout, stderr: result.stderr };
      } catch (error) {
        const stdout = typeof error?.stdout === "string" ? error.stdout : "";
        const stderr =
          typeof error?.stderr === "string" ? error.stderr : error instanceof Error ? error.message : String(error);
        outcome = {
          exitCode: typeof error?.code === "number" ? error.code : null,
          signal: typeof error?.signal === "string" ? error.signal : null,
          timedOut: error?.killed === true,
          stdout,
          stderr,
        };
      }
      if (outcome.stdout) await commandInput.onLog?.("stdout", outcome.stdout);
      if (outcome.stderr) await commandInput.onLog?.("stderr", outcome.stderr);
      return { ...outcome, pid: null, startedAt };
    },
  };
}

/** Checks the transfer input shared by both directions. */
function transferInput(input, dirKey) {
  if (!input || typeof input !== "object") throw invalidArgument("input must be an object");
  if (!input.spec || typeof input.spec !== "object")
    throw invalidArgument("input.spec must be an SshRemoteExecutionSpec");
  if (typeof input.remoteDir !== "string" || input.remoteDir === "")
    throw invalidArgument("remoteDir must be a non-empty string");
  if (typeof input[dirKey] !== "string" || input[dirKey] === "")
    throw invalidArgument(`${dirKey} must be a non-empty string`);
  if (input.exclude != null && (!Array.isArray(input.exclude) || !input.exclude.every((e) => typeof e === "string"))) {
    throw invalidArgument("exclude must be an array of strings");
  }
  return {
    signal: checkSignal(input.signal),
    target: transferTarget(input.spec, input),
  };
}

/**
 * Uploads `localDir` into `remoteDir` on the SSH host (see ssh.d.ts): our packer streams the
 * archive into `sh -c 'mkdir -p <dir> && tar -xf - -C <dir>'` on one session.
 */
export async function syncDirectoryToSsh(input) {
  const remoteDir = shellQuote(input?.remoteDir ?? "");
  await withConnectBudget(input, (withBudget) =>
    uploadTree(withBudget, { command: `sh -c ${shellQuote(`mkdir -p ${remoteDir} && tar -xf - -C ${remoteDir}`)}` }),
  );
}

/**
 * One upload of `input.localDir` (checked as `syncDirectoryToSsh` checks it) into the stdin
 * of `command`, with upstream's progress lines. `only`: the members to write (all when
 * absent); `record`: resolve the members written (their `stat` records, for the delta
 * manifest); `collectStdout`: resolve the command's stdout (up to this many bytes); `gzip`:
 * compress the stream at level 1 (the command must decompress it).
 */
async function uploadTree(input, { command, only, record = false, collectStdout, gzip = false }) {
  const { signal, target } = transferInput(input, "localDir");
  // Members named `./x` with the excludes matched against those names, as upstream's
  // `tar -C <localDir> --exclude … -cf - .` archives them.
  const pack = {
    ...(await packInput({ localDir: input.localDir, exclude: input.exclude, followSymlinks: input.followSymlinks })),
    dotMembers: true,
    ...(gzip ? { gzip: 1 } : {}),
    ...(only ? { only } : {}),
  };
  const progress = uploadProgress({
    onProgress: input.onProgress,
    label: input.progressLabel,
    // Upstream's total (the regular files' sizes), walked while the transfer starts (and
    // stopped by the signal, like the transfer).
    estimate:
      typeof input.onProgress === "function"
        ? runCancellable(signal, (id) =>
            native.sshUploadEstimate(input.localDir, input.exclude ?? [], Boolean(input.followSymlinks), id),
          )
        : null,
  });
  const options = record || collectStdout != null ? { record, collectStdout } : undefined;
  let result;
  try {
    result = await runCancellable(signal, (id) =>
      native.sshUploadTar(target, command, pack, id, progress ? (bytes) => progress.update(bytes) : undefined, options),
    );
    await progress?.finish(result.tarBytes);
  } catch (error) {
    await progress?.fail();
    throw error;
  }
  return { stdout: result.stdout ?? null, members: result.members ? parseMembers(result.members) : [] };
}

/**
 * Upstream's remote size estimate for a restore: `du -sk` in bytes, `null` when unknown. On
 * the pull's connection options (`input`: its connect timeout and budget).
 */
async function probeRemoteDirSize(input, signal) {
  try {
    const result = await runSshCommand(input.spec, `du -sk ${shellQuote(input.remoteDir)} 2>/dev/null | cut -f1`, {
      timeoutMs: PROBE_TIMEOUT_MS,
      maxBuffer: PROBE_MAX_BUFFER,
      signal,
      connectTimeoutMs: input.connectTimeoutMs,
      [CONNECT_BUDGET]: input[CONNECT_BUDGET],
    });
    const kilobytes = Number.parseInt(result.stdout.trim(), 10);
    return Number.isFinite(kilobytes) && kilobytes > 0 ? kilobytes * 1024 : null;
  } catch {
    return null;
  }
}

// A pull stages inside the directory it will fill (so entries move in by rename, whatever
// file system the temp dir is on): `<localDir>/.paperclip-ssh-sync-back-<pid>-<start>-<nonce>/`
// (the name carries its owner; crates/core/src/staging.rs recognises it) holding `tree/`,
// the extracted remote tree, and, once the replace starts, `journal`:
// `{"phase":"clear"|"move","preserve":[…]}`. A pull killed before its journal leaves a
// directory the next pull, extraction or merge on `localDir` removes; one killed during the
// replace is completed by the next pull into `localDir` (completePull below).

/** The staged tree and the journal inside a pull's staging directory. */
const TREE = "tree";
const JOURNAL = "journal";

/**
 * A private staging directory for a restore, inside `localDir` (created when missing).
 * `discard()` removes it, and the directories this call created for `localDir` when they
 * are still empty.
 */
async function stagingInside(localDir) {
  const firstCreated = await fs.mkdir(localDir, { recursive: true });
  const dir = path.join(localDir, native.stagingName("pull"));
  await fs.mkdir(dir, { mode: 0o700 });
  await fs.mkdir(path.join(dir, TREE), { mode: 0o700 });
  return {
    dir,
    tree: path.join(dir, TREE),
    async discard({ failed }) {
      await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
      if (!failed || firstCreated === undefined) return;
      // Leave no directory behind that was not there before the call.
      for (let at = path.resolve(localDir); ; at = path.dirname(at)) {
        if (
          !(await fs.rmdir(at).then(
            () => true,
            () => false,
          ))
        )
          break;
        if (at === path.resolve(firstCreated)) break;
      }
    },
  };
}

/** Writes a pull's journal atomically (a temporary name, then a rename). */
async function writeJournal(stagingDir, journal) {
  const temporary = path.join(stagingDir, `${JOURNAL}.tmp`);
  await fs.writeFile(temporary, `${JSON.stringify(journal)}\n`, { mode: 0o600 });
  await fs.rename(temporary, path.join(stagingDir, JOURNAL));
}

/**
 * Makes `localDir` hold exactly the entries of the staged `tree` plus its own entries named
 * in `preserve` (upstream's clear-then-copy), journalled so that a kill at any point is
 * completed by the next pull: phase `clear` removes what the remote tree replaces (our own
 * staging directories are never touched), phase `move` moves the staged entries in. Entries
 * move by rename (mode, times and raw symlink targets intact), so each is either its old or
 * its new version; a preserved entry that also arrived is merged with `fs.cp` as upstream
 * merges it.
 */
async function replaceDirectoryContents(stagingDir, localDir, preserve, phase = "clear") {
  const keep = [...new Set(preserve ?? [])];
  const tree = path.join(stagingDir, TREE);
  if (phase === "clear") {
    await writeJournal(stagingDir, { phase: "clear", preserve: keep });
    const existing = await fs.readdir(localDir);
    await Promise.all(
      existing
        .filter((name) => !keep.includes(name) && !isReservedName(name))
        .map((name) => fs.rm(path.join(localDir, name), { recursive: true, force: true })),
    );
    await writeJournal(stagingDir, { phase: "move", preserve: keep });
  }
  const incoming = await fs.readdir(tree);
  await Promise.all(
    incoming.map(async (name) => {
      const from = path.join(tree, name);
      const to = path.join(localDir, name);
      if (keep.includes(name)) {
        await fs.cp(from, to, { recursive: true, force: true, preserveTimestamps: true, verbatimSymlinks: true });
        await fs.rm(from, { recursive: true, force: true });
      } else {
        await fs.rename(from, to);
      }
    }),
  );
}

/**
 * Before a pull into `localDir`: removes what killed operations left there and completes a
 * pull that was killed during its replace (from its journal; its staged entries are still
 * there). Fails, as the sweep does, when a restore merge into `localDir` was interrupted.
 */
async function completeInterruptedPulls(localDir) {
  const swept = await native.stagingSweep(localDir).catch((error) => {
    throw toJsError(error);
  });
  reportForeignStaging(localDir, swept.foreign);
  for (const { name, journal } of swept.pulls) {
    const stagingDir = path.join(localDir, name);
    let parsed;
    try {
      parsed = JSON.parse(journal);
    } catch {
      parsed = null;
    }
    if (parsed && (parsed.phase === "clear" || parsed.phase === "move") && Array.isArray(parsed.preserve)) {
      await replaceDirectoryContents(stagingDir, localDir, parsed.preserve, parsed.phase);
    }
    await fs.rm(stagingDir, { recursive: true, force: true });
  }
}

/**
 * Downloads `remoteDir` from the SSH host into `localDir` (see ssh.d.ts): the remote's
 * `tar -cf - .` is extracted safely into a private staging directory inside `localDir` on
 * one session; only a complete, successful transfer replaces the contents of `localDir`.
 */
export async function syncDirectoryFromSsh(input) {
  await withConnectBudget(input, (withBudget) => pullTree(withBudget, {}));
}

/**
 * One pull of `input.remoteDir` into `input.localDir` (checked as `syncDirectoryFromSsh`
 * checks it), upstream's: the whole tree, or with `delta` (`{ members, trees, names }`,
 * the restore delta's plan) only those entries (tree-delta.js `pullArguments`). `first`: a
 * shell line the remote command runs before its archive (a workspace restore's check of the
 * remote workspace, lifecycle/remote.js); `untransferable: "skip"` leaves FIFOs and devices
 * out (a workspace restore's: the host keeps its own).
 */
async function pullTree(input, { delta, first = "", untransferable }) {
  const { signal, target } = transferInput(input, "localDir");
  const excludeArgs = [APPLE_DOUBLE, ...(input.exclude ?? [])].flatMap((entry) => ["--exclude", entry]);
  const pull = [
    `cd ${shellQuote(input.remoteDir)}`,
    delta
      ? `tar ${pullArguments(delta).join(" ")}`
      : `tar ${[...excludeArgs.map(shellQuote), "-cf", "-", "."].join(" ")}`,
  ].join(" && ");
  const remoteScript = first ? `${first}\n${pull}` : pull;
  const command = `sh -c ${shellQuote(remoteScript)}`;
  const limits = archiveLimits(input.limits);
  if (signal?.aborted) throw abortError(signal);
  await completeInterruptedPulls(input.localDir);
  const staging = await stagingInside(input.localDir);
  const progress = transferProgress({
    onProgress: input.onProgress,
    phase: "Restoring",
    direction: "from",
    label: input.progressLabel,
    total: input.onProgress ? probeRemoteDirSize(input, signal) : null,
  });
  let failed = true;
  try {
    const summary = await runCancellable(signal, (id) =>
      native.sshDownloadTar(
        target,
        command,
        {
          dest: staging.tree,
          preserveMtime: true,
          limits,
          knownLinks: input.knownLinks === undefined ? input.localDir : requireString(input.knownLinks, "knownLinks"),
          skipUntransferable: untransferable === "skip",
        },
        id,
        progress ? (bytes) => progress.update(bytes) : undefined,
      ),
    );
    if (signal?.aborted) throw abortError(signal);
    await progress?.finish(summary.bytes);
    await replaceDirectoryContents(staging.dir, input.localDir, input.preserveLocalEntries);
    failed = false;
  } catch (error) {
    await progress?.fail();
    throw error;
  } finally {
    await staging.discard({ failed });
  }
}

// The workspace lifecycle on top of these transfers lives in ./ssh-workspace.js (the bundles
// use the same channel code); it is handed the three transfers above rather than importing
// this module back.
const TRANSFERS = { runSshCommand, syncDirectoryToSsh, syncDirectoryFromSsh, uploadTree, pullTree };

/**
 * Stages a local workspace on the SSH host before a run, as upstream does (see ssh.d.ts and
 * ssh-workspace.js).
 */
export function prepareWorkspaceForSshExecution(input) {
  return withConnectBudget(input, (withBudget) => prepareWorkspaceOverSsh(withBudget, TRANSFERS));
}

/**
 * Brings a run's work back from the SSH host into the local workspace, as upstream does (see
 * ssh.d.ts and ssh-workspace.js).
 */
export function restoreWorkspaceFromSshExecution(input) {
  return withConnectBudget(input, (withBudget) => restoreWorkspaceOverSsh(withBudget, TRANSFERS));
}
