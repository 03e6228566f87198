//! The total upstream's SSH upload progress reports against (its `estimateLocalDirSize`):
//! the sum of the sizes of the regular files below the directory, with `._*` and the
//! `exclude` values matched as upstream's simplified patterns (a literal where `*` is any
//! run of characters but `/` and `?` one character but `/`, anchored at both ends) against
//! each entry's relative path and against its name; an excluded directory is not entered.
//! With `follow_symlinks`, links are `stat`ed and followed (a file counts its target's
//! size, a directory is walked), as upstream does; an entry that cannot be read or
//! `stat`ed counts nothing. The progress lines of our upload then show upstream's figures
//! for the same tree, not the archive's size.
//!
//! Matching works on UTF-16 code units, as JavaScript's regular expressions do (`?` is one
//! unit, so half of a character outside the Basic Multilingual Plane).

use std::path::Path;
use std::sync::atomic::AtomicBool;

use crate::error::Result;
use crate::reserved::OnReserved;
use crate::walk::{self, join_like_node, Kind, ReaddirErrors, WalkOptions};

/// Threads of the estimate's walk (it runs beside the transfer).
const THREADS: usize = 2;

/// One pattern in UTF-16 code units.
struct Pattern(Vec<u16>);

impl Pattern {
    /// Whether the pattern matches all of `text`.
    fn matches(&self, text: &[u16]) -> bool {
        const STAR: u16 = b'*' as u16;
        const ANY: u16 = b'?' as u16;
        const SLASH: u16 = b'/' as u16;
        let p = &self.0;
        // reach[j]: the first i units of the pattern match the first j units of the text.
        let mut reach = vec![false; text.len() + 1];
        reach[0] = true;
        for &unit in p {
            let mut next = vec![false; text.len() + 1];
            if unit == STAR {
                for j in 0..=text.len() {
                    next[j] = reach[j] || (j > 0 && next[j - 1] && text[j - 1] != SLASH);
                }
            } else {
                for j in 1..=text.len() {
                    let c = text[j - 1];
                    next[j] = reach[j - 1] && (if unit == ANY { c != SLASH } else { c == unit });
                }
            }
            reach = next;
        }
        reach[text.len()]
    }
}

/// Upstream's exclusion test: `pattern` against the relative path or the name.
fn excluded(patterns: &[Pattern], rel: &str) -> bool {
    let path: Vec<u16> = rel.encode_utf16().collect();
    let name: Vec<u16> = rel.rsplit('/').next().unwrap_or(rel).encode_utf16().collect();
    patterns.iter().any(|p| p.matches(&path) || p.matches(&name))
}

/// The estimate for `root` (see the module documentation). `None` when the root itself
/// cannot be walked (upstream's total is then 0, which it reports as unknown).
pub fn upload_estimate(root: &Path, exclude: &[String], follow_symlinks: bool, cancel: &AtomicBool) -> Result<u64> {
    let patterns: Vec<Pattern> = std::iter::once("._*")
        .chain(exclude.iter().map(String::as_str))
        .map(|p| Pattern(p.encode_utf16().collect()))
        .collect();
    walk_below(root, "", &patterns, follow_symlinks, cancel)
}

/// The sum for the directory `dir`, whose entries are `prefix/<name>` to the patterns.
fn walk_below(dir: &Path, prefix: &str, patterns: &[Pattern], follow: bool, cancel: &AtomicBool) -> Result<u64> {
    let full = |rel: &str| if prefix.is_empty() { rel.to_string() } else { format!("{prefix}/{rel}") };
    let skip = |rel: &str| excluded(patterns, &full(rel));
    let tree = walk::walk(&WalkOptions {
        root: dir,
        threads: THREADS,
        readdir_errors: ReaddirErrors::TreatAsEmpty,
        skip: &skip,
        descend: &|_| true,
        read_link_targets: false,
        inline_file: None,
        // Our own staging is never packed, so it is not counted either.
        on_reserved: OnReserved::Skip,
        cancel,
    })?;
    let mut total = 0u64;
    for node in &tree.nodes {
        match node.stat.kind {
            Kind::File => total += node.stat.size,
            Kind::Symlink if follow => {
                let path = join_like_node(dir, &node.rel);
                match std::fs::metadata(&path) {
                    Ok(meta) if meta.is_file() => total += meta.len(),
                    // A linked directory is walked like any other (a cycle ends where the
                    // system refuses the path, as upstream's walk does).
                    Ok(meta) if meta.is_dir() => {
                        total += walk_below(&path, &full(&node.rel), patterns, follow, cancel).unwrap_or(0)
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn pattern(p: &str) -> Pattern {
        Pattern(p.encode_utf16().collect())
    }

    fn matches(p: &str, t: &str) -> bool {
        pattern(p).matches(&t.encode_utf16().collect::<Vec<_>>())
    }

    #[test]
    fn patterns_follow_upstreams_regular_expressions() {
        assert!(matches("._*", "._x"));
        assert!(!matches("._*", "a/._x"));
        assert!(matches("node_modules", "node_modules"));
        assert!(!matches("node_modules", "a/node_modules"));
        assert!(matches("*/node_modules/*", "a/node_modules/b"));
        assert!(!matches("*/node_modules/*", "a/b/node_modules/c"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "a/c"));
        assert!(matches("[x].txt", "[x].txt"));
        assert!(!matches("[x].txt", "x.txt"));
        assert!(matches("**", "abc"));
        assert!(matches("*", ""));
        // `?` is one UTF-16 unit: a character outside the BMP takes two.
        assert!(!matches("?", "😀"));
        assert!(matches("??", "😀"));
    }

    #[test]
    fn sums_regular_files_as_upstream_walks() {
        let dir = std::env::temp_dir().join(format!("pc-estimate-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("src/deep")).unwrap();
        fs::create_dir_all(dir.join("node_modules/x")).unwrap();
        fs::write(dir.join("a.txt"), vec![1; 100]).unwrap();
        fs::write(dir.join("._a.txt"), vec![1; 7]).unwrap();
        fs::write(dir.join("src/deep/b.txt"), vec![1; 1000]).unwrap();
        fs::write(dir.join("src/._b"), vec![1; 5]).unwrap(); // `._*` matches the name anywhere
        fs::write(dir.join("node_modules/x/c.js"), vec![1; 50]).unwrap();
        std::os::unix::fs::symlink("a.txt", dir.join("link")).unwrap();
        std::os::unix::fs::symlink("src", dir.join("srclink")).unwrap();
        let cancel = AtomicBool::new(false);
        assert_eq!(upload_estimate(&dir, &[], false, &cancel).unwrap(), 1150);
        assert_eq!(upload_estimate(&dir, &["node_modules".into()], false, &cancel).unwrap(), 1100);
        // Followed: the linked file and the linked directory's file count again.
        assert_eq!(upload_estimate(&dir, &["node_modules".into()], true, &cancel).unwrap(), 1100 + 100 + 1000);
        fs::remove_dir_all(&dir).unwrap();
    }
}
