// The release, installed as an operator installs it: the tarballs `npm run pack:release`
// makes (the root package and this machine's platform package), installed into an empty
// project next to upstream with no Rust toolchain on PATH (scripts/release/install.mjs).
// `paperclip-sync doctor` reports the activation, a drop-in works, the README's recipe turns
// the activation on in a process whose children start from anywhere, and with the platform
// package removed every message names the package to install.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pathWithoutRust } from "../scripts/release/install.mjs";
import { currentPlatform, platformOfTarget, platformPackageName } from "../lib/platforms.js";
import { runNode } from "./helpers/run-node.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const manifest = JSON.parse(readFileSync(path.join(repo, "package.json"), "utf8"));
const platform = currentPlatform();
const platformPackage = platformPackageName(platform);
const onLinuxX64Gnu = platform === "linux-x64-gnu";

/** Runs a command in the installed project as an operator would (no cargo on PATH). */
function inProject(project, command, args, { env = {}, cwd = project } = {}) {
  const result = spawnSync(command, args, {
    cwd,
    encoding: "utf8",
    timeout: 120_000,
    env: {
      ...process.env,
      NODE_OPTIONS: "",
      PATH: pathWithoutRust(`${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}`),
      ...env,
    },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function tarList(file) {
  return execFileSync("tar", ["-tzf", file], { encoding: "utf8" }).trim().split("\n");
}

function tarManifest(file) {
  return JSON.parse(execFileSync("tar", ["-xzOf", file, "package/package.json"], { encoding: "utf8" }));
}

describe.skipIf(!onLinuxX64Gnu)("the release tarballs, installed into an empty project", () => {
  let work;
  let installed;
  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), "pc-native-release-"));
    // scripts/release/install.mjs as a child (its pack and npm install hold a process for
    // many seconds; see helpers/run-node.js).
    const run = await runNode([path.join(repo, "scripts/release/install.mjs"), "--dir", work, "--no-build", "--json"]);
    if (run.status !== 0) throw new Error(`install-release failed (${run.status ?? run.signal}): ${run.stderr}`);
    installed = JSON.parse(run.stdout);
  }, 600_000);
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("are the root package, with every platform as an optional dependency at its version, and this platform's binary package", () => {
    const files = tarList(installed.root);
    expect(files).toEqual(
      expect.arrayContaining([
        "package/index.js",
        "package/index.d.ts",
        "package/native/binding.cjs",
        "package/bin/paperclip-sync.mjs",
        "package/cli/main.js",
        "package/LICENSE",
        "package/README.md",
      ]),
    );
    expect(files.filter((f) => f.endsWith(".node"))).toEqual([]);
    expect(files.some((f) => /^package\/(src|crates|__test__|scripts|bench|fuzz)\//.test(f))).toBe(false);
    const root = tarManifest(installed.root);
    expect(root.version).toBe(manifest.version);
    expect(root.optionalDependencies).toEqual(
      Object.fromEntries(
        manifest.napi.targets.map((t) => [platformPackageName(platformOfTarget(t)), manifest.version]),
      ),
    );
    expect(root.devDependencies).toBeUndefined();
    expect(root.scripts).toBeUndefined();
    expect(installed.platforms.map((p) => p.platform)).toEqual([platform]);
    const binary = tarManifest(installed.platforms[0].file);
    expect(binary).toMatchObject({
      name: platformPackage,
      version: manifest.version,
      os: ["linux"],
      cpu: ["x64"],
      libc: ["glibc"],
    });
    expect(tarList(installed.platforms[0].file)).toContain(`package/adapter-utils-native.${platform}.node`);
  });

  it("doctor exits 0 and reports the activation; a drop-in works, with the binary of the installed platform package", () => {
    const doctor = inProject(installed.project, "npx", ["paperclip-sync", "doctor", "--json"]);
    expect(doctor.status, doctor.stderr).toBe(0);
    const report = JSON.parse(doctor.stdout.trim().split("\n").pop());
    expect(report).toMatchObject({ platform, nativeBinary: "loads", upstream: { verified: true } });
    expect(report.withRegister.active).toBe(true);
    expect(Object.keys(report.withRegister.modules)).toEqual(
      expect.arrayContaining(["ssh", "workspace-restore-merge", "sandbox-managed-runtime"]),
    );
    writeFileSync(
      path.join(installed.project, "direct.mjs"),
      [
        'import { createRequire } from "node:module";',
        'import { shouldExcludePath, captureDirectorySnapshot } from "@paperclipai/adapter-utils-native";',
        "const snapshot = await captureDirectorySnapshot(process.cwd(), { exclude: ['node_modules'] });",
        `console.log(JSON.stringify({ excluded: shouldExcludePath("a/node_modules/x", ["*/node_modules"]), files: [...snapshot.entries.keys()].sort(), binary: createRequire(import.meta.url).resolve(${JSON.stringify(platformPackage)}) }));`,
      ].join("\n"),
    );
    const direct = inProject(installed.project, process.execPath, ["direct.mjs"]);
    expect(direct.status, direct.stderr).toBe(0);
    const out = JSON.parse(direct.stdout);
    expect(out.excluded).toBe(true);
    expect(out.files).toEqual(expect.arrayContaining(["direct.mjs", "package.json"]));
    expect(out.binary).toContain(path.join("node_modules", "@paperclipai", `adapter-utils-native-${platform}`));
  }, 180_000);

  it("the README's recipe turns the activation on, and children started elsewhere keep working", () => {
    writeFileSync(
      path.join(installed.project, "host.mjs"),
      [
        'import { spawnSync } from "node:child_process";',
        'import os from "node:os";',
        'await import("@paperclipai/adapter-utils/ssh");',
        'const { nativeActivation } = await import("@paperclipai/adapter-utils-native");',
        'const child = spawnSync(process.execPath, ["-e", "console.log(process.cwd())"], { cwd: os.tmpdir(), encoding: "utf8" });',
        "console.log(JSON.stringify({ active: nativeActivation().active, child: child.status, childErr: child.stderr }));",
      ].join("\n"),
    );
    const host = inProject(installed.project, process.execPath, ["host.mjs"], {
      env: { NODE_OPTIONS: "--import @paperclipai/adapter-utils-native/register" },
    });
    expect(host.status, host.stderr).toBe(0);
    expect(host.stderr).toBe("");
    expect(JSON.parse(host.stdout)).toEqual({ active: true, child: 0, childErr: "" });
    // The README's absolute form (`doctor --node-options`) works from any directory.
    const recipe = inProject(installed.project, "npx", ["paperclip-sync", "doctor", "--node-options"]).stdout.trim();
    expect(recipe).toBe(
      `--import=${pathToFileURL(path.join(installed.nativeRoot, "lib/activation/register.js")).href}`,
    );
    expect(inProject(installed.project, "npx", ["paperclip-sync", "doctor"]).stdout).toContain(
      `NODE_OPTIONS="${recipe}"`,
    );
    const elsewhere = inProject(installed.project, process.execPath, [path.join(installed.project, "host.mjs")], {
      cwd: os.tmpdir(),
      env: { NODE_OPTIONS: recipe },
    });
    expect(elsewhere.status, elsewhere.stderr).toBe(0);
    expect(JSON.parse(elsewhere.stdout)).toEqual({ active: true, child: 0, childErr: "" });
  }, 180_000);

  it("doctor --pid tells whether a running host serves upstream natively", async () => {
    writeFileSync(
      path.join(installed.project, "server.mjs"),
      [
        'await import("@paperclipai/adapter-utils/workspace-restore-merge");',
        'console.log("ready");',
        "setTimeout(() => {}, 60_000);",
      ].join("\n"),
    );
    const start = (env) => {
      const child = spawn(process.execPath, ["server.mjs"], {
        cwd: installed.project,
        env: { ...process.env, NODE_OPTIONS: "", ...env },
        stdio: ["ignore", "pipe", "inherit"],
      });
      return new Promise((resolve) => child.stdout.once("data", () => resolve(child)));
    };
    const recipe = inProject(installed.project, "npx", ["paperclip-sync", "doctor", "--node-options"]).stdout.trim();
    const activated = await start({ NODE_OPTIONS: recipe });
    const plain = await start({});
    try {
      const on = inProject(installed.project, "npx", [
        "paperclip-sync",
        "doctor",
        "--pid",
        String(activated.pid),
        "--json",
      ]);
      expect(on.status, on.stderr).toBe(0);
      expect(JSON.parse(on.stdout)).toMatchObject({
        pid: activated.pid,
        startedWithHook: true,
        turnedOff: false,
        binary: expect.stringContaining(`adapter-utils-native.${platform}.node`),
      });
      const off = inProject(installed.project, "npx", ["paperclip-sync", "doctor", "--pid", String(plain.pid)]);
      expect(off.status).toBe(1);
      expect(off.stdout).toMatch(/started with hook\s+no/);
      expect(off.stdout).toMatch(/native binary\s+not mapped/);
    } finally {
      activated.kill();
      plain.kill();
    }
  }, 180_000);

  it("without the platform package: doctor exits 1 and every message names the package to install and why it may be missing", () => {
    rmSync(path.join(installed.project, "node_modules", ...platformPackage.split("/")), {
      recursive: true,
      force: true,
    });
    const expected = `${platformPackage}@${manifest.version}`;
    const doctor = inProject(installed.project, "npx", ["paperclip-sync", "doctor"]);
    expect(doctor.status).toBe(1);
    expect(doctor.stdout).toContain(expected);
    expect(doctor.stdout).toContain("--omit=optional");
    expect(`${doctor.stdout}${doctor.stderr}`).not.toMatch(/npm has a bug|removing both package-lock\.json/);
    const direct = inProject(installed.project, process.execPath, ["direct.mjs"]);
    expect(direct.status).toBe(1);
    expect(direct.stderr).toContain("ERR_PAPERCLIP_NATIVE_UNSUPPORTED_PLATFORM");
    expect(direct.stderr).toContain(`npm install ${expected}`);
    // The activation stays off with one line, and upstream runs as installed.
    const host = inProject(installed.project, process.execPath, ["host.mjs"], {
      env: { NODE_OPTIONS: "--import @paperclipai/adapter-utils-native/register" },
    });
    expect(host.status, host.stderr).toBe(0);
    expect(host.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(
        new RegExp(
          `^@paperclipai/adapter-utils-native: native binary unavailable \\(.*${expected.replace(/[.@/]/g, "\\$&")}.*\\); @paperclipai/adapter-utils unchanged$`,
        ),
      ),
    ]);
    expect(JSON.parse(host.stdout)).toMatchObject({ active: false, child: 0 });
  }, 180_000);
});
