// `paperclip-sync doctor`: whether the native binary loads, which upstream is installed and
// verified, and what the activation serves here and in a process started with the hook.
import { spawnSync } from "node:child_process";
import { nativeActivation } from "../../lib/activation/state.js";
import { ACTIVATION_ENV, compositionPlan, findInstalledUpstream, isVerifiedUpstreamVersion, VERIFIED_UPSTREAM_VERSIONS } from "../../lib/activation/coverage.js";
import { nativeLoadError, nativePlatform } from "../../lib/native.js";
import { table } from "../output.js";

/** The command's help. */
export const help = `Usage: paperclip-sync doctor [--json]

Reports whether the native binary loads here, the installed @paperclipai/adapter-utils
(found from the working directory) and whether its version is one this package was verified
against, the upstream modules and names the activation serves, whether the activation is
on in this process (nativeActivation()), and what a Node started with
--import @paperclipai/adapter-utils-native/register gets (checked in a child process).
Exit code 1 when the activation would stay off.`;

/** The command's options (node:util.parseArgs). */
export const options = { json: { type: "boolean" } };

/** Runs the command on its parsed arguments; resolves the exit code (1: the activation would stay off). */
export async function run({ values: opts }) {
  const installed = findInstalledUpstream();
  let plan = [];
  if (!nativeLoadError) plan = (await compositionPlan()).map(({ module, names }) => ({ module, names }));
  // What a process started with the hook gets: a child loads every covered module.
  const register = new URL("../../lib/activation/register.js", import.meta.url).href;
  const state = new URL("../../lib/activation/state.js", import.meta.url).href;
  const probe = `for (const m of ${JSON.stringify(plan.map((p) => p.module))}) await import("@paperclipai/adapter-utils/" + m).catch(() => {});
    const { nativeActivation } = await import(${JSON.stringify(state)}); console.log(JSON.stringify(nativeActivation()));`;
  let child = null;
  let childStderr = "";
  try {
    const probeRun = spawnSync(process.execPath, ["--import", register, "--input-type=module", "-e", probe], { encoding: "utf8", cwd: process.cwd(), timeout: 60_000 });
    childStderr = probeRun.stderr.trim();
    child = JSON.parse(probeRun.stdout.trim().split("\n").pop());
  } catch {
    child = null;
  }
  const report = {
    platform: nativePlatform(),
    node: process.versions.node,
    nativeBinary: nativeLoadError ? `unavailable: ${nativeLoadError.message}` : "loads",
    upstream: installed ? { root: installed.root, version: installed.version, verified: isVerifiedUpstreamVersion(installed.version) } : null,
    verifiedVersions: VERIFIED_UPSTREAM_VERSIONS,
    turnedOff: process.env[ACTIVATION_ENV] === "0",
    covered: plan,
    thisProcess: nativeActivation(),
    withRegister: child ? { active: child.active, reason: child.reason, stderr: childStderr || null, modules: Object.fromEntries(child.upstream.flatMap((u) => Object.entries(u.modules).map(([m, names]) => [m, names.length]))) } : null,
  };
  const on = Boolean(report.withRegister?.active && Object.keys(report.withRegister.modules).length > 0);
  if (opts.json) {
    console.log(JSON.stringify(report));
    return on ? 0 : 1;
  }
  console.log(`platform            ${report.platform} (Node ${report.node})`);
  console.log(`native binary       ${report.nativeBinary}`);
  console.log(`upstream            ${installed ? `${installed.version} at ${installed.root} (${report.upstream.verified ? "verified" : `not verified; verified: ${VERIFIED_UPSTREAM_VERSIONS.join(", ")}`})` : "not found from this directory"}`);
  console.log(`${ACTIVATION_ENV}  ${process.env[ACTIVATION_ENV] ?? "(unset)"}`);
  console.log(`this process        ${report.thisProcess.active ? `active (${report.thisProcess.mechanism})` : `not active${report.thisProcess.reason ? ` (${report.thisProcess.reason})` : ""}`}`);
  console.log(`with --import …/register: ${on ? "active" : `off${report.withRegister?.stderr ? ` (${report.withRegister.stderr})` : ""}`}`);
  if (plan.length) {
    console.log(`\n${table(plan.map(({ module, names }) => ({ "upstream module": module, "served natively": report.withRegister?.modules?.[module] ? `${names.length} ${names.length === 1 ? "name" : "names"}` : "no", names: names.join(", ") })), ["upstream module", "served natively", "names"])}`);
  }
  console.log(`\nEnable: NODE_OPTIONS="--import=${register}"; turn off: ${ACTIVATION_ENV}=0`);
  return on ? 0 : 1;
}
