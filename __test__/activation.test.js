// The activation (`node --import @paperclipai/adapter-utils-native/register`, the vitest
// plugin) on small apps in child processes: unmodified code importing
// `@paperclipai/adapter-utils` gets our functions, upstream's internal callers too; and the
// fail-safe paths (PAPERCLIP_ADAPTER_UTILS_NATIVE=0, an unverified upstream version, a copy
// of this package without its native binary) leave upstream untouched, print one line on
// stderr and do not change the app's exit code. The app tells ours from upstream's by
// comparing each function's source with a fresh, never-composed instance of upstream's
// module (`?fresh` URL).
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { coveredModules, VERIFIED_UPSTREAM_VERSIONS } from "../lib/activation/coverage.js";
import { INHERITED_ENV } from "../lib/activation/env.js";
import { NEWER_MODULE_MARKERS } from "./helpers/newer-upstream.js";
import { upstreamWorkspace } from "./helpers/upstream-workspace.js";

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

function run(cwd, app, { env = {}, importArg = registerUrl, node = process.execPath } = {}) {
  const result = spawnSync(node, [...(importArg ? ["--import", importArg] : []), app], {
    cwd,
    env: { ...process.env, NODE_OPTIONS: "", [INHERITED_ENV]: undefined, ...env },
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
    expect(out).toMatchObject({
      ssh: true,
      remote: true,
      exclude: true,
      sshUpstreamOnly: false,
      internal: true,
      excludeWorks: true,
    });
    expect(out.activation).toMatchObject({ active: true, mechanism: "node-hooks", reason: null });
    const [found] = out.activation.upstream;
    expect(found.version).toBe(VERIFIED_UPSTREAM_VERSIONS[0]);
    expect(found.modules.ssh).toEqual(
      expect.arrayContaining(["syncDirectoryToSsh", "runSshCommand", "prepareWorkspaceForSshExecution"]),
    );
    expect(found.modules["remote-managed-runtime"]).toContain("prepareRemoteManagedRuntime");
  });

  it("composes every covered module with upstream's module of the same name (the one coverage list)", () => {
    const modules = coveredModules().map((m) => m.module);
    expect(modules).toEqual(
      expect.arrayContaining(["ssh", "remote-managed-runtime", "workspace-restore-merge", "sandbox-managed-runtime"]),
    );
    expect(modules).not.toContain("register");
    expect(modules).not.toContain("vitest");
    const dir = project("every", { upstream: upstreamDir, native: repo });
    writeFileSync(
      path.join(dir, "every.mjs"),
      `
      const modules = ${JSON.stringify(modules)};
      for (const m of modules) await import("@paperclipai/adapter-utils/" + m);
      const { nativeActivation } = await import("@paperclipai/adapter-utils-native");
      console.log(JSON.stringify(Object.keys(nativeActivation().upstream[0].modules).sort()));
    `,
    );
    const { out } = run(dir, "every.mjs");
    expect(out).toEqual([...modules].sort());
  });

  it("PAPERCLIP_ADAPTER_UTILS_NATIVE=0: upstream untouched, one line on stderr, exit code kept", () => {
    const dir = project("off", { upstream: upstreamDir, native: repo });
    const { status, stderr, out } = run(dir, "app.mjs", { env: { PAPERCLIP_ADAPTER_UTILS_NATIVE: "0" } });
    expect(status).toBe(EXIT);
    expect(stderrLines(stderr)).toEqual([
      expect.stringMatching(/^@paperclipai\/adapter-utils-native: PAPERCLIP_ADAPTER_UTILS_NATIVE=0: /),
    ]);
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
      writeFileSync(
        path.join(dir, "dist", `${m}.js`),
        m === "exclude-patterns"
          ? readFileSync(path.join(upstreamDir, "dist/exclude-patterns.js"), "utf8")
          : `export function ${m === "ssh" ? "syncDirectoryToSsh" : "prepareRemoteManagedRuntime"}() { return "upstream"; }\nexport function buildSshEnvLabFixtureConfig() {}\n`,
      );
    }
    return dir;
  }

  it("an unverified upstream version found from the working directory: untouched, one line, exit code kept", () => {
    const dir = project("other-version", { upstream: otherVersion("upstream-2026.1.1"), native: repo });
    const { status, stderr, out } = run(dir, "app.mjs");
    expect(status).toBe(EXIT);
    // The copy is not inside a node_modules directory (a workspace package): the line names the opt-in.
    expect(stderrLines(stderr)).toEqual([
      expect.stringMatching(
        /^@paperclipai\/adapter-utils-native: @paperclipai\/adapter-utils 2026\.1\.1 is not a verified version \(2026\.916\.1\); left unchanged; to compose a workspace package anyway, opt in with PAPERCLIP_ADAPTER_UTILS_NATIVE_UPSTREAM=workspace/,
      ),
    ]);
    expect(out).toMatchObject({ ssh: false, remote: false, exclude: false, excludeWorks: true });
    expect(out.activation).toMatchObject({ active: false, upstream: [] });
    expect(out.activation.reason).toMatch(/2026\.1\.1 is not a verified version/);
  });

  it("an unverified upstream copy loaded beside a verified one: that copy untouched, one line", () => {
    const dir = project("mixed", { upstream: otherVersion("upstream-mixed"), native: repo });
    // Started in the repository (a verified upstream there): the hook installs, then refuses this copy.
    const { status, stderr, out } = run(repo, path.join(dir, "app.mjs"));
    expect(status).toBe(EXIT);
    expect(stderrLines(stderr)).toEqual([
      expect.stringMatching(/2026\.1\.1 is not a verified version .*; left unchanged/),
    ]);
    expect(out).toMatchObject({ ssh: false, remote: false, exclude: false });
    // Nothing is served, so the report says it is not active, and why.
    expect(out.activation).toMatchObject({ active: false, upstream: [] });
    expect(out.activation.reason).toMatch(/2026\.1\.1 is not a verified version/);
  });

  it("a Node without module.registerHooks: upstream untouched, one line naming the supported versions", () => {
    const dir = project("no-hooks", { upstream: upstreamDir, native: repo });
    // Stands in for an older Node: the hook API is gone before our entry runs.
    writeFileSync(
      path.join(dir, "old-node.mjs"),
      'process.getBuiltinModule("node:module").registerHooks = undefined;\n',
    );
    const result = spawnSync(process.execPath, ["--import", "./old-node.mjs", "--import", registerUrl, "app.mjs"], {
      cwd: dir,
      env: { ...process.env, NODE_OPTIONS: "", [INHERITED_ENV]: undefined },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(result.status).toBe(EXIT);
    expect(stderrLines(result.stderr)).toEqual([
      expect.stringMatching(
        /^@paperclipai\/adapter-utils-native: Node [\d.]+ has no module\.registerHooks \(supported: Node >= 24\.11\); @paperclipai\/adapter-utils unchanged$/,
      ),
    ]);
    const out = JSON.parse(result.stdout.trim().split("\n").pop());
    expect(out).toMatchObject({ ssh: false, remote: false, exclude: false, excludeWorks: true });
    expect(out.activation).toMatchObject({ active: false });
  });

  it("a copy of this package without its native binary: upstream untouched, one line; direct calls name the platform", () => {
    const copy = path.join(work, "no-binary");
    mkdirSync(path.join(copy, "native"), { recursive: true });
    for (const entry of ["package.json", "index.js", "index.d.ts", "lib"])
      cpSync(path.join(repo, entry), path.join(copy, entry), { recursive: true });
    cpSync(path.join(repo, "native/binding.cjs"), path.join(copy, "native/binding.cjs"));
    const dir = project("missing-binary", { upstream: upstreamDir, native: copy });
    const { status, stderr, out } = run(dir, "app.mjs", {
      importArg: "@paperclipai/adapter-utils-native/register",
      env: { DIRECT: "1" },
    });
    expect(status).toBe(EXIT);
    const lines = stderrLines(stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^@paperclipai\/adapter-utils-native: native binary unavailable \(.*linux-x64.*\); @paperclipai\/adapter-utils unchanged$/,
    );
    expect(stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(out).toMatchObject({ ssh: false, remote: false, exclude: false, excludeWorks: true });
    expect(out.activation).toMatchObject({ active: false });
    expect(out.activation.reason).toMatch(/^native binary unavailable/);
    expect(out.directError.code).toBe("ERR_PAPERCLIP_NATIVE_UNSUPPORTED_PLATFORM");
    expect(out.directError.message).toMatch(new RegExp(`${process.platform}-${process.arch}`));
  });
});

// The recommended form, NODE_OPTIONS with the package subpath: a parent started in the
// project spawns children elsewhere. Each child reports, at exit, whether the binary is
// mapped into it (/proc/self/maps) and the NODE_OPTIONS it was given, through a probe module
// added to its NODE_OPTIONS (it observes the child, it changes nothing).
const PROBE = `
import { readFileSync, writeFileSync } from "node:fs";
process.on("exit", () => {
  const maps = readFileSync("/proc/self/maps", "utf8");
  writeFileSync(process.env.PROBE_OUT + "." + process.pid, JSON.stringify({
    binary: /adapter-utils-native\\.[\\w-]+\\.node/.test(maps), nodeOptions: process.env.NODE_OPTIONS, label: process.env.PROBE_LABEL,
  }));
});
`;

const PARENT = `
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
const binaryMapped = () => /adapter-utils-native\\.[\\w-]+\\.node/.test(readFileSync("/proc/self/maps", "utf8"));
const probeOptions = (process.env.NODE_OPTIONS ?? "") + " --import=" + process.env.PROBE_URL;
const env = { ...process.env, NODE_OPTIONS: probeOptions };
const child = (label, command, args, cwd) => {
  const r = spawnSync(command, args, { cwd, env: { ...env, PROBE_LABEL: label }, encoding: "utf8", timeout: 60_000 });
  return { label, status: r.status, stdout: r.stdout.trim(), stderr: r.stderr.trim() };
};
const out = { nodeOptions: process.env.NODE_OPTIONS, parentBinaryAtStart: binaryMapped(), children: [] };
out.children.push(child("node -e", process.execPath, ["-e", "console.log('child ok')"], process.env.ELSEWHERE));
out.children.push(child("npx --version", "npx", ["--version"], "/"));
out.children.push(child("upstream", process.execPath, ["--input-type=module", "-e",
  "await import('@paperclipai/adapter-utils/ssh'); const { nativeActivation } = await import('@paperclipai/adapter-utils-native'); console.log(JSON.stringify(nativeActivation().active));"], process.cwd()));
// A child on a Node the activation cannot use (an agent CLI on an older system Node): the
// hook API is removed before our entry runs, as on such a Node.
const olderEnv = { ...env, PROBE_LABEL: "older node", NODE_OPTIONS: "--import=" + process.env.OLD_NODE_URL + " " + env.NODE_OPTIONS };
const older = spawnSync(process.execPath, ["-e", "console.log('old ok')"], { cwd: process.env.ELSEWHERE, env: olderEnv, encoding: "utf8", timeout: 60_000 });
out.children.push({ label: "older node", status: older.status, stdout: older.stdout.trim(), stderr: older.stderr.trim() });
// Worker threads run --import too (a host's logger thread): each says nothing of its own.
const { Worker } = await import("node:worker_threads");
await Promise.all([1, 2].map(() => new Promise((resolve, reject) => new Worker(new URL("./worker.mjs", import.meta.url)).on("exit", resolve).on("error", reject))));
await new Promise((resolve) => setTimeout(resolve, 300)); // their stderr reaches ours
await import("@paperclipai/adapter-utils/exclude-patterns");
out.parentBinaryAfterUpstream = binaryMapped();
console.log(JSON.stringify(out));
`;

const onLinux = process.platform === "linux";

describe.skipIf(!onLinux)('NODE_OPTIONS="--import @paperclipai/adapter-utils-native/register": child processes', () => {
  function runParent(name, env = {}) {
    const dir = project(name, { upstream: upstreamDir, native: repo });
    writeFileSync(path.join(dir, "parent.mjs"), PARENT);
    writeFileSync(path.join(dir, "probe.mjs"), PROBE);
    writeFileSync(
      path.join(dir, "old-node.mjs"),
      'process.getBuiltinModule("node:module").registerHooks = undefined;\n',
    );
    writeFileSync(path.join(dir, "worker.mjs"), "setTimeout(() => {}, 200);\n");
    const probeOut = path.join(dir, "probe");
    const elsewhere = mkdtempSync(path.join(os.tmpdir(), "pc-elsewhere-"));
    try {
      const result = spawnSync(process.execPath, ["parent.mjs"], {
        cwd: dir,
        encoding: "utf8",
        timeout: 120_000,
        env: {
          ...process.env,
          [INHERITED_ENV]: undefined,
          // Children find this Node first, as they would find the host's.
          PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}`,
          NODE_OPTIONS: "--import @paperclipai/adapter-utils-native/register",
          PROBE_URL: pathToFileURL(path.join(dir, "probe.mjs")).href,
          OLD_NODE_URL: pathToFileURL(path.join(dir, "old-node.mjs")).href,
          PROBE_OUT: probeOut,
          ELSEWHERE: elsewhere,
          ...env,
        },
      });
      const lines = result.stdout.trim().split("\n");
      const probes = readdirSync(dir)
        .filter((f) => f.startsWith("probe.") && f !== "probe.mjs")
        .map((f) => JSON.parse(readFileSync(path.join(dir, f), "utf8")));
      return { status: result.status, stderr: result.stderr, out: JSON.parse(lines[lines.length - 1]), probes };
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  }

  it("every child starts from any directory; the ones that never load upstream load no binary", () => {
    const { status, stderr, out, probes } = runParent("children");
    expect(status).toBe(0);
    expect(stderrLines(stderr)).toEqual([]);
    // Our entry now names this file by absolute URL, for every child.
    expect(out.nodeOptions).toBe(`--import=${registerUrl}`);
    expect(out.parentBinaryAtStart).toBe(false);
    expect(out.parentBinaryAfterUpstream).toBe(true);
    const [nodeE, npx, upstream, older] = out.children;
    expect(nodeE).toMatchObject({ status: 0, stdout: "child ok", stderr: "" });
    // Not activated (no hooks there) and quiet: its stderr is the agent CLI's own.
    expect(older).toMatchObject({ status: 0, stdout: "old ok", stderr: "" });
    expect(npx.status).toBe(0);
    expect(npx.stdout).toMatch(/^\d+\.\d+\.\d+$/);
    expect(upstream).toMatchObject({ status: 0, stdout: "true", stderr: "" });
    // One probe per Node process each child started.
    const byLabel = (label) => probes.filter((p) => p.label === label);
    const nodeEProbes = byLabel("node -e");
    const upstreamProbes = byLabel("upstream");
    const npxProbes = byLabel("npx --version");
    expect(upstreamProbes).toHaveLength(1);
    expect(upstreamProbes[0].binary).toBe(true);
    expect(npxProbes.length).toBeGreaterThanOrEqual(1);
    for (const probe of [...nodeEProbes, ...npxProbes]) {
      expect(probe.binary).toBe(false);
      expect(probe.nodeOptions).toContain(`--import=${registerUrl}`);
    }
    expect(nodeEProbes).toHaveLength(1);
  }, 180_000);

  it("PAPERCLIP_ADAPTER_UTILS_NATIVE=0: the parent says it once (not once per worker thread), its children are not given the hook", () => {
    const { status, stderr, out, probes } = runParent("children-off", { PAPERCLIP_ADAPTER_UTILS_NATIVE: "0" });
    expect(status).toBe(0);
    expect(stderrLines(stderr)).toEqual([
      expect.stringMatching(/^@paperclipai\/adapter-utils-native: PAPERCLIP_ADAPTER_UTILS_NATIVE=0: /),
    ]);
    expect(out.nodeOptions).toBeUndefined();
    for (const child of out.children) expect(child.stderr).toBe("");
    expect(out.children[2].stdout).toBe("false");
    for (const probe of probes) expect(probe.nodeOptions).not.toMatch(/register/);
  }, 180_000);
});

// The monorepo's workspace package: upstream's published modules under a development version
// (0.3.1), in a directory outside node_modules that the project links to, as a workspace does.
describe("an unpublished upstream workspace (version 0.3.1)", () => {
  function workspace(name, options) {
    const root = path.join(work, name);
    upstreamWorkspace(root, options);
    writeFileSync(
      path.join(root, "app.mjs"),
      `${APP}
const signature = (await import("@paperclipai/adapter-utils/acpx-engine/execute")).referencedSourceContentSignature;
console.log(JSON.stringify({ ...out, signature: typeof signature === "string" ? signature : "function" }));
`.replace("console.log(JSON.stringify(out));\nprocess.exitCode", "process.exitCode"),
    );
    return root;
  }

  it("is refused by default, with one line naming the opt-in; the report says why nothing is served", () => {
    const dir = workspace("ws-default");
    const { status, stderr, out } = run(dir, "app.mjs");
    expect(status).toBe(EXIT);
    expect(stderrLines(stderr)).toEqual([
      expect.stringMatching(
        /0\.3\.1 is not a verified version .*left unchanged; to compose a workspace package anyway, opt in with PAPERCLIP_ADAPTER_UTILS_NATIVE_UPSTREAM=workspace/,
      ),
    ]);
    expect(out).toMatchObject({ ssh: false, remote: false, exclude: false, excludeWorks: true, signature: "changed" });
    expect(out.activation).toMatchObject({ active: false, upstream: [] });
    expect(out.activation.reason).toMatch(/0\.3\.1 is not a verified version/);
  });

  it("with PAPERCLIP_ADAPTER_UTILS_NATIVE_UPSTREAM=workspace: the modules identical to 2026.916.1's are composed, the changed one stays upstream's, one line says which and why", () => {
    const dir = workspace("ws-opt-in");
    const { status, stderr, out } = run(dir, "app.mjs", {
      env: { PAPERCLIP_ADAPTER_UTILS_NATIVE_UPSTREAM: "workspace" },
    });
    expect(status).toBe(EXIT);
    const lines = stderrLines(stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /@paperclipai\/adapter-utils 0\.3\.1 at .* is an unverified workspace version, composed by opt-in where a module is identical to a verified upstream's: serving exclude-patterns, .*ssh.*; left upstream's: acpx-engine\/execute \(differs from 2026\.916\.1: dist\/acpx-engine\/execute\.js\)$/,
    );
    expect(out).toMatchObject({
      ssh: true,
      remote: true,
      exclude: true,
      sshUpstreamOnly: false,
      internal: true,
      excludeWorks: true,
      signature: "changed",
    });
    expect(out.activation).toMatchObject({ active: true, mechanism: "node-hooks", reason: null });
    expect(out.activation.upstream[0].version).toBe("0.3.1");
    expect(Object.keys(out.activation.upstream[0].modules)).not.toContain("acpx-engine/execute");
    expect(out.activation.upstream[0].refused).toEqual({
      "acpx-engine/execute": "differs from 2026.916.1: dist/acpx-engine/execute.js",
    });
  });

  // The newer releases' modules (stand-ins written from the reference, helpers/newer-upstream.js):
  // their exports would pass a check by name; their behaviour is not ours to serve.
  it("with the opt-in, modules carrying the newer releases' behaviour are refused, with it and the modules importing them; an unchanged module is still served", () => {
    const dir = workspace("ws-newer", { newer: true });
    const { status, stderr, out } = run(dir, "app.mjs", {
      env: { PAPERCLIP_ADAPTER_UTILS_NATIVE_UPSTREAM: "workspace" },
    });
    expect(status).toBe(EXIT);
    const lines = stderrLines(stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /composed by opt-in where a module is identical to a verified upstream's: serving runtime-progress; left upstream's: /,
    );
    for (const [module, marker] of Object.entries(NEWER_MODULE_MARKERS))
      expect(lines[0]).toContain(`${module} (carries ${marker} (`);
    // Upstream's own modules run: the newer matcher unescapes, ours would not.
    expect(out).toMatchObject({ ssh: false, remote: false, exclude: false, excludeWorks: true, internal: true });
    expect(out.activation).toMatchObject({ active: true, reason: null });
    const [found] = out.activation.upstream;
    expect(Object.keys(found.modules)).toEqual(["runtime-progress"]);
    const refused = Object.keys(found.refused).sort();
    expect(refused).toEqual(
      coveredModules()
        .map((m) => m.module)
        .filter((m) => m !== "runtime-progress")
        .sort(),
    );
    expect(found.refused["exclude-patterns"]).toMatch(
      /^carries unescapeTarExcludeLiteral \(an exclude matcher that unescapes/,
    );
    expect(found.refused["remote-managed-runtime"]).toMatch(/^imports .*dist\/ssh\.js \(transferExclude\)/);
  });

  it("with the opt-in and no module identical to a verified upstream's: nothing served, the report says not active and why, per module", () => {
    const dir = workspace("ws-none", { newer: true, touch: ["runtime-progress"] });
    const { status, stderr, out } = run(dir, "app.mjs", {
      env: { PAPERCLIP_ADAPTER_UTILS_NATIVE_UPSTREAM: "workspace" },
    });
    expect(status).toBe(EXIT);
    expect(stderrLines(stderr)).toEqual([expect.stringMatching(/: serving nothing; left upstream's: /)]);
    expect(out).toMatchObject({ ssh: false, remote: false, exclude: false });
    expect(out.activation).toMatchObject({ active: false, upstream: [] });
    expect(out.activation.reason).toBe(
      "@paperclipai/adapter-utils 0.3.1: no module is identical to a verified upstream's",
    );
    const [skipped] = out.activation.skipped;
    expect(skipped.refused["runtime-progress"]).toBe("differs from 2026.916.1: dist/runtime-progress.js");
    expect(Object.keys(skipped.refused)).toHaveLength(coveredModules().length);
  });
});
