// A sandbox runner for the tests: it runs every command on this host (`sh -c …` with the
// stdin string piped in), optionally fails one call, offers a real process-backed duplex
// channel, or simulates a provider with native syncIn/syncOut (file copies and GNU tar on
// this host, post-upload commands through sh).
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, chmodSync, mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";

/** A runner that spawns each command on this host and records the calls. */
export function spawnRunner({ singleStream = false, duplex = false, failOnCall = null, onCall = null } = {}) {
  const calls = [];
  const runner = {
    supportsSingleStreamStdinProgress: singleStream,
    execute: (input) =>
      new Promise((resolve) => {
        calls.push({
          script: input.args?.[1] ?? "",
          cwd: input.cwd,
          stdinLength: input.stdin?.length ?? null,
          timeoutMs: input.timeoutMs,
        });
        onCall?.();
        const startedAt = new Date().toISOString();
        if (failOnCall !== null && calls.length === failOnCall) {
          resolve({
            exitCode: 1,
            signal: null,
            timedOut: false,
            stdout: "",
            stderr: "injected transport failure",
            pid: null,
            startedAt,
          });
          return;
        }
        const child = spawn(input.command === "bash" ? "/bin/bash" : "/bin/sh", input.args ?? [], { cwd: input.cwd });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (d) => {
          stdout += d;
        });
        child.stderr.on("data", (d) => {
          stderr += d;
        });
        child.on("close", (code) =>
          resolve({
            exitCode: code ?? 1,
            signal: null,
            timedOut: false,
            stdout,
            stderr,
            pid: child.pid ?? null,
            startedAt,
          }),
        );
        child.stdin.on("error", () => undefined);
        if (input.stdin != null) child.stdin.write(input.stdin);
        child.stdin.end();
      }),
  };
  const channel = { opened: 0, maxUnacked: 0, maxOutstandingRequests: 0 };
  if (duplex) {
    runner.supportsDuplexFileTransfer = true;
    runner.openDuplexChannel = async ({ command }) => {
      channel.opened += 1;
      const child = spawn(command[0] === "bash" ? "/bin/bash" : "/bin/sh", command.slice(1));
      let written = 0;
      let acked = 0;
      let onExit = () => undefined;
      // Reads: block requests written ("<n>\n") against 1 MiB blocks delivered.
      let requests = 0;
      let delivered = 0;
      child.stdout.on("data", (chunk) => {
        delivered += chunk.length;
        for (const byte of chunk) if (byte === 0x2e) acked += 1;
      });
      child.on("close", (code) => onExit({ exitCode: code }));
      child.stdin.on("error", () => undefined);
      return {
        write(data) {
          const text = Buffer.from(data).toString("latin1");
          if (/^\d+\n$/.test(text)) {
            requests += 1;
            channel.maxOutstandingRequests = Math.max(
              channel.maxOutstandingRequests,
              requests - Math.floor(delivered / (4 * 1024 * 1024)),
            );
          }
          written += data.length;
          channel.maxUnacked = Math.max(channel.maxUnacked, written - acked * 4 * 1024 * 1024);
          child.stdin.write(Buffer.from(data));
        },
        onData(listener) {
          child.stdout.on("data", (chunk) => listener(new Uint8Array(chunk)));
        },
        onExit(listener) {
          onExit = listener;
        },
        stop() {
          child.kill("SIGTERM");
        },
        close: async () => {
          child.stdin.destroy();
        },
      };
    };
  }
  return { runner, calls, channel };
}

/** Runs one script with sh on this host (for the native fake's post-upload commands). */
function sh(script, cwd) {
  execFileSync("/bin/sh", ["-c", script], { cwd: cwd ?? "/", stdio: ["ignore", "pipe", "pipe"] });
}

/** Copies a directory with GNU tar (exclude patterns as `--exclude`), replacing `target`. */
function copyDirectory(source, target, exclude = [], follow = false) {
  rmSync(target, { recursive: true, force: true });
  mkdirSync(target, { recursive: true });
  const args = ["-c", ...(follow ? ["-h"] : []), "-C", source, ...exclude.flatMap((e) => ["--exclude", e]), "."];
  const archive = execFileSync("tar", args, { maxBuffer: 1 << 30 });
  execFileSync("tar", ["-x", "-C", target], { input: archive, maxBuffer: 1 << 30 });
}

/** A runner with native syncIn/syncOut over the host file system, plus `execute` as spawnRunner. */
export function nativeSyncRunner() {
  const { runner, calls } = spawnRunner();
  const syncCalls = [];
  const place = (operations, direction) => {
    syncCalls.push({ direction, operations });
    const results = [];
    for (const operation of operations) {
      let bytes = 0;
      for (const mapping of operation.files) {
        if (mapping.kind === "directory") {
          copyDirectory(mapping.sourcePath, mapping.targetPath, mapping.exclude, mapping.followSymlinks);
        } else {
          mkdirSync(path.dirname(mapping.targetPath), { recursive: true });
          copyFileSync(mapping.sourcePath, mapping.targetPath);
          if (mapping.mode != null) chmodSync(mapping.targetPath, mapping.mode);
          bytes += 1;
        }
      }
      for (const command of operation.postUploadCommands ?? []) sh(command.command, command.cwd);
      results.push({
        operationId: operation.operationId,
        filesTransferred: operation.files.length,
        bytesTransferred: bytes,
      });
    }
    return { operations: results };
  };
  runner.allowConcurrentSyncOperations = true;
  runner.syncIn = async (operations) => place(operations, "in");
  runner.syncOut = async (operations) => place(operations, "out");
  return { runner, calls, syncCalls };
}

/**
 * A delta restore's listing output (`stdout`: base64 of the header line and the body, the
 * body gzip'd when the header says so) with its inline archive (the `pcdelta-note pull`
 * record) replaced by `archive`; `null` when the listing carries none.
 */
export function withInlinePull(stdout, archive) {
  const raw = Buffer.from(stdout, "base64");
  const newline = raw.indexOf(10);
  if (newline < 0) return null;
  const header = raw.subarray(0, newline + 1);
  const gzipped = header.toString("utf8").trim().split(" ")[5] === "gzip";
  const body = (gzipped ? gunzipSync(raw.subarray(newline + 1)) : raw.subarray(newline + 1)).toString("latin1");
  const replaced = body.replace(
    /pcdelta-note pull [A-Za-z0-9+/=]*\0/,
    `pcdelta-note pull ${archive.toString("base64")}\0`,
  );
  if (replaced === body) return null;
  const out = Buffer.from(replaced, "latin1");
  return Buffer.concat([header, gzipped ? gzipSync(out) : out]).toString("base64");
}
