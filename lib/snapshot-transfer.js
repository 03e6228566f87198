// Internal: turns a native capture transfer into upstream's entries `Map`.

const KIND_DIR = 1;
const KIND_FILE = 2;
const KIND_SYMLINK = 3;

/**
 * Builds upstream's `Map` from a native transfer: pre-order, siblings in
 * `String.prototype.localeCompare` order (the process locale, as upstream sorts them).
 */
export function entriesFromTransfer(t) {
  const { kinds, modes, childStart, childEnd, hashes } = t;
  const entries = new Map();
  const n = kinds.length;
  if (n === 0) return entries;
  const names = t.names.split("\u0000");
  const targets = t.targets.length > 0 || kinds.includes(KIND_SYMLINK) ? t.targets.split("\u0000") : [];
  // Hash and target positions: the k-th file (symlink) in node order owns slot k.
  const slot = new Uint32Array(n);
  let files = 0;
  let links = 0;
  for (let i = 0; i < n; i += 1) {
    if (kinds[i] === KIND_FILE) slot[i] = files++;
    else if (kinds[i] === KIND_SYMLINK) slot[i] = links++;
  }
  const compare = new Intl.Collator().compare;
  const byName = (a, b) => compare(names[a], names[b]);
  // Each node's relative path, set when its parent is listed.
  const rels = Array.from({ length: n });
  // Pre-order: a stack of node ids, each directory's children pushed in reverse sorted order.
  const stack = new Uint32Array(n);
  let top = 0;
  const ids = [];
  const list = (start, end, prefix) => {
    for (let i = start; i < end; i += 1) rels[i] = prefix ? `${prefix}/${names[i]}` : names[i];
    if (end - start === 1) {
      stack[top++] = start;
      return;
    }
    // Native siblings arrive in byte order, as Node's readdir returns them; a stable sort by
    // the collator then breaks ties exactly as upstream's does.
    ids.length = 0;
    for (let i = start; i < end; i += 1) ids.push(i);
    ids.sort(byName);
    for (let k = ids.length - 1; k >= 0; k -= 1) stack[top++] = ids[k];
  };
  list(t.rootStart, t.rootEnd, "");
  while (top > 0) {
    const i = stack[--top];
    const kind = kinds[i];
    if (kind === KIND_DIR) {
      entries.set(rels[i], { kind: "dir" });
      if (childEnd[i] > childStart[i]) list(childStart[i], childEnd[i], rels[i]);
    } else if (kind === KIND_FILE) {
      const at = slot[i] * 64;
      entries.set(rels[i], { kind: "file", mode: modes[i], hash: hashes.slice(at, at + 64) });
    } else if (kind === KIND_SYMLINK) {
      entries.set(rels[i], { kind: "symlink", target: targets[slot[i]] });
    }
  }
  return entries;
}
