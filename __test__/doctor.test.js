// `paperclip-sync doctor` where it used to say wrong things. `--pid` against running hosts: the
// native binary mapped is not enough, the process must have served upstream natively (the
// record it leaves on its first native serve, lib/activation/served-record.js); a process
// that imported our package with the activation off, or served nothing yet, is told apart.
// And run from a copy of this package without its binary (as `npm install --omit=optional`
// leaves it), the line for the hook names the missing platform package.
import { spawn, spawnSync } from "node:child_process";
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INHERITED_ENV } from "../lib/activation/env.js";
import { upstreamWorkspace } from "./helpers/upstream-workspace.js";
import { currentPlatform, platformPackageName } from "../lib/platforms.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const registerUrl = pathToFileURL(path.join(repo, "lib/activation/register.js")).href;
const upstreamDir = path.join(repo, "node_modules/@paperclipai/adapter-utils");
const { version } = JSON.parse(readFileSync(path.join(repo, "package.json"), "utf8"));
const SECRET = "doctor-test-secret-7f3a";

// A host: `serve` imports one of upstream's covered modules and calls it; `direct` imports our
// package and calls it directly (a native call the activation did not serve); then it prints
// what nativeActivation() says and stays up until killed.
const HOST = `
const out = {};
if (process.env.MODE.includes("serve")) {
  const { shouldExcludePath } = await import("@paperclipai/adapter-utils/exclude-patterns");
  out.served = shouldExcludePath("a/node_modules/b", ["*/node_modules/*"]);
}
const ours = await import("@paperclipai/adapter-utils-native");
if (process.env.MODE.includes("direct")) out.direct = ours.shouldExcludePath("a/node_modules/b", ["*/node_modules/*"]);
out.activation = ours.nativeActivation();
console.log(JSON.stringify(out));
setInterval(() => {}, 60_000);
`;

let work;

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), "pc-doctor-test-"));
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** A project whose node_modules hold upstream and `native` (this checkout or a copy). */
function project(name, native) {
  const dir = path.join(work, name);
  mkdirSync(path.join(dir, "node_modules/@paperclipai"), { recursive: true });
  symlinkSync(upstreamDir, path.join(dir, "node_modules/@paperclipai/adapter-utils"), "dir");
  symlinkSync(native, path.join(dir, "node_modules/@paperclipai/adapter-utils-native"), "dir");
  writeFileSync(path.join(dir, "host.mjs"), HOST);
  return dir;
}

function doctor(bin, cwd, args, env = {}) {
  const result = spawnSync(process.execPath, [bin, "doctor", ...args], {
    cwd,
    encoding: "utf8",
    timeout: 120_000,
    env: { ...process.env, NODE_OPTIONS: "", [INHERITED_ENV]: undefined, ...env },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The line of doctor's output that starts with `label`. */
function line(stdout, label) {
  return stdout.split("\n").find((text) => text.startsWith(label)) ?? "";
}

describe.skipIf(process.platform !== "linux")("doctor --pid", () => {
  const hosts = [];
  let dir;
  let tmp;
  let records;
  let deadPid;

  /** Starts host.mjs with `env`; resolves `{ child, out, stderr() }` once it printed its line. */
  function startHost(env) {
    const child = spawn(process.execPath, ["host.mjs"], {
      cwd: dir,
      env: { ...process.env, NODE_OPTIONS: "", [INHERITED_ENV]: undefined, TMPDIR: tmp, DOCTOR_SECRET: SECRET, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    hosts.push(child);
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    return new Promise((resolve, reject) => {
      child.stdout.on("data", (chunk) => {
        stdout += chunk;
        if (stdout.includes("\n")) resolve({ child, out: JSON.parse(stdout.split("\n")[0]), stderr: () => stderr });
      });
      child.once("exit", (code) => reject(new Error(`host exited ${code}: ${stderr}`)));
    });
  }

  beforeAll(() => {
    dir = project("hosts", repo);
    // The hosts' os.tmpdir() (doctor finds it from their environment), with the records'
    // directory made in advance to hold a record left by a process that has ended.
    tmp = path.join(work, "tmp");
    records = path.join(tmp, `paperclip-native-activation-${process.getuid()}`);
    mkdirSync(records, { recursive: true, mode: 0o700 });
    deadPid = spawnSync(process.execPath, ["-e", "console.log(process.pid)"], { encoding: "utf8" }).stdout.trim();
    writeFileSync(
      path.join(records, `${deadPid}.json`),
      JSON.stringify({ pid: Number(deadPid), startTime: "1", at: new Date().toISOString(), mechanism: "node-hooks" }),
      { mode: 0o600 },
    );
  });

  afterAll(() => {
    for (const child of hosts) child.kill();
  });

  it("a host that served upstream natively: mapped and served, exit 0; its record is private and holds no environment", async () => {
    const { child, out } = await startHost({ NODE_OPTIONS: `--import=${registerUrl}`, MODE: "serve" });
    expect(out).toMatchObject({ served: true, activation: { active: true, mechanism: "node-hooks" } });
    const text = doctor(path.join(repo, "bin/paperclip-sync.mjs"), dir, ["--pid", String(child.pid)]);
    expect(text.status, text.stderr).toBe(0);
    expect(line(text.stdout, "started with hook")).toMatch(/^started with hook\s+yes/);
    expect(line(text.stdout, "native binary")).toMatch(
      /^native binary\s+mapped \(\S*adapter-utils-native\.[\w-]+\.node\): upstream is served natively there$/,
    );
    expect(line(text.stdout, "first served")).toMatch(/^first served\s+exclude-patterns at \S+ \(node-hooks\)$/);
    const json = doctor(path.join(repo, "bin/paperclip-sync.mjs"), dir, ["--pid", String(child.pid), "--json"]);
    expect(json.status).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      pid: child.pid,
      startedWithHook: true,
      binary: expect.stringMatching(/adapter-utils-native\.[\w-]+\.node$/),
      served: { mechanism: "node-hooks", module: "exclude-patterns" },
    });

    const file = path.join(records, `${child.pid}.json`);
    expect(statSync(records).mode & 0o777).toBe(0o700);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const record = readFileSync(file, "utf8");
    expect(record).not.toContain(SECRET);
    expect(record).not.toContain(registerUrl);
    const stat = readFileSync(`/proc/${child.pid}/stat`, "utf8");
    const startTime = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    expect(JSON.parse(record)).toEqual({
      pid: child.pid,
      startTime,
      at: expect.any(String),
      mechanism: "node-hooks",
      module: "exclude-patterns",
    });
    // Its write pruned the record of the process that had ended; no temporary file is left.
    expect(readdirSync(records).sort()).toEqual([`${child.pid}.json`]);
    expect(deadPid).not.toBe(String(child.pid));
  });

  it("a record that cannot be written fails nothing: the host is served as usual", async () => {
    const notADirectory = path.join(work, "not-a-directory");
    writeFileSync(notADirectory, "");
    const { child, out, stderr } = await startHost({
      NODE_OPTIONS: `--import=${registerUrl}`,
      MODE: "serve",
      TMPDIR: notADirectory,
    });
    expect(out).toMatchObject({ served: true, activation: { active: true } });
    expect(child.exitCode).toBe(null);
    // Node's own experimental-feature warnings are not ours.
    expect(
      stderr()
        .split("\n")
        .filter((text) => text && !/ExperimentalWarning|--trace-warnings/.test(text)),
    ).toEqual([]);
  });

  it("a host that imported the package with the activation off: binary loaded, nothing served, exit 1", async () => {
    const { child, out } = await startHost({
      NODE_OPTIONS: `--import=${registerUrl}`,
      PAPERCLIP_ADAPTER_UTILS_NATIVE: "0",
      MODE: "serve+direct",
    });
    expect(out).toMatchObject({ served: true, direct: true, activation: { active: false } });
    // A record of another process that had this pid before (another start time) is not believed.
    writeFileSync(
      path.join(records, `${child.pid}.json`),
      JSON.stringify({ pid: child.pid, startTime: "1", at: new Date().toISOString(), mechanism: "node-hooks" }),
      { mode: 0o600 },
    );
    const text = doctor(path.join(repo, "bin/paperclip-sync.mjs"), dir, ["--pid", String(child.pid)]);
    expect(text.status).toBe(1);
    expect(line(text.stdout, "PAPERCLIP_ADAPTER_UTILS_NATIVE")).toMatch(/0: turned off there$/);
    expect(line(text.stdout, "native binary")).toMatch(
      /^native binary\s+loaded \(\S*adapter-utils-native\.[\w-]+\.node\), but nothing has been served natively there: the activation is off or has served nothing yet$/,
    );
    expect(text.stdout).not.toMatch(/served natively there$|first served/m);
    const json = doctor(path.join(repo, "bin/paperclip-sync.mjs"), dir, ["--pid", String(child.pid), "--json"]);
    expect(json.status).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({
      turnedOff: true,
      binary: expect.stringMatching(/adapter-utils-native\.[\w-]+\.node$/),
      served: null,
    });
  });

  it("a host with the hook that has served nothing yet: binary loaded, nothing served, exit 1; no binary: not mapped", async () => {
    const idle = await startHost({ NODE_OPTIONS: `--import=${registerUrl}`, MODE: "direct" });
    expect(idle.out).toMatchObject({ direct: true, activation: { active: false, mechanism: "node-hooks" } });
    expect(idle.out.activation.reason).toMatch(/^nothing served yet/);
    const text = doctor(path.join(repo, "bin/paperclip-sync.mjs"), dir, ["--pid", String(idle.child.pid)]);
    expect(text.status).toBe(1);
    expect(line(text.stdout, "started with hook")).toMatch(/^started with hook\s+yes/);
    expect(line(text.stdout, "native binary")).toMatch(/^native binary\s+loaded \(.*\), but nothing has been served/);

    const plain = spawn(process.execPath, ["-e", "console.log('up'); setInterval(() => {}, 60_000)"], {
      env: { ...process.env, NODE_OPTIONS: "", TMPDIR: tmp },
      stdio: ["ignore", "pipe", "ignore"],
    });
    hosts.push(plain);
    await new Promise((resolve) => plain.stdout.once("data", resolve));
    const none = doctor(path.join(repo, "bin/paperclip-sync.mjs"), dir, ["--pid", String(plain.pid)]);
    expect(none.status).toBe(1);
    expect(line(none.stdout, "native binary")).toMatch(/^native binary\s+not mapped/);
  });
});

describe("doctor without the platform package", () => {
  it("names the missing binary package on the line for the hook, and what to do", () => {
    // A copy of this package without its .node binary, where the platform package cannot be
    // found either: what `npm install --omit=optional` leaves.
    const copy = path.join(work, "no-binary");
    mkdirSync(path.join(copy, "native"), { recursive: true });
    for (const entry of ["package.json", "index.js", "lib", "cli", "bin"])
      cpSync(path.join(repo, entry), path.join(copy, entry), { recursive: true });
    cpSync(path.join(repo, "native/binding.cjs"), path.join(copy, "native/binding.cjs"));
    const dir = project("missing-binary", copy);
    const bin = path.join(dir, "node_modules/@paperclipai/adapter-utils-native/bin/paperclip-sync.mjs");
    const missing = `${platformPackageName(currentPlatform())}@${version}`.replace(/[.@/]/g, "\\$&");
    const reason = new RegExp(
      `^native binary unavailable: .*the package ${missing} is missing\\..*npm install ${missing}$`,
    );

    const text = doctor(bin, dir, []);
    expect(text.status).toBe(1);
    const hook = line(text.stdout, "with the hook");
    expect(hook).toMatch(/^with the hook\s+off: /);
    expect(hook.replace(/^with the hook\s+off: /, "")).toMatch(reason);
    expect(hook).toContain("--omit=optional");
    expect(text.stdout).not.toMatch(/nothing served yet/);

    const json = doctor(bin, dir, ["--json"]);
    expect(json.status).toBe(1);
    const report = JSON.parse(json.stdout);
    expect(report.withRegister).toMatchObject({ active: false });
    expect(report.withRegister.reason).toMatch(reason);
    expect(report.thisProcess.reason).toMatch(reason);
  });
});

describe("doctor and an unpublished upstream workspace, by opt-in", () => {
  it("lists the modules left upstream's and why (the newer releases' stand-ins)", () => {
    const root = path.join(work, "workspace-newer");
    upstreamWorkspace(root, { newer: true });
    const bin = path.join(repo, "bin/paperclip-sync.mjs");
    const text = doctor(bin, root, [], { PAPERCLIP_ADAPTER_UTILS_NATIVE_UPSTREAM: "workspace" });
    // runtime-progress is served: the activation is on.
    expect(text.status, text.stdout + text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^runtime-progress\s+1 name\s/m);
    expect(text.stdout).toMatch(/^exclude-patterns\s+no \(refused\)\s/m);
    expect(line(text.stdout, "refused             exclude-patterns:")).toMatch(/carries unescapeTarExcludeLiteral/);
    expect(line(text.stdout, "refused             ssh:")).toMatch(/carries transferExclude/);
    const report = JSON.parse(
      doctor(bin, root, ["--json"], { PAPERCLIP_ADAPTER_UTILS_NATIVE_UPSTREAM: "workspace" }).stdout,
    );
    expect(Object.keys(report.withRegister.modules)).toEqual(["runtime-progress"]);
    expect(Object.keys(report.withRegister.refused)).toContain("workspace-restore-merge");
  });
});
