// Runs as an unprivileged user (root reads everything): merges a source whose directory `a`
// cannot be read into an identical host, with ours and upstream, and prints each error and
// the host's entries before and after.
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/workspace-restore-merge";
import * as ours from "@paperclipai/adapter-utils-native/workspace-restore-merge";

const root = mkdtempSync(path.join(os.tmpdir(), "pc-native-unreadable-source-"));
process.env.PAPERCLIP_HOME = path.join(root, "home");
const fill = (dir) => {
  mkdirSync(path.join(dir, "a", "b"), { recursive: true });
  for (const file of ["top", "a/x", "a/y", "a/b/z"]) writeFileSync(path.join(dir, file), file);
};
const out = {};
for (const [name, impl] of [
  ["ours", ours],
  ["upstream", upstream],
]) {
  const target = path.join(root, name, "target");
  const source = path.join(root, name, "source");
  fill(target);
  fill(source);
  const baseline = await impl.captureDirectorySnapshot(target);
  out.hostBefore = readdirSync(target, { recursive: true }).sort();
  chmodSync(path.join(source, "a"), 0o000);
  const error = await impl.mergeDirectoryWithBaseline({ baseline, sourceDir: source, targetDir: target }).then(
    () => null,
    (e) => e,
  );
  chmodSync(path.join(source, "a"), 0o700);
  out[name] = {
    code: error?.code ?? null,
    syscall: error?.syscall ?? null,
    hostAfter: readdirSync(target, { recursive: true }).sort(),
  };
}
rmSync(root, { recursive: true, force: true });
console.log(JSON.stringify(out));
