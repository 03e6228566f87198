// Drop-in for `@paperclipai/adapter-utils/runtime-progress`: the throttled progress
// reporter whose lines transports write to a `RuntimeProgressSink`.
// Pure JS on purpose: a native call per report would cost more than the work, and the line
// format depends on JS number formatting (`toFixed` rounds exact ties up, `Math.round`
// rounds .5 up), which is simplest to match by using it.

const MIB = 1024 * 1024;
const DEFAULT_STEP_PERCENT = 10;
const DEFAULT_MIN_INTERVAL_MS = 2000;

/** Bytes as mebibytes with one decimal (`262144` → `"0.3"`); negative counts show as 0. */
function megabytes(bytes) {
  return (Math.max(0, bytes) / MIB).toFixed(1);
}

/** A whole percentage in 0..100; 0 for NaN or an infinite ratio. */
function percent(done, total) {
  const value = (done / total) * 100;
  return Number.isFinite(value) ? Math.min(100, Math.max(0, Math.round(value))) : 0;
}

/** True when a total is known: a number above zero (null, undefined and 0 mean unknown). */
function knownTotal(total) {
  return total != null && total > 0;
}

/**
 * Creates a progress reporter that writes throttled lines such as
 * `[paperclip] Syncing workspace to environment: 40% (12.6/31.4 MB)\n` to `options.sink`.
 * See `runtime-progress.d.ts` for the rules; they are upstream's, line for line.
 */
export function createRuntimeProgressReporter(options) {
  const { sink } = options;
  const stepPercent = options.stepPercent > 0 ? options.stepPercent : DEFAULT_STEP_PERCENT;
  const minIntervalMs = options.minIntervalMs > 0 ? options.minIntervalMs : DEFAULT_MIN_INTERVAL_MS;
  const now = options.now ?? Date.now;
  const target = options.target === "sandbox" ? "environment" : options.target;
  const prefix = `[paperclip] ${options.phase}${options.label ? ` ${options.label}` : ""} ${options.direction} ${target}`;

  let lastEmitAt = null;
  let lastStep = -1;
  let lastDone = 0;
  let lastTotal = null;
  let finished = false;

  const progressLine = (done, total) =>
    knownTotal(total)
      ? `${prefix}: ${percent(done, total)}% (${megabytes(done)}/${megabytes(total)} MB)\n`
      : `${prefix}: ${megabytes(done)} MB\n`;
  const failureLine = (done, total) =>
    knownTotal(total)
      ? `${prefix}: failed at ${percent(done, total)}% (${megabytes(done)}/${megabytes(total)} MB)\n`
      : `${prefix}: failed after ${megabytes(done)} MB\n`;
  const stepOf = (done, total) => Math.floor(((done / total) * 100) / stepPercent);

  // State changes happen before the sink is awaited, so reports issued without awaiting
  // the previous one still see a consistent throttle state.
  const emit = async (done, total) => {
    lastEmitAt = now();
    if (knownTotal(total)) lastStep = stepOf(done, total);
    await sink(progressLine(done, total));
  };

  return {
    async report(doneBytes, totalBytes) {
      lastDone = doneBytes;
      lastTotal = totalBytes;
      if (finished) return;
      const intervalElapsed = lastEmitAt == null || now() - lastEmitAt >= minIntervalMs;
      if (!knownTotal(totalBytes)) {
        if (intervalElapsed) await emit(doneBytes, totalBytes);
        return;
      }
      const terminal = doneBytes >= totalBytes;
      if (terminal || intervalElapsed || stepOf(doneBytes, totalBytes) > lastStep) {
        await emit(doneBytes, totalBytes);
      }
      if (terminal) finished = true;
    },

    async complete(doneBytes, totalBytes) {
      if (finished) return;
      finished = true;
      const total = totalBytes === undefined ? lastTotal : totalBytes;
      const done = doneBytes !== undefined ? doneBytes : knownTotal(total) ? total : lastDone;
      await sink(progressLine(done, total));
    },

    async fail(doneBytes, totalBytes) {
      if (finished) return;
      finished = true;
      const total = totalBytes === undefined ? lastTotal : totalBytes;
      const done = doneBytes === undefined ? lastDone : doneBytes;
      await sink(failureLine(done, total));
    },
  };
}
