// The vitest plugin (`adapterUtilsNative()` from `@paperclipai/adapter-utils-native/vitest`)
// on a monorepo-shaped project in a child vitest run: a workspace package
// `@paperclipai/adapter-utils` whose modules are TypeScript sources
// (`packages/adapter-utils/src/<module>.ts`, imported as `./<module>.js` and through the
// package's `./*` export). Its modules are served composed under their own ids: a sibling
// importing `./exclude-patterns.js` gets our function; names we do not implement stay
// upstream's; `vi.mock("@paperclipai/adapter-utils/ssh")` still reaches upstream's
// orchestrator and our bound `prepareRemoteManagedRuntime`; `vi.importActual` gives the
// composed module. Without the plugin, the same project runs upstream's functions (control).
// (The published `dist/*.js`, inlined and externalized, is run by scripts/upstream/activation-suites.mjs.)
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { upstreamWorkspace } from "./helpers/upstream-workspace.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
let work;

const STUBS = {
  "exclude-patterns": `export function shouldExcludePath(relativePath: string, exclude: string[]): boolean { return relativePath === "upstream" && exclude.length >= 0; }
export function isRelativePathOrDescendant(a: string, b: string): boolean { return a === b; }
export function excludePatternMatches(a: string, b: string): boolean { return a === b; }
export const UPSTREAM_ONLY: string = "upstream-only";`,
  ssh: `export async function syncDirectoryToSsh(_input: unknown): Promise<void> { throw new Error("upstream syncDirectoryToSsh"); }
export async function prepareWorkspaceForSshExecution(_input: unknown): Promise<{ gitBacked: boolean }> { throw new Error("upstream prepare"); }
export async function restoreWorkspaceFromSshExecution(_input: unknown): Promise<void> {}
export async function runSshCommand(): Promise<{ stdout: string; stderr: string }> { return { stdout: "", stderr: "" }; }
export function buildSshEnvLabFixtureConfig(): string { return "upstream-only"; }`,
  "git-workspace-sync": `export const GIT_ARCHIVE_EXCLUDES: string[] = [".git", ".git/*"];`,
  "sandbox-managed-runtime": `export function mergeExcludes(...groups: Array<string[] | undefined>): string[] { return groups.flatMap((g) => g ?? []); }
export function referencedSourceIgnoreExcludeEntries(_r: unknown): string[] { return []; }`,
  "workspace-restore-merge": `export async function captureDirectorySnapshot(_dir: string, _o: unknown): Promise<unknown> { return null; }`,
  "remote-managed-runtime": `export async function prepareRemoteManagedRuntime(_input: unknown): Promise<string> { return "upstream orchestrator"; }`,
  consumer: `import { shouldExcludePath } from "./exclude-patterns.js";
export const viaSibling = shouldExcludePath;`,
};

const TEST = `
import { expect, it, vi } from "vitest";
import { shouldExcludePath as ours } from ${JSON.stringify(path.join(repo, "lib/exclude-patterns.js"))};
import { viaSibling } from "../packages/adapter-utils/src/consumer.js";
import * as exclude from "@paperclipai/adapter-utils/exclude-patterns";

const syncDirectoryToSsh = vi.hoisted(() => vi.fn(async () => undefined));
vi.mock("@paperclipai/adapter-utils/ssh", async () => ({
  ...(await vi.importActual("@paperclipai/adapter-utils/ssh")),
  syncDirectoryToSsh,
}));
import { prepareRemoteManagedRuntime } from "@paperclipai/adapter-utils/remote-managed-runtime";

it("reports", async () => {
  const actualSsh = await vi.importActual("@paperclipai/adapter-utils/ssh");
  const prepared = await prepareRemoteManagedRuntime({
    spec: { host: "h", port: 22, username: "u", remoteCwd: "/r", remoteWorkspacePath: "/r", privateKey: null, knownHosts: null, strictHostKeyChecking: false },
    runId: "r1", adapterKey: "k", workspaceLocalDir: "/nowhere", syncWorkspace: false,
    assets: [{ key: "a", localDir: "/nowhere/a" }],
  });
  console.log("REPORT " + JSON.stringify({
    sibling: viaSibling === ours,
    subpath: exclude.shouldExcludePath === ours,
    works: viaSibling("a/node_modules/b", ["*/node_modules/*"]),
    upstreamOnly: exclude.UPSTREAM_ONLY,
    actualSshOurs: !String(actualSsh.prepareWorkspaceForSshExecution).includes("upstream prepare"),
    actualSshUpstreamOnly: actualSsh.buildSshEnvLabFixtureConfig(),
    prepared: typeof prepared === "string" ? prepared : { runtimeRootDir: prepared.runtimeRootDir },
    mockedCalls: syncDirectoryToSsh.mock.calls.map(([input]) => input.remoteDir),
  }));
});
`;

/** Runs vitest in `root` (the project's own config); its output and the test's REPORT line. */
function runVitest(root) {
  const result = spawnSync(
    process.execPath,
    [path.join(repo, "node_modules/vitest/vitest.mjs"), "run", "--root", root],
    {
      cwd: root,
      env: { ...process.env, NODE_OPTIONS: "" },
      encoding: "utf8",
      timeout: 120_000,
    },
  );
  const output = `${result.stdout}\n${result.stderr}`;
  const line = output.split("\n").find((l) => l.includes("REPORT {"));
  if (!line) throw new Error(`no report (status ${result.status}):\n${output}`);
  return { result, output, line };
}

function monorepo(name, withPlugin) {
  const root = path.join(work, name);
  const pkg = path.join(root, "packages/adapter-utils");
  mkdirSync(path.join(pkg, "src"), { recursive: true });
  writeFileSync(
    path.join(pkg, "package.json"),
    JSON.stringify({
      name: "@paperclipai/adapter-utils",
      version: JSON.parse(readFileSync(path.join(repo, "node_modules/@paperclipai/adapter-utils/package.json"), "utf8"))
        .version,
      type: "module",
      exports: { "./*": "./src/*.ts" },
    }),
  );
  for (const [module, source] of Object.entries(STUBS))
    writeFileSync(path.join(pkg, "src", `${module}.ts`), `${source}\n`);
  mkdirSync(path.join(root, "node_modules/@paperclipai"), { recursive: true });
  symlinkSync(pkg, path.join(root, "node_modules/@paperclipai/adapter-utils"), "dir");
  symlinkSync(path.join(repo, "node_modules/vitest"), path.join(root, "node_modules/vitest"), "dir");
  mkdirSync(path.join(root, "test"));
  writeFileSync(path.join(root, "test/plugin.test.ts"), TEST);
  writeFileSync(
    path.join(root, "vitest.config.mjs"),
    [
      withPlugin
        ? `import { adapterUtilsNative } from ${JSON.stringify(pathToFileURL(path.join(repo, "lib/activation/vitest.js")).href)};`
        : "",
      `export default { plugins: [${withPlugin ? "adapterUtilsNative()" : ""}], cacheDir: ${JSON.stringify(path.join(root, ".vite"))}, test: { include: ["test/**/*.test.ts"] } };`,
    ].join("\n"),
  );
  const { result, line } = runVitest(root);
  return { status: result.status, report: JSON.parse(line.slice(line.indexOf("REPORT ") + 7)) };
}

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), "pc-activation-vitest-"));
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("adapterUtilsNative() in a monorepo's vitest.config", () => {
  it("composes the workspace package's TypeScript modules under their own ids, mocks still apply", () => {
    const { status, report } = monorepo("with-plugin", true);
    expect(status).toBe(0);
    expect(report).toMatchObject({
      sibling: true,
      subpath: true,
      works: true,
      upstreamOnly: "upstream-only",
      actualSshOurs: true,
      actualSshUpstreamOnly: "upstream-only",
      // Our bound prepareRemoteManagedRuntime ran, and its asset upload reached the mock.
      prepared: { runtimeRootDir: "/r/.paperclip-runtime/k" },
      mockedCalls: ["/r/.paperclip-runtime/k/a"],
    });
  }, 180_000);

  it("without the plugin the same project runs upstream's modules (control)", () => {
    const { status, report } = monorepo("without-plugin", false);
    expect(status).toBe(0);
    expect(report).toMatchObject({
      sibling: false,
      subpath: false,
      works: false,
      prepared: "upstream orchestrator",
      mockedCalls: [],
    });
  }, 180_000);
});

// Upstream's published modules as a workspace package of a development version (0.3.1).
const WORKSPACE_TEST = `
import { expect, it } from "vitest";
import * as ssh from "@paperclipai/adapter-utils/ssh";
import * as execute from "@paperclipai/adapter-utils/acpx-engine/execute";
import { syncDirectoryToSsh as ours } from ${JSON.stringify(path.join(repo, "lib/ssh.js"))};
import { nativeActivation } from ${JSON.stringify(path.join(repo, "lib/activation/state.js"))};

it("reports", () => {
  console.log("REPORT " + JSON.stringify({
    ssh: ssh.syncDirectoryToSsh === ours,
    signature: typeof execute.referencedSourceContentSignature,
    activation: nativeActivation(),
  }));
  expect(ssh.buildSshEnvLabFixtureConfig).toBeTypeOf("function");
});
`;

function workspaceRun(name, pluginOptions) {
  const root = path.join(work, name);
  upstreamWorkspace(root);
  mkdirSync(path.join(root, "test"));
  writeFileSync(path.join(root, "test/ws.test.mjs"), WORKSPACE_TEST);
  writeFileSync(
    path.join(root, "vitest.config.mjs"),
    [
      `import { adapterUtilsNative } from ${JSON.stringify(pathToFileURL(path.join(repo, "lib/activation/vitest.js")).href)};`,
      `export default { plugins: [adapterUtilsNative(${JSON.stringify(pluginOptions)})], cacheDir: ${JSON.stringify(path.join(root, ".vite"))}, test: { include: ["test/**/*.test.mjs"] } };`,
    ].join("\n"),
  );
  const { result, output, line } = runVitest(root);
  const ours = output.split("\n").filter((l) => l.startsWith("@paperclipai/adapter-utils-native: "));
  return { status: result.status, lines: ours, report: JSON.parse(line.slice(line.indexOf("REPORT ") + 7)) };
}

describe("adapterUtilsNative() and an unpublished upstream workspace (0.3.1)", () => {
  it("refuses it by default, saying how to opt in; the report is not active and says why", () => {
    const { status, lines, report } = workspaceRun("ws-plugin-default", {});
    expect(status).toBe(0);
    expect(lines).toEqual([
      expect.stringMatching(
        /0\.3\.1 is not a verified version .*opt in with .*adapterUtilsNative\(\{ upstream: "workspace" \}\)/,
      ),
    ]);
    expect(report).toMatchObject({ ssh: false, signature: "string", activation: { active: false, upstream: [] } });
    expect(report.activation.reason).toMatch(/0\.3\.1, not a verified version|0\.3\.1 is not a verified version/);
  }, 180_000);

  it("with upstream: \"workspace\", composes the modules identical to 2026.916.1's and names the one left upstream's, and why", () => {
    const { status, lines, report } = workspaceRun("ws-plugin-opt-in", { upstream: "workspace" });
    expect(status).toBe(0);
    expect(lines).toEqual([
      expect.stringMatching(
        /0\.3\.1 at .* is an unverified workspace version, composed by opt-in where a module is identical to a verified upstream's: serving .*ssh.*; left upstream's: acpx-engine\/execute \(differs from 2026\.916\.1: dist\/acpx-engine\/execute\.js\)$/,
      ),
    ]);
    expect(report).toMatchObject({ ssh: true, signature: "string", activation: { active: true, reason: null } });
    const [served] = report.activation.upstream;
    expect(served.version).toBe("0.3.1");
    expect(served.modules.ssh).toContain("syncDirectoryToSsh");
    expect(Object.keys(served.modules)).not.toContain("acpx-engine/execute");
    // The plugin decides in vitest's main process; its served modules tell the workers why the rest is not.
    expect(served.refused).toEqual({ "acpx-engine/execute": "differs from 2026.916.1: dist/acpx-engine/execute.js" });
  }, 180_000);
});
