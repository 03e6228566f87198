//! Git's `wildmatch` semantics on bytes, written from its documented behaviour:
//!
//! - `\x` matches `x` literally; a trailing lone `\` never matches;
//! - `?` matches one byte (not `/` in path mode);
//! - `[...]` bracket expressions with `!`/`^` negation, ranges, `\` escapes and the POSIX
//!   classes `[:alpha:]` etc. (never `/` in path mode); an unterminated bracket never matches;
//! - `*` matches any run of bytes (not crossing `/` in path mode);
//! - in path mode, `**` that starts the pattern or follows `/` and ends it or precedes `/`
//!   crosses directories (`a/**/b` matches `a/b`, `a/x/b`, `a/x/y/b`); any other `**` is a `*`.
//!
//! Matching is byte-wise (a multi-byte UTF-8 character is several bytes for `?`), and
//! case-folding (for `core.ignoreCase`) folds ASCII only, as git does.
//!
//! Backtracking over several `*` is memoised, so a hostile pattern such as `*a*a*a*a*b`
//! cannot make a scan exponential.

/// Match flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// `WM_PATHNAME`: wildcards do not cross `/` (except the special `**`).
    pub pathname: bool,
    /// `WM_CASEFOLD`: ASCII case-insensitive.
    pub casefold: bool,
}

/// True when `text` matches `pattern` entirely.
pub fn wildmatch(pattern: &[u8], text: &[u8], flags: Flags) -> bool {
    // Only a pattern with two or more `*` runs can backtrack more than linearly.
    let star_runs = pattern.windows(2).filter(|w| w[0] != b'*' && w[1] == b'*').count()
        + usize::from(pattern.first() == Some(&b'*'));
    let mut m = Matcher { p: pattern, t: text, flags, memoize: star_runs >= 2, failed: None };
    m.run(0, 0)
}

struct Matcher<'a> {
    p: &'a [u8],
    t: &'a [u8],
    flags: Flags,
    memoize: bool,
    /// Lazily allocated memo of `(pattern index, text index)` pairs known not to match.
    failed: Option<Vec<u64>>,
}

fn fold(c: u8, casefold: bool) -> u8 {
    if casefold {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

impl Matcher<'_> {
    fn at(&self, i: usize) -> u8 {
        self.p.get(i).copied().unwrap_or(0)
    }

    fn memo_index(&self, pi: usize, ti: usize) -> usize {
        pi * (self.t.len() + 1) + ti
    }

    fn known_failure(&self, pi: usize, ti: usize) -> bool {
        match &self.failed {
            Some(bits) => {
                let i = self.memo_index(pi, ti);
                bits[i / 64] & (1 << (i % 64)) != 0
            }
            None => false,
        }
    }

    fn record_failure(&mut self, pi: usize, ti: usize) {
        if !self.memoize {
            return;
        }
        let cells = (self.p.len() + 1) * (self.t.len() + 1);
        let i = self.memo_index(pi, ti);
        let bits = self.failed.get_or_insert_with(|| vec![0u64; cells.div_ceil(64)]);
        bits[i / 64] |= 1 << (i % 64);
    }

    /// Match `p[pi..]` against `t[ti..]`.
    fn run(&mut self, mut pi: usize, mut ti: usize) -> bool {
        let casefold = self.flags.casefold;
        while pi < self.p.len() {
            let pc = self.p[pi];
            if ti == self.t.len() && pc != b'*' {
                return false;
            }
            match pc {
                b'\\' => {
                    // The escaped byte is compared as written (git does not fold it).
                    pi += 1;
                    if pi == self.p.len() || fold(self.t[ti], casefold) != self.p[pi] {
                        return false;
                    }
                    pi += 1;
                    ti += 1;
                }
                b'?' => {
                    if self.flags.pathname && self.t[ti] == b'/' {
                        return false;
                    }
                    pi += 1;
                    ti += 1;
                }
                b'[' => match self.bracket(pi, fold(self.t[ti], casefold)) {
                    Some(next) => {
                        pi = next;
                        ti += 1;
                    }
                    None => return false,
                },
                b'*' => return self.star(pi, ti),
                _ => {
                    if fold(self.t[ti], casefold) != fold(pc, casefold) {
                        return false;
                    }
                    pi += 1;
                    ti += 1;
                }
            }
        }
        ti == self.t.len()
    }

    /// A run of `*` at `pi`; the rest of the match is decided here.
    fn star(&mut self, pi: usize, ti: usize) -> bool {
        let mut after = pi;
        while after < self.p.len() && self.p[after] == b'*' {
            after += 1;
        }
        let double = after - pi >= 2;
        let match_slash = if !self.flags.pathname {
            true
        } else if double
            && (pi == 0 || self.p[pi - 1] == b'/')
            && (after == self.p.len()
                || self.p[after] == b'/'
                || (self.p[after] == b'\\' && self.at(after + 1) == b'/'))
        {
            // `**/` may also match no directory at all.
            if self.at(after) == b'/' && self.run(after + 1, ti) {
                return true;
            }
            true
        } else {
            false
        };
        let rest = &self.t[ti..];
        if after == self.p.len() {
            return match_slash || !rest.contains(&b'/');
        }
        if !match_slash && self.p[after] == b'/' {
            // One `*` before a `/` swallows exactly the rest of the current component.
            return match rest.iter().position(|&c| c == b'/') {
                Some(slash) => self.run(after, ti + slash),
                None => false,
            };
        }
        let mut k = ti;
        loop {
            if k == self.t.len() {
                // A non-empty remainder that starts with a non-`*` needs at least one byte.
                return false;
            }
            if !self.known_failure(after, k) {
                if self.run(after, k) {
                    return true;
                }
                self.record_failure(after, k);
            }
            if !match_slash && self.t[k] == b'/' {
                return false;
            }
            k += 1;
        }
    }

    /// A bracket expression starting at `pi` (the `[`) against byte `tc` (already folded).
    /// Returns the index after the closing `]` when it matches.
    fn bracket(&self, pi: usize, tc: u8) -> Option<usize> {
        let casefold = self.flags.casefold;
        let mut j = pi + 1;
        let mut c = self.at(j);
        if c == b'^' {
            c = b'!';
        }
        let negated = c == b'!';
        if negated {
            j += 1;
            c = self.at(j);
        }
        let mut prev: u8 = 0;
        let mut matched = false;
        loop {
            if j >= self.p.len() {
                return None;
            }
            if c == b'\\' {
                j += 1;
                c = self.at(j);
                if j >= self.p.len() {
                    return None;
                }
                if tc == c {
                    matched = true;
                }
            } else if c == b'-' && prev != 0 && j + 1 < self.p.len() && self.p[j + 1] != b']' {
                j += 1;
                c = self.p[j];
                if c == b'\\' {
                    j += 1;
                    if j >= self.p.len() {
                        return None;
                    }
                    c = self.p[j];
                }
                if tc <= c && tc >= prev {
                    matched = true;
                } else if casefold && tc.is_ascii_lowercase() {
                    let upper = tc.to_ascii_uppercase();
                    if upper <= c && upper >= prev {
                        matched = true;
                    }
                }
                c = 0;
            } else if c == b'[' && self.at(j + 1) == b':' {
                let s = j + 2;
                let mut k = s;
                while k < self.p.len() && self.p[k] != b']' {
                    k += 1;
                }
                if k >= self.p.len() {
                    return None;
                }
                if k < s + 1 || self.p[k - 1] != b':' {
                    // No `:]`: the `[` is an ordinary member.
                    c = b'[';
                    if tc == c {
                        matched = true;
                    }
                } else {
                    let class = &self.p[s..k - 1];
                    match class_matches(class, tc, casefold) {
                        Some(true) => matched = true,
                        Some(false) => {}
                        None => return None,
                    }
                    j = k;
                    c = 0;
                }
            } else if tc == c {
                matched = true;
            }
            prev = c;
            j += 1;
            c = self.at(j);
            if c == b']' && j < self.p.len() {
                break;
            }
        }
        if matched == negated || (self.flags.pathname && tc == b'/') {
            return None;
        }
        Some(j + 1)
    }
}

/// POSIX character classes with git's ASCII-only definitions; `None` for an unknown class.
fn class_matches(class: &[u8], c: u8, casefold: bool) -> Option<bool> {
    Some(match class {
        b"alnum" => c.is_ascii_alphanumeric(),
        b"alpha" => c.is_ascii_alphabetic(),
        b"blank" => c == b' ' || c == b'\t',
        b"cntrl" => c.is_ascii_control(),
        b"digit" => c.is_ascii_digit(),
        b"graph" => c.is_ascii_graphic(),
        b"lower" => c.is_ascii_lowercase(),
        b"print" => c.is_ascii_graphic() || c == b' ',
        b"punct" => c.is_ascii_punctuation(),
        b"space" => matches!(c, b' ' | b'\t' | b'\n' | b'\r'),
        b"upper" => c.is_ascii_uppercase() || (casefold && c.is_ascii_lowercase()),
        b"xdigit" => c.is_ascii_hexdigit(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str, t: &str) -> bool {
        wildmatch(p.as_bytes(), t.as_bytes(), Flags { pathname: true, casefold: false })
    }
    fn plain(p: &str, t: &str) -> bool {
        wildmatch(p.as_bytes(), t.as_bytes(), Flags::default())
    }

    #[test]
    fn basics() {
        assert!(path("foo", "foo"));
        assert!(!path("foo", "fo"));
        assert!(path("*.log", "a.log"));
        assert!(!path("*.log", "d/a.log"));
        assert!(plain("*.log", "d/a.log"));
        assert!(path("a/**/b", "a/b"));
        assert!(path("a/**/b", "a/x/y/b"));
        assert!(!path("a/**/b", "a/xb"));
        assert!(path("**/b", "b"));
        assert!(path("**/b", "x/y/b"));
        assert!(path("a/**", "a/x/y"));
        assert!(!path("a/**", "a"));
        assert!(path("a**b", "axxb"));
        assert!(!path("a**b", "ax/xb"));
        assert!(path("**b", "xb"));
        assert!(path("\\#x", "#x"));
        assert!(!path("x\\", "x"));
        assert!(path("[a-c]x", "bx"));
        assert!(!path("[!a-c]x", "bx"));
        assert!(path("[]a]", "]"));
        assert!(path("[[:digit:]]", "7"));
        assert!(!path("[[:bogus:]]", "7"));
        assert!(!path("[ab", "a"));
        assert!(!path("a?b", "a/b"));
        assert!(plain("a?b", "a/b"));
        assert!(path("*/b", "a/b"));
        assert!(!path("*/b", "a/c/b"));
    }

    #[test]
    fn hostile_pattern_is_not_exponential() {
        let text = "a".repeat(200);
        let pattern = "*a*a*a*a*a*a*a*a*a*a*b";
        let start = std::time::Instant::now();
        assert!(!path(pattern, &text));
        assert!(!plain(pattern, &text));
        assert!(start.elapsed().as_secs() < 2);
    }

    #[test]
    fn casefold() {
        let f = Flags { pathname: true, casefold: true };
        assert!(wildmatch(b"*.LOG", b"a.log", f));
        assert!(wildmatch(b"*.log", b"A.LOG", f));
        assert!(wildmatch(b"[A-Z]", b"q", f));
    }
}
