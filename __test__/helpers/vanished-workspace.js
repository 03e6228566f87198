// How a remote workspace can be gone between a prepare and its restore (a recycled or
// re-created sandbox, an expired lease, a cleaned disk), shared by the sandbox and SSH suites.
import { mkdirSync, renameSync, rmSync } from "node:fs";

/** `{ name: (remoteDir) => void }`: each makes the remote workspace directory gone in its way. */
export const VANISHED_WORKSPACE_FAULTS = {
  removed: (remote) => rmSync(remote, { recursive: true, force: true }),
  renamed: (remote) => renameSync(remote, `${remote}-moved`),
  "re-created empty": (remote) => {
    rmSync(remote, { recursive: true, force: true });
    mkdirSync(remote);
  },
};
