// A monorepo-shaped copy of upstream for the workspace opt-in's tests: upstream's published
// package (without its test files) under `packages/adapter-utils` with a development version,
// linked from the project's node_modules as a workspace package is, so its real path is
// outside any node_modules directory. One module is changed so its exports no longer match
// ours (`referencedSourceContentSignature` of `acpx-engine/execute` becomes a string value).
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const upstreamDir = path.join(repo, "node_modules/@paperclipai/adapter-utils");

/** Creates the project at `root` (version `version`); returns the workspace package's directory. */
export function upstreamWorkspace(root, { version = "0.3.1" } = {}) {
  const pkg = path.join(root, "packages/adapter-utils");
  cpSync(upstreamDir, pkg, {
    recursive: true,
    filter: (source) => !source.endsWith(".test.js") && !source.endsWith(".map"),
  });
  const manifest = JSON.parse(readFileSync(path.join(pkg, "package.json"), "utf8"));
  writeFileSync(path.join(pkg, "package.json"), JSON.stringify({ ...manifest, version }));
  const execute = path.join(pkg, "dist/acpx-engine/execute.js");
  writeFileSync(
    execute,
    readFileSync(execute, "utf8").replace(
      "export async function referencedSourceContentSignature(",
      'export const referencedSourceContentSignature = "changed";\nasync function referencedSourceContentSignatureBefore(',
    ),
  );
  mkdirSync(path.join(root, "node_modules/@paperclipai"), { recursive: true });
  symlinkSync(pkg, path.join(root, "node_modules/@paperclipai/adapter-utils"), "dir");
  symlinkSync(repo, path.join(root, "node_modules/@paperclipai/adapter-utils-native"), "dir");
  for (const dep of ["@paperclipai/shared", "picocolors", "vitest"]) {
    if (existsSync(path.join(repo, "node_modules", dep)))
      symlinkSync(path.join(repo, "node_modules", dep), path.join(root, "node_modules", dep), "dir");
  }
  return pkg;
}
