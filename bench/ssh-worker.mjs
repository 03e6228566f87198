// One SSH transfer in its own process (so its peak RSS and its children are its own).
// Prints one JSON line: { ms, rssMb, children, childNames }.
//   children: distinct child processes this process had during the transfer (from /proc).
// Usage: node bench/ssh-worker.mjs <ours|upstream> <push|pull> <spec.json> <localDir> <remoteDir>
import { readFileSync, readdirSync } from "node:fs";

const [impl, direction, specFile, localDir, remoteDir] = process.argv.slice(2);
const spec = JSON.parse(readFileSync(specFile, "utf8"));
const mod =
  impl === "ours"
    ? await import("@paperclipai/adapter-utils-native/ssh")
    : await import("@paperclipai/adapter-utils/ssh");

/** Children of this process right now: pid → command name. */
function children() {
  const out = new Map();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[1]) === process.pid)
        out.set(Number(entry), stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

const seen = new Map();
let sampling = true;
const sampler = (async () => {
  while (sampling) {
    for (const [pid, name] of children()) seen.set(pid, name);
    await new Promise((r) => setTimeout(r, 5));
  }
})();
const onProgress = () => {};
const start = process.hrtime.bigint();
if (direction === "push") {
  await mod.syncDirectoryToSsh({ spec, localDir, remoteDir, onProgress, progressLabel: "workspace" });
} else {
  await mod.syncDirectoryFromSsh({ spec, remoteDir, localDir, onProgress, progressLabel: "workspace" });
}
const ms = Number(process.hrtime.bigint() - start) / 1e6;
sampling = false;
await sampler;
console.log(
  JSON.stringify({
    ms,
    rssMb: process.resourceUsage().maxRSS / 1024,
    children: seen.size,
    childNames: [...new Set(seen.values())].sort(),
  }),
);
