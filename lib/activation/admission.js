// Which installed upstream packages the activation composes into, and which of their modules:
// a verified version (every covered module), or, with the workspace opt-in, an unpublished
// upstream workspace (the monorepo's `packages/adapter-utils`, whose package.json carries a
// development version) module by module, only where the module exports every name we
// implement with the same kind (function, class or value). Shared by the Node hook and the
// vitest plugin; both print the one line `admit` returns.
import { isVerifiedUpstreamVersion, UPSTREAM_PACKAGE, VERIFIED_UPSTREAM_VERSIONS } from "./coverage.js";
import { UPSTREAM_OPT_IN_ENV } from "./env.js";

// Built-ins through process.getBuiltinModule, as in coverage.js (on the register path).
const { existsSync, readFileSync, realpathSync } = process.getBuiltinModule("node:fs");
const path = process.getBuiltinModule("node:path");

export { UPSTREAM_OPT_IN_ENV } from "./env.js";

/** The value of the opt-in (the plugin's `upstream` option, or `UPSTREAM_OPT_IN_ENV`). */
export const WORKSPACE_OPT_IN = "workspace";

/**
 * The exported names of a JavaScript or TypeScript module's source and their kinds:
 * `function` (a function declaration, or a `const` initialized with a function or an arrow),
 * `class`, `value` (any other `const`/`let`/`var`) or `unknown` (an `export { … }` list).
 * Types and interfaces are not values and are left out. A static scan: the module is never run.
 */
export function exportedShapes(source) {
  const shapes = new Map();
  const text = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  for (const match of text.matchAll(
    /^export\s+(?:declare\s+)?(?:default\s+)?(async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)/gm,
  )) {
    shapes.set(match[2], "function");
  }
  for (const match of text.matchAll(/^export\s+(?:declare\s+)?(?:abstract\s+)?class\s+([A-Za-z_$][\w$]*)/gm))
    shapes.set(match[1], "class");
  for (const match of text.matchAll(
    /^export\s+(?:declare\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::[^=\n]+)?=\s*([^\n]*)/gm,
  )) {
    const callable = /^(?:async\s+)?(?:function\b|[A-Za-z_$][\w$]*\s*=>|\([^)]*\)\s*(?::[^=]+)?=>)/.test(match[2]);
    shapes.set(match[1], callable ? "function" : "value");
  }
  for (const match of text.matchAll(/^export\s*\{([^}]*)\}/gm)) {
    for (const part of match[1].split(",")) {
      const name = part
        .trim()
        .replace(/^type\s+/, "")
        .split(/\s+as\s+/)
        .pop()
        ?.trim();
      if (name && !part.trim().startsWith("type ") && !shapes.has(name)) shapes.set(name, "unknown");
    }
  }
  return shapes;
}

/** Whether upstream's kind `theirs` can stand where ours is `ours`. */
function compatible(ours, theirs) {
  if (theirs === undefined) return false;
  if (theirs === "unknown") return true;
  return ours === theirs;
}

/** The source file of upstream `module` under `root`, of the same kind as the file being loaded. */
function moduleSource(root, module, kind) {
  const candidates =
    kind === "src"
      ? [`src/${module}.ts`, `src/${module}.mts`, `src/${module}.js`]
      : [`dist/${module}.js`, `dist/${module}.mjs`];
  for (const relative of candidates) {
    const file = path.join(root, relative);
    if (existsSync(file)) return readFileSync(file, "utf8");
  }
  return null;
}

/** Whether `root` is a workspace package (its real path is not inside a `node_modules` directory). */
export function isWorkspaceRoot(root) {
  let real = root;
  try {
    real = realpathSync(root);
  } catch {
    real = root;
  }
  return !real.split(path.sep).includes("node_modules");
}

/**
 * Decides, once per upstream package, what is composed: `{ modules, line }` where `modules`
 * maps each upstream module served natively to the names served, and `line` (or null) is the
 * one line to print on stderr. `plan` is `[{ module, names, shapes }]` (our drop-ins, with
 * `shapes` the kind of each name); `kind` is `dist` or `src`, the kind of file being loaded.
 */
export function admit({ root, version, kind, plan, optIn }) {
  const all = new Map(plan.map((entry) => [entry.module, entry.names]));
  if (isVerifiedUpstreamVersion(version)) return { modules: all, line: null, reason: null };
  const workspace = isWorkspaceRoot(root);
  if (optIn !== WORKSPACE_OPT_IN || !workspace) {
    const hint = workspace
      ? `; to compose a workspace package anyway, opt in with ${UPSTREAM_OPT_IN_ENV}=${WORKSPACE_OPT_IN} (or adapterUtilsNative({ upstream: "${WORKSPACE_OPT_IN}" }))`
      : "";
    const reason = `${UPSTREAM_PACKAGE} ${version} is not a verified version`;
    return {
      modules: new Map(),
      line: `${reason} (${VERIFIED_UPSTREAM_VERSIONS.join(", ")}); left unchanged${hint}`,
      reason,
    };
  }
  const modules = new Map();
  const differing = [];
  for (const { module, names, shapes } of plan) {
    const source = moduleSource(root, module, kind);
    if (source === null) {
      differing.push(`${module} (missing)`);
      continue;
    }
    const theirs = exportedShapes(source);
    const mismatched = names.filter((name) => !compatible(shapes[name], theirs.get(name)));
    if (mismatched.length === 0) modules.set(module, names);
    else differing.push(`${module} (${mismatched.slice(0, 3).join(", ")}${mismatched.length > 3 ? ", …" : ""})`);
  }
  const served = [...modules.keys()];
  const line =
    `${UPSTREAM_PACKAGE} ${version} at ${root} is an unverified workspace version, composed by opt-in: serving ${served.length ? served.join(", ") : "nothing"}` +
    (differing.length ? `; left upstream's where the exports differ: ${differing.join(", ")}` : "");
  return { modules, line, reason: served.length ? null : `${UPSTREAM_PACKAGE} ${version}: no module's exports match` };
}
