// The recorded baselines of scripts/upstream/activation-suites.mjs (CONTRIBUTING.md, "Recorded
// baselines"): the results of a package's compiled suites run without activation (the modes
// `plain` and `plain-inline`). They depend on none of this package's code, only on the
// suites, the packages they test, the Node version, the user and the runner's settings; so
// they are kept in the repository (`test-baselines/`), one file per package, version, Node
// version, user and mode, and a run reads them instead of running the baseline again.
//
// A record holds a key and, per suite file, the file's digest and its tests' results. It
// serves a run only where everything matches: the whole key (the package's version and the
// digest of its non-test files; for a consumer, the upstream it resolves, by version and
// digest; the Node version; root or not; vitest's and vite's versions; the mode's vitest
// settings) and each suite file's digest. A suite file with no matching entry runs live.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { repo } from "../lib/shared.mjs";

export const BASELINE_DIR = path.join(repo, "test-baselines");
const UPSTREAM = "@paperclipai/adapter-utils";

const sha256 = (data) => createHash("sha256").update(data).digest("hex");

/** The digest of one file. */
export function fileDigest(file) {
  return sha256(readFileSync(file));
}

/** The digest of a package's files other than its suites (`*.test.js`) and node_modules. */
function codeDigest(dir) {
  const hash = createHash("sha256");
  const walk = (at) => {
    for (const entry of readdirSync(at, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const full = path.join(at, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== "node_modules") walk(full);
      } else if (entry.isFile() && !entry.name.endsWith(".test.js")) {
        hash
          .update(`${path.relative(dir, full)}\0`)
          .update(readFileSync(full))
          .update("\0");
      }
    }
  };
  walk(dir);
  return hash.digest("hex");
}

/** The installed version of `name` as `from` resolves it, with the directory it is in. */
function resolvedPackage(name, from) {
  const require = createRequire(path.join(from, "package.json"));
  let dir;
  try {
    dir = path.dirname(require.resolve(`${name}/package.json`));
  } catch {
    // A package whose `exports` hide package.json: walk node_modules upwards.
    for (let at = from; ; at = path.dirname(at)) {
      const candidate = path.join(at, "node_modules", ...name.split("/"));
      if (existsSync(path.join(candidate, "package.json"))) {
        dir = candidate;
        break;
      }
      if (path.dirname(at) === at) return null;
    }
  }
  return { dir, version: JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")).version };
}

/**
 * The key a baseline run of the package in `pkgDir` in `mode` (with vitest `settings`) has
 * here: everything its results depend on except the suite files themselves.
 */
export function baselineKey({ pkgDir, mode, settings }) {
  const manifest = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8"));
  const key = {
    package: manifest.name,
    version: manifest.version,
    code: codeDigest(pkgDir),
    upstream: null,
    node: process.versions.node,
    user: typeof process.getuid === "function" && process.getuid() === 0 ? "root" : "unprivileged",
    vitest: resolvedPackage("vitest", repo)?.version ?? null,
    vite: resolvedPackage("vite", repo)?.version ?? null,
    mode,
    settings,
  };
  if (manifest.name !== UPSTREAM) {
    const upstream = resolvedPackage(UPSTREAM, pkgDir);
    if (upstream) key.upstream = { version: upstream.version, code: codeDigest(upstream.dir) };
  }
  return key;
}

/** The record's file for `key` (test-baselines/<package>@<version>.node-<version>.<user>.<mode>.json). */
export function baselineFile(key, dir = BASELINE_DIR) {
  const name = key.package.replace(/^@[^/]+\//, "");
  return path.join(dir, `${name}@${key.version}.node-${key.node}.${key.user}.${key.mode}.json`);
}

/**
 * What the record holds for `key`: `{ file, suites: Map<suite, { digest, tests: Map<name,
 * status> }>, served, stale }` (`served`: the modules the runs reported served natively, none
 * for a baseline; `stale`: why a record there did not match the key, or null).
 */
export function readBaseline(key, dir = BASELINE_DIR) {
  const file = baselineFile(key, dir);
  const suites = new Map();
  if (!existsSync(file)) return { file, suites, served: [], stale: "no record" };
  const record = JSON.parse(readFileSync(file, "utf8"));
  const differing = Object.keys({ ...key, ...record.key }).filter(
    (field) => JSON.stringify(record.key[field]) !== JSON.stringify(key[field]),
  );
  if (differing.length > 0) return { file, suites, served: [], stale: `the key differs in ${differing.join(", ")}` };
  for (const [suite, entry] of Object.entries(record.suites)) {
    suites.set(suite, { digest: entry.digest, tests: new Map(Object.entries(entry.tests)) });
  }
  return { file, suites, served: record.served ?? [], stale: null };
}

/** Writes the record for `key`: `suites` and `served` as `readBaseline` returns them. */
export function writeBaseline(key, suites, served, dir = BASELINE_DIR) {
  const file = baselineFile(key, dir);
  mkdirSync(path.dirname(file), { recursive: true });
  const out = { key, served, suites: {} };
  for (const suite of [...suites.keys()].sort()) {
    const entry = suites.get(suite);
    out.suites[suite] = {
      digest: entry.digest,
      tests: Object.fromEntries([...entry.tests].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
    };
  }
  writeFileSync(file, `${JSON.stringify(out, null, 1)}\n`);
  return file;
}
