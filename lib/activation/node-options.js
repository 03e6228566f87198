// Our entry in `NODE_OPTIONS`, rewritten so child processes keep working: Node resolves an
// `--import` specifier from each process's own working directory, so a bare
// `@paperclipai/adapter-utils-native/register` inherited by a child started elsewhere (an
// agent's workspace) fails that child with ERR_MODULE_NOT_FOUND. Pure string work, with
// Node's own NODE_OPTIONS syntax: arguments split at spaces, double quotes group, and inside
// quotes a backslash escapes the next character.
// Built-ins through process.getBuiltinModule, as in coverage.js (on the register path).
const { realpathSync } = process.getBuiltinModule("node:fs");
const path = process.getBuiltinModule("node:path");
const { fileURLToPath } = process.getBuiltinModule("node:url");

/** The package subpath of the `--import` entry. */
export const REGISTER_SPECIFIER = "@paperclipai/adapter-utils-native/register";

/** `NODE_OPTIONS`' arguments, as Node splits them. */
export function splitNodeOptions(value) {
  const args = [];
  let current = null;
  let quoted = false;
  for (let i = 0; i < value.length; i += 1) {
    let c = value[i];
    if (c === "\\" && quoted && i + 1 < value.length) c = value[++i];
    else if (c === " " && !quoted) {
      if (current !== null) args.push(current);
      current = null;
      continue;
    } else if (c === '"') {
      // As in Node, quotes alone start no argument: `""` is no argument at all.
      quoted = !quoted;
      continue;
    }
    current = (current ?? "") + c;
  }
  if (current !== null) args.push(current);
  return args;
}

/** Joins arguments back into a `NODE_OPTIONS` value Node splits into the same arguments (an empty one cannot be written). */
export function joinNodeOptions(args) {
  return args
    .filter((arg) => arg !== "")
    .map((arg) => (/[ "\\]/.test(arg) ? `"${arg.replace(/["\\]/g, "\\$&")}"` : arg))
    .join(" ");
}

function realFile(file) {
  try {
    return realpathSync(file);
  } catch {
    return path.resolve(file);
  }
}

/** Whether an `--import` value names the register module at `registerFile`, seen from `cwd`. */
function namesRegister(value, registerFile, cwd) {
  if (value === REGISTER_SPECIFIER) return true;
  let file = null;
  if (value.startsWith("file:")) {
    try {
      file = fileURLToPath(value);
    } catch {
      return false;
    }
  } else if (path.isAbsolute(value)) file = value;
  else if (value.startsWith("./") || value.startsWith("../")) file = path.resolve(cwd, value);
  return file !== null && realFile(file) === realFile(registerFile);
}

/**
 * `value` (a `NODE_OPTIONS` string) with every `--import` of the register module replaced by
 * `registerUrl` (absolute), or removed with `remove`; unchanged (the same string) when it
 * has none. Other arguments keep their order and meaning.
 */
export function rewriteNodeOptions(value, { registerUrl, cwd, remove = false }) {
  if (!value) return value;
  const registerFile = fileURLToPath(registerUrl);
  const args = splitNodeOptions(value);
  const out = [];
  let changed = false;
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i];
    let specifier = null;
    let pair = false;
    if (arg === "--import" && i + 1 < args.length) {
      specifier = args[i + 1];
      pair = true;
    } else if (arg.startsWith("--import=")) specifier = arg.slice("--import=".length);
    if (specifier !== null && namesRegister(specifier, registerFile, cwd)) {
      if (pair) i += 1;
      if (!remove) out.push(`--import=${registerUrl}`);
      changed ||= remove || pair || specifier !== registerUrl;
      continue;
    }
    out.push(arg);
  }
  return changed ? joinNodeOptions(out) : value;
}
