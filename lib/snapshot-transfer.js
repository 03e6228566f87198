// Internal: turns a native capture transfer into upstream's entries `Map`.

const KIND_DIR = 1;
const KIND_FILE = 2;
const KIND_SYMLINK = 3;

/**
 * Builds upstream's `Map` from a native transfer: pre-order, siblings in
 * `String.prototype.localeCompare` order (the process locale, as upstream sorts them).
 */
export function entriesFromTransfer(t) {
  const { kinds, modes, childStart, childEnd } = t;
  const entries = new Map();
  if (kinds.length === 0) return entries;
  const names = t.names.split("\u0000");
  const targets = t.targets.length > 0 || kinds.includes(KIND_SYMLINK) ? t.targets.split("\u0000") : [];
  // Hash and target positions: the k-th file (symlink) in node order owns slot k.
  const slot = new Uint32Array(kinds.length);
  let files = 0;
  let links = 0;
  for (let i = 0; i < kinds.length; i += 1) {
    if (kinds[i] === KIND_FILE) slot[i] = files++;
    else if (kinds[i] === KIND_SYMLINK) slot[i] = links++;
  }
  const compare = new Intl.Collator().compare;
  // Native siblings arrive in byte order, as Node's readdir returns them; a stable sort by
  // the collator then breaks ties exactly as upstream's does.
  const sortedChildren = (start, end) => {
    const ids = [];
    for (let i = start; i < end; i += 1) ids.push(i);
    return ids.sort((a, b) => compare(names[a], names[b]));
  };
  const stack = [];
  const pushChildren = (start, end, prefix) => {
    const ids = sortedChildren(start, end);
    for (let k = ids.length - 1; k >= 0; k -= 1) stack.push(ids[k], prefix);
  };
  pushChildren(t.rootStart, t.rootEnd, "");
  while (stack.length > 0) {
    const prefix = stack.pop();
    const i = stack.pop();
    const kind = kinds[i];
    if (kind === 0) continue;
    const rel = prefix ? `${prefix}/${names[i]}` : names[i];
    if (kind === KIND_DIR) {
      entries.set(rel, { kind: "dir" });
      pushChildren(childStart[i], childEnd[i], rel);
    } else if (kind === KIND_FILE) {
      entries.set(rel, { kind: "file", mode: modes[i], hash: t.hashes.slice(slot[i] * 64, slot[i] * 64 + 64) });
    } else {
      entries.set(rel, { kind: "symlink", target: targets[slot[i]] });
    }
  }
  return entries;
}

