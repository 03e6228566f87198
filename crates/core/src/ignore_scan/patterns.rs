//! Ignore patterns as git reads and applies them (`.gitignore`, `info/exclude`,
//! `core.excludesFile`): file parsing, pattern flags, and first-match-from-the-end lookup.

use super::wildmatch::{wildmatch, Flags};

/// A pattern file larger than this is skipped by git (`PATTERN_MAX_FILE_SIZE`).
pub const PATTERN_MAX_FILE_SIZE: u64 = 100 * 1024 * 1024;

/// The kind of a path being matched, as far as patterns care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    /// Regular files, symlinks (never followed) and anything else.
    NotDir,
}

#[derive(Debug, Clone)]
struct Pattern {
    /// The pattern text: without a leading `!` and without the trailing `/` of a
    /// directory-only pattern.
    text: Box<[u8]>,
    /// Length of the leading part without glob specials (`*?[\`).
    literal_len: usize,
    negative: bool,
    must_be_dir: bool,
    /// No `/` in the pattern (trailing one aside): matched against the basename only.
    basename_only: bool,
    /// `*literal`: a suffix comparison is enough.
    ends_with: bool,
}

/// The patterns of one source, with the directory they apply under.
#[derive(Debug, Clone, Default)]
pub struct PatternList {
    /// Directory of the `.gitignore`, toplevel-relative, with a trailing `/` (empty at the top).
    base: Box<[u8]>,
    patterns: Vec<Pattern>,
}

fn is_glob_special(c: u8) -> bool {
    matches!(c, b'*' | b'?' | b'[' | b'\\')
}

fn literal_len(s: &[u8]) -> usize {
    s.iter().position(|&c| is_glob_special(c)).unwrap_or(s.len())
}

/// Drop unescaped trailing spaces (not tabs); `\ ` keeps its space.
fn trim_trailing_spaces(line: &[u8]) -> &[u8] {
    let mut last_space: Option<usize> = None;
    let mut i = 0;
    while i < line.len() {
        match line[i] {
            b' ' => {
                if last_space.is_none() {
                    last_space = Some(i);
                }
            }
            b'\\' => {
                i += 1;
                if i == line.len() {
                    return line;
                }
                last_space = None;
            }
            _ => last_space = None,
        }
        i += 1;
    }
    match last_space {
        Some(end) => &line[..end],
        None => line,
    }
}

impl PatternList {
    /// Parse the contents of a pattern file that applies under `base` (toplevel-relative
    /// directory with a trailing `/`, or empty).
    pub fn parse(base: &[u8], contents: &[u8]) -> PatternList {
        let mut list = PatternList { base: base.into(), patterns: Vec::new() };
        let contents = contents.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(contents);
        let mut rest = contents;
        while !rest.is_empty() {
            let (line, next) = match rest.iter().position(|&c| c == b'\n') {
                Some(nl) => (&rest[..nl], &rest[nl + 1..]),
                None => (rest, &rest[rest.len()..]),
            };
            rest = next;
            if line.is_empty() || line[0] == b'#' {
                continue;
            }
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            // Git works on C strings: a NUL ends the line.
            let line = match line.iter().position(|&c| c == 0) {
                Some(nul) => &line[..nul],
                None => line,
            };
            list.add(trim_trailing_spaces(line));
        }
        list
    }

    fn add(&mut self, raw: &[u8]) {
        let (negative, p) = match raw.strip_prefix(b"!") {
            Some(p) => (true, p),
            None => (false, raw),
        };
        let (must_be_dir, text) = match p.strip_suffix(b"/") {
            Some(t) => (true, t),
            None => (false, p),
        };
        let basename_only = !text.contains(&b'/');
        // Git decides `*literal` on the text including a directory-only pattern's `/`.
        let ends_with = p.first() == Some(&b'*') && literal_len(&p[1..]) == p.len() - 1;
        self.patterns.push(Pattern {
            text: text.into(),
            literal_len: literal_len(p).min(text.len()),
            negative,
            must_be_dir,
            basename_only,
            ends_with,
        });
    }

    /// The last pattern matching `path` (toplevel-relative, no trailing slash), as
    /// `Some(excluded)`, or `None` when no pattern of this list matches.
    pub fn last_match(&self, path: &[u8], basename_at: usize, kind: Kind, casefold: bool) -> Option<bool> {
        let basename = &path[basename_at..];
        for pattern in self.patterns.iter().rev() {
            if pattern.must_be_dir && kind != Kind::Dir {
                continue;
            }
            let hit = if pattern.basename_only {
                match_basename(pattern, basename, casefold)
            } else {
                match_pathname(pattern, &self.base, path, casefold)
            };
            if hit {
                return Some(!pattern.negative);
            }
        }
        None
    }
}

fn eq_bytes(a: &[u8], b: &[u8], casefold: bool) -> bool {
    if casefold {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

fn match_basename(pattern: &Pattern, basename: &[u8], casefold: bool) -> bool {
    let text = &pattern.text[..];
    if pattern.literal_len == text.len() {
        eq_bytes(text, basename, casefold)
    } else if pattern.ends_with {
        let suffix = &text[1..];
        suffix.len() <= basename.len() && eq_bytes(suffix, &basename[basename.len() - suffix.len()..], casefold)
    } else {
        wildmatch(text, basename, Flags { pathname: false, casefold })
    }
}

fn match_pathname(pattern: &Pattern, base: &[u8], path: &[u8], casefold: bool) -> bool {
    let mut text = &pattern.text[..];
    let mut literal = pattern.literal_len;
    if text.first() == Some(&b'/') {
        text = &text[1..];
        literal -= 1;
    }
    // `base` carries its trailing slash; the path must lie strictly under it.
    let name = if base.is_empty() {
        path
    } else {
        if path.len() < base.len() || !eq_bytes(&path[..base.len()], base, casefold) {
            return false;
        }
        &path[base.len()..]
    };
    let (mut text, mut name) = (text, name);
    if literal > 0 {
        if literal > name.len() || !eq_bytes(&text[..literal], &name[..literal], casefold) {
            return false;
        }
        text = &text[literal..];
        name = &name[literal..];
        if text.is_empty() && name.is_empty() {
            return true;
        }
    }
    wildmatch(text, name, Flags { pathname: true, casefold })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(list: &PatternList, path: &str, kind: Kind) -> Option<bool> {
        let at = path.rfind('/').map_or(0, |i| i + 1);
        list.last_match(path.as_bytes(), at, kind, false)
    }

    #[test]
    fn parsing_rules() {
        let l =
            PatternList::parse(b"", b"\xEF\xBB\xBF*.log\r\n!keep.log\n# c\n\\#hash\ntrail   \nesc\\ \n/anch\ndir/\n");
        assert_eq!(m(&l, "a.log", Kind::NotDir), Some(true));
        assert_eq!(m(&l, "x/keep.log", Kind::NotDir), Some(false));
        assert_eq!(m(&l, "#hash", Kind::NotDir), Some(true));
        assert_eq!(m(&l, "trail", Kind::NotDir), Some(true));
        assert_eq!(m(&l, "esc ", Kind::NotDir), Some(true));
        assert_eq!(m(&l, "anch", Kind::NotDir), Some(true));
        assert_eq!(m(&l, "x/anch", Kind::NotDir), None);
        assert_eq!(m(&l, "x/dir", Kind::Dir), Some(true));
        assert_eq!(m(&l, "x/dir", Kind::NotDir), None);
    }

    #[test]
    fn base_scoping() {
        let l = PatternList::parse(b"sub/", b"/a\nb/c\n**/d\n");
        assert_eq!(m(&l, "sub/a", Kind::NotDir), Some(true));
        assert_eq!(m(&l, "a", Kind::NotDir), None);
        assert_eq!(m(&l, "sub/b/c", Kind::NotDir), Some(true));
        assert_eq!(m(&l, "sub/x/d", Kind::NotDir), Some(true));
        assert_eq!(m(&l, "subx/d", Kind::NotDir), None);
    }
}
