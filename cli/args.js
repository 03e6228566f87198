// Argument parsing for the paperclip-sync commands: node:util.parseArgs (strict, positionals
// allowed, `-h`/`--help` everywhere), its errors turned into usage errors (exit code 2).
import { parseArgs } from "node:util";

/** The command's name in usage lines and error messages. */
export const PROGRAM = "paperclip-sync";

/** Bad usage (unknown command or option, missing argument): exit code 2. */
export class UsageError extends Error {}

const HELP_OPTION = { help: { type: "boolean", short: "h" } };

/** A parseArgs error as one usage line: `unknown option --x`, `--x needs a value`, … */
function usageMessage(error) {
  const first = String(error.message).split("\n")[0];
  const unknown = /^Unknown option '([^']+)'/.exec(first);
  if (unknown) return `unknown option ${unknown[1]}`;
  const missing = /^Option '(--[\w-]+) <value>' argument missing/.exec(first);
  if (missing) return `${missing[1]} needs a value`;
  const noValue = /^Option '(--[\w-]+)' does not take an argument/.exec(first);
  if (noValue) return `${noValue[1]} takes no value`;
  return first.charAt(0).toLowerCase() + first.slice(1);
}

/**
 * Parses a command's `argv` against its parseArgs `options`; returns `{ values, positionals }`.
 * Names in `optionalValue` are string options whose value may be left out (`--gzip` alone
 * gives `true`, `--gzip=6` gives `"6"`). Throws a {@link UsageError} for bad usage.
 */
export function parseCommandArgs(argv, options, { optionalValue = [] } = {}) {
  const bare = new Set();
  const end = argv.indexOf("--");
  const args = argv.filter((arg, index) => {
    const name = arg.startsWith("--") ? arg.slice(2) : null;
    if (name && (end < 0 || index < end) && optionalValue.includes(name)) {
      bare.add(name);
      return false;
    }
    return true;
  });
  let parsed;
  try {
    parsed = parseArgs({ args, options: { ...HELP_OPTION, ...options }, allowPositionals: true, strict: true });
  } catch (error) {
    if (typeof error?.code === "string" && error.code.startsWith("ERR_PARSE_ARGS_"))
      throw new UsageError(usageMessage(error));
    throw error;
  }
  const values = { ...parsed.values };
  for (const name of bare) values[name] ??= true;
  for (const [name, option] of Object.entries(options)) {
    if (option.multiple) values[name] ??= [];
    else if (option.type === "boolean") values[name] ??= false;
  }
  return { values, positionals: parsed.positionals };
}
