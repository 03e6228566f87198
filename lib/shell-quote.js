// POSIX shell quoting, the one copy both lanes and what they share use (upstream's
// `shellQuote`). Internal: not part of the package's exports.

/** `value` as one single-quoted POSIX shell word, as upstream's `shellQuote`: `it's` → `'it'"'"'s'`. */
export function shellQuote(value) {
  return `'${value.replace(/'/g, `'"'"'`)}'`;
}
