// Upstream's dist with our exports swapped in, composed exactly as scripts/upstream/swap.mjs
// composes it (scripts/upstream/swapped-copy.mjs), so upstream's own modules (execution-target.js,
// …) call ours.
import path from "node:path";
import { copyUpstream, swapIn } from "../../scripts/upstream/swapped-copy.mjs";

/** Writes a swapped copy of upstream under `dir` and returns its dist directory. */
export async function writeSwappedUpstream(dir) {
  copyUpstream(dir);
  await swapIn(dir);
  return path.join(dir, "dist");
}
