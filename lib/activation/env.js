// The activation's environment variables, in one place. This module imports nothing, so the
// `--import` entry can read them on any Node, before it knows the Node can be activated.

/** Turns the activation off when set to `0`. */
export const ACTIVATION_ENV = "PAPERCLIP_ADAPTER_UTILS_NATIVE";

/** The workspace opt-in for the `--import` form: set to `workspace` (see admission.js). */
export const UPSTREAM_OPT_IN_ENV = "PAPERCLIP_ADAPTER_UTILS_NATIVE_UPSTREAM";

/**
 * Set by a process the hook was installed in, so the processes it starts (which inherit our
 * NODE_OPTIONS entry) know they are children of an activated host and keep start-up notices
 * (an older Node without module hooks) to themselves: an agent CLI's stderr is its own.
 */
export const INHERITED_ENV = "PAPERCLIP_ADAPTER_UTILS_NATIVE_INHERITED";

/** Whether this process may print a start-up notice: the main thread of a process no activated host started. */
export function mayNotifyAtStart(isMainThread) {
  return isMainThread && process.env[INHERITED_ENV] === undefined;
}
