// The mark our command-managed client carries, so our prepare uses its additions (byte
// counts during `syncIn`) only on it and hands any other client exactly upstream's calls.

/**
 * Set on clients made by our `createCommandManagedRuntimeClient`: `{ streamsPackedSources }`,
 * true when its `syncIn` runs the fallback (base64 or duplex), which can pack a mapping's
 * {@link PACKED_SOURCE} straight into the upload instead of reading `sourcePath`.
 */
export const OUR_CLIENT = Symbol("paperclip-native.commandManagedClient");

/**
 * On a `file` mapping: `{ localDir, exclude, followSymlinks }`, the directory whose archive
 * `sourcePath` would hold. Our fallback packs it into the upload; the file never exists.
 */
export const PACKED_SOURCE = Symbol("paperclip-native.packedSource");
