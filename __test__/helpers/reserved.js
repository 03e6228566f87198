// The catalogue of names this library reserves inside a user's tree (crates/core/src/reserved.rs),
// as an untrusted source would plant them: every staging prefix, in the current form (with a
// forged tag) and an earlier one, of a live and a dead pid, with and without a journal, at
// the root and nested; and the key file's name. Shared by the suites that feed them through
// each way in (extraction, merge, mirror, sandbox restore, SSH pull).
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { expect } from "vitest";
import { RawArchive, treeState } from "./tar.js";

export const PREFIXES = {
  extract: ".paperclip-extract-",
  pull: ".paperclip-ssh-sync-back-",
  merge: ".paperclip-merge-",
  restore: ".paperclip-sandbox-restore-",
};
export const KEY_FILE = ".paperclip-staging-key";

/** What each kind's journal holds, as the operation writes it. */
const JOURNALS = {
  extract: "extract 0\n",
  pull: `${JSON.stringify({ phase: "move", preserve: [] })}\n`,
  merge: "merge\n",
  restore: "restore\n",
};

/** A pid no process has. */
export function deadPid() {
  for (let pid = 4_000_000; pid > 1; pid -= 1) {
    try {
      process.kill(pid, 0);
    } catch (error) {
      if (error.code === "ESRCH") return pid;
    }
  }
  throw new Error("no free pid");
}

/**
 * The catalogue: `{ label, top, files }`, `top` the planted entry's path (relative to the
 * tree it is planted in), `files` the `[relative path, content]` pairs to write (an
 * ordinary `ok.txt` first). With `{ every: false }`, one case per prefix, journal and depth
 * (the pid and the form alternate), for the slower ways in.
 */
export function catalogue({ every = true } = {}) {
  const cases = [];
  const dead = deadPid();
  let turn = 0;
  for (const [kind, prefix] of Object.entries(PREFIXES)) {
    for (const journal of [true, false]) {
      for (const depth of ["", "sub/"]) {
        const variants = [];
        for (const [pid, who] of [
          [process.pid, "live"],
          [dead, "dead"],
        ]) {
          variants.push({ name: `${prefix}${pid}-0-0123456789abcdef`, what: `earlier form, ${who} pid` });
          variants.push({ name: `${prefix}${pid}-77-${"0123456789abcdef".repeat(2)}`, what: `forged tag, ${who} pid` });
        }
        const chosen = every ? variants : [variants[(turn += 1) % variants.length]];
        for (const { name, what } of chosen) {
          const top = `${depth}${name}`;
          const files = [
            ["ok.txt", "fine\n"],
            [`${top}/tree/planted.sh`, "#!/bin/sh\necho planted\n"],
          ];
          if (journal) files.push([`${top}/journal`, JOURNALS[kind]]);
          cases.push({
            label: `${prefix}… ${what}, ${journal ? "with" : "no"} journal, ${depth ? "nested" : "root"}`,
            top,
            files,
          });
        }
      }
    }
  }
  cases.push({
    label: "the key file",
    top: KEY_FILE,
    files: [
      ["ok.txt", "fine\n"],
      [KEY_FILE, "k".repeat(32)],
    ],
  });
  const nestedKey = `.local/state/paperclip-native/${KEY_FILE}`;
  cases.push({
    label: "the key file, nested",
    top: nestedKey,
    files: [
      ["ok.txt", "fine\n"],
      [nestedKey, "k".repeat(32)],
    ],
  });
  return cases;
}

/** Writes a case's files under `root`. */
export function plant(root, entry) {
  for (const [rel, content] of entry.files) {
    mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    writeFileSync(path.join(root, rel), content);
  }
}

/** A case as a tar archive (its files, with their directories first). */
export function archiveOf(entry) {
  const archive = new RawArchive();
  const made = new Set();
  for (const [rel, content] of entry.files) {
    const parts = rel.split("/");
    for (let i = 1; i < parts.length; i += 1) {
      const dir = parts.slice(0, i).join("/");
      if (!made.has(dir)) archive.dir(dir);
      made.add(dir);
    }
    archive.file(rel, content);
  }
  return archive.finish();
}

/** Fills `dir` with a small workspace, `a.txt` and `d/b.txt`; returns `dir`. */
export function smallWorkspace(dir) {
  mkdirSync(path.join(dir, "d"), { recursive: true });
  writeFileSync(path.join(dir, "a.txt"), "a\n");
  writeFileSync(path.join(dir, "d", "b.txt"), "b\n");
  return dir;
}

/** Expects `error` to be the refusal of a reserved name, with no host path in its message. */
export function expectRefused(error, entry, where, hostPath) {
  expect(error?.code, `${where}: ${entry.label}: ${error?.message}`).toBe("ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY");
  expect(error.message, where).toContain("reserves");
  expect(error.message, where).not.toContain(hostPath);
}

/** Whether a relative path holds a planted name (a staging prefix or the key file) at any depth. */
const holdsPlanted = (rel) =>
  rel.split("/").some((name) => name === KEY_FILE || Object.values(PREFIXES).some((prefix) => name.startsWith(prefix)));

/**
 * Expects a lane's restore to have left the case's planted entry out and taken the rest: it
 * succeeded (`error` null), no planted name is anywhere under `root`, and the case's
 * ordinary file and the directories above the planted entry arrived.
 */
export function expectLeftOut(error, entry, where, root) {
  expect(error, `${where}: ${entry.label}: ${error?.message}`).toBeNull();
  expect(Object.keys(treeState(root)).filter(holdsPlanted), `${where}: ${entry.label}`).toEqual([]);
  expect(readFileSync(path.join(root, "ok.txt"), "utf8"), `${where}: ${entry.label}`).toBe("fine\n");
  const above = path.dirname(entry.top);
  if (above !== ".") expect(statSync(path.join(root, above)).isDirectory(), `${where}: ${entry.label}`).toBe(true);
  expect(existsSync(path.join(root, entry.top)), `${where}: ${entry.label}`).toBe(false);
}
