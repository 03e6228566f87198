import type { ReferencedSourceIgnoreResolution } from "../sandbox-managed-runtime.js";
/**
 * The content signature of a referenced project: the first 16 hex digits of a SHA-256 over
 * its files (siblings in code-unit order, Git-ignored paths and heavy directories skipped).
 * `unreadable:<reason>` for a failed resolution (no file is read), `unreadable:<error>` when
 * the walk fails. `options.signal` (our addition) aborts the walk with an `AbortError`.
 */
export declare function referencedSourceContentSignature(
  localPath: string,
  ignoreResolution: ReferencedSourceIgnoreResolution,
  options?: {
    signal?: AbortSignal;
  },
): Promise<string>;
