// The activation's pure parts: our NODE_OPTIONS entry rewritten to an absolute URL (checked
// against Node's own parsing of NODE_OPTIONS), and the fingerprints behind the workspace
// opt-in's admission (checked against upstream's published modules and a made-up package).
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { moduleAdmission } from "../lib/activation/admission.js";
import { coveredModules, UPSTREAM_PACKAGE, verifiedUpstreams } from "../lib/activation/coverage.js";
import { markersIn, moduleClosure, packageFingerprints, sourceFingerprint } from "../lib/activation/fingerprint.js";
import {
  joinNodeOptions,
  REGISTER_SPECIFIER,
  rewriteNodeOptions,
  splitNodeOptions,
} from "../lib/activation/node-options.js";
import { createRandom, runSeed } from "./helpers/random.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const registerFile = path.join(repo, "lib/activation/register.js");
const registerUrl = pathToFileURL(registerFile).href;
const upstreamDir = path.join(repo, "node_modules/@paperclipai/adapter-utils");

const seed = runSeed();

describe("NODE_OPTIONS rewriting", () => {
  it("joins arguments so that Node splits them back the same (Node itself is the oracle)", () => {
    const rng = createRandom(seed);
    const alphabet = ["a", "b", " ", '"', "\\", "x", "-"];
    for (let i = 0; i < 24; i += 1) {
      // Starting with a letter: Node's option parser would take a leading "-" for an option.
      const title = `t${Array.from({ length: 1 + rng.int(10) }, () => rng.pick(alphabet)).join("")}`;
      const value = joinNodeOptions(["--title", title]);
      expect(splitNodeOptions(value), `DIFF_SEED=${seed} case ${i}`).toEqual(["--title", title]);
      const result = spawnSync(process.execPath, ["-p", "JSON.stringify(process.title)"], {
        env: { ...process.env, NODE_OPTIONS: value },
        encoding: "utf8",
      });
      expect(result.status, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout.trim()), `NODE_OPTIONS=${value}`).toBe(title);
    }
  });

  it("replaces every form of our entry by the absolute URL in place, and keeps every other argument", () => {
    const forms = [
      ["--import", REGISTER_SPECIFIER],
      [`--import=${REGISTER_SPECIFIER}`],
      ["--import", "./lib/activation/register.js"],
      [`--import=${registerFile}`],
      ["--import", registerUrl],
    ];
    const others = [
      ["--max-old-space-size=4096"],
      ["--enable-source-maps"],
      ["--import", "tsx"],
      ["--title", "a b"],
      ["--require", "./x.cjs"],
      ["--import=other/register"],
    ];
    const rng = createRandom(seed);
    for (let i = 0; i < 200; i += 1) {
      const ours = rng.pick(forms);
      const before = Array.from({ length: rng.int(3) }, () => rng.pick(others)).flat();
      const after = Array.from({ length: rng.int(3) }, () => rng.pick(others)).flat();
      const value = joinNodeOptions([...before, ...ours, ...after]);
      const rewritten = rewriteNodeOptions(value, { registerUrl, cwd: repo });
      expect(splitNodeOptions(rewritten), `DIFF_SEED=${seed} case ${i}: ${value}`).toEqual([
        ...before,
        `--import=${registerUrl}`,
        ...after,
      ]);
      const removed = rewriteNodeOptions(value, { registerUrl, cwd: repo, remove: true });
      expect(splitNodeOptions(removed ?? ""), `DIFF_SEED=${seed} case ${i}: ${value}`).toEqual([...before, ...after]);
    }
    expect(splitNodeOptions('a "" b""c')).toEqual(["a", "bc"]);
    // Nothing of ours: the same string back, byte for byte.
    const foreign = '--import tsx  --title "a b"';
    expect(rewriteNodeOptions(foreign, { registerUrl, cwd: repo })).toBe(foreign);
    // A relative path seen from another directory is not ours.
    expect(rewriteNodeOptions("--import ./lib/activation/register.js", { registerUrl, cwd: "/" })).toBe(
      "--import ./lib/activation/register.js",
    );
  });
});

describe("the admission's fingerprints behind the workspace opt-in", () => {
  const modules = coveredModules().map((m) => m.module);

  it("the verified record holds the fingerprints of the installed 2026.916.1, from the lockfile's tarball", () => {
    const [entry] = verifiedUpstreams().filter((e) => e.version === "2026.916.1");
    expect(entry.published).toBe(true);
    expect(entry.files).toEqual(packageFingerprints(upstreamDir, modules, UPSTREAM_PACKAGE));
    const lock = JSON.parse(readFileSync(path.join(repo, "package-lock.json"), "utf8"));
    expect(entry.source).toBe(
      `npm:${UPSTREAM_PACKAGE}@2026.916.1 ${lock.packages["node_modules/@paperclipai/adapter-utils"].integrity}`,
    );
    for (const module of modules) {
      expect(moduleAdmission({ root: upstreamDir, kind: "dist", module }), module).toEqual({
        admitted: true,
        version: "2026.916.1",
      });
    }
  });

  it("no refusal marker occurs in a verified upstream's closures (a marker tells newer code apart)", () => {
    const found = [];
    for (const module of modules) {
      for (const { file, text } of moduleClosure(upstreamDir, "dist", module, UPSTREAM_PACKAGE).files)
        for (const { marker } of markersIn(text)) found.push(`${file}: ${marker}`);
    }
    expect(found).toEqual([]);
    expect(markersIn('import { DatabaseSync } from "node:sqlite";').map((m) => m.marker)).toEqual(["node:sqlite"]);
  });

  it("a fingerprint ignores CRLF line ends and the source map line, nothing else", () => {
    const base = sourceFingerprint("export const a = 1;\nexport const b = 2;");
    expect(sourceFingerprint("export const a = 1;\r\nexport const b = 2;\n//# sourceMappingURL=x.js.map")).toBe(base);
    expect(sourceFingerprint("export const a = 1;\nexport const b = 2; // note")).not.toBe(base);
    expect(sourceFingerprint("export const a = 1;\nexport const b = 3;")).not.toBe(base);
  });

  it("a closure follows relative imports and the package's own subpaths, transitively; not other packages", () => {
    const root = mkdtempSync(path.join(os.tmpdir(), "pc-closure-"));
    try {
      const put = (file, text) => {
        mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
        writeFileSync(path.join(root, file), text);
      };
      put(
        "dist/a.js",
        'import { b } from "./b.js";\nexport * from "@paperclipai/adapter-utils/c";\nimport x from "other-package";\nconst s = `x from "./ghost.js"`;\n',
      );
      put("dist/b.js", 'export const b = await import("./sub/d.js");\n');
      put("dist/c.js", "export const c = 1;\n");
      put("dist/sub/d.js", 'import "../b.js";\n');
      put("dist/unused.js", "export const u = 1;\n");
      put("src/a.ts", 'import { b } from "./b.js";\nimport type { T } from "./types";\n');
      put("src/b.ts", "export const b = 1;\n");
      put("src/types.ts", "export type T = string;\n");
      const files = (kind) => moduleClosure(root, kind, "a", UPSTREAM_PACKAGE).files.map((f) => f.file);
      expect(files("dist")).toEqual(["dist/a.js", "dist/b.js", "dist/c.js", "dist/sub/d.js"]);
      expect(files("src")).toEqual(["src/a.ts", "src/b.ts", "src/types.ts"]);
      expect(moduleClosure(root, "dist", "missing", UPSTREAM_PACKAGE)).toBeNull();

      // Admitted only where the whole closure is a verified upstream's, file for file.
      const verified = [{ version: "v1", files: packageFingerprints(root, ["a"], UPSTREAM_PACKAGE) }];
      expect(Object.keys(verified[0].files)).toEqual([...files("dist"), ...files("src")]);
      expect(moduleAdmission({ root, kind: "dist", module: "a", verified })).toEqual({ admitted: true, version: "v1" });
      put("dist/sub/d.js", 'import "../b.js";\n// changed\n');
      expect(moduleAdmission({ root, kind: "dist", module: "a", verified })).toMatchObject({
        admitted: false,
        reason: "differs from v1: dist/sub/d.js",
        differing: ["dist/sub/d.js"],
      });
      put("dist/c.js", "export const c = 1; // onStdout\n");
      expect(moduleAdmission({ root, kind: "dist", module: "a", verified }).reason).toBe(
        "imports dist/c.js (onStdout)",
      );
      const distOnly = [{ version: "v1", files: { "dist/a.js": "x" } }];
      expect(moduleAdmission({ root, kind: "src", module: "a", verified: distOnly }).reason).toMatch(
        /^no verified fingerprint of TypeScript sources/,
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
