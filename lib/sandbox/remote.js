// The sandbox lane's remote (../lifecycle/remote.js): a sandbox reached through its runner's
// calls, each command one `client.run` under the spec's deadline; through our client
// (client-features.js), listings come back as base64 text on a command's stdout.
import { OUR_CLIENT } from "./client-features.js";
import { listRemote } from "./delta.js";
import { shellQuote } from "./shell.js";

/**
 * The sandbox of `client` (a runtime client) as a lifecycle remote, under `spec.timeoutMs`.
 * `list` only through our client (a provider's own client has no listing).
 */
export function sandboxRemote(client, spec) {
  const features = client[OUR_CLIENT];
  const remote = {
    run: (script) => client.run(`sh -c ${shellQuote(script)}`, { timeoutMs: spec.timeoutMs }),
  };
  if (typeof features?.exec === "function") remote.list = (script, options) => listRemote(features, script, options);
  return remote;
}
