// One merge-benchmark step in its own process.
//   baseline <out.json> _ <host>      capture and serialize the host's baseline (untimed setup)
//   ours|upstream <baseline.json> <remote> <target> <paperclip-home>
//                                     one timed merge; prints { ms, rssMb }
//   digest _ _ <dir>                  prints the snapshot digest of a tree
import { readFileSync, writeFileSync } from "node:fs";

const [kind, baselineFile, remote, target, home] = process.argv.slice(2);
const ours = await import("@paperclipai/adapter-utils-native/workspace-restore-merge");
if (kind === "baseline") {
  writeFileSync(
    baselineFile,
    JSON.stringify(ours.serializeDirectorySnapshot(await ours.captureDirectorySnapshot(target))),
  );
} else if (kind === "digest") {
  console.log(ours.directorySnapshotSha256(await ours.captureDirectorySnapshot(target)));
} else {
  process.env.PAPERCLIP_HOME = home;
  const impl = kind === "ours" ? ours : await import("@paperclipai/adapter-utils/workspace-restore-merge");
  const baseline = impl.parseDirectorySnapshot(JSON.parse(readFileSync(baselineFile, "utf8")));
  const start = process.hrtime.bigint();
  await impl.mergeDirectoryWithBaseline({ baseline, sourceDir: remote, targetDir: target });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  console.log(JSON.stringify({ ms, rssMb: process.resourceUsage().maxRSS / 1024 }));
}
