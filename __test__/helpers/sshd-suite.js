// The SSH suites' shared setup (vitest hooks; ./sshd.js itself stays free of vitest, as the
// benchmarks and `paperclip-sync demo` import it).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import { scratchPlaces, startSshd } from "./sshd.js";

/**
 * An SSH suite's setup: before its tests, a scratch directory (named from `prefix`, holding a
 * private Paperclip home, where the delta manifests live) and an sshd; after them, both
 * removed and the home variable restored. Refuses to run as root (scripts/test/full.sh runs the
 * SSH suites as an unprivileged user). Returns `{ work, server, places }`, the first two set
 * in `beforeAll`.
 */
export function sshdSuite(prefix) {
  const suite = { work: null, server: null };
  suite.places = scratchPlaces(
    () => suite.work,
    () => suite.server.workspace,
  );
  const savedHome = process.env.PAPERCLIP_HOME;
  beforeAll(async () => {
    if (process.getuid?.() === 0)
      throw new Error("run the SSH suites as an unprivileged user (see scripts/test/full.sh), not as root");
    suite.work = mkdtempSync(path.join(os.tmpdir(), prefix));
    process.env.PAPERCLIP_HOME = path.join(suite.work, "home");
    suite.server = await startSshd(path.join(suite.work, "sshd"));
  }, 30_000);
  afterAll(async () => {
    await suite.server?.stop();
    if (savedHome === undefined) delete process.env.PAPERCLIP_HOME;
    else process.env.PAPERCLIP_HOME = savedHome;
    if (suite.work) {
      execFileSync("chmod", ["-R", "u+rwx", suite.work]);
      rmSync(suite.work, { recursive: true, force: true });
    }
  });
  return suite;
}
