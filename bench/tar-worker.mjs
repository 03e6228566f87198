// One tar measurement in its own process (so its peak RSS is its own). Prints one JSON line:
// { ms, cpuMs, rssMb, tarBytes, outBytes } (cpuMs: user + system time of every thread, or of
// every process of the system pipeline). Kinds:
//   ours-stream[-gz1]  createTarballStreamFromDirectory, 1 MiB chunks, consumed and dropped
//   ours-file          createTarballFromDirectory into a temporary file
//   upstream-file      upstream createTarballFromDirectory (system tar) into a temporary file
//   system             tar -cf - | cat > /dev/null, with upstream's arguments
//   system-gz1         tar -cf - | gzip -1 | wc -c (GNU gzip; its output is counted, not kept)
// Usage: node bench/tar-worker.mjs <kind> <dir>
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";

const [kind, dir] = process.argv.slice(2);
const names = readdirSync(dir).sort((a, b) => a.localeCompare(b));
const tmp = mkdtempSync(path.join(os.tmpdir(), "pc-bench-tar-"));
const archivePath = path.join(tmp, "out.tar");
let tarBytes = 0;
let outBytes = 0;
let rssMb = null;
let cpuMs = null;
// Load the modules before the clock starts: only the archiving is timed.
const ours = await import("@paperclipai/adapter-utils-native");
const upstream = kind === "upstream-file" ? await import("@paperclipai/adapter-utils/sandbox-managed-runtime") : null;
const start = process.hrtime.bigint();
const cpuStart = process.cpuUsage();
try {
  if (kind === "ours-stream" || kind === "ours-stream-gz1") {
    const { createTarballStreamFromDirectory } = ours;
    const stream = await createTarballStreamFromDirectory({
      localDir: dir,
      chunkSize: 1 << 20,
      gzip: kind.endsWith("gz1") ? 1 : undefined,
    });
    for await (const chunk of stream) outBytes += chunk.length;
    tarBytes = stream.summary.tarBytes;
  } else if (kind === "ours-file" || kind === "upstream-file") {
    const module = kind === "ours-file" ? ours : upstream;
    await module.createTarballFromDirectory({ localDir: dir, archivePath });
    tarBytes = outBytes = statSync(archivePath).size;
  } else if (kind === "system" || kind === "system-gz1") {
    // `cat` keeps GNU tar from noticing /dev/null (it skips reading file data for it).
    const quoted = names.map((n) => `'${n.replaceAll("'", "'\"'\"'")}'`).join(" ");
    const tar = `tar -c --no-xattrs -f - -C '${dir}' --exclude '._*' -- ${quoted}`;
    const script =
      kind === "system-gz1" ? `${tar} | gzip -1 | wc -c >&2` : `${tar} | tee >(wc -c >&2) | cat > /dev/null`;
    const out = spawnSync("/usr/bin/time", ["-f", "maxrss=%M cpu=%U+%S", "bash", "-c", script], { encoding: "utf8" });
    if (out.status !== 0) throw new Error(out.stderr);
    outBytes = Number(/^\s*(\d+)$/m.exec(out.stderr)?.[1] ?? 0);
    rssMb = Number(/maxrss=(\d+)/.exec(out.stderr)[1]) / 1024; // of the largest process
    const [, user, sys] = /cpu=([\d.]+)\+([\d.]+)/.exec(out.stderr);
    cpuMs = (Number(user) + Number(sys)) * 1000;
  } else {
    throw new Error(`unknown kind ${kind}`);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
const ms = Number(process.hrtime.bigint() - start) / 1e6;
const cpu = process.cpuUsage(cpuStart);
cpuMs ??= (cpu.user + cpu.system) / 1000;
rssMb ??= process.resourceUsage().maxRSS / 1024;
console.log(JSON.stringify({ ms, cpuMs, rssMb, tarBytes, outBytes }));
