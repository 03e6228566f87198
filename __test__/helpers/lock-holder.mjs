// Holds the directory-merge lock of a target in its own process until stdin says "release"
// (or closes). Usage: node lock-holder.mjs <ours|upstream|newer> <targetDir>
// `ours` is this package, `upstream` @paperclipai/adapter-utils 2026.916.1, `newer` the
// stand-in of the newer SQLite protocol (newer-merge-lock.mjs). Prints "database" once a
// `newer` holder has the database lock, "held <pid>" once it holds the lock and "released"
// after. HOLDER_WAIT_MS sets the wait of `ours` and `newer` (default 30 s).
import * as upstream from "@paperclipai/adapter-utils/workspace-restore-merge";
import { withDirectoryMergeLockWaiting } from "../../lib/merge-lock.js";
import { withNewerDirectoryMergeLock } from "./newer-merge-lock.mjs";

const [impl, target] = process.argv.slice(2);
const waitMs = Number(process.env.HOLDER_WAIT_MS ?? 30_000);
const hold = async () => {
  process.stdout.write(`held ${process.pid}\n`);
  await new Promise((resolve) => {
    process.stdin.on("data", (chunk) => {
      if (String(chunk).includes("release")) resolve();
    });
    process.stdin.on("end", resolve);
  });
};
if (impl === "ours") await withDirectoryMergeLockWaiting(target, hold, process.env, waitMs);
else if (impl === "newer")
  await withNewerDirectoryMergeLock(target, hold, process.env, waitMs, {
    onDatabase: () => process.stdout.write("database\n"),
  });
else await upstream.withDirectoryMergeLock(target, hold);
process.stdout.write("released\n", () => process.exit(0));
