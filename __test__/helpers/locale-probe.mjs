// Captures one tree with ours and upstream in this process's locale (LANG) and prints both.
import { oracle } from "./oracle.js";
import * as ours from "@paperclipai/adapter-utils-native/workspace-restore-merge";
const upstream = await oracle("workspace-restore-merge");

const root = process.argv[2];
const view = (s, m) => ({
  keys: [...s.entries.keys()],
  serialized: m.serializeDirectorySnapshot(s),
  digest: m.directorySnapshotSha256(s),
});
console.log(
  JSON.stringify({
    ours: view(await ours.captureDirectorySnapshot(root), ours),
    upstream: view(await upstream.captureDirectorySnapshot(root), upstream),
  }),
);
