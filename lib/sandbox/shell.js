// Shell plumbing shared by the sandbox modules: quoting, the shell a sandbox runs scripts
// with, upstream's failure message for a command that did not exit 0, and the coded errors
// of the sandbox lane.
import { codes } from "../native.js";

export { shellQuote } from "../shell-quote.js";

/** `bash` when asked for, `sh` otherwise. */
export function sandboxShell(shellCommand) {
  return shellCommand === "bash" ? "bash" : "sh";
}

const OUTPUT_TAIL_CHARS = 4_000;

function tail(text) {
  const trimmed = text.trim();
  return trimmed.length <= OUTPUT_TAIL_CHARS ? trimmed : `...[truncated]\n${trimmed.slice(-OUTPUT_TAIL_CHARS)}`;
}

/** An `Error` of the sandbox lane: `message`, our `code`, and `fields` (`exitCode`, `timeoutMs`, …). */
export function sandboxError(code, message, fields = {}) {
  return Object.assign(new Error(message), { code }, fields);
}

/**
 * Throws `<action> failed with exit code <code>` plus the trimmed stderr and stdout tails
 * unless `result` exited 0 without timing out: upstream's message, with our code
 * (`ERR_PAPERCLIP_NATIVE_SANDBOX_COMMAND_FAILED`, or `…_SANDBOX_TIMEOUT` when the runner
 * says the command timed out) and the `exitCode`.
 */
export function requireSuccess(result, action) {
  if (result.exitCode === 0 && !result.timedOut) return;
  const parts = [];
  const stderr = tail(result.stderr ?? "");
  const stdout = tail(result.stdout ?? "");
  if (stderr.length > 0) parts.push(`stderr: ${stderr}`);
  if (stdout.length > 0) parts.push(`stdout: ${stdout}`);
  const detail = parts.length > 0 ? `:\n${parts.join("\n")}` : "";
  throw sandboxError(
    result.timedOut ? codes.SANDBOX_TIMEOUT : codes.SANDBOX_COMMAND_FAILED,
    `${action} failed with exit code ${result.exitCode ?? "null"}${detail}`,
    { exitCode: result.exitCode ?? null },
  );
}
