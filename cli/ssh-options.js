// The SSH options shared by the push and pull commands.
import { readFileSync } from "node:fs";
import path from "node:path";
import { UsageError } from "./args.js";

/** The SSH options' part of the push and pull help. */
export const SSH_OPTIONS_HELP = `SSH options:
  --host HOST --user USER [--port 22]   the server
  --key FILE                            the private key (OpenSSH format)
  --known-hosts FILE                    host keys to trust (strict checking)
  --no-host-key-check                   trust any host key (explicit; upstream's StrictHostKeyChecking=no)
  --remote-dir DIR                      the remote directory (absolute)
  --json                                print a summary as JSON when done`;

/** The parseArgs options of push and pull. */
export const SSH_OPTIONS = {
  host: { type: "string" },
  port: { type: "string" },
  user: { type: "string" },
  key: { type: "string" },
  "known-hosts": { type: "string" },
  "no-host-key-check": { type: "boolean" },
  "remote-dir": { type: "string" },
  exclude: { type: "string", multiple: true },
  json: { type: "boolean" },
};

/** The upstream `SshRemoteExecutionSpec` for the parsed SSH options. */
export function sshSpec(opts) {
  for (const flag of ["host", "user", "key", "remote-dir"])
    if (!opts[flag]) throw new UsageError(`--${flag} is required`);
  if (!opts["known-hosts"] && !opts["no-host-key-check"])
    throw new UsageError("--known-hosts FILE is required (or --no-host-key-check)");
  if (opts["known-hosts"] && opts["no-host-key-check"])
    throw new UsageError("--known-hosts and --no-host-key-check exclude each other");
  const port = opts.port === undefined ? 22 : Number(opts.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError("--port takes a port number");
  if (!path.isAbsolute(opts["remote-dir"])) throw new UsageError("--remote-dir must be absolute");
  const read = (file) => readFileSync(file, "utf8");
  return {
    host: opts.host,
    port,
    username: opts.user,
    privateKey: read(opts.key),
    knownHosts: opts["known-hosts"] ? read(opts["known-hosts"]) : null,
    strictHostKeyChecking: !opts["no-host-key-check"],
    remoteWorkspacePath: opts["remote-dir"],
    remoteCwd: opts["remote-dir"],
  };
}

/** Aborts the transfer on Ctrl-C instead of leaving the remote half-written silently. */
export function interruptSignal() {
  const controller = new AbortController();
  process.once("SIGINT", () => controller.abort(new Error("interrupted")));
  return controller.signal;
}
