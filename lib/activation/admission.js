// Which installed upstream packages the activation composes into, and which of their modules:
// a verified published version, every covered module (unchanged behaviour: decided by the
// version alone); with the workspace opt-in, an unpublished upstream workspace (the
// monorepo's `packages/adapter-utils`, whose package.json carries a development version)
// module by module, only where the module's behaviour is known to be one this package was
// verified against: its closure (its file and every file of the package it imports) has,
// file for file, the fingerprints a verified upstream recorded (lib/activation/fingerprint.js,
// lib/activation/verified-upstream.json). Export names never admit anything. A refused module
// stays upstream's; the reason names the markers of behaviour this package does not implement
// when its closure carries any, else the files that differ. Shared by the Node hook and the
// vitest plugin; both print the one line `admit` returns.
import {
  isVerifiedUpstreamVersion,
  UPSTREAM_PACKAGE,
  VERIFIED_UPSTREAM_VERSIONS,
  verifiedUpstreams,
} from "./coverage.js";
import { UPSTREAM_OPT_IN_ENV } from "./env.js";
import { markersIn, moduleClosure, sourceFingerprint } from "./fingerprint.js";

// Built-ins through process.getBuiltinModule, as in coverage.js (on the register path).
const { realpathSync } = process.getBuiltinModule("node:fs");
const path = process.getBuiltinModule("node:path");

export { UPSTREAM_OPT_IN_ENV } from "./env.js";

/** The value of the opt-in (the plugin's `upstream` option, or `UPSTREAM_OPT_IN_ENV`). */
export const WORKSPACE_OPT_IN = "workspace";

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

/** A list of at most three items, then `…`. */
function few(items) {
  return `${items.slice(0, 3).join(", ")}${items.length > 3 ? ", …" : ""}`;
}

/**
 * Whether upstream `module` of the package at `root` (files of `kind`: `dist` or `src`) behaves
 * as a verified upstream's: `{ admitted: true, version }` (the verified version whose
 * fingerprints its whole closure has) or `{ admitted: false, reason, markers, differing }`,
 * where `markers` are the refusal markers its closure carries (`{ marker, means, file }`) and
 * `differing` the closure's files whose fingerprint no verified upstream recorded (against the
 * closest one). `verified` defaults to this package's record; `cache` shares file reads.
 */
export function moduleAdmission({ root, kind, module, verified = verifiedUpstreams(), cache = new Map() }) {
  const closure = moduleClosure(root, kind, module, UPSTREAM_PACKAGE, cache);
  if (closure === null) return { admitted: false, reason: "missing", markers: [], differing: [] };
  const prints = closure.files.map(({ file, text }) => ({ file, print: sourceFingerprint(text) }));
  let closest = null;
  for (const entry of verified) {
    const differing = prints.filter(({ file, print }) => entry.files[file] !== print).map(({ file }) => file);
    if (differing.length === 0) return { admitted: true, version: entry.version };
    if (!closest || differing.length < closest.differing.length) closest = { entry, differing };
  }
  const markers = closure.files.flatMap(({ file, text }) => markersIn(text).map((found) => ({ ...found, file })));
  const differing = closest?.differing ?? prints.map(({ file }) => file);
  let reason;
  if (markers.length > 0) {
    const own = closure.files[0].file;
    const imported = new Map();
    for (const { marker, file } of markers.filter((found) => found.file !== own)) {
      if (!imported.has(file)) imported.set(file, []);
      imported.get(file).push(marker);
    }
    const parts = [];
    const mine = markers.filter((found) => found.file === own);
    if (mine.length > 0) parts.push(`carries ${mine.map(({ marker, means }) => `${marker} (${means})`).join(", ")}`);
    if (imported.size > 0)
      parts.push(`imports ${few([...imported].map(([file, found]) => `${file} (${found.join(", ")})`))}`);
    reason = parts.join("; ");
  } else if (kind === "src" && !verified.some((entry) => Object.keys(entry.files).some((f) => f.startsWith("src/")))) {
    reason = "no verified fingerprint of TypeScript sources (verify this workspace: npm run verify-upstream -- <path>)";
  } else {
    reason = `differs from ${closest ? closest.entry.version : "every verified upstream"}: ${few(differing)}`;
  }
  return { admitted: false, reason, markers, differing };
}

/**
 * Decides, once per upstream package, what is composed: `{ modules, refused, line, reason }`
 * where `modules` maps each upstream module served natively to the names served, `refused`
 * maps each module left upstream's to why, `line` (or null) is the one line to print on
 * stderr and `reason` (or null) why nothing is served. `plan` is `[{ module, names }]` (our
 * drop-ins); `kind` is `dist` or `src`, the kind of file being loaded.
 */
export function admit({ root, version, kind, plan, optIn }) {
  const all = new Map(plan.map((entry) => [entry.module, entry.names]));
  if (isVerifiedUpstreamVersion(version)) return { modules: all, refused: {}, line: null, reason: null };
  const workspace = isWorkspaceRoot(root);
  if (optIn !== WORKSPACE_OPT_IN || !workspace) {
    const hint = workspace
      ? `; to compose a workspace package anyway, opt in with ${UPSTREAM_OPT_IN_ENV}=${WORKSPACE_OPT_IN} (or adapterUtilsNative({ upstream: "${WORKSPACE_OPT_IN}" }))`
      : "";
    const reason = `${UPSTREAM_PACKAGE} ${version} is not a verified version`;
    return {
      modules: new Map(),
      refused: {},
      line: `${reason} (${VERIFIED_UPSTREAM_VERSIONS.join(", ")}); left unchanged${hint}`,
      reason,
    };
  }
  const modules = new Map();
  const refused = {};
  const cache = new Map();
  for (const { module, names } of plan) {
    const decision = moduleAdmission({ root, kind, module, cache });
    if (decision.admitted) modules.set(module, names);
    else refused[module] = decision.reason;
  }
  const served = [...modules.keys()];
  const left = Object.entries(refused).map(([module, why]) => `${module} (${why})`);
  const line =
    `${UPSTREAM_PACKAGE} ${version} at ${root} is an unverified workspace version, composed by opt-in where a module is identical to a verified upstream's: serving ${served.length ? served.join(", ") : "nothing"}` +
    (left.length ? `; left upstream's: ${left.join("; ")}` : "");
  return {
    modules,
    refused,
    line,
    reason: served.length ? null : `${UPSTREAM_PACKAGE} ${version}: no module is identical to a verified upstream's`,
  };
}
