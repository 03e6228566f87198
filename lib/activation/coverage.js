// What the activation covers, in one place: the upstream versions this package was verified
// against, and the upstream modules it serves (every subpath of our package.json `exports`
// that maps to a drop-in module under lib/, so a new drop-in subpath is picked up with no
// change here). Shared by the `--import` hook, the vitest plugin, the diagnostics and the
// upstream-swap runner.
// Built-in modules through process.getBuiltinModule rather than `import`: the modules on the
// `--import …/register` path load in every child Node process of an activated host, and an ES
// import of a built-in builds its module namespace (about 3 MiB for node:fs) that those children
// would pay for nothing.
const { existsSync, readFileSync } = process.getBuiltinModule("node:fs");
const { createRequire } = process.getBuiltinModule("node:module");
const path = process.getBuiltinModule("node:path");
const { fileURLToPath, pathToFileURL } = process.getBuiltinModule("node:url");

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The npm name of the package the activation composes into. */
export const UPSTREAM_PACKAGE = "@paperclipai/adapter-utils";

/** The record of verified upstreams (written by `npm run verify-upstream -- <version|path> --write`). */
export const VERIFIED_UPSTREAM_FILE = path.join(packageRoot, "lib", "activation", "verified-upstream.json");

let verified = null;

/**
 * The upstream packages the drop-ins were verified against (`npm run verify-upstream`: the
 * differential tests, upstream's suites with our exports swapped in and through the
 * activation): `[{ version, published, source, files }]`, where `published` marks a version
 * of the npm registry (served by its version) and `files` maps each package-relative file of
 * the covered modules' closures to its fingerprint (lib/activation/fingerprint.js), which the
 * workspace opt-in compares.
 */
export function verifiedUpstreams() {
  verified ??= Object.freeze(JSON.parse(readFileSync(VERIFIED_UPSTREAM_FILE, "utf8")).verified.map(Object.freeze));
  return verified;
}

/**
 * The published upstream versions the drop-ins were verified against. Any other installed
 * version is left exactly as it is (or, an unpublished workspace by opt-in, module by module:
 * lib/activation/admission.js).
 */
export const VERIFIED_UPSTREAM_VERSIONS = Object.freeze(
  verifiedUpstreams()
    .filter((entry) => entry.published)
    .map((entry) => entry.version),
);

export { ACTIVATION_ENV } from "./env.js";

/** Whether `version` of upstream is one the drop-ins were verified against. */
export function isVerifiedUpstreamVersion(version) {
  return VERIFIED_UPSTREAM_VERSIONS.includes(version);
}

/**
 * The drop-in modules: `[{ module, file }]` for every `./<module>` entry of our package.json
 * `exports` whose target is a module under lib/ (not lib/activation/, which holds the
 * activation's own entry points), e.g. `{ module: "ssh", file: "/…/lib/ssh.js" }`.
 */
export function coveredModules() {
  const pkg = JSON.parse(readFileSync(path.join(packageRoot, "package.json"), "utf8"));
  return Object.entries(pkg.exports)
    .filter(
      ([key, value]) => key.startsWith("./") && key !== "./package.json" && typeof value === "object" && value?.default,
    )
    .filter(([, value]) => value.default.startsWith("./lib/") && !value.default.startsWith("./lib/activation/"))
    .map(([key, value]) => ({ module: key.slice(2), file: path.join(packageRoot, value.default) }));
}

/** One entry of the composition plan, from our module's namespace. */
function planEntry({ module, file }, namespace) {
  return { module, file, url: pathToFileURL(file).href, names: Object.keys(namespace).sort() };
}

/**
 * The composition plan: `[{ module, file, url, names }]`, where `names` are the exports of our
 * module for `module` (sorted). Imports our modules, so it loads the native binary.
 */
export async function compositionPlan() {
  const plan = [];
  for (const covered of coveredModules()) plan.push(planEntry(covered, await import(pathToFileURL(covered.file).href)));
  return plan;
}

/**
 * The same plan, loaded synchronously (`require` of our ES modules, which have no top-level
 * await): for the synchronous Node hook, which computes it when the first covered upstream
 * module loads, so a process that never loads upstream never loads our modules or the binary.
 */
export function compositionPlanSync() {
  const require = createRequire(import.meta.url);
  return coveredModules().map((covered) => planEntry(covered, require(covered.file)));
}

/**
 * The source of the module served in place of upstream's `module`: upstream's original
 * (loaded from `originalSpecifier`) with every name we implement overridden by ours (an
 * explicit export shadows a star export, so upstream's own modules that import these names
 * get ours too). `recordUrl`, when given, is a module whose `recordComposition` the shim
 * calls so the diagnostics can list what is served (and `refused`, the package's modules the
 * admission left upstream's, when the hook is not the one recording them).
 */
export function shimSource({
  originalSpecifier,
  ours,
  names,
  module,
  upstreamRoot,
  version,
  recordUrl,
  mechanism,
  refused,
}) {
  const lines = [
    `export { ${names.join(", ")} } from ${JSON.stringify(ours)};`,
    `export * from ${JSON.stringify(originalSpecifier)};`,
  ];
  if (recordUrl) {
    const record = { module, upstreamRoot, version, names, mechanism };
    if (refused && Object.keys(refused).length > 0) record.refused = refused;
    lines.push(`import { recordComposition as __paperclipNativeRecord } from ${JSON.stringify(recordUrl)};`);
    lines.push(`__paperclipNativeRecord(${JSON.stringify(record)});`);
  }
  lines.push("");
  return lines.join("\n");
}

/** The query that marks the URL of upstream's original module behind a shim. */
export const ORIGINAL_QUERY = "paperclip-native-original";

const packageCache = new Map();

/** `{ name, version }` of the package.json in `dir`, or null (cached). */
function readPackage(dir) {
  if (packageCache.has(dir)) return packageCache.get(dir);
  let pkg = null;
  try {
    const json = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
    pkg = { name: json.name, version: json.version };
  } catch {
    pkg = null;
  }
  packageCache.set(dir, pkg);
  return pkg;
}

/**
 * Which upstream module a file is, if any: for `<root>/dist/<module>.js` (the published
 * package) or `<root>/src/<module>.ts` (a workspace package built from TypeScript sources),
 * where `<root>/package.json` names upstream, `{ root, version, kind, module }` (`kind` is
 * `dist` or `src`); otherwise null.
 */
export function upstreamModuleOf(filePath) {
  const match = /^(.*)[\\/](dist|src)[\\/](.+)\.(js|ts|mts|mjs)$/.exec(filePath);
  if (!match) return null;
  const [, root, kind, rest, ext] = match;
  if ((kind === "dist") !== (ext === "js" || ext === "mjs")) return null;
  const pkg = readPackage(root);
  if (!pkg || pkg.name !== UPSTREAM_PACKAGE) return null;
  return { root, version: pkg.version, kind, module: rest.split(path.sep).join("/") };
}

/**
 * Drop-ins that only orchestrate other drop-ins. Composed into upstream, such a module is
 * served "bound" beside the upstream module it replaces (`boundSource`): its imports of
 * covered siblings (`./ssh.js`) go to upstream's (composed) sibling modules instead of ours,
 * so a test's `vi.mock("@paperclipai/adapter-utils/ssh")` or `vi.mock("./ssh.js")` still
 * reaches them, as it reaches upstream's own orchestrator. Imported directly, it uses ours.
 */
export const BOUND_MODULES = Object.freeze(["remote-managed-runtime"]);

/** The query that marks the URL of a bound drop-in served beside upstream's module. */
export const BOUND_QUERY = "paperclip-native-bound";

/** Whether `module` is served bound (see `BOUND_MODULES`). */
export function isBoundModule(module) {
  return BOUND_MODULES.includes(module);
}

/**
 * The source of our drop-in `entry` served beside upstream's `entry.module`: our module's
 * own source with each relative import rewritten, to upstream's sibling (relative to the
 * upstream module) when it names a covered module, else to our file's absolute URL.
 */
export function boundSource(entry, coveredNames) {
  const source = readFileSync(entry.file, "utf8");
  const fromDir = path.posix.dirname(entry.module);
  return source.replace(/(\bfrom\s*|\bimport\s*\(?\s*)(["'])(\.{1,2}\/[^"']+)\2/g, (whole, lead, quote, specifier) => {
    const target = path.resolve(path.dirname(entry.file), specifier);
    const relative = path.relative(path.join(packageRoot, "lib"), target).split(path.sep).join("/");
    const module = relative.replace(/\.js$/, "");
    if (coveredNames.has(module) && !relative.startsWith("..")) {
      let sibling = path.posix.relative(fromDir, module);
      if (!sibling.startsWith(".")) sibling = `./${sibling}`;
      return `${lead}${quote}${sibling}.js${quote}`;
    }
    return `${lead}${quote}${pathToFileURL(target).href}${quote}`;
  });
}

/** The upstream package a program started in `dir` would import (`{ root, version }`), or null. */
export function findInstalledUpstream(dir = process.cwd()) {
  for (let current = path.resolve(dir); ; current = path.dirname(current)) {
    const file = path.join(current, "node_modules", ...UPSTREAM_PACKAGE.split("/"), "package.json");
    if (existsSync(file)) {
      try {
        return { root: path.dirname(file), version: JSON.parse(readFileSync(file, "utf8")).version };
      } catch {
        return { root: path.dirname(file), version: null };
      }
    }
    if (path.dirname(current) === current) return null;
  }
}
