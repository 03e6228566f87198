//! GNU tar's default `--exclude` matching, as `tar -c --exclude PAT` applies it to member
//! names while it creates an archive.
//!
//! This is *not* the upstream JavaScript matcher ([`crate::exclude`]): that one is literal and
//! root-anchored, while tar treats every value as an `fnmatch(3)` wildcard pattern, unanchored
//! at both ends. The rules reproduced here, verified against GNU tar 1.34 on glibc:
//!
//! * A pattern is tried against the member name (`src/build/x`, never a `./` prefix) and
//!   against every suffix that starts after a `/`, so `build` also matches `src/build`.
//! * `fnmatch` runs with `FNM_LEADING_DIR` and without `FNM_PATHNAME`/`FNM_PERIOD`: the pattern
//!   may stop at a `/` of the name (`build` matches `build/x`), `*`, `?` and bracket
//!   expressions match `/` too, and a leading dot needs no special care (`*` matches `.git`).
//! * `\` makes the next character literal; a trailing lone `\` never matches.
//! * `[...]` is a bracket expression: `!` or `^` negates, a leading `]` is a member, `a-z`
//!   ranges compare code points, `[:alpha:]`-style classes, `[=c=]` and `[.c.]` name single
//!   characters. An unterminated `[` is an ordinary character, with glibc's quirk that it
//!   matches nothing when the would-be set contains the character at hand.
//! * A pattern with no wildcard (`* ? [ ]`, an escaped one does not count) is a literal: tar
//!   unescapes it and looks whole `/`-separated runs of components up in a hash table. So
//!   `report\[1].csv` names the file `report[1].csv` exactly.
//! * A pattern ending in `/` (`build/`) matches nothing, since member names never end in one.
//!
//! Because the archiver skips an excluded directory entirely, matching a directory excludes
//! its whole subtree. `*/build/*` applied to `x/build/y` excludes the contents of `x/build`
//! while the directory entry `x/build` itself stays, exactly as in GNU tar.
//!
//! Matching is on Unicode scalar values, as glibc does in a UTF-8 locale (`C.UTF-8`,
//! `en_US.UTF-8`): `?` matches `é` as one character. Under the `C` locale GNU tar would match
//! bytes instead; member names here are always valid UTF-8.

use std::collections::HashSet;

/// The longest character-class name glibc accepts inside `[: :]`.
const CHAR_CLASS_MAX_LENGTH: usize = 256;

/// A set of `--exclude` patterns with GNU tar's default semantics.
///
/// ```
/// use paperclip_sync_core::tar::TarExcludeSet;
///
/// let set = TarExcludeSet::new(&["build", "*/cache/*", "secret\\[1].txt"]);
/// assert!(set.excludes("build"));
/// assert!(set.excludes("src/build/out.o"));
/// assert!(set.excludes("a/cache/file"));
/// assert!(!set.excludes("a/cache"));
/// assert!(set.excludes("secret[1].txt"));
/// assert!(!set.excludes("secret1.txt"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct TarExcludeSet {
    /// Wildcard-free patterns, unescaped (GNU's hash segment).
    literals: HashSet<String>,
    /// Patterns with wildcards.
    globs: Vec<Glob>,
}

impl TarExcludeSet {
    /// Compiles a list of `--exclude` values. Every string is a valid pattern, as for tar; a
    /// NUL character ends a pattern, as it would end a C argument.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Self {
        let mut set = TarExcludeSet::default();
        for pattern in patterns {
            set.push(pattern.as_ref());
        }
        set
    }

    /// Adds one more pattern.
    pub fn push(&mut self, pattern: &str) {
        let pattern = pattern.split('\0').next().unwrap_or_default();
        if has_wildcards(pattern) {
            self.globs.push(Glob::new(pattern));
        } else {
            self.literals.insert(unescape(pattern));
        }
    }

    /// True when no pattern was added.
    pub fn is_empty(&self) -> bool {
        self.literals.is_empty() && self.globs.is_empty()
    }

    /// True when GNU tar would skip the member `member_path` (a `/`-separated name relative to
    /// the archive root, without `./` and without a trailing `/`). The subtree of a skipped
    /// directory is skipped with it; that is the walker's business, not this function's.
    pub fn excludes(&self, member_path: &str) -> bool {
        (!self.literals.is_empty() && self.literal_match(member_path))
            || self.globs.iter().any(|glob| glob.matches(member_path))
    }

    /// Looks up every run of whole components (`b`, `b/c`, `a/b`, …) in the literal table.
    fn literal_match(&self, name: &str) -> bool {
        let mut start = 0;
        loop {
            let rest = &name[start..];
            // Longest run first, then drop one trailing component at a time.
            let mut end = rest.len();
            loop {
                if self.literals.contains(&rest[..end]) {
                    return true;
                }
                match rest[..end].rfind('/') {
                    Some(slash) => end = slash,
                    None => break,
                }
            }
            match rest.find('/') {
                Some(slash) => start += slash + 1,
                None => return false,
            }
        }
    }
}

/// gnulib's `fnmatch_pattern_has_wildcards` for tar's options: `* ? [ ]` outside an escape.
fn has_wildcards(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '*' | '?' | '[' | ']' => return true,
            _ => {}
        }
    }
    false
}

/// Drops each `\` that has a character after it (a trailing `\` stays), as gnulib does before
/// a literal pattern enters the hash table.
fn unescape(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// One wildcard pattern.
///
/// glibc 2.36 (Debian 12, where this was verified) matches a pattern twice in a multibyte
/// locale: over wide characters and, when that fails, over bytes. So `??` excludes `é` (two
/// bytes) and `?` excludes it too (one character). Both passes are reproduced; they only
/// differ when the pattern or the name is not ASCII.
#[derive(Debug, Clone)]
struct Glob {
    chars: Matcher,
    bytes: Matcher,
    ascii: bool,
    /// A run of literal characters every match contains; a cheap pre-filter.
    required: String,
}

impl Glob {
    fn new(pattern: &str) -> Self {
        let chars: Vec<char> = pattern.chars().collect();
        let required = longest_literal_run(&chars);
        Glob {
            chars: Matcher { pattern: chars, byte_mode: false },
            bytes: Matcher { pattern: pattern.bytes().map(char::from).collect(), byte_mode: true },
            ascii: pattern.is_ascii(),
            required,
        }
    }

    fn matches(&self, name: &str) -> bool {
        if !name.contains(self.required.as_str()) {
            return false;
        }
        self.chars.matches(name.chars())
            || (!(self.ascii && name.is_ascii()) && self.bytes.matches(name.bytes().map(char::from)))
    }
}

/// One `fnmatch` pass, over characters or (`byte_mode`) over bytes, each byte standing for
/// the `char` of the same value. It simulates every attempt at once: the states are
/// positions in the pattern, a fresh attempt starts at the name's start and after each `/`,
/// and an attempt that has consumed the whole pattern succeeds at the end of the name or just
/// before a `/` (`FNM_LEADING_DIR`).
#[derive(Debug, Clone)]
struct Matcher {
    pattern: Vec<char>,
    byte_mode: bool,
}

/// The outcome of one bracket expression against one character.
enum Bracket {
    /// The expression matched; matching continues at this pattern position.
    Matched(usize),
    /// No match (including glibc's ill-formed cases, which fail rather than error).
    Failed,
    /// The `[` is unterminated and the set did not contain the character: `[` is literal.
    Literal,
}

impl Matcher {
    /// The pattern character at `i`, with `\0` standing for the end (as in C).
    fn at(&self, i: usize) -> char {
        self.pattern.get(i).copied().unwrap_or('\0')
    }

    fn matches(&self, name: impl Iterator<Item = char>) -> bool {
        let accept = self.pattern.len();
        let mut current = StateSet::new(accept + 1);
        let mut next = StateSet::new(accept + 1);
        self.add_state(&mut current, 0);
        let mut name = name.peekable();
        while let Some(ch) = name.next() {
            if ch == '/' && current.contains(accept) {
                return true;
            }
            next.clear();
            for state in current.iter() {
                if state < accept {
                    self.step(state, ch, &mut next);
                }
            }
            // A new attempt after each `/` not followed by another `/`.
            if ch == '/' && name.peek() != Some(&'/') {
                self.add_state(&mut next, 0);
            }
            std::mem::swap(&mut current, &mut next);
        }
        current.contains(accept)
    }

    /// Adds `state` and, through any `*` there, the states after it (a star may match nothing).
    fn add_state(&self, set: &mut StateSet, mut state: usize) {
        set.insert(state);
        while self.pattern.get(state) == Some(&'*') {
            state += 1;
            set.insert(state);
        }
    }

    /// The states reached from `state` by consuming `ch`.
    fn step(&self, state: usize, ch: char, out: &mut StateSet) {
        match self.pattern[state] {
            '*' => self.add_state(out, state),
            '?' => self.add_state(out, state + 1),
            '\\' => {
                // A trailing backslash never matches.
                if let Some(&literal) = self.pattern.get(state + 1) {
                    if literal == ch {
                        self.add_state(out, state + 2);
                    }
                }
            }
            '[' => match self.bracket(state + 1, ch) {
                Bracket::Matched(next) => self.add_state(out, next),
                Bracket::Literal if ch == '[' => self.add_state(out, state + 1),
                Bracket::Literal | Bracket::Failed => {}
            },
            literal => {
                if literal == ch {
                    self.add_state(out, state + 1);
                }
            }
        }
    }

    /// Evaluates the bracket expression whose `[` is just before `start` against `ch`, the
    /// way glibc's `fnmatch` does: items are tried in order, and after a match the rest of the
    /// expression is skipped (which fails if the expression turns out to be unterminated).
    fn bracket(&self, start: usize, ch: char) -> Bracket {
        let mut p = start;
        let negated = matches!(self.at(p), '!' | '^');
        if negated {
            p += 1;
        }
        let mut c = self.at(p);
        p += 1;
        let matched = 'items: loop {
            // `c` is the current item's first character; `p` points after it.
            let low: char;
            if c == '\\' {
                if self.at(p) == '\0' {
                    return Bracket::Failed;
                }
                c = self.at(p);
                p += 1;
                match self.single_item(c, &mut p, ch) {
                    Some(item) => low = item,
                    None => break 'items true,
                }
            } else if c == '[' && self.at(p) == ':' {
                match self.class_item(&mut p, ch) {
                    ClassItem::Matched => break 'items true,
                    ClassItem::Failed => return Bracket::Failed,
                    ClassItem::NoMatch => {
                        c = self.at(p);
                        p += 1;
                        if c == ']' {
                            break 'items false;
                        }
                        continue;
                    }
                    ClassItem::NotAClass => match self.single_item('[', &mut p, ch) {
                        Some(item) => low = item,
                        None => break 'items true,
                    },
                }
            } else if c == '[' && self.at(p) == '=' {
                match self.equivalence_item(&mut p) {
                    Some(symbol) => {
                        if symbol == ch {
                            break 'items true;
                        }
                        c = self.at(p);
                        p += 1;
                        if c == ']' {
                            break 'items false;
                        }
                        continue;
                    }
                    None => match self.single_item('[', &mut p, ch) {
                        Some(item) => low = item,
                        None => break 'items true,
                    },
                }
            } else if c == '\0' {
                return Bracket::Literal;
            } else if c == '[' && self.at(p) == '.' {
                let Some(symbol) = self.collating_symbol(&mut p) else {
                    return Bracket::Failed;
                };
                // glibc's range test after a collating symbol does not exclude `-]`.
                let is_range = self.at(p) == '-' && self.at(p + 1) != '\0';
                if !is_range && symbol == ch {
                    break 'items true;
                }
                low = symbol;
            } else {
                match self.single_item(c, &mut p, ch) {
                    Some(item) => low = item,
                    None => break 'items true,
                }
            }

            // After a single character `low`: either a range `low-high` or the next item.
            c = self.at(p);
            p += 1;
            if c == '-' && self.at(p) != ']' {
                let mut high = self.at(p);
                p += 1;
                if high == '[' && self.at(p) == '.' {
                    match self.collating_symbol(&mut p) {
                        Some(symbol) => high = symbol,
                        None => return Bracket::Failed,
                    }
                } else {
                    if high == '\\' {
                        high = self.at(p);
                        p += 1;
                    }
                    if high == '\0' {
                        return Bracket::Failed;
                    }
                }
                if low <= ch && ch <= high {
                    break 'items true;
                }
                c = self.at(p);
                p += 1;
            }
            if c == ']' {
                break 'items false;
            }
        };

        if !matched {
            return if negated { Bracket::Matched(p) } else { Bracket::Failed };
        }
        match self.skip_bracket_rest(p) {
            Skip::Closed(next) if !negated => Bracket::Matched(next),
            Skip::Closed(_) | Skip::Failed => Bracket::Failed,
            Skip::Unterminated => Bracket::Literal,
        }
    }

    /// A plain item character `item` (already consumed): `None` when it matches `ch` on its
    /// own (it is not the start of a range), else `Some(item)` as a possible range start.
    fn single_item(&self, item: char, p: &mut usize, ch: char) -> Option<char> {
        let is_range = self.at(*p) == '-' && self.at(*p + 1) != '\0' && self.at(*p + 1) != ']';
        if !is_range && item == ch {
            return None;
        }
        Some(item)
    }

    /// `[:name:]` with `p` at the `:`.
    fn class_item(&self, p: &mut usize, ch: char) -> ClassItem {
        let colon = *p;
        let mut name = String::new();
        loop {
            if name.len() == CHAR_CLASS_MAX_LENGTH {
                return ClassItem::Failed;
            }
            *p += 1;
            let c = self.at(*p);
            if c == ':' && self.at(*p + 1) == ']' {
                *p += 2;
                break;
            }
            if !is_class_name_char(c) {
                *p = colon;
                return ClassItem::NotAClass;
            }
            name.push(c);
        }
        match char_class(&name, self.byte_mode) {
            None => ClassItem::Failed,
            Some(class) if class(ch) => ClassItem::Matched,
            Some(_) => ClassItem::NoMatch,
        }
    }

    /// `[=c=]` with `p` at the `=`: the character, with `p` after `=]`, or `None` (and `p`
    /// unchanged) when it is not one.
    fn equivalence_item(&self, p: &mut usize) -> Option<char> {
        let symbol = self.at(*p + 1);
        if symbol == '\0' || self.at(*p + 2) != '=' || self.at(*p + 3) != ']' {
            return None;
        }
        *p += 4;
        Some(symbol)
    }

    /// `[.c.]` with `p` at the first `.`: the single character it names, with `p` after `.]`;
    /// `None` for an unterminated or multi-character symbol (glibc fails the match then).
    fn collating_symbol(&self, p: &mut usize) -> Option<char> {
        let dot = *p;
        let mut len = 0;
        loop {
            *p += 1;
            let c = self.at(*p);
            if c == '.' && self.at(*p + 1) == ']' {
                *p += 2;
                break;
            }
            if c == '\0' {
                return None;
            }
            len += 1;
        }
        (len == 1).then(|| self.at(dot + 1))
    }

    /// After a matching item: skips to just past the closing `]`. Running into the end of
    /// the pattern makes the `[` an ordinary character after all (glibc 2.36; older versions
    /// failed the match instead).
    fn skip_bracket_rest(&self, mut p: usize) -> Skip {
        loop {
            let c = self.at(p);
            p += 1;
            match c {
                ']' => return Skip::Closed(p),
                '\0' => return Skip::Unterminated,
                '\\' => {
                    if self.at(p) == '\0' {
                        return Skip::Failed;
                    }
                    p += 1;
                }
                '[' if self.at(p) == ':' => {
                    // A well-formed `[:name:]` is skipped whole; anything else resumes at `:`.
                    let colon = p;
                    let mut q = p;
                    let mut count = 0;
                    p = loop {
                        q += 1;
                        count += 1;
                        if count == CHAR_CLASS_MAX_LENGTH {
                            return Skip::Failed;
                        }
                        if self.at(q) == ':' && self.at(q + 1) == ']' {
                            break q + 2;
                        }
                        if !is_class_name_char(self.at(q)) {
                            break colon;
                        }
                    };
                }
                '[' if self.at(p) == '=' => {
                    if self.at(p + 1) == '\0' || self.at(p + 2) != '=' || self.at(p + 3) != ']' {
                        return Skip::Failed;
                    }
                    p += 4;
                }
                '[' if self.at(p) == '.' => loop {
                    p += 1;
                    match self.at(p) {
                        '\0' => return Skip::Failed,
                        '.' if self.at(p + 1) == ']' => {
                            p += 2;
                            break;
                        }
                        _ => {}
                    }
                },
                _ => {}
            }
        }
    }
}

/// The end of a bracket expression after a matching item.
enum Skip {
    /// Just past the closing `]`.
    Closed(usize),
    /// No closing `]`: the `[` is literal.
    Unterminated,
    /// Ill-formed: no match.
    Failed,
}

/// Characters glibc lets into a class name: `a` to `y` (its test is `c < 'a' || c >= 'z'`).
fn is_class_name_char(c: char) -> bool {
    ('a'..='y').contains(&c)
}

/// The outcome of a `[:name:]` item.
enum ClassItem {
    Matched,
    NoMatch,
    /// An unknown class name, or one that is too long: glibc fails the whole match.
    Failed,
    /// Not shaped like a class: `[` is an ordinary item character.
    NotAClass,
}

/// The POSIX character classes, over Unicode as glibc's UTF-8 locales define them (close
/// enough: the ASCII answers are exact). In byte mode a byte above 0x7f is in no class.
fn char_class(name: &str, byte_mode: bool) -> Option<fn(char) -> bool> {
    if byte_mode {
        return Some(match name {
            "alnum" => |c: char| c.is_ascii_alphanumeric(),
            "alpha" => |c: char| c.is_ascii_alphabetic(),
            "blank" => |c| c == ' ' || c == '\t',
            "cntrl" => |c: char| c.is_ascii_control(),
            "digit" => |c: char| c.is_ascii_digit(),
            "graph" => |c: char| c.is_ascii_graphic(),
            "lower" => |c: char| c.is_ascii_lowercase(),
            "print" => |c: char| c.is_ascii_graphic() || c == ' ',
            "punct" => |c: char| c.is_ascii_punctuation(),
            "space" => |c: char| c.is_ascii_whitespace() || c == '\x0b',
            "upper" => |c: char| c.is_ascii_uppercase(),
            "xdigit" => |c: char| c.is_ascii_hexdigit(),
            _ => return None,
        });
    }
    Some(match name {
        "alnum" => char::is_alphanumeric,
        "alpha" => char::is_alphabetic,
        "blank" => |c| c == ' ' || c == '\t',
        "cntrl" => char::is_control,
        "digit" => |c: char| c.is_ascii_digit(),
        "graph" => |c: char| !c.is_control() && !c.is_whitespace(),
        "lower" => char::is_lowercase,
        "print" => |c: char| !c.is_control(),
        "punct" => |c: char| c.is_ascii_punctuation(),
        "space" => char::is_whitespace,
        "upper" => char::is_uppercase,
        "xdigit" => |c: char| c.is_ascii_hexdigit(),
        _ => return None,
    })
}

/// The longest run of literal characters that every match contains. Only the part of the
/// pattern before its first `[` is looked at, since what follows a `[` may belong to a
/// bracket expression.
fn longest_literal_run(pattern: &[char]) -> String {
    let end = pattern.iter().position(|&c| c == '[').unwrap_or(pattern.len());
    let mut best = String::new();
    let mut run = String::new();
    let mut i = 0;
    while i < end {
        match pattern[i] {
            '*' | '?' => {
                if run.len() > best.len() {
                    best = std::mem::take(&mut run);
                }
                run.clear();
            }
            '\\' if i + 1 < end => {
                run.push(pattern[i + 1]);
                i += 1;
            }
            '\\' => run.clear(),
            c => run.push(c),
        }
        i += 1;
    }
    if run.len() > best.len() {
        best = run;
    }
    best
}

/// A small bit set of pattern positions.
#[derive(Debug)]
struct StateSet {
    words: Vec<u64>,
}

impl StateSet {
    fn new(size: usize) -> Self {
        StateSet { words: vec![0; size.div_ceil(64)] }
    }

    fn insert(&mut self, state: usize) {
        self.words[state / 64] |= 1 << (state % 64);
    }

    fn contains(&self, state: usize) -> bool {
        self.words[state / 64] & (1 << (state % 64)) != 0
    }

    fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(index, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(index * 64 + bit)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(patterns: &[&str], member: &str) -> bool {
        TarExcludeSet::new(patterns).excludes(member)
    }

    /// The GNU tar column of upstream's exclude table, for named members (and for `./`
    /// names where the row says so).
    #[test]
    fn upstream_table_gnu_rows() {
        // `--exclude build`: unanchored, the whole subtree.
        for member in ["build", "build/x", "src/build", "src/build/y"] {
            assert!(ex(&["build"], member), "{member}");
        }
        assert!(!ex(&["build"], "builder"));
        assert!(!ex(&["build"], "src/rebuild"));
        // Unescaped brackets are a class; escaped they are literal.
        assert!(ex(&["secret[1].txt"], "secret1.txt"));
        assert!(!ex(&["secret[1].txt"], "secret[1].txt"));
        assert!(ex(&["secret\\[1].txt"], "secret[1].txt"));
        assert!(!ex(&["secret\\[1].txt"], "secret1.txt"));
        // `*` is a wildcard unless escaped.
        assert!(ex(&["x*y"], "x*y"));
        assert!(ex(&["x*y"], "xzy"));
        assert!(ex(&["x\\*y"], "x*y"));
        assert!(!ex(&["x\\*y"], "xzy"));
        // `^` and `$` are ordinary characters for GNU tar.
        assert!(ex(&["^lead"], "^lead"));
        assert!(!ex(&["^lead"], "lead"));
        assert!(ex(&["tail$"], "tail$"));
        assert!(!ex(&["tail$"], "tail"));
        // `*/build` with `.` archived matches `./build` and `./src/build`; with named
        // members a top-level `build` has no `/` before it.
        assert!(ex(&["*/build"], "./build"));
        assert!(ex(&["*/build"], "./src/build"));
        assert!(ex(&["*/build"], "src/build"));
        assert!(!ex(&["*/build"], "build"));
        // `*/build/*`: contents excluded, the directory entry stays.
        assert!(ex(&["*/build/*"], "./build/x"));
        assert!(ex(&["*/build/*"], "./src/build/y"));
        assert!(!ex(&["*/build/*"], "./build"));
        assert!(!ex(&["*/build/*"], "./src/build"));
        assert!(ex(&["*/build/*"], "x/build/y"));
        assert!(!ex(&["*/build/*"], "x/build"));
        assert!(!ex(&["*/build/*"], "build/y"), "named top-level build keeps its contents");
        // `._*` at any depth.
        assert!(ex(&["._*"], "._x"));
        assert!(ex(&["._*"], "src/deep/._y"));
        assert!(!ex(&["._*"], "src/a._y"));
        // `*` crosses `/`.
        assert!(ex(&["a*c"], "a/b/c"));
        assert!(ex(&["src*.log"], "src/x/y.log"));
    }

    #[test]
    fn the_heavy_directory_quartet() {
        let quartet = ["node_modules", "node_modules/*", "*/node_modules", "*/node_modules/*"];
        for member in ["node_modules", "node_modules/a", "pkg/node_modules", "pkg/node_modules/a/b"] {
            assert!(ex(&quartet, member), "{member}");
        }
        assert!(!ex(&quartet, "pkg/node_modules_old"));
        assert!(!ex(&quartet, "my_node_modules"));
    }

    #[test]
    fn literal_patterns_match_whole_component_runs() {
        assert!(ex(&["a/b"], "a/b"));
        assert!(ex(&["a/b"], "x/a/b/c"));
        assert!(!ex(&["a/b"], "xa/b"));
        assert!(!ex(&["a/b"], "a/bc"));
        // A trailing slash never matches a member name; a leading one neither.
        assert!(!ex(&["build/"], "build"));
        assert!(!ex(&["build/"], "build/x"));
        assert!(!ex(&["/build"], "build"));
        // Escapes are dropped from literals; a trailing backslash stays.
        assert!(ex(&["a\\b"], "ab"));
        assert!(!ex(&["a\\b"], "a\\b"));
        assert!(ex(&["a\\\\b"], "a\\b"));
        assert!(ex(&["a\\"], "a\\"));
        // `]` alone makes a pattern a wildcard one, where it is still literal.
        assert!(ex(&["a]"], "a]"));
        assert!(!ex(&[""], "a"));
    }

    #[test]
    fn wildcards_follow_fnmatch() {
        assert!(ex(&["?"], "a"));
        assert!(ex(&["?"], "é"), "one character, not one byte");
        assert!(ex(&["a?c"], "a/c"), "? matches a slash");
        assert!(ex(&["*.log"], "deep/dir/x.log"));
        assert!(ex(&[".*"], ".git"), "no special leading dot");
        assert!(ex(&["[a-c]x"], "bx"));
        assert!(!ex(&["[a-c]x"], "dx"));
        assert!(ex(&["[!a-c]x"], "dx"));
        assert!(ex(&["[^a-c]x"], "dx"));
        assert!(!ex(&["[^a-c]x"], "ax"));
        assert!(ex(&["[]]"], "]"));
        assert!(ex(&["[!]]"], "a"));
        assert!(ex(&["[a-]"], "-"));
        assert!(ex(&["[[:digit:]]x"], "7x"));
        assert!(!ex(&["[[:digit:]]x"], "ax"));
        assert!(!ex(&["[[:nope:]]x"], "ax"), "unknown class fails");
        assert!(ex(&["[[=a=]]"], "a"));
        assert!(ex(&["[[.-.]]"], "-"));
        assert!(ex(&["[\\]]"], "]"));
        assert!(ex(&["a\\?"], "a?"));
        assert!(!ex(&["a\\?"], "ab"));
        assert!(!ex(&["a*\\"], "a\\"), "a trailing backslash never matches");
        assert!(ex(&["a/"], "a/") || !ex(&["a/"], "a"));
    }

    #[test]
    fn unterminated_brackets_are_literal() {
        assert!(ex(&["[ab"], "[ab"));
        assert!(!ex(&["[ab"], "a"));
        assert!(ex(&["ab["], "ab["));
        // glibc 2.36 (unlike older versions) also takes `[` literally when the would-be set
        // contains the character at hand.
        assert!(ex(&["[[ab"], "[[ab"));
        assert!(!ex(&["[[ab"], "[ab"));
        assert!(ex(&[".git/[["], "x/.git/[["));
        assert!(ex(&["*["], "ab["));
    }

    #[test]
    fn multibyte_names_match_by_character_and_by_byte() {
        // glibc 2.36 in a UTF-8 locale: the wide-character pass or the byte pass.
        assert!(ex(&["?"], "é"));
        assert!(ex(&["??"], "é"));
        assert!(!ex(&["???"], "é"));
        assert!(ex(&["?[é]"], "é"), "byte pass: ? takes 0xc3, [é] holds 0xa9");
        assert!(!ex(&["?é"], "é"));
        assert!(ex(&["[é-ü]"], "ö"));
    }

    #[test]
    fn leading_dir_and_start_positions() {
        // Matching may end before any `/` and start after any `/`.
        assert!(ex(&["b*"], "a/bc/d"));
        assert!(ex(&["a/b?"], "x/a/bc/d"));
        assert!(!ex(&["a/b?"], "x/a/bcd"));
        assert!(ex(&["*/x"], "a/b/x/c"));
    }

    /// Differential test against the real GNU tar: random trees with hostile names, random
    /// exclude lists, `tar -c --exclude … | tar -t` versus this matcher and a walk.
    #[test]
    fn differential_against_gnu_tar() {
        use crate::tar::testutil::*;
        if !have_gnu_tar("differential_against_gnu_tar") {
            return;
        }
        let cases = case_count(300);
        let base_seed = std::env::var("PAPERCLIP_TAR_SEED").ok().and_then(|s| s.parse().ok());
        for case in 0..cases {
            let seed = base_seed.unwrap_or(0x5eed_0000) + case;
            let mut rng = Rng::new(seed);
            let dir = TempDir::new("exclude-diff");
            let paths = build_tree(&mut rng, dir.path(), &TreeOptions::default());
            let excludes = random_excludes(&mut rng, &paths);
            let names = crate::walk::sorted_names(dir.path()).unwrap();
            let archive = gnu_tar_create_plain(dir.path(), &excludes, &names);
            let expected = gnu_list(&archive);
            let set = TarExcludeSet::new(&excludes);
            let mut ours = Vec::new();
            for name in &names {
                walk_expected(&set, dir.path(), name, &mut ours);
            }
            ours.sort();
            assert_eq!(ours, expected, "seed {seed}: excludes {excludes:?}");
        }
    }

    /// `tar -c` of named members with exactly these excludes (no implicit `._*`).
    fn gnu_tar_create_plain(root: &std::path::Path, excludes: &[String], names: &[String]) -> Vec<u8> {
        use crate::tar::testutil::*;
        let mut command = tar_command("tar");
        command.args(["-c", "--no-xattrs", "--no-unquote", "-f", "-", "-C"]).arg(root);
        for exclude in excludes {
            command.arg("--exclude").arg(exclude);
        }
        command.arg("--").args(names);
        run_with_input(command, b"")
    }

    fn walk_expected(set: &TarExcludeSet, root: &std::path::Path, member: &str, out: &mut Vec<String>) {
        if set.excludes(member) {
            return;
        }
        let path = root.join(member);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            out.push(format!("{member}/"));
            for child in crate::walk::sorted_names(&path).unwrap() {
                walk_expected(set, root, &format!("{member}/{child}"), out);
            }
        } else {
            out.push(member.to_owned());
        }
    }
}
