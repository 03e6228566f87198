// The paperclip-sync command line: one module per command under ./commands/, each exporting
// its `help`, its node:util.parseArgs `options` and `run({ values, positionals })`; this
// module picks the command, parses its arguments and turns failures into exit codes.
//
// Exit codes: 0 success; 1 the operation failed (one line `paperclip-sync: CODE: message`);
// 2 bad usage (unknown command or option, missing argument).
import { codes } from "../lib/native.js";
import { parseCommandArgs, PROGRAM, UsageError } from "./args.js";

const HELP = `Usage: ${PROGRAM} <command> [options]

Workspace-staging jobs of Paperclip's adapters, done natively.

Commands:
  demo                     run the full cycle on a generated workspace, timed against upstream
  doctor                   is the activation (--import …/register) on, and what would it serve here
  ignored <dir>            the Git-ignored paths of a project (or why they cannot be resolved)
  snapshot <dir>           capture a directory snapshot (entries, bytes, digest)
  diff <a.json> <b.json>   compare two serialized snapshots
  signature <dir>          the content signature of a referenced project
  pack <dir>               archive a directory as tar (optionally gzip), with progress
  extract <archive> <dir>  safely extract a tar or tar.gz archive into a directory
  merge                    merge a remote result back into a workspace against a baseline
  push <dir>               upload a directory to a remote directory over SSH (no ssh/tar child)
  pull <dir>               download a remote directory over SSH into a local directory

Run '${PROGRAM} <command> --help' for a command's options.
Exit codes: 0 ok, 1 the operation failed, 2 bad usage.`;

/** Each command's module, loaded only when that command runs. */
const COMMANDS = {
  doctor: () => import("./commands/doctor.js"),
  demo: () => import("./commands/demo.js"),
  merge: () => import("./commands/merge.js"),
  push: () => import("./commands/push.js"),
  pull: () => import("./commands/pull.js"),
  ignored: () => import("./commands/ignored.js"),
  snapshot: () => import("./commands/snapshot.js"),
  diff: () => import("./commands/diff.js"),
  signature: () => import("./commands/signature.js"),
  pack: () => import("./commands/pack.js"),
  extract: () => import("./commands/extract.js"),
};

async function dispatch(argv) {
  const [command, ...rest] = argv;
  if (!command || command === "--help" || command === "-h" || command === "help") {
    console.log(HELP);
    return command ? 0 : 2;
  }
  const load = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : null;
  if (!load) throw new UsageError(`unknown command '${command}'`);
  const module = await load();
  const args = parseCommandArgs(rest, module.options, { optionalValue: module.optionalValue });
  if (args.values.help) {
    console.log(module.help);
    return 0;
  }
  return (await module.run(args)) ?? 0;
}

/**
 * Runs the command line `argv` (without node and the script) and resolves its exit code:
 * a usage error is printed with a pointer to `--help` (2), any other failure as one line
 * `paperclip-sync: CODE: message` with no stack trace (1).
 */
export async function main(argv) {
  try {
    return await dispatch(argv);
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`${PROGRAM}: ${error.message}\nRun '${PROGRAM} --help' for usage.`);
      return 2;
    }
    const code = error?.code ?? codes.INTERNAL;
    // One line, whatever the message holds (remote stderr, OpenSSH-style warnings).
    const message = String(error?.message ?? error)
      .split("\n")
      .map((line) => line.trim())
      .filter(Boolean)
      .join(" ");
    console.error(`${PROGRAM}: ${code}: ${message}`);
    return 1;
  }
}
