// The Paperclip instance root, where the merge lock (merge-lock.js) and both lanes' delta
// caches (sandbox/delta.js, ssh-delta.js) keep their files. Internal.
import os from "node:os";
import path from "node:path";

const DEFAULT_INSTANCE_ID = "default";
const INSTANCE_ID_PATTERN = /^[a-zA-Z0-9_-]+$/;

function expandHome(value) {
  if (value === "~") return os.homedir();
  if (value.startsWith("~/")) return path.resolve(os.homedir(), value.slice(2));
  return value;
}

/**
 * The Paperclip instance root from `env` only (never `process.env` unless that is what was
 * passed): `PAPERCLIP_HOME` (trimmed, `~` expanded; default `~/.paperclip`) +
 * `instances/<PAPERCLIP_INSTANCE_ID or "default">`. An instance id outside
 * `[a-zA-Z0-9_-]+` throws `Invalid PAPERCLIP_INSTANCE_ID '<id>'.`
 */
export function resolveInstanceRoot(env) {
  const home = env.PAPERCLIP_HOME?.trim();
  const homeDir = path.resolve(home ? expandHome(home) : path.resolve(os.homedir(), ".paperclip"));
  const instanceId = env.PAPERCLIP_INSTANCE_ID?.trim() || DEFAULT_INSTANCE_ID;
  if (!INSTANCE_ID_PATTERN.test(instanceId)) throw new Error(`Invalid PAPERCLIP_INSTANCE_ID '${instanceId}'.`);
  return path.resolve(homeDir, "instances", instanceId);
}
