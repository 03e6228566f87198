// A monorepo-shaped copy of upstream for the workspace opt-in's tests: upstream's published
// package (without its test files) under `packages/adapter-utils` with a development version,
// linked from the project's node_modules as a workspace package is, so its real path is
// outside any node_modules directory. By default one module is changed so it is no longer
// 2026.916.1's (`referencedSourceContentSignature` of `acpx-engine/execute` becomes a string
// value); `newer: true` instead gives it the stand-ins of the newer releases' modules
// (newer-upstream.js), and `touch` appends a comment to each module named.
import { appendFileSync, cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { withNewerModules } from "./newer-upstream.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const upstreamDir = path.join(repo, "node_modules/@paperclipai/adapter-utils");

/** Creates the project at `root` (version `version`); returns the workspace package's directory. */
export function upstreamWorkspace(root, { version = "0.3.1", newer = false, touch = [] } = {}) {
  const pkg = path.join(root, "packages/adapter-utils");
  cpSync(upstreamDir, pkg, {
    recursive: true,
    filter: (source) => !source.endsWith(".test.js") && !source.endsWith(".map"),
  });
  const manifest = JSON.parse(readFileSync(path.join(pkg, "package.json"), "utf8"));
  writeFileSync(path.join(pkg, "package.json"), JSON.stringify({ ...manifest, version }));
  if (newer) withNewerModules(pkg);
  else {
    const execute = path.join(pkg, "dist/acpx-engine/execute.js");
    writeFileSync(
      execute,
      readFileSync(execute, "utf8").replace(
        "export async function referencedSourceContentSignature(",
        'export const referencedSourceContentSignature = "changed";\nasync function referencedSourceContentSignatureBefore(',
      ),
    );
  }
  for (const module of touch) appendFileSync(path.join(pkg, "dist", `${module}.js`), "\n// changed in the workspace\n");
  mkdirSync(path.join(root, "node_modules/@paperclipai"), { recursive: true });
  symlinkSync(pkg, path.join(root, "node_modules/@paperclipai/adapter-utils"), "dir");
  symlinkSync(repo, path.join(root, "node_modules/@paperclipai/adapter-utils-native"), "dir");
  for (const dep of ["@paperclipai/shared", "picocolors", "vitest"]) {
    if (existsSync(path.join(repo, "node_modules", dep)))
      symlinkSync(path.join(repo, "node_modules", dep), path.join(root, "node_modules", dep), "dir");
  }
  return pkg;
}
