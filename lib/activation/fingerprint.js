// What an upstream module's behaviour is made of, as far as the activation can tell without
// running it: the module's source file and every file of the same package it imports
// (relative imports and the package's own subpaths, followed transitively: its "closure"),
// each reduced to a SHA-256 fingerprint. A module whose whole closure has the fingerprints a
// verified upstream recorded (lib/activation/verified-upstream.json) behaves exactly as that
// verified module did, so our drop-ins serve it; anything else is upstream's to run. The
// markers name what newer upstreams do that this package does not implement, so a refusal
// can say why. Shared by the admission (lib/activation/admission.js) and the command that
// records a verified upstream (scripts/upstream/verify.mjs).
// Built-ins through process.getBuiltinModule, as in coverage.js (on the register path; node:crypto
// only when a fingerprint is taken, which only the workspace opt-in and verify-upstream do).
const { existsSync, readFileSync } = process.getBuiltinModule("node:fs");
const path = process.getBuiltinModule("node:path");

/**
 * Source text that tells a module apart from 2026.916.1's: each `marker` is a string found
 * in the sources of newer upstream releases and `means` the behaviour it comes with, which
 * this package's drop-ins do not implement (docs/activation.md). The newer SQLite merge
 * lock's file is honoured by lib/merge-lock.js; the modules that carry its code stay
 * upstream's.
 */
export const REFUSAL_MARKERS = Object.freeze([
  { marker: "node:sqlite", means: "SQLite code: disk-backed snapshots or the newer merge lock's module" },
  { marker: ".lock.sqlite", means: "the newer merge lock's module" },
  { marker: "unescapeTarExcludeLiteral", means: "an exclude matcher that unescapes literal patterns" },
  { marker: "transferExclude", means: "an SSH prepare that returns transferExclude" },
  { marker: "WorkspacePaths", means: "disk-manifest workspace paths" },
  { marker: "onStdout", means: "a streaming git executor" },
  { marker: "DirectoryMergeConflict", means: "merge conflict errors" },
]);

/**
 * The fingerprint of one source file: SHA-256 (hex) of its text with CRLF line ends made LF
 * and a trailing `//# sourceMappingURL=` line left out (a build with or without source maps
 * is the same code). Nothing else is normalised: a changed comment is a changed file.
 */
export function sourceFingerprint(text) {
  const normalised = text.replace(/\r\n/g, "\n").replace(/\n?\/\/# sourceMappingURL=[^\n]*\s*$/, "");
  return process.getBuiltinModule("node:crypto").createHash("sha256").update(normalised).digest("hex");
}

/** The markers (entries of `REFUSAL_MARKERS`) found in `text`. */
export function markersIn(text) {
  return REFUSAL_MARKERS.filter(({ marker }) => text.includes(marker));
}

// Static import specifiers: `from "…"`, `import "…"` and `import("…")` with a literal.
const SPECIFIER = /\bfrom\s*(["'])([^"'\n]+)\1|\bimport\s*\(\s*(["'])([^"'\n]+)\3\s*\)|\bimport\s+(["'])([^"'\n]+)\5/g;

/** The file extensions tried for a module of `kind` (`dist`: compiled JS, `src`: TypeScript sources). */
function extensions(kind) {
  return kind === "src" ? [".ts", ".mts", ".tsx", ".js", ".mjs"] : [".js", ".mjs"];
}

/** The package-relative path (posix) of the file `base` (package-relative, without extension or with `.js`) names, or null. */
function resolveFile(root, kind, base) {
  const stem = base.replace(/\.(?:m?js|m?ts|tsx)$/, "");
  const candidates = [];
  if (kind === "dist" && /\.m?js$/.test(base)) candidates.push(base);
  for (const ext of extensions(kind)) candidates.push(`${stem}${ext}`);
  for (const ext of extensions(kind)) candidates.push(`${stem}/index${ext}`);
  for (const candidate of candidates) {
    const normal = path.posix.normalize(candidate);
    if (normal.startsWith("../")) return null;
    if (existsSync(path.join(root, ...normal.split("/")))) return normal;
  }
  return null;
}

/**
 * The package-relative path of upstream `module`'s file of `kind` under `root`
 * (`dist/<module>.js`, or `src/<module>.ts` for TypeScript sources), or null when missing.
 */
export function moduleFile(root, kind, module) {
  return resolveFile(root, kind, `${kind}/${module}`);
}

/**
 * The closure of upstream `module` in the package at `root` (named `packageName`), files of
 * `kind`: `{ files: [{ file, text }] }` with the module's own file first, then every file it
 * imports from the same package, transitively (relative specifiers, and `packageName` and its
 * subpaths); null when the module's file is missing. Imports of other packages and of Node's
 * built-ins are not followed. `cache` (a Map) shares file reads between calls.
 */
export function moduleClosure(root, kind, module, packageName, cache = new Map()) {
  const first = moduleFile(root, kind, module);
  if (first === null) return null;
  const read = (file) => {
    if (!cache.has(file)) cache.set(file, readFileSync(path.join(root, ...file.split("/")), "utf8"));
    return cache.get(file);
  };
  const seen = new Set([first]);
  const files = [];
  const queue = [first];
  while (queue.length > 0) {
    const file = queue.shift();
    const text = read(file);
    files.push({ file, text });
    for (const match of text.matchAll(SPECIFIER)) {
      const specifier = match[2] ?? match[4] ?? match[6];
      let target = null;
      if (specifier.startsWith("./") || specifier.startsWith("../")) {
        target = resolveFile(root, kind, path.posix.join(path.posix.dirname(file), specifier));
      } else if (specifier === packageName) {
        target = resolveFile(root, kind, `${kind}/index`);
      } else if (specifier.startsWith(`${packageName}/`)) {
        target = resolveFile(root, kind, `${kind}/${specifier.slice(packageName.length + 1)}`);
      }
      // A specifier that names no file (a string inside generated script text) loads nothing.
      if (target !== null && !seen.has(target)) {
        seen.add(target);
        queue.push(target);
      }
    }
  }
  return { files };
}

/**
 * The fingerprints to record for a verified upstream package at `root`: package-relative
 * path → `sourceFingerprint`, for every file of the closures of `modules` (of each kind the
 * package has: `dist`, and `src` when it holds TypeScript sources).
 */
export function packageFingerprints(root, modules, packageName) {
  const files = {};
  const cache = new Map();
  for (const kind of ["dist", "src"]) {
    for (const module of modules) {
      const closure = moduleClosure(root, kind, module, packageName, cache);
      if (!closure) continue;
      for (const { file, text } of closure.files) files[file] = sourceFingerprint(text);
    }
  }
  return Object.fromEntries(Object.entries(files).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
