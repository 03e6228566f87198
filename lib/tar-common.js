// Internal helpers shared by the tar modules: the top-level entry list in upstream's order,
// the native pack input, and the bridge from native byte counts to a progress reporter.
import fs from "node:fs/promises";
import path from "node:path";
import { gzipLevel, requireString, requireStringArray } from "./arguments.js";
import { codes, native } from "./native.js";

/** Our code for a file name that is not UTF-8. */
const NON_UTF8_NAME = codes.NON_UTF8_NAME;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The entries of `dir` as upstream passes them to tar after `--`: every name, sorted with
 * `localeCompare` in the process's locale (so the member order is upstream's). A readdir
 * failure rejects with Node's error, as upstream's does; a name that is not UTF-8 (which
 * upstream cannot pass to tar intact either) with `ERR_PAPERCLIP_NATIVE_NON_UTF8_NAME`.
 */
export async function topLevelNames(dir) {
  const raw = await fs.readdir(dir, { encoding: "buffer" });
  const names = raw.map((bytes) => {
    try {
      return utf8.decode(bytes);
    } catch {
      const where = path.join(dir, bytes.toString("latin1"));
      const error = new Error(`file name is not valid UTF-8 bytes: '${where}'`);
      error.code = NON_UTF8_NAME;
      throw error;
    }
  });
  // Our own staging directories are never part of a tree.
  return names.filter((name) => !native.stagingIsName(name)).sort((left, right) => left.localeCompare(right));
}

/** The native pack input for a directory and upstream-shaped options. */
export async function packInput(options) {
  const localDir = requireString(options.localDir, "localDir");
  const exclude = requireStringArray(options.exclude ?? [], "exclude");
  return {
    root: localDir,
    exclude: [...exclude],
    followSymlinks: options.followSymlinks === true,
    topLevel: await topLevelNames(localDir),
    gzip: gzipLevel(options.gzip),
  };
}

/**
 * Feeds running byte counts to a progress reporter without ever making the data path wait
 * for its sink: at most one `report()` runs at a time and, while it runs, only the latest
 * count is kept (so nothing queues up). Reporter failures are ignored, as upstream's
 * transports ignore them: progress is advisory and never fails a transfer. `totalBytes` is
 * a number, `null`, or a function returning the total known at the time of a report (a
 * total that becomes known during the transfer).
 */
export function progressBridge(reporter, totalBytes) {
  const total = typeof totalBytes === "function" ? totalBytes : () => totalBytes;
  let latest = 0;
  let reported = -1;
  let running = null;
  let closed = false;
  const drain = async () => {
    while (!closed && reported !== latest) {
      reported = latest;
      await quietly(() => reporter.report(reported, total()));
    }
    running = null;
  };
  const settle = async () => {
    closed = true;
    await running;
  };
  return {
    /** The latest running count (monotonic: a smaller count is ignored). */
    update(bytes) {
      if (closed || !(bytes > latest)) return;
      latest = bytes;
      running ??= drain();
    },
    /** The last count seen. */
    get latest() {
      return latest;
    },
    /** Waits for the report in flight, then emits the completion line. */
    async complete(doneBytes, total) {
      await settle();
      await quietly(() => reporter.complete(doneBytes, total));
    },
    /** Waits for the report in flight, then emits the failure line at `doneBytes` (default: the latest count). */
    async fail(doneBytes = latest) {
      await settle();
      await quietly(() => reporter.fail(doneBytes, total()));
    },
  };
}

/** Runs a reporter call, ignoring its failure (sync or async). */
async function quietly(call) {
  try {
    await call();
  } catch {
    // advisory only
  }
}
