// Deadlines this package enforces on the sandbox runner itself (docs/reliability.md, "A
// runner that never answers"): the runner is told each command's `timeoutMs` and should end
// the command then, but a provider whose call never settles (a lost API response, a wedged
// bridge) would otherwise hold a prepare or a restore forever. Every runner call we make is
// raced against its own deadline, and one that misses it rejects with
// `ERR_PAPERCLIP_NATIVE_SANDBOX_TIMEOUT`; what the call still does later is ignored.
import { archiveTransferTimeoutMs } from "./archive-deadline.js";
import { codes } from "../native.js";
import { sandboxError } from "./shell.js";

/**
 * How long past a command's own `timeoutMs` we wait for the runner to report that timeout
 * itself (its answer, with the command's output, is the better error).
 */
export const RUNNER_GRACE_MS = 1_000;

/**
 * The deadline of a runner call that carries part of a transfer of `totalBytes` bytes: the
 * archive transfer deadline (extras.js `archiveTransferTimeoutMs`: the command's own
 * `timeoutMs` for all but large archives, one second per MiB plus 60 s for those).
 */
export function transferDeadlineMs(totalBytes, timeoutMs) {
  return archiveTransferTimeoutMs({
    archiveBytes: Number.isFinite(totalBytes) && totalBytes > 0 ? totalBytes : 0,
    ...(timeoutMs > 0 ? { providerTimeoutMs: timeoutMs } : {}),
  });
}

/** The coded error of a runner call that missed its deadline (`what`: the call, named for a person). */
export function runnerTimeoutError(what, deadlineMs) {
  return sandboxError(
    codes.SANDBOX_TIMEOUT,
    `The sandbox runner did not answer ${what} within ${deadlineMs} ms; the call was abandoned. ` +
      "The provider may be unreachable or its sandbox gone; nothing after this step ran.",
    { timeoutMs: deadlineMs },
  );
}

/**
 * `call` (a promise of a runner call) or, when it has not settled `deadlineMs` +
 * {@link RUNNER_GRACE_MS} after this call, a rejection with {@link runnerTimeoutError}. No
 * deadline when `deadlineMs` is not a positive number.
 */
export function withRunnerDeadline(call, deadlineMs, what) {
  const promise = Promise.resolve(call);
  if (!(deadlineMs > 0) || !Number.isFinite(deadlineMs)) return promise;
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(runnerTimeoutError(what, deadlineMs)), deadlineMs + RUNNER_GRACE_MS);
  });
  // A call that settles after its deadline settles unobserved.
  promise.catch(() => undefined);
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}
