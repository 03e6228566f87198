/** Receives each formatted progress line (ending in `\n`); may return a Promise, which is awaited. */
export type RuntimeProgressSink = (line: string) => void | Promise<void>;
/** What a transfer is doing, as the line's first word(s). */
export type RuntimeProgressPhase = "Syncing" | "Restoring" | "Importing git history" | "Exporting git history";
/** `to` the target or `from` it. */
export type RuntimeProgressDirection = "to" | "from";
/** The transport; `sandbox` is displayed as `environment`. */
export type RuntimeProgressTarget = "sandbox" | "ssh";
/** The phase of a structured runtime status update. */
export type RuntimeStatusPhase = "git_sync" | "config_sync" | "adapter_startup" | "restore" | "export" | "finalize";
/** A structured runtime status update (a progress line without `[paperclip] `, trimmed, as `message`). */
export interface RuntimeStatusUpdate {
  phase: RuntimeStatusPhase;
  message: string;
  currentToolName?: string | null;
  lastAssistantSnippet?: string | null;
  lastEventAt?: Date | string | null;
}
/** Receives structured runtime status updates. */
export type RuntimeStatusSink = (update: RuntimeStatusUpdate) => void | Promise<void>;
/** How a reporter formats and throttles its lines. */
export interface RuntimeProgressReporterOptions {
  /** Where lines go. Each emitted line is awaited before the report call resolves. */
  sink: RuntimeProgressSink;
  phase: RuntimeProgressPhase;
  /** Shown after the phase when non-empty, e.g. `workspace` or an asset key. */
  label?: string;
  direction: RuntimeProgressDirection;
  target: RuntimeProgressTarget;
  /** A known-total report emits when its percentage enters a new step of this size. Default 10 (used when > 0). */
  stepPercent?: number;
  /** A report also emits when this many ms passed since the last emitted line. Default 2000 (used when > 0). */
  minIntervalMs?: number;
  /** The clock for the interval rule. Default `Date.now`. */
  now?: () => number;
}
/**
 * A throttled progress reporter. Lines look like
 * `[paperclip] Syncing workspace to environment: 40% (12.6/31.4 MB)` with a known total, or
 * `[paperclip] Syncing workspace to ssh: 12.6 MB` without one (MB are MiB with one decimal,
 * rounded like `Number.prototype.toFixed`; the percentage is rounded and clamped to 0-100).
 */
export interface RuntimeProgressReporter {
  /**
   * Records `doneBytes` of `totalBytes` (`null` or a non-positive total: unknown). With a
   * known total a line is emitted on the first report, when the percentage enters a new
   * step, when the interval elapsed, or when `doneBytes` reaches the total (which also
   * completes the reporter). With an unknown total only the interval rule applies.
   * No line after completion or failure.
   */
  report(doneBytes: number, totalBytes: number | null): Promise<void>;
  /**
   * Emits the completion line unless the reporter already completed or failed. Omitted
   * arguments default to the last reported ones; `doneBytes` defaults to the total when it
   * is known, so the line normally shows 100%.
   */
  complete(doneBytes?: number, totalBytes?: number | null): Promise<void>;
  /**
   * Emits `failed at NN% (x/y MB)` (known total) or `failed after x MB` unless the reporter
   * already completed or failed. Omitted arguments default to the last reported ones.
   */
  fail(doneBytes?: number, totalBytes?: number | null): Promise<void>;
}
/** Creates a {@link RuntimeProgressReporter}; lines are byte-identical to upstream's. */
export declare function createRuntimeProgressReporter(options: RuntimeProgressReporterOptions): RuntimeProgressReporter;
