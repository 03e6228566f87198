// Reads one repository's ignored paths and git snapshot with ours and upstream in this
// process's locale (LANG) and prints both.
import * as upstream from "@paperclipai/adapter-utils/git-workspace-sync";
import * as ours from "@paperclipai/adapter-utils-native/git-workspace-sync";

const repo = process.argv[2];
const read = async (m) => ({
  scan: await m.readReferencedSourceGitIgnoredPaths(repo),
  snapshot: await m.readGitWorkspaceSnapshot(repo),
});
console.log(JSON.stringify({ ours: await read(ours), upstream: await read(upstream) }));
