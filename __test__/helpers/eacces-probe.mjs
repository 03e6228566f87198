// Runs as an unprivileged user: captures a tree with an unreadable directory (read as
// empty), then one with an unreadable file (EACCES), with ours and upstream.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { oracle } from "./oracle.js";
import * as ours from "@paperclipai/adapter-utils-native/workspace-restore-merge";
const upstream = await oracle("workspace-restore-merge");

const root = process.argv[2];
const fileRoot = mkdtempSync(path.join(os.tmpdir(), "pc-native-eacces-file-"));
writeFileSync(path.join(fileRoot, "secret"), "s");
chmodSync(path.join(fileRoot, "secret"), 0o000);
const codeOf = (p) =>
  p.then(
    () => ({ code: null }),
    (e) => ({ code: e.code, syscall: e.syscall }),
  );
const out = {
  dir: {
    ours: [...(await ours.captureDirectorySnapshot(root)).entries],
    upstream: [...(await upstream.captureDirectorySnapshot(root)).entries],
  },
  file: {
    ours: await codeOf(ours.captureDirectorySnapshot(fileRoot)),
    upstream: await codeOf(upstream.captureDirectorySnapshot(fileRoot)),
  },
};
rmSync(fileRoot, { recursive: true, force: true });
console.log(JSON.stringify(out));
