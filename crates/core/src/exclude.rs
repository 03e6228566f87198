//! The upstream exclude matcher (`exclude-patterns.ts` of `@paperclipai/adapter-utils`)
//! and the tar-exclude escaping helpers (`sandbox-managed-runtime.ts`).
//!
//! Every function here is generic over the string's unit type so that one matcher serves
//! both callers: the native walks match UTF-8 bytes (`&[u8]`), and the JS binding matches
//! UTF-16 code units (`&[u16]`) so that any JS string, ill-formed ones included, gives
//! exactly the answer the upstream JavaScript gives. The operations are pure prefix,
//! suffix, infix and equality tests, for which UTF-8 bytes and UTF-16 units agree on every
//! well-formed string.

/// The unit types a path may be matched as: UTF-8 bytes or UTF-16 code units.
pub trait Unit: Copy + Eq {
    /// `/`
    const SLASH: Self;
    /// `*`
    const STAR: Self;
    /// `?`
    const QUESTION: Self;
    /// `[`
    const BRACKET: Self;
    /// `\`
    const BACKSLASH: Self;
}

impl Unit for u8 {
    const SLASH: u8 = b'/';
    const STAR: u8 = b'*';
    const QUESTION: u8 = b'?';
    const BRACKET: u8 = b'[';
    const BACKSLASH: u8 = b'\\';
}

impl Unit for u16 {
    const SLASH: u16 = b'/' as u16;
    const STAR: u16 = b'*' as u16;
    const QUESTION: u16 = b'?' as u16;
    const BRACKET: u16 = b'[' as u16;
    const BACKSLASH: u16 = b'\\' as u16;
}

/// `relative === candidate || relative.startsWith(candidate + "/")`.
pub fn is_relative_path_or_descendant<U: Unit>(relative: &[U], candidate: &[U]) -> bool {
    relative == candidate || starts_with_then_slash(relative, candidate)
}

/// `haystack.startsWith(prefix + "/")`.
fn starts_with_then_slash<U: Unit>(haystack: &[U], prefix: &[U]) -> bool {
    haystack.len() > prefix.len() && haystack.starts_with(prefix) && haystack[prefix.len()] == U::SLASH
}

/// `haystack.endsWith("/" + suffix)`.
fn ends_with_slash_then<U: Unit>(haystack: &[U], suffix: &[U]) -> bool {
    haystack.len() > suffix.len()
        && haystack.ends_with(suffix)
        && haystack[haystack.len() - suffix.len() - 1] == U::SLASH
}

/// `haystack.includes("/" + needle + "/")`.
fn contains_slash_delimited<U: Unit>(haystack: &[U], needle: &[U]) -> bool {
    let window = needle.len() + 2;
    haystack.len() >= window
        && haystack
            .windows(window)
            .any(|w| w[0] == U::SLASH && w[window - 1] == U::SLASH && &w[1..window - 1] == needle)
}

/// True when `relative` is `segment`, starts with `segment/`, ends with `/segment` or
/// contains `/segment/` (the `*/…` pattern forms).
fn contains_segment_or_descendant<U: Unit>(relative: &[U], segment: &[U]) -> bool {
    relative == segment
        || starts_with_then_slash(relative, segment)
        || ends_with_slash_then(relative, segment)
        || contains_slash_delimited(relative, segment)
}

/// Upstream `excludePatternMatches(relative, pattern)`: `*/X/*` and `*/X` match the segment
/// `X` anywhere (and its descendants), `X/*` matches the descendants of the root-anchored
/// `X`, and anything else is a literal, root-anchored path-or-descendant match. Glob
/// characters are literal.
pub fn exclude_pattern_matches<U: Unit>(relative: &[U], pattern: &[U]) -> bool {
    let star_slash = pattern.len() >= 2 && pattern[0] == U::STAR && pattern[1] == U::SLASH;
    let slash_star =
        pattern.len() >= 2 && pattern[pattern.len() - 2] == U::SLASH && pattern[pattern.len() - 1] == U::STAR;
    if star_slash && slash_star {
        // JS `slice(2, -2)`: empty when the pattern is shorter than four units.
        let segment: &[U] = if pattern.len() >= 4 { &pattern[2..pattern.len() - 2] } else { &[] };
        return contains_segment_or_descendant(relative, segment);
    }
    if star_slash {
        return contains_segment_or_descendant(relative, &pattern[2..]);
    }
    if slash_star {
        return starts_with_then_slash(relative, &pattern[..pattern.len() - 2]);
    }
    is_relative_path_or_descendant(relative, pattern)
}

/// Upstream `shouldExcludePath(relative, exclude)`: true when any entry matches.
pub fn should_exclude_path<'p, U: Unit + 'p>(relative: &[U], exclude: impl IntoIterator<Item = &'p [U]>) -> bool {
    exclude.into_iter().any(|pattern| exclude_pattern_matches(relative, pattern))
}

/// Upstream `escapeTarExcludeLiteral(entry)`: double every backslash, then put a backslash
/// before each `*`, `?` and `[`, so GNU tar and bsdtar read the entry as a literal name.
pub fn escape_tar_exclude_literal<U: Unit>(entry: &[U]) -> Vec<U> {
    let mut out = Vec::with_capacity(entry.len() + 4);
    for &unit in entry {
        if unit == U::BACKSLASH || unit == U::STAR || unit == U::QUESTION || unit == U::BRACKET {
            out.push(U::BACKSLASH);
        }
        out.push(unit);
    }
    out
}

/// Upstream `mergeExcludes(...groups)`: the groups concatenated in order, skipping absent
/// ones, with duplicates removed (the first occurrence wins).
pub fn merge_excludes<T: Clone + Eq + std::hash::Hash>(groups: &[Option<Vec<T>>]) -> Vec<T> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for item in groups.iter().flatten().flatten() {
        if seen.insert(item) {
            out.push(item.clone());
        }
    }
    out
}

/// `GIT_ARCHIVE_EXCLUDES` of upstream `git-workspace-sync.ts`.
pub const GIT_ARCHIVE_EXCLUDES: [&str; 2] = [".git", ".git/*"];

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rel: &str, pat: &str) -> bool {
        let a = exclude_pattern_matches(rel.as_bytes(), pat.as_bytes());
        let r16: Vec<u16> = rel.encode_utf16().collect();
        let p16: Vec<u16> = pat.encode_utf16().collect();
        assert_eq!(a, exclude_pattern_matches(&r16, &p16), "utf8/utf16 disagree on {rel:?} {pat:?}");
        a
    }

    #[test]
    fn upstream_verified_cases() {
        // Cases checked against upstream's published `exclude-patterns` code.
        assert!(!m("src/build", "build"));
        assert!(m("build/x", "build"));
        assert!(m("node_modules/x", "*/node_modules"));
        assert!(!m("dist", "dist/*"));
        assert!(m("dist/a", "dist/*"));
        assert!(!m("report[1].csv", "report\\[1].csv"));
    }

    #[test]
    fn segment_forms() {
        for pat in ["*/node_modules", "*/node_modules/*"] {
            assert!(m("node_modules", pat));
            assert!(m("a/node_modules", pat));
            assert!(m("a/node_modules/b", pat));
            assert!(!m("a/node_modulesx/b", pat));
            assert!(!m("xnode_modules", pat));
        }
        // `*/*`: the segment is empty, so only "", "/…", "…/" and "…//…" match.
        assert!(m("", "*/*"));
        assert!(m("a//b", "*/*"));
        assert!(!m("a/b", "*/*"));
        // `*/` (pattern of two units) is both forms at once: the segment is empty.
        assert!(m("a/", "*/"));
        assert!(!m("a", "*/"));
        // a three-unit `*/*`-like overlap: "*/*" has len 3, slice(2,-2) is "".
        assert!(!m("abc", "*/*"));
    }

    #[test]
    fn literal_forms() {
        assert!(m("", ""));
        assert!(!m("a", ""));
        assert!(m("/a", ""));
        assert!(m("*.log", "*.log"));
        assert!(!m("x.log", "*.log"));
        assert!(m("a/b/c", "a/b"));
        assert!(!m("a/bc", "a/b"));
        assert!(should_exclude_path(b"a/b", [&b"x"[..], b"a"]));
        assert!(!should_exclude_path::<u8>(b"a/b", []));
    }

    #[test]
    fn escape_and_merge() {
        let e = |s: &str| String::from_utf8(escape_tar_exclude_literal(s.as_bytes())).unwrap();
        assert_eq!(e("secret[1].txt"), "secret\\[1].txt");
        assert_eq!(e("wildcard*name"), "wildcard\\*name");
        assert_eq!(e("question?mark"), "question\\?mark");
        assert_eq!(e("a\\b"), "a\\\\b");
        assert_eq!(e("a\\*"), "a\\\\\\*");
        assert_eq!(e("^x$]{}-"), "^x$]{}-");
        let merged = merge_excludes(&[Some(vec!["a", "b"]), None, Some(vec!["b", "c", "a"]), Some(vec![])]);
        assert_eq!(merged, vec!["a", "b", "c"]);
    }
}
