// Captures one tree with ours and upstream in this process's locale (LANG) and prints both.
import * as upstream from "@paperclipai/adapter-utils/workspace-restore-merge";
import * as ours from "@paperclipai/adapter-utils-native/workspace-restore-merge";

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
