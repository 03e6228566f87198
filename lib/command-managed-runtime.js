// Drop-in for `@paperclipai/adapter-utils/command-managed-runtime`: the sandbox client
// built on a runner's `execute` (plus its optional native `syncIn`/`syncOut` and, when it
// opts in, its duplex channel). Transfers stream: a directory is packed in-process by the
// streaming pack and a file is read from disk, one slice at a time, so no archive is ever
// held whole in memory or written to a host temp file.
import { promises as fs } from "node:fs";
import { randomUUID } from "node:crypto";
import { createTarballStreamFromDirectory } from "./tar-stream.js";
import {
  asBuffer,
  base64Length,
  readBase64,
  reslice,
  runnerLink,
  SINGLE_STREAM_MAX_BASE64_BYTES,
  SLICE_BYTES,
  slicesOfBuffer,
  writeBase64,
} from "./sandbox/base64-transfer.js";
import { OUR_CLIENT, PACKED_SOURCE } from "./sandbox/client-features.js";
import { assertPostUploadCommandsConfined } from "./sandbox/confinement.js";
import { readThroughDuplexChannel, writeThroughDuplexChannel } from "./sandbox/duplex-transfer.js";
import { prepareSandboxManagedRuntime } from "./sandbox-managed-runtime.js";
import { ARCHIVE_TRANSFER_MAX_MS } from "./sandbox/archive-deadline.js";
import { codes } from "./native.js";
import { transferDeadlineMs, withRunnerDeadline } from "./sandbox/runner-deadline.js";
import { requireSuccess, sandboxShell, shellQuote } from "./sandbox/shell.js";

export { assertPostUploadCommandsConfined };

/** The staged remote archive of a directory mapping: `<target>.paperclip-syncin.tar.<uuid>`. */
function syncInArchivePath(targetPath) {
  return `${targetPath}.paperclip-syncin.tar.${randomUUID()}`;
}

/** Replaces `targetDir` with the contents of the uploaded archive, then removes the archive. */
function extractDirectoryCommand(remoteTar, targetDir) {
  const dir = shellQuote(targetDir);
  const tar = shellQuote(remoteTar);
  return `rm -rf ${dir} && mkdir -p ${dir} && tar -xf ${tar} -C ${dir} && rm -f ${tar}`;
}

/**
 * A file's bytes as slices read from disk (its size is taken when it is opened). The stream
 * owns the file handle and closes it once, at its end or when destroyed: {@link closeSource}.
 * (Never a second owner of the same descriptor: two closes of one fd race, and the later one
 * fails, or closes whatever file took that number in between.)
 */
async function fileSource(sourcePath) {
  const handle = await fs.open(sourcePath, "r");
  let size;
  try {
    ({ size } = await handle.stat());
  } catch (error) {
    await handle.close().catch(() => undefined);
    throw error;
  }
  return { size, stream: handle.createReadStream({ highWaterMark: SLICE_BYTES }) };
}

/** Destroys a {@link fileSource} stream and waits until its file handle is closed. */
async function closeSource(stream) {
  // A read-only handle's close has nothing to lose; its error must not go unheard.
  stream.on("error", () => undefined);
  if (!stream.closed) {
    const closed = new Promise((resolve) => stream.once("close", resolve));
    stream.destroy();
    await closed;
  }
}

/**
 * A `SandboxManagedRuntimeClient` over `input.runner`, upstream's: scripts run as
 * `[sh|bash, "-c", script]` in `commandCwd` under `timeoutMs`; `writeFile` uses one
 * `base64 -d` process (≤ 96 MiB of text, runner with `supportsSingleStreamStdinProgress`)
 * or 3 MiB chunks, `readFile` 3 MiB `dd | base64` reads; `syncIn` always exists (native
 * when the runner has both `syncIn` and `syncOut`, else the base64/tar fallback), `syncOut`
 * only natively; `allowConcurrentSyncOperations` as upstream.
 *
 * Our additions: `writeStream(remotePath, source, { totalBytes, onProgress })` uploads an
 * (async) iterable of chunks of known total size and `readStream(remotePath, options)`
 * yields a remote file's bytes slice by slice; a runner that sets
 * `supportsDuplexFileTransfer: true` next to `openDuplexChannel` gets its uploads through
 * one duplex channel per file (raw bytes, acknowledged blocks) instead of base64. The
 * fallback `syncIn` packs directories with the in-process streaming pack (no host `tar`,
 * no host temp file).
 */
export function createCommandManagedRuntimeClient(input) {
  const calls = runnerCalls(input);
  const client = fileClient(calls);
  attachSync(calls, client);
  return client;
}

/**
 * The runner's calls as the client makes them: `execute(request, options)`, one runner call
 * under the deadline we enforce (runner-deadline.js: its `timeoutMs`, or for a call carrying
 * part of a transfer of `options.transferBytes` bytes, that transfer's archive deadline;
 * `options.what` names the call in a timeout's message); `exec(script, options)`, a script in
 * the runner's shell; `runShell`, one that must succeed; `remove(remotePath)`; and
 * `upload(remotePath, source, total, onProgress)`, `total` bytes of `source` by the transport
 * this runner allows (a duplex channel, else base64).
 */
function runnerCalls(input) {
  const { runner } = input;
  const shell = sandboxShell(input.shellCommand);
  const execute = (request, options = {}) =>
    withRunnerDeadline(
      runner.execute(request),
      options.transferBytes === undefined
        ? (request.timeoutMs ?? input.timeoutMs)
        : transferDeadlineMs(options.transferBytes, request.timeoutMs ?? input.timeoutMs),
      options.what ?? "a command",
    );
  const exec = (script, options = {}) =>
    execute(
      {
        command: shell,
        args: ["-c", script],
        cwd: options.cwd ?? input.commandCwd,
        ...(options.stdin !== undefined ? { stdin: options.stdin } : {}),
        timeoutMs: options.timeoutMs ?? input.timeoutMs,
        ...(options.onLog ? { onLog: options.onLog } : {}),
      },
      options,
    );
  const runShell = async (script, options = {}) => {
    const result = await exec(script, options);
    requireSuccess(result, script);
    return result;
  };
  const remove = async (remotePath) => {
    requireSuccess(await exec(`rm -rf ${shellQuote(remotePath)}`), `remove ${remotePath}`);
  };
  const useDuplex = runner.supportsDuplexFileTransfer === true && typeof runner.openDuplexChannel === "function";
  const upload = async (remotePath, source, total, onProgress) => {
    if (useDuplex) {
      await writeThroughDuplexChannel(runner, {
        shell,
        remotePath,
        source,
        total,
        timeoutMs: input.timeoutMs,
        onProgress,
      });
      return;
    }
    await writeBase64(runShell, {
      remotePath,
      slices: reslice(source, SLICE_BYTES),
      total,
      singleStream:
        base64Length(total) <= SINGLE_STREAM_MAX_BASE64_BYTES && runner.supportsSingleStreamStdinProgress === true,
      onProgress,
      removeStaged: (staged) => remove(staged).catch(() => undefined),
      // The runner's measured link: gzip before base64 once it is slow (base64-transfer.js).
      link: runnerLink(runner),
    });
  };
  return { input, runner, shell, execute, exec, runShell, remove, useDuplex, upload };
}

/** The client's file and command calls (upstream's, with our `writeStream` and `readStream`). */
function fileClient({ input, runner, shell, execute, runShell, remove, useDuplex, upload }) {
  return {
    makeDir: async (remotePath) => {
      await runShell(`mkdir -p ${shellQuote(remotePath)}`);
    },
    writeFile: async (remotePath, bytes, options) => {
      const buffer = asBuffer(bytes);
      await upload(remotePath, slicesOfBuffer(buffer), buffer.length, options?.onProgress);
    },
    writeStream: async (remotePath, source, options) => {
      const total = options?.totalBytes;
      if (!Number.isSafeInteger(total) || total < 0) {
        throw new TypeError("writeStream needs options.totalBytes, the exact byte count of the source");
      }
      await upload(remotePath, source, total, options?.onProgress);
    },
    readStream: (remotePath, options) =>
      useDuplex
        ? readThroughDuplexChannel(runner, {
            shell,
            remotePath,
            timeoutMs: input.timeoutMs,
            onProgress: options?.onProgress,
          })
        : readBase64(runShell, remotePath, options?.onProgress),
    readFile: async (remotePath, options) => {
      const slices = [];
      for await (const slice of readBase64(runShell, remotePath, options?.onProgress)) slices.push(slice);
      return slices.length === 1 ? slices[0] : Buffer.concat(slices);
    },
    listFiles: async (remotePath) => {
      const dir = shellQuote(remotePath);
      const result = await runShell(
        `if [ -d ${dir} ]; then for entry in ${dir}/*; do [ -f "$entry" ] || continue; basename "$entry"; done; fi`,
      );
      return result.stdout
        .split(/\r?\n/)
        .map((line) => line.trim())
        .filter((line) => line.length > 0)
        .sort((left, right) => left.localeCompare(right));
    },
    remove,
    run: async (command, options) => {
      // The caller's timeout as given (upstream does not default it to the client's); our
      // deadline is the client's when the caller gives none.
      const result = await execute({
        command: shell,
        args: ["-c", command],
        cwd: input.commandCwd,
        timeoutMs: options.timeoutMs,
      });
      requireSuccess(result, command);
    },
  };
}

/**
 * The client's `syncIn` (the runner's own when it has both `syncIn` and `syncOut`, else our
 * fallback), its `syncOut` (only the runner's), `allowConcurrentSyncOperations` and what our
 * lanes ask of the client (`OUR_CLIENT`). A second argument `{ onBytes(sent, total) }` of
 * `syncIn` (our addition, used by our prepare to say where a failed upload stopped) receives
 * the running byte count of the fallback's uploads and the total known so far (the mappings
 * started so far). A provider's own transfers run under deadlines too (runner-deadline.js): a
 * `syncIn`, the archive deadline of its files' bytes plus its post-upload commands' timeouts;
 * a `syncOut`, whose size is not known before it ends, the archive deadline's cap.
 */
function attachSync(calls, client) {
  const { runner, input, useDuplex } = calls;
  const nativeSyncIn = runner.syncIn;
  const nativeSyncOut = runner.syncOut;
  const native = Boolean(nativeSyncIn && nativeSyncOut);
  client.allowConcurrentSyncOperations = native ? runner.allowConcurrentSyncOperations === true : true;
  client.syncIn = async (operations, options) => {
    assertPostUploadCommandsConfined(operations);
    if (!native) return await fallbackSyncIn(calls, client, operations, options?.onBytes);
    return await withRunnerDeadline(nativeSyncIn(operations), await syncInDeadlineMs(input, operations), "a syncIn");
  };
  if (native)
    client.syncOut = (operations) =>
      withRunnerDeadline(nativeSyncOut(operations), ARCHIVE_TRANSFER_MAX_MS, "a syncOut");
  Object.defineProperty(client, OUR_CLIENT, {
    value: {
      streamsPackedSources: !native,
      // The base64 transport on a link measured slower than gzip: what comes back is worth
      // compressing in the sandbox first (the safe extraction reads gzip as well as tar).
      compressDownloads: () => !native && !useDuplex && runnerLink(runner).slow(),
      // The deltas (sandbox/delta.js): a script's result with its stdout (`options.stdin`:
      // text on its stdin), and the runner's link as its uploads measured it (`slow()`,
      // `bytesPerSecond`, `remember`).
      exec: (script, options) => calls.runShell(script, options),
      link: () => runnerLink(runner),
    },
  });
}

/** The fallback `syncIn`: each operation's mappings placed in order, then its post-upload commands, verbatim, stopping at the first failure. */
async function fallbackSyncIn(calls, client, operations, onBytes) {
  const results = [];
  let before = 0;
  for (const operation of operations) {
    let filesTransferred = 0;
    let bytesTransferred = 0;
    for (const mapping of operation.files) {
      const base = before;
      const sent = await placeMapping(
        calls,
        client,
        mapping,
        onBytes ? (done, total) => onBytes(base + done, base + total) : undefined,
      );
      bytesTransferred += sent;
      before += sent;
      filesTransferred += 1;
    }
    for (const command of operation.postUploadCommands ?? []) {
      const result = await calls.exec(command.command, { cwd: command.cwd, timeoutMs: command.timeoutMs });
      requireSuccess(result, command.command);
    }
    results.push({ operationId: operation.operationId, filesTransferred, bytesTransferred });
  }
  return { operations: results };
}

/** Places one mapping of the fallback `syncIn`; returns the bytes sent (the archive's size for a directory). */
async function placeMapping({ input, upload }, client, mapping, onProgress) {
  const packed = mapping.kind === "file" ? mapping[PACKED_SOURCE] : undefined;
  if (packed) {
    // The archive `sourcePath` would hold, packed straight into the upload.
    const archive = await createTarballStreamFromDirectory({
      ...packed,
      precomputeSize: true,
      chunkSize: SLICE_BYTES,
    });
    await upload(mapping.targetPath, archive, archive.totalBytes, onProgress);
    return archive.totalBytes;
  }
  if (mapping.kind === "directory") {
    const archive = await createTarballStreamFromDirectory({
      localDir: mapping.sourcePath,
      exclude: mapping.exclude,
      followSymlinks: mapping.followSymlinks,
      precomputeSize: true,
      chunkSize: SLICE_BYTES,
    });
    const remoteTar = syncInArchivePath(mapping.targetPath);
    try {
      await upload(remoteTar, archive, archive.totalBytes, onProgress);
      await client.run(extractDirectoryCommand(remoteTar, mapping.targetPath), { timeoutMs: input.timeoutMs });
    } finally {
      await client.remove(remoteTar).catch(() => undefined);
    }
    return archive.totalBytes;
  }
  const file = await fileSource(mapping.sourcePath);
  try {
    await upload(mapping.targetPath, file.stream, file.size, onProgress);
  } finally {
    await closeSource(file.stream);
  }
  if (mapping.mode != null) {
    const mode = (mapping.mode & 0o7777).toString(8);
    await client.run(`chmod ${mode} ${shellQuote(mapping.targetPath)}`, { timeoutMs: input.timeoutMs });
  }
  return file.size;
}

/** A native `syncIn`'s deadline: its files' transfer deadline plus its commands' timeouts. */
async function syncInDeadlineMs(input, operations) {
  let bytes = 0;
  let commands = 0;
  for (const operation of operations) {
    for (const mapping of operation.files) {
      if (mapping.kind === "file") bytes += (await fs.stat(mapping.sourcePath).catch(() => null))?.size ?? 0;
    }
    for (const command of operation.postUploadCommands ?? []) commands += command.timeoutMs ?? input.timeoutMs;
  }
  return transferDeadlineMs(bytes, input.timeoutMs) + commands;
}

/** The last three non-empty lines of a command's output, for a warning. */
function outputTail(text) {
  return text
    .split(/\r?\n/)
    .filter((line) => line.trim().length > 0)
    .slice(-3)
    .join(" | ")
    .slice(0, 480);
}

/**
 * Upstream's `prepareCommandManagedRuntime`: a client over `input.runner` (commands from
 * `/`, the spec's timeout or 300 000 ms), an optional install command (skipped when
 * `command -v <detectCommand>` succeeds; a failed install only warns), then
 * `prepareSandboxManagedRuntime` with `.paperclip-runtime` added to the workspace excludes.
 */
export async function prepareCommandManagedRuntime(input) {
  const timeoutMs = input.spec.timeoutMs && input.spec.timeoutMs > 0 ? input.spec.timeoutMs : 300_000;
  const workspaceRemoteDir = input.workspaceRemoteDir ?? input.spec.remoteCwd;
  const commandCwd = "/";
  const spec = {
    transport: "sandbox",
    provider: input.spec.providerKey ?? "sandbox",
    sandboxId: input.spec.leaseId ?? "managed",
    remoteCwd: workspaceRemoteDir,
    timeoutMs,
    apiKey: null,
  };
  const client = createCommandManagedRuntimeClient({
    runner: input.runner,
    commandCwd,
    timeoutMs,
    shellCommand: input.spec.shellCommand,
  });
  const shell = sandboxShell(input.spec.shellCommand);
  const prepare = () =>
    prepareSandboxManagedRuntime({
      spec,
      client,
      adapterKey: input.adapterKey,
      workspaceLocalDir: input.workspaceLocalDir,
      workspaceRemoteDir,
      syncWorkspace: input.syncWorkspace,
      workspaceInboundMode: input.workspaceInboundMode,
      workspaceDurableSeed: input.workspaceDurableSeed,
      workspaceBaseline: input.workspaceBaseline,
      workspaceGitSnapshot: input.workspaceGitSnapshot,
      workspaceExclude: [...new Set([".paperclip-runtime", ...(input.workspaceExclude ?? [])])],
      preserveAbsentOnRestore: input.preserveAbsentOnRestore,
      assets: input.assets,
      additionalSources: input.additionalSources,
      onProgress: input.onProgress,
      onRuntimeProgress: input.onRuntimeProgress,
      runtimeSpan: input.runtimeSpan,
      ...(input.signal !== undefined ? { signal: input.signal } : {}),
      ...(input.limits !== undefined ? { limits: input.limits } : {}),
    });
  const install = input.installCommand?.trim();
  if (install) {
    const detect = input.detectCommand?.trim();
    // Under our deadline (runner-deadline.js); a runner that never answers is taken as
    // having timed out, which only warns, as the runner's own timeout does.
    const answer = (script, what) =>
      withRunnerDeadline(
        input.runner.execute({ command: shell, args: ["-c", script], cwd: commandCwd, timeoutMs }),
        timeoutMs,
        what,
      ).catch((error) => {
        if (error?.code !== codes.SANDBOX_TIMEOUT) throw error;
        return { exitCode: null, timedOut: true, stdout: "", stderr: error.message };
      });
    if (detect) {
      const probe = await answer(`command -v ${shellQuote(detect)} >/dev/null 2>&1`, "the install probe");
      if (!probe.timedOut && (probe.exitCode ?? 1) === 0) return await prepare();
    }
    const result = await answer(install, "the install command");
    if (result.timedOut || (result.exitCode ?? 0) !== 0) {
      const reason = result.timedOut ? "timed out" : `exited ${result.exitCode ?? "?"}`;
      console.warn(
        `[paperclip] managed-runtime install command ${reason}: ${install} :: ${outputTail(result.stderr || result.stdout)}`,
      );
    }
  }
  return await prepare();
}
