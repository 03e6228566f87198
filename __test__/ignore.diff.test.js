// Differential tests of ignore resolution on seeded generated repositories:
// the in-process scan against the git CLI (raw records in git's order, and the toplevel) and
// `readReferencedSourceGitIgnoredPaths`/`resolveReferencedSourceIgnore` against upstream's.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { oracle } from "./helpers/oracle.js";
import * as ours from "@paperclipai/adapter-utils-native/git-workspace-sync";
import * as oursSandbox from "@paperclipai/adapter-utils-native/sandbox-managed-runtime";
import { native } from "../lib/native.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { writeRandomRepo } from "./helpers/repos.js";
const upstreamGit = await oracle("git-workspace-sync");
const upstreamSandbox = await oracle("sandbox-managed-runtime");

const SEED = runSeed();
const REPOSITORIES = Number(process.env.IGNORE_DIFF_REPOSITORIES ?? 200);
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-ignore-"));
const savedHome = process.env.HOME;
const savedXdg = process.env.XDG_CONFIG_HOME;

beforeAll(() => {
  delete process.env.XDG_CONFIG_HOME;
});
afterAll(() => {
  process.env.HOME = savedHome;
  if (savedXdg !== undefined) process.env.XDG_CONFIG_HOME = savedXdg;
  rmSync(work, { recursive: true, force: true });
});

/** Upstream's hardened git, run directly: the oracle for the raw records and the toplevel. */
function hardenedGit(dir, args) {
  const env = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith("GIT_")) env[key] = value;
  Object.assign(env, { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" });
  return new Promise((resolve) => {
    execFile(
      "git",
      ["-C", dir, "-c", "core.fsmonitor=false", "--no-optional-locks", ...args],
      { env, maxBuffer: 64 * 1024 * 1024, encoding: "buffer" },
      (error, stdout) => resolve(error ? null : stdout),
    );
  });
}

async function gitOracle(dir) {
  const top = await hardenedGit(dir, ["rev-parse", "--show-toplevel"]);
  if (top === null) return null;
  const listing = await hardenedGit(dir, [
    "ls-files",
    "--others",
    "--ignored",
    "--exclude-standard",
    "--directory",
    "--full-name",
    "-z",
  ]);
  if (listing === null) return { toplevel: top.toString("utf8").trim(), failed: true };
  const records = listing
    .toString("utf8")
    .split("\0")
    .map((r) => r.replace(/\/+$/, ""))
    .filter(Boolean);
  return { toplevel: top.toString("utf8").trim(), records };
}

async function settle(promise) {
  try {
    return { value: await promise };
  } catch (error) {
    return { error };
  }
}

/** A rejection's category as upstream's resolution sees it. */
function category(outcome) {
  if (!("error" in outcome)) return "ok";
  return outcome.error instanceof ours.ReferencedSourceIgnoreScanLimitExceededError ||
    outcome.error instanceof upstreamGit.ReferencedSourceIgnoreScanLimitExceededError
    ? "limit"
    : "failed";
}

async function compareAt(dir, where) {
  const [oracle, top, list, mine, theirs] = await Promise.all([
    gitOracle(dir),
    settle(native.ignoreScanToplevel(dir)),
    settle(native.ignoreScanList(dir, { home: process.env.HOME })),
    oursSandbox.resolveReferencedSourceIgnore(dir),
    upstreamSandbox.resolveReferencedSourceIgnore(dir),
  ]);
  if (oracle === null) {
    // git failed to find a toplevel: "not a repository" (null) or a failure, as upstream decides.
    const theirs = await settle(upstreamGit.readReferencedSourceGitIgnoredPaths(dir));
    const mine = await settle(ours.readReferencedSourceGitIgnoredPaths(dir));
    expect(category(mine), where).toBe(category(theirs));
    if (!("error" in theirs)) expect(mine.value, where).toEqual(theirs.value);
  } else if (oracle.failed) {
    expect(top.value, `${where}: toplevel`).toBe(oracle.toplevel);
    expect("error" in list, `${where}: git's listing failed, ours did not`).toBe(true);
  } else {
    expect(top.value, `${where}: toplevel`).toBe(oracle.toplevel);
    expect(list.error, where).toBeUndefined();
    expect(list.value.toplevel, `${where}: listing toplevel`).toBe(oracle.toplevel);
    expect(list.value.records.split("\0").filter(Boolean), `${where}: records in git's order`).toEqual(oracle.records);
  }
  expect(mine, `${where}: resolution`).toEqual(theirs);
  return mine;
}

describe(`ignore resolution differential (DIFF_SEED=${SEED})`, () => {
  it(`matches git and upstream on ${REPOSITORIES} generated repositories`, async () => {
    const rng = createRandom(SEED);
    const kinds = new Map();
    for (let round = 0; round < REPOSITORIES; round += 1) {
      const root = path.join(work, `r${round}`);
      const home = path.join(root, "home");
      mkdirSync(home, { recursive: true });
      process.env.HOME = home;
      const { repo, dirs, extras } = writeRandomRepo(rng, root, home);
      const places = [repo, ...extras];
      for (let i = rng.int(3); i > 0 && dirs.length > 0; i -= 1) places.push(path.join(repo, rng.pick(dirs)));
      if (dirs.length > 0 && rng.chance(0.1)) {
        // The project reached through a symlink from outside the repository.
        const alias = path.join(root, "alias");
        symlinkSync(path.join(repo, rng.pick(dirs)), alias);
        places.push(alias);
      }
      if (rng.chance(0.03)) places.push(path.join(repo, ".git"));
      if (rng.chance(0.03)) places.push(home);
      const resolutions = await Promise.all(
        places.map((place) =>
          compareAt(
            place,
            `DIFF_SEED=${SEED} IGNORE_DIFF_REPOSITORIES=${round + 1} round=${round} dir=${path.relative(root, place) || "."}`,
          ),
        ),
      );
      for (const { kind } of resolutions) kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      rmSync(root, { recursive: true, force: true });
    }
    // The generator reaches every outcome.
    expect(kinds.get("git")).toBeGreaterThan(REPOSITORIES / 2);
  }, 180_000);
});
