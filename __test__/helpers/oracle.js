// The oracle of the differential tests, in one place: upstream's package as installed for the
// tests (the devDependency in node_modules/@paperclipai/adapter-utils) or, with
// PAPERCLIP_NATIVE_ORACLE=<package directory>, another install of it: scripts/upstream/verify.mjs
// points it at the upstream version being verified. The probes the tests start as child
// processes inherit the variable and load the same oracle.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The variable naming another upstream install as the oracle. */
export const ORACLE_ENV = "PAPERCLIP_NATIVE_ORACLE";

/** The oracle package's directory. */
export const oracleDir = process.env[ORACLE_ENV]
  ? path.resolve(process.env[ORACLE_ENV])
  : path.join(repo, "node_modules", "@paperclipai", "adapter-utils");

/** The oracle package's version. */
export const oracleVersion = JSON.parse(readFileSync(path.join(oracleDir, "package.json"), "utf8")).version;

/**
 * Upstream's module `module` (`"workspace-restore-merge"`, `"acpx-engine/execute"`, …) from the
 * oracle package. scripts/upstream/verify.mjs reads the `oracle("…")` calls of each
 * differential test to tell which modules it compares.
 */
export function oracle(module) {
  return import(pathToFileURL(path.join(oracleDir, "dist", `${module}.js`)).href);
}
