// Our staging inside a user's tree (crates/core/src/staging.rs and reserved.rs hold the
// logic): the reserved-name predicate the JS layer filters listings with, and the warning
// for a foreign look-alike, an entry carrying one of our staging names that this host did
// not create, which every sweep leaves where it is.
import path from "node:path";
import { native } from "./native.js";

/** The `code` of the process warning for a foreign look-alike. */
export const FOREIGN_STAGING_WARNING = "PAPERCLIP_NATIVE_FOREIGN_STAGING";

/** Look-alikes already reported (`<root>\0<name>`), so each is reported once per process. */
const reported = new Set();
const MAX_REPORTED = 4096;

/** Whether `name` is one this library reserves (its staging directories and key). */
export function isReservedName(name) {
  return native.reservedName(name);
}

/**
 * Emits a process warning (type `PaperclipNativeWarning`, code
 * `PAPERCLIP_NATIVE_FOREIGN_STAGING`) for each of `names`, entries of `root` that a sweep
 * found carrying one of our staging names without this host's tag: left alone, never acted
 * upon, never blocking. Once per root and name per process.
 */
export function reportForeignStaging(root, names) {
  for (const name of names ?? []) {
    const key = `${path.resolve(root)}\u0000${name}`;
    if (reported.has(key)) continue;
    if (reported.size >= MAX_REPORTED) reported.clear();
    reported.add(key);
    process.emitWarning(
      `'${name}' carries one of this library's staging names but was not created on this host; it is left where it is and not acted upon (not removed, completed or taken for an interrupted restore): check it and remove it`,
      { type: "PaperclipNativeWarning", code: FOREIGN_STAGING_WARNING, detail: `Found in ${root}.` },
    );
  }
}
