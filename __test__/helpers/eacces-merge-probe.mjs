// Runs as an unprivileged user: merges a remote file into a read-only host directory with
// ours and upstream, and prints each error's code and classification.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/workspace-restore-merge";
import * as ours from "@paperclipai/adapter-utils-native/workspace-restore-merge";

const root = mkdtempSync(path.join(os.tmpdir(), "pc-native-eacces-merge-"));
process.env.PAPERCLIP_HOME = path.join(root, "home");
const out = {};
for (const [name, impl] of [
  ["ours", ours],
  ["upstream", upstream],
]) {
  const target = path.join(root, name, "target");
  const source = path.join(root, name, "source");
  mkdirSync(path.join(target, "sub"), { recursive: true });
  const baseline = await impl.captureDirectorySnapshot(target);
  mkdirSync(path.join(source, "sub"), { recursive: true });
  writeFileSync(path.join(source, "sub", "x"), "remote");
  chmodSync(path.join(target, "sub"), 0o500);
  const error = await impl.mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: target }).then(
    () => null,
    (e) => e,
  );
  chmodSync(path.join(target, "sub"), 0o700);
  out[name] = { code: error?.code ?? null, classified: impl.classifyWorkspaceRestoreFailure(error) };
}
rmSync(root, { recursive: true, force: true });
console.log(JSON.stringify(out));
