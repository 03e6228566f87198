// Upstream's dist with our exports swapped in, composed as scripts/upstream-swap.mjs composes
// it: each upstream module we cover becomes `export * from "./<m>.orig.js"` plus our names
// re-exported from lib/, so upstream's own modules (execution-target.js, …) call ours.
import { cpSync, mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const upstreamDir = path.join(repo, "node_modules", "@paperclipai", "adapter-utils");

/** Writes a swapped copy of upstream under `dir` and returns its dist directory. */
export async function writeSwappedUpstream(dir) {
  mkdirSync(dir, { recursive: true });
  cpSync(path.join(upstreamDir, "dist"), path.join(dir, "dist"), { recursive: true });
  cpSync(path.join(upstreamDir, "package.json"), path.join(dir, "package.json"));
  symlinkSync(path.join(upstreamDir, "node_modules"), path.join(dir, "node_modules"), "dir");
  const pkg = JSON.parse(readFileSync(path.join(repo, "package.json"), "utf8"));
  for (const [key, value] of Object.entries(pkg.exports)) {
    if (key === "." || typeof value !== "object" || !value.default) continue;
    const module = key.slice(2);
    const file = path.join(repo, value.default);
    const names = Object.keys(await import(pathToFileURL(file).href)).sort();
    const target = path.join(dir, "dist", `${module}.js`);
    renameSync(target, path.join(dir, "dist", `${module}.orig.js`));
    writeFileSync(target, `export * from "./${path.basename(module)}.orig.js";\nexport { ${names.join(", ")} } from ${JSON.stringify(pathToFileURL(file).href)};\n`);
  }
  return path.join(dir, "dist");
}
