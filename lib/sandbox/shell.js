// Shell plumbing shared by the sandbox modules: quoting, the shell a sandbox runs scripts
// with, and upstream's failure message for a command that did not exit 0.

/** `value` as one single-quoted POSIX shell word. */
export function shellQuote(value) {
  return `'${value.replace(/'/g, `'"'"'`)}'`;
}

/** `bash` when asked for, `sh` otherwise. */
export function sandboxShell(shellCommand) {
  return shellCommand === "bash" ? "bash" : "sh";
}

const OUTPUT_TAIL_CHARS = 4_000;

function tail(text) {
  const trimmed = text.trim();
  return trimmed.length <= OUTPUT_TAIL_CHARS ? trimmed : `...[truncated]\n${trimmed.slice(-OUTPUT_TAIL_CHARS)}`;
}

/**
 * Throws `<action> failed with exit code <code>` plus the trimmed stderr and stdout tails
 * unless `result` exited 0 without timing out.
 */
export function requireSuccess(result, action) {
  if (result.exitCode === 0 && !result.timedOut) return;
  const parts = [];
  const stderr = tail(result.stderr ?? "");
  const stdout = tail(result.stdout ?? "");
  if (stderr.length > 0) parts.push(`stderr: ${stderr}`);
  if (stdout.length > 0) parts.push(`stdout: ${stdout}`);
  const detail = parts.length > 0 ? `:\n${parts.join("\n")}` : "";
  throw new Error(`${action} failed with exit code ${result.exitCode ?? "null"}${detail}`);
}
