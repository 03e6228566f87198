// Seeded generators for differential tests. Every suite prints its seed on failure; rerun
// one with `DIFF_SEED=<seed>`.

/** A small, fast, seedable PRNG (mulberry32). */
export function createRandom(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n) => Math.floor(next() * n);
  const pick = (items) => items[int(items.length)];
  return { next, int, pick, chance: (p) => next() < p };
}

/** The seed for this run: `DIFF_SEED` when set, otherwise a fresh one. */
export function runSeed() {
  const fromEnv = process.env.DIFF_SEED;
  return fromEnv !== undefined && fromEnv !== "" ? Number(fromEnv) >>> 0 : (Date.now() ^ (process.pid << 8)) >>> 0;
}

// Characters that stress path and pattern handling: glob and regex metacharacters,
// separators, spaces, dots, accents, case pairs, non-BMP and (rarely) lone surrogates.
const SPICY = [
  "*",
  "?",
  "[",
  "]",
  "\\",
  "^",
  "$",
  "{",
  "}",
  "/",
  " ",
  ".",
  "-",
  "_",
  "~",
  "#",
  "!",
  "é",
  "É",
  "ß",
  "ı",
  "😀",
  "中",
];
const PLAIN = "abcxyzABC019".split("");

/** A random name segment (may be empty, have spaces at its ends, or hold metacharacters). */
export function randomSegment(rng, { allowSlash = false, allowLoneSurrogate = true } = {}) {
  const len = rng.int(6);
  let out = "";
  for (let i = 0; i < len; i += 1) {
    let ch = rng.chance(0.35) ? rng.pick(SPICY) : rng.pick(PLAIN);
    if (ch === "/" && !allowSlash) ch = "a";
    out += ch;
  }
  if (allowLoneSurrogate && rng.chance(0.01)) out += rng.chance(0.5) ? "\ud800" : "\udc00";
  if (rng.chance(0.05)) out = ` ${out}`;
  if (rng.chance(0.05)) out = `${out} `;
  return out;
}

/** A random POSIX relative path of 0 to 4 segments. */
export function randomRelativePath(rng) {
  const n = rng.int(5);
  const parts = [];
  for (let i = 0; i < n; i += 1)
    parts.push(rng.chance(0.5) ? rng.pick(["build", "node_modules", "a", "src", ".git", "dist"]) : randomSegment(rng));
  return parts.join("/");
}

/** A pattern of one of upstream's shapes, often built from parts of `relative` so it hits. */
export function randomPattern(rng, relative) {
  const parts = relative.split("/");
  const from = rng.int(parts.length);
  const to = from + rng.int(parts.length - from + 1);
  const core = rng.chance(0.7)
    ? parts.slice(from, Math.max(to, from + 1)).join("/")
    : randomSegment(rng, { allowSlash: true });
  switch (rng.int(8)) {
    case 0:
      return `*/${core}/*`;
    case 1:
      return `*/${core}`;
    case 2:
      return `${core}/*`;
    case 3:
      return rng.pick(["*/*", "*/", "/*", "*", "", "**", "*//*"]);
    case 4:
      return core.slice(0, rng.int(core.length + 1));
    default:
      return core;
  }
}
