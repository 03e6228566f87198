// What several paperclip-sync commands print or check: tables, byte counts, timings, the
// directory argument, and transfer progress on stderr.
import { existsSync } from "node:fs";
import { createRuntimeProgressReporter } from "../index.js";
import { UsageError } from "./args.js";

/** `rows` as a text table with a header line and a rule, columns padded to fit. */
export function table(rows, columns) {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? "").length)));
  const line = (cells) =>
    cells
      .map((cell, i) => String(cell ?? "").padEnd(widths[i]))
      .join("  ")
      .trimEnd();
  return [
    line(columns),
    line(widths.map((w) => "-".repeat(w))),
    ...rows.map((r) => line(columns.map((c) => r[c]))),
  ].join("\n");
}

/** A byte count in B, KiB, MiB or GiB. */
export function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

/** Runs `fn` and resolves `{ value, ms }`. */
export async function timed(fn) {
  const start = process.hrtime.bigint();
  const value = await fn();
  return { value, ms: Number(process.hrtime.bigint() - start) / 1e6 };
}

/** Checks a directory argument: missing is a usage error, absent an `ENOENT`. */
export function requireDir(dir) {
  if (!dir) throw new UsageError("a directory is required");
  if (!existsSync(dir)) {
    const error = new Error(`no such directory: ${dir}`);
    error.code = "ENOENT";
    throw error;
  }
}

/**
 * Progress for a long transfer on stderr: a redrawn bar on a terminal, otherwise upstream's
 * `[paperclip] …` lines (throttled by createRuntimeProgressReporter).
 */
export function progressReporter(label, phase = "Syncing", direction = "to") {
  if (!process.stderr.isTTY) {
    return createRuntimeProgressReporter({
      sink: (line) => {
        process.stderr.write(line);
      },
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
      process.stderr.write(
        `\r${label} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${String(Math.round(ratio * 100)).padStart(3)}% ${mb(done)}/${mb(total)} MB${suffix}`,
      );
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
