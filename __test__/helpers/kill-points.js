// The crash tests' shared machinery: run __test__/helpers/crash-child.mjs, SIGKILL it at a
// seeded point, and find staging our operations left behind.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The crash child script. */
export const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), "crash-child.mjs");

/** Our staging directory names (the prefixes of crates/core/src/staging.rs). */
export const STAGING = /^\.paperclip-(extract|merge|ssh-sync-back|sandbox-restore)-/;

/** Every staging name under `root`, at any depth. */
export function stagingLeft(root) {
  return readdirSync(root, { recursive: true })
    .map(String)
    .filter((rel) => rel.split("/").some((part) => STAGING.test(part)));
}

/** Files `d<i>/f<j>` of `root` with `content(i, j)`, `dirs` × `perDir` of them. */
export function writeFiles(root, content, { dirs, perDir }) {
  for (let i = 0; i < dirs; i += 1) {
    mkdirSync(path.join(root, `d${i}`), { recursive: true });
    for (let j = 0; j < perDir; j += 1) writeFileSync(path.join(root, `d${i}`, `f${j}`), content(i, j));
  }
}

/**
 * Runs the crash child with `args` and SIGKILLs it at the seeded point: `{ after: ms }`
 * after it started, or `{ journal: root, after: ms }` that long after a journal appeared in
 * a staging directory of `root` (during the moves). Resolves with how it ended.
 */
export function runAndKill(args, point) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    let timer;
    const kill = () => child.kill("SIGKILL");
    child.stdout.on("data", (chunk) => {
      out += chunk;
      if (!out.startsWith("started") || timer !== undefined) return;
      if (point.journal === undefined) {
        timer = setTimeout(kill, point.after);
        return;
      }
      timer = setInterval(() => {
        const journalled = readdirSync(point.journal).some(
          (name) => STAGING.test(name) && existsSync(path.join(point.journal, name, "journal")),
        );
        if (journalled) {
          clearInterval(timer);
          timer = setTimeout(kill, point.after);
        }
      }, 1);
    });
    child.stderr.on("data", (chunk) => {
      err += chunk;
    });
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      clearInterval(timer);
      resolve({ code, signal, out, err });
    });
  });
}
