// The activation's pure parts: our NODE_OPTIONS entry rewritten to an absolute URL (checked
// against Node's own parsing of NODE_OPTIONS), and the static scan of an upstream module's
// exports behind the workspace opt-in (checked against upstream's published modules).
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { exportedShapes } from "../lib/activation/admission.js";
import { compositionPlan } from "../lib/activation/coverage.js";
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

describe("the exports scan behind the workspace opt-in", () => {
  it("finds every name we implement in upstream's published modules, with a compatible kind", async () => {
    for (const { module, names, shapes } of await compositionPlan()) {
      const theirs = exportedShapes(readFileSync(path.join(upstreamDir, "dist", `${module}.js`), "utf8"));
      for (const name of names) {
        expect(theirs.get(name), `${module}: ${name}`).toBeDefined();
        if (theirs.get(name) !== "unknown") expect(theirs.get(name), `${module}: ${name}`).toBe(shapes[name]);
      }
    }
  });

  it("reads TypeScript sources: functions, arrows, classes, values; types and comments are not exports", () => {
    const shapes = exportedShapes(
      [
        "export async function a(x: string): Promise<void> {}",
        "export function* gen() {}",
        'export const B: readonly string[] = ["x"];',
        "export const c = async (x: number) => x;",
        "export const d: Fn = (a: number): number => a;",
        "export const e = value => value;",
        "export class E extends Error {}",
        "export type T = string;",
        "export interface I { x: number }",
        "// export function commented() {}",
        "/* export const hidden = 1; */",
        "export { f, g as h, type K };",
      ].join("\n"),
    );
    expect(Object.fromEntries(shapes)).toEqual({
      a: "function",
      gen: "function",
      B: "value",
      c: "function",
      d: "function",
      e: "function",
      E: "class",
      f: "unknown",
      h: "unknown",
    });
  });
});
