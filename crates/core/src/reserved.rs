//! The one list of names this library reserves inside a user's tree, and the one predicate
//! over it. Every path that needs them uses these: the walks skip a reserved name (so our
//! own staging never enters a snapshot, a pack or a merge), the sweep recognises its
//! staging directories by them ([`crate::staging`]), and every untrusted source refuses
//! them at any depth with [`codes::UNSAFE_ARCHIVE_ENTRY`]: archive members (extraction from
//! a file or a stream, an SSH pull, a sandbox restore), a merge's source tree, a mirror's
//! source. A name we act on can therefore only be one we created.
//!
//! The reserved names:
//!
//! * the staging directories, `<prefix><pid>-<start>-<nonce>` for the prefixes of [`Kind`]
//!   (the current form's nonce is 32 hex digits: 16 random ones and a 16-digit keyed tag, see
//!   [`crate::staging`]), and the earlier forms the sweep still recognises: `<pid>-<start>-`
//!   and 16 hex digits; 32 hex digits (extraction and merge); 6 `mkdtemp` characters (pull);
//! * [`KEY_FILE`], the name of the file holding the per-host key that tags staging names
//!   (it lives outside every workspace, but a workspace may contain its directory).
//!
//! [`JOURNAL`], [`JOURNAL_TMP`] and [`TREE`] are names inside a staging directory only; they
//! are protected by their parent's name and are ordinary names anywhere else. Only our exact
//! forms are reserved: a user's `.paperclip-merge-notes` is an ordinary file.

use crate::error::{codes, Error};

/// Prefix of an extraction's staging directory.
pub const EXTRACT_PREFIX: &str = ".paperclip-extract-";
/// Prefix of an SSH pull's staging directory.
pub const PULL_PREFIX: &str = ".paperclip-ssh-sync-back-";
/// Prefix of a restore merge's staging directory (and of its staged copies).
pub const MERGE_PREFIX: &str = ".paperclip-merge-";
/// Prefix of the directory a sandbox or SSH baseline restore downloads the remote workspace
/// into before it merges it (it holds no journal: the merge journals its own apply).
pub const RESTORE_PREFIX: &str = ".paperclip-sandbox-restore-";
/// The file that holds the per-host key tagging our staging names ([`crate::host_key`]).
pub const KEY_FILE: &str = ".paperclip-staging-key";
/// The journal an operation writes into its staging directory before its first move.
pub const JOURNAL: &str = "journal";
/// The journal's temporary name while it is written.
pub const JOURNAL_TMP: &str = "journal.tmp";
/// The directory inside an extraction's or pull's staging directory that holds the members.
pub const TREE: &str = "tree";

/// Which operation a staging directory belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Extract,
    Pull,
    Merge,
    /// A sandbox or SSH baseline restore's downloaded copy of the remote workspace.
    Restore,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 4] = [Kind::Extract, Kind::Pull, Kind::Merge, Kind::Restore];

    /// The name prefix of this kind.
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Extract => EXTRACT_PREFIX,
            Kind::Pull => PULL_PREFIX,
            Kind::Merge => MERGE_PREFIX,
            Kind::Restore => RESTORE_PREFIX,
        }
    }
}

/// The process that created a staging directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    /// Start time in clock ticks since boot; 0 when unknown (then only the pid is checked).
    pub start: u64,
}

/// Length of the current form's nonce: 16 random hex digits, then a 16-digit tag.
pub const NONCE_HEX: usize = 32;
/// Length of the tag at the end of the current form's nonce.
pub const TAG_HEX: usize = 16;

/// What a staging name says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    pub kind: Kind,
    /// `None` for a name that records no owner (the pull's earlier `mkdtemp` form).
    pub owner: Option<Owner>,
    /// The name has the current form, whose last [`TAG_HEX`] digits are a tag of the rest
    /// ([`crate::staging::is_ours`] checks it); earlier forms carry none.
    pub tagged: bool,
}

/// Parses one of our staging names (the current or an earlier form, see the module docs);
/// `None` for any other name.
pub fn parse(name: &[u8]) -> Option<Parsed> {
    let (kind, rest) =
        Kind::ALL.into_iter().find_map(|kind| name.strip_prefix(kind.prefix().as_bytes()).map(|rest| (kind, rest)))?;
    let digits = |s: &[u8]| !s.is_empty() && s.len() <= 20 && s.iter().all(u8::is_ascii_digit);
    let hex = |s: &[u8], len: usize| s.len() == len && s.iter().all(u8::is_ascii_hexdigit);
    let text = std::str::from_utf8(rest).ok()?;
    let fields: Vec<&str> = text.split('-').collect();
    if let [pid, start, nonce] = fields[..] {
        let nonce = nonce.as_bytes();
        let tagged = hex(nonce, NONCE_HEX);
        if digits(pid.as_bytes()) && digits(start.as_bytes()) && (tagged || hex(nonce, 16)) {
            let owner = Owner { pid: pid.parse().ok()?, start: start.parse().ok()? };
            return Some(Parsed { kind, owner: Some(owner), tagged });
        }
        return None;
    }
    if matches!(kind, Kind::Extract | Kind::Merge) && hex(rest, 32) {
        let pid = u32::from_str_radix(&text[..8], 16).ok()?;
        return Some(Parsed { kind, owner: Some(Owner { pid, start: 0 }), tagged: false });
    }
    if kind == Kind::Pull && rest.len() == 6 && rest.iter().all(u8::is_ascii_alphanumeric) {
        return Some(Parsed { kind, owner: None, tagged: false });
    }
    None
}

/// True for a name this library reserves (see the module docs): the walks skip it, and
/// every untrusted source refuses it.
pub fn is_reserved(name: &[u8]) -> bool {
    name.starts_with(b".paperclip-") && (name == KEY_FILE.as_bytes() || parse(name).is_some())
}

/// The first reserved component of a `/`-separated relative path, if any.
pub fn reserved_component(rel: &str) -> Option<&str> {
    rel.split('/').find(|component| is_reserved(component.as_bytes()))
}

/// What a walk does with a reserved name it meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnReserved {
    /// Leave it (and what is below it) out: a tree of ours, where our staging may live.
    Skip,
    /// Fail with [`refusal`]: an untrusted tree (a merge's or a mirror's source), named in
    /// the message by this (e.g. "the merge source").
    Refuse(&'static str),
}

/// Why a reserved name is refused, for messages.
pub const WHY: &str = "it is a name this library reserves for its own staging directories and key";

/// The [`codes::UNSAFE_ARCHIVE_ENTRY`] error for the reserved name at `rel` (relative to the
/// root of `what`, e.g. "the merge source"); never a host path.
pub fn refusal(what: &str, rel: &str) -> Error {
    Error::new(codes::UNSAFE_ARCHIVE_ENTRY, format!("refusing '{rel}' in {what}: {WHY}; nothing was changed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_forms_are_reserved_and_a_users_names_are_not() {
        for kind in Kind::ALL {
            let p = kind.prefix();
            let current = format!("{p}12-34-{}", "0123456789abcdef".repeat(2));
            assert_eq!(
                parse(current.as_bytes()),
                Some(Parsed { kind, owner: Some(Owner { pid: 12, start: 34 }), tagged: true })
            );
            let earlier = format!("{p}12-0-0123456789abcdef");
            assert_eq!(
                parse(earlier.as_bytes()),
                Some(Parsed { kind, owner: Some(Owner { pid: 12, start: 0 }), tagged: false })
            );
            assert!(is_reserved(current.as_bytes()) && is_reserved(earlier.as_bytes()));
        }
        assert_eq!(
            parse(b".paperclip-extract-0000002a0000000100000000deadbeef"),
            Some(Parsed { kind: Kind::Extract, owner: Some(Owner { pid: 42, start: 0 }), tagged: false })
        );
        assert_eq!(
            parse(b".paperclip-ssh-sync-back-aB3xYz"),
            Some(Parsed { kind: Kind::Pull, owner: None, tagged: false })
        );
        assert!(is_reserved(KEY_FILE.as_bytes()));
        for name in [
            &b".paperclip-merge-notes"[..],
            b".paperclip-extract-",
            b".paperclip-extract-1-2-3",
            b".paperclip-extract-1-2-0123456789abcdef-x",
            b".paperclip-extract-1-2-0123456789abcdef0",
            b"paperclip-extract-1-2-0123456789abcdef",
            b".paperclip-runtime",
            b".paperclip-ssh-sync-back-toolong",
            b".paperclip-staging-key.bak",
            b"journal",
            b"tree",
        ] {
            assert!(!is_reserved(name), "{}", String::from_utf8_lossy(name));
        }
        assert_eq!(reserved_component("a/.paperclip-staging-key/b"), Some(KEY_FILE));
        assert_eq!(reserved_component("a/.paperclip-merge-notes"), None);
    }
}
