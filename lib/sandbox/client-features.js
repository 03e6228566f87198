// The mark our command-managed client carries, so our prepare uses its additions (byte
// counts during `syncIn`) only on it and hands any other client exactly upstream's calls.

/** Set (to `true`) on clients made by our `createCommandManagedRuntimeClient`. */
export const OUR_CLIENT = Symbol("paperclip-native.commandManagedClient");
