// A copy of the installed upstream package with our exports swapped in, as the upstream-swap
// runner (scripts/upstream/swap.mjs) and the tests that run upstream's own orchestration
// (__test__/helpers/swapped-upstream.js) need it: each upstream module we cover becomes
//
//     export * from "./<module>.orig.js";
//     export { name, … } from "<this repo>/lib/<module>.js";
//
// (an explicit export shadows a star export, so upstream's own modules that import these
// names get ours too). The covered modules and the shim's source are the activation's
// (lib/activation/coverage.js), which composes the same modules at load time.
import { cpSync, existsSync, mkdirSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { boundSource, coveredModules, isBoundModule, shimSource } from "../../lib/activation/coverage.js";
import { repo } from "../lib/shared.mjs";

/** The installed upstream package (the devDependency; the default `from` below). */
export const upstreamDir = path.join(repo, "node_modules", "@paperclipai", "adapter-utils");

/**
 * Copies the dist and package.json of the upstream package at `from` (default: the installed
 * one) into `dir`, its bundled dependencies linked; returns `dir`. Its other dependencies
 * resolve from the directories above `dir`, so `dir` sits beside the install's node_modules.
 */
export function copyUpstream(dir, from = upstreamDir) {
  mkdirSync(dir, { recursive: true });
  cpSync(path.join(from, "dist"), path.join(dir, "dist"), { recursive: true });
  cpSync(path.join(from, "package.json"), path.join(dir, "package.json"));
  // The bundled dependencies (acpx, …) resolve through the upstream package's own folder.
  if (existsSync(path.join(from, "node_modules")))
    symlinkSync(path.join(from, "node_modules"), path.join(dir, "node_modules"), "dir");
  return dir;
}

/**
 * Swaps our exports into the copy at `dir` (of the upstream package at `from`) and proves every
 * swap took effect; returns the swapped names as `module.name`.
 */
export async function swapIn(dir, from = upstreamDir) {
  const modules = [];
  const covered = coveredModules();
  const coveredNames = new Set(covered.map((entry) => entry.module));
  for (const { module, file } of covered) {
    const upstreamFile = path.join(dir, "dist", `${module}.js`);
    if (!existsSync(upstreamFile)) throw new Error(`upstream has no module ${module}`);
    const ours = await import(pathToFileURL(file).href);
    const theirs = await import(pathToFileURL(path.join(from, "dist", `${module}.js`)).href);
    const names = Object.keys(ours).sort();
    const foreign = names.filter((name) => !(name in theirs));
    if (foreign.length > 0)
      throw new Error(`lib/${module}.js exports names upstream's ${module} lacks: ${foreign.join(", ")}`);
    const base = path.basename(module);
    renameSync(upstreamFile, path.join(dir, "dist", `${module}.orig.js`));
    // A bound drop-in (an orchestrator of other drop-ins) sits beside upstream's module as
    // `<module>.native.js`, calling upstream's (swapped) siblings, as the activation serves it.
    let oursSpecifier = pathToFileURL(file).href;
    if (isBoundModule(module)) {
      writeFileSync(path.join(dir, "dist", `${module}.native.js`), boundSource({ module, file }, coveredNames));
      oursSpecifier = `./${base}.native.js`;
    }
    writeFileSync(upstreamFile, shimSource({ originalSpecifier: `./${base}.orig.js`, ours: oursSpecifier, names }));
    modules.push({
      module,
      upstreamFile,
      ours: isBoundModule(module)
        ? await import(pathToFileURL(path.join(dir, "dist", `${module}.native.js`)).href)
        : ours,
      names,
    });
  }
  // Prove every shim took effect (only once all are written: upstream modules import each
  // other): the swapped module hands out our very functions.
  const swapped = [];
  for (const { module, upstreamFile, ours, names } of modules) {
    const shim = await import(pathToFileURL(upstreamFile).href);
    for (const name of names) {
      if (typeof ours[name] === "function" && shim[name] !== ours[name])
        throw new Error(`swap of ${module}.${name} did not take effect`);
      swapped.push(`${module}.${name}`);
    }
  }
  return swapped;
}
