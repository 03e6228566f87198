// One snapshot measurement in its own process: prints { ms, mapMs, rssMb, entries, bytes }.
import { statSync } from "node:fs";
import path from "node:path";

const [kind, dir] = process.argv.slice(2);
let result;
let mapMs = 0;
let ms;
// Peak RSS of the capture itself, read before any measuring extras below.
let peakRss;
if (kind === "upstream") {
  const upstream = await import("@paperclipai/adapter-utils/workspace-restore-merge");
  const start = process.hrtime.bigint();
  result = await upstream.captureDirectorySnapshot(dir);
  ms = Number(process.hrtime.bigint() - start) / 1e6;
} else if (kind === "ours") {
  const ours = await import("@paperclipai/adapter-utils-native/workspace-restore-merge");
  const start = process.hrtime.bigint();
  result = await ours.captureDirectorySnapshot(dir);
  ms = Number(process.hrtime.bigint() - start) / 1e6;
  peakRss = process.resourceUsage().maxRSS / 1024;
  // The JS share of the boundary: building the Map from the native transfer.
  const { native } = await import("../lib/native.js");
  const { entriesFromTransfer } = await import("../lib/snapshot-transfer.js");
  const transfer = await native.snapshotCapture(path.normalize(dir), [], null, false, undefined);
  const t0 = process.hrtime.bigint();
  entriesFromTransfer(transfer);
  mapMs = Number(process.hrtime.bigint() - t0) / 1e6;
} else if (kind === "ours-incremental") {
  const ours = await import("@paperclipai/adapter-utils-native/workspace-restore-merge");
  const first = await ours.captureDirectorySnapshot(dir, { incremental: true });
  const start = process.hrtime.bigint();
  result = await ours.captureDirectorySnapshot(dir, { previous: first });
  ms = Number(process.hrtime.bigint() - start) / 1e6;
} else {
  throw new Error(`unknown kind ${kind}`);
}
const rssMb = peakRss ?? process.resourceUsage().maxRSS / 1024;
let bytes = 0;
if (kind === "ours")
  for (const [rel, e] of result.entries) if (e.kind === "file") bytes += statSync(path.join(dir, rel)).size;
console.log(JSON.stringify({ ms, mapMs, rssMb, entries: result.entries.size, bytes }));
