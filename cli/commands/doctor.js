// `paperclip-sync doctor`: whether the native binary loads, which upstream is installed and
// verified, and what the activation serves here and in a process started with the hook.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { readServedRecord, tmpdirOfEnvironment } from "../../lib/activation/served-record.js";
import { nativeActivation } from "../../lib/activation/state.js";
import {
  ACTIVATION_ENV,
  compositionPlan,
  findInstalledUpstream,
  isVerifiedUpstreamVersion,
  VERIFIED_UPSTREAM_VERSIONS,
} from "../../lib/activation/coverage.js";
import { nativeLoadError, nativePlatform } from "../../lib/native.js";
import { UsageError } from "../args.js";
import { table } from "../output.js";

/** The command's help. */
export const help = `Usage: paperclip-sync doctor [--json]
       paperclip-sync doctor --node-options
       paperclip-sync doctor --pid PID [--json]

Reports whether the native binary loads here, the installed @paperclipai/adapter-utils
(found from the working directory) and whether its version is one this package was verified
against, the upstream modules and names the activation serves, whether the activation is
on in this process (nativeActivation()), and what a Node started with
--import @paperclipai/adapter-utils-native/register gets (checked in a child process).
Exit code 1 when the activation would stay off.

--node-options prints only the NODE_OPTIONS value that turns the activation on for this
installation (--import=<absolute file: URL>), which works from any working directory:
  export NODE_OPTIONS="$(npx paperclip-sync doctor --node-options)"

--pid PID looks at a running process (a Paperclip server; Linux, the same user or root):
whether it was started with the activation (its NODE_OPTIONS or arguments), whether it is
turned off there, whether the native binary is mapped into it, and whether the activation
has served one of upstream's modules natively there (the record the process leaves on its
first native serve). Exit code 1 when nothing has been served natively there.`;

const REGISTER_FILE = fileURLToPath(new URL("../../lib/activation/register.js", import.meta.url));

/**
 * How long the child that starts with the hook may take. It loads upstream's covered modules
 * through the hook: well under a second natively, tens of seconds for Node under emulation
 * (linux-arm64 in qemu, `npm run test:platforms`), so the bound only catches a hung child.
 */
const PROBE_TIMEOUT_MS = 300_000;

/** The command's options (node:util.parseArgs). */
export const options = { json: { type: "boolean" }, "node-options": { type: "boolean" }, pid: { type: "string" } };

/**
 * What /proc tells of a running process: how it was started, whether the binary is mapped,
 * and what it recorded of its first native serve (`served`: `{ at, mechanism, module }` or null).
 */
function inspectProcess(pid) {
  const read = (name) => readFileSync(`/proc/${pid}/${name}`, "utf8");
  const environ = Object.fromEntries(
    read("environ")
      .split("\0")
      .filter(Boolean)
      .map((pair) => {
        const at = pair.indexOf("=");
        return [pair.slice(0, at), pair.slice(at + 1)];
      }),
  );
  const argv = read("cmdline").split("\0").filter(Boolean);
  const binary =
    read("maps")
      .split("\n")
      .map((line) => /(\S*adapter-utils-native\.[\w-]+\.node)$/.exec(line)?.[1])
      .find(Boolean) ?? null;
  // Our register entry by package name, or this installation's file (a checkout in any directory).
  const names = (value) =>
    /adapter-utils-native[\\/](?:register|lib[\\/]activation[\\/]register\.js)/.test(value ?? "") ||
    (value ?? "").includes(REGISTER_FILE);
  // The record is under that process's os.tmpdir() (from its environment at start, or ours).
  const uid = Number(/^Uid:\s+(\d+)/m.exec(read("status"))?.[1]);
  const record = readServedRecord(pid, { uid, tmpdirs: [tmpdirOfEnvironment(environ), os.tmpdir()] });
  return {
    pid: Number(pid),
    command: argv.join(" "),
    nodeOptions: environ.NODE_OPTIONS ?? null,
    startedWithHook: names(environ.NODE_OPTIONS) || argv.some(names),
    turnedOff: environ[ACTIVATION_ENV] === "0",
    binary,
    served: binary && record ? { at: record.at, mechanism: record.mechanism, module: record.module } : null,
  };
}

/** The `native binary` line of `doctor --pid`. */
function binaryLine({ binary, served }) {
  if (!binary) return "not mapped: nothing has been served natively there yet";
  if (served) return `mapped (${binary}): upstream is served natively there`;
  return `loaded (${binary}), but nothing has been served natively there: the activation is off or has served nothing yet`;
}

function runPid(pid, json) {
  let found;
  try {
    found = inspectProcess(pid);
  } catch (error) {
    const why =
      error.code === "ENOENT"
        ? "no such process (or no /proc here)"
        : error.code === "EACCES"
          ? "not permitted: run as the process's user or root"
          : error.message;
    throw Object.assign(new Error(`cannot inspect process ${pid}: ${why}`), {
      code: error.code === "ENOENT" ? "ESRCH" : error.code,
    });
  }
  const code = found.served ? 0 : 1;
  if (json) {
    console.log(JSON.stringify(found));
    return code;
  }
  console.log(`process             ${found.pid}: ${found.command}`);
  console.log(
    `started with hook   ${found.startedWithHook ? "yes" : "no"}${found.nodeOptions ? ` (NODE_OPTIONS=${found.nodeOptions})` : ""}`,
  );
  if (found.turnedOff) console.log(`${ACTIVATION_ENV}  0: turned off there`);
  console.log(`native binary       ${binaryLine(found)}`);
  if (found.served)
    console.log(`first served        ${found.served.module} at ${found.served.at} (${found.served.mechanism})`);
  return code;
}

/** Runs the command on its parsed arguments; resolves the exit code (1: the activation would stay off). */
export async function run({ values: opts }) {
  const register = new URL("../../lib/activation/register.js", import.meta.url).href;
  if (opts["node-options"]) {
    console.log(`--import=${register}`);
    return 0;
  }
  if (opts.pid !== undefined) {
    if (!/^\d+$/.test(opts.pid)) throw new UsageError(`--pid takes a process id, got '${opts.pid}'`);
    return runPid(opts.pid, opts.json);
  }
  const installed = findInstalledUpstream();
  let plan = [];
  if (!nativeLoadError) plan = (await compositionPlan()).map(({ module, names }) => ({ module, names }));
  // What a process started with the hook gets: a child loads every covered module.
  const state = new URL("../../lib/activation/state.js", import.meta.url).href;
  const probe = `for (const m of ${JSON.stringify(plan.map((p) => p.module))}) await import("@paperclipai/adapter-utils/" + m).catch(() => {});
    const { nativeActivation } = await import(${JSON.stringify(state)}); console.log(JSON.stringify(nativeActivation()));`;
  let child = null;
  let childStderr = "";
  const probeRun = spawnSync(process.execPath, ["--import", register, "--input-type=module", "-e", probe], {
    encoding: "utf8",
    cwd: process.cwd(),
    timeout: PROBE_TIMEOUT_MS,
  });
  try {
    childStderr = probeRun.stderr.trim();
    child = JSON.parse(probeRun.stdout.trim().split("\n").pop());
  } catch {
    // What the child did instead of reporting: the reason of an inactive hook.
    child = {
      active: false,
      reason:
        probeRun.error?.code === "ETIMEDOUT"
          ? `the process started with the hook did not finish within ${PROBE_TIMEOUT_MS / 1000} s`
          : `the process started with the hook ${probeRun.error ? `failed: ${probeRun.error.message}` : `exited ${probeRun.status ?? probeRun.signal} without its report`}`,
      upstream: [],
    };
  }
  const report = {
    platform: nativePlatform(),
    node: process.versions.node,
    nativeBinary: nativeLoadError ? `unavailable: ${nativeLoadError.message}` : "loads",
    upstream: installed
      ? { root: installed.root, version: installed.version, verified: isVerifiedUpstreamVersion(installed.version) }
      : null,
    verifiedVersions: VERIFIED_UPSTREAM_VERSIONS,
    turnedOff: process.env[ACTIVATION_ENV] === "0",
    covered: plan,
    thisProcess: nativeActivation(),
    withRegister: child
      ? {
          active: child.active,
          reason: child.reason,
          stderr: childStderr || null,
          modules: Object.fromEntries(
            child.upstream.flatMap((u) => Object.entries(u.modules).map(([m, names]) => [m, names.length])),
          ),
          // Modules the admission left upstream's (an unverified workspace by opt-in), and why.
          refused: Object.assign({}, ...[...child.upstream, ...child.skipped].map((u) => u.refused ?? {})),
        }
      : null,
  };
  const on = Boolean(report.withRegister?.active && Object.keys(report.withRegister.modules).length > 0);
  if (opts.json) {
    console.log(JSON.stringify(report));
    return on ? 0 : 1;
  }
  console.log(`platform            ${report.platform} (Node ${report.node})`);
  console.log(`native binary       ${report.nativeBinary}`);
  console.log(
    `upstream            ${installed ? `${installed.version} at ${installed.root} (${report.upstream.verified ? "verified" : `not verified; verified: ${VERIFIED_UPSTREAM_VERSIONS.join(", ")}`})` : "not found from this directory"}`,
  );
  console.log(`${ACTIVATION_ENV}  ${process.env[ACTIVATION_ENV] ?? "(unset)"}`);
  console.log(
    `with the hook       ${on ? "active" : `off${report.withRegister?.stderr ? `: ${report.withRegister.stderr}` : report.withRegister?.reason ? `: ${report.withRegister.reason}` : ""}`}`,
  );
  if (plan.length) {
    console.log(
      `\n${table(
        plan.map(({ module, names }) => ({
          "upstream module": module,
          "served natively": report.withRegister?.modules?.[module]
            ? `${names.length} ${names.length === 1 ? "name" : "names"}`
            : report.withRegister?.refused?.[module]
              ? "no (refused)"
              : "no",
          names: names.join(", "),
        })),
        ["upstream module", "served natively", "names"],
      )}`,
    );
  }
  for (const [module, why] of Object.entries(report.withRegister?.refused ?? {}))
    console.log(`refused             ${module}: ${why}`);
  console.log(`\nEnable: NODE_OPTIONS="--import=${register}"; turn off: ${ACTIVATION_ENV}=0`);
  return on ? 0 : 1;
}
