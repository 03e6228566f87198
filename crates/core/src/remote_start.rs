//! What a prepare gave the remote: the tree a sandbox or SSH workspace started the run with,
//! as a lane's restore judges the agent's work against it (docs/differences.md, "Nothing the
//! agent did not change").
//!
//! Three views of one workspace disagree, and upstream's restore loses host data where they
//! do: the transfer in both directions leaves paths out by GNU tar's matching (unanchored,
//! glob, `._*` always), while the baseline leaves out only what upstream's anchored, literal
//! matcher does; and a git workspace's remote starts from a fresh checkout of HEAD under the
//! host's changed files, not from the host's own bytes and modes. A path the baseline holds
//! that the remote never had reads as "deleted by the agent", one the remote had in another
//! form as "changed by the agent", and the merge deletes or rewrites the host's copy.
//!
//! [`RemoteStart`] says, for a path, whether it travels at all ([`RemoteStart::transferable`])
//! and what the remote started with there ([`RemoteStart::given`]); the merge
//! ([`crate::merge`] with [`crate::merge::MergeOptions::start`]) acts only where the remote's
//! end state differs from that start, and only where the host still holds its baseline.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read};

use sha1::{Digest, Sha1};

use crate::error::{codes, Error, Result};
use crate::merge::BaselineEntry;
use crate::snapshot::Hash;
use crate::tar::TarExcludeSet;

/// A git object id (SHA-1).
pub type ObjectId = [u8; 20];

/// One entry of HEAD's tree, as `git ls-tree -r` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeEntry {
    /// A file (`100644`, or `100755` when `executable`).
    Blob { oid: ObjectId, executable: bool },
    /// A symbolic link (`120000`): the checkout makes the link HEAD records.
    Symlink,
    /// A submodule (`160000`): the checkout makes an empty directory, nothing below it.
    Gitlink,
}

/// What a git workspace's remote started from: the checkout of HEAD, the host files sent over
/// it (the overlay), less the paths removed after both (the deleted files).
#[derive(Debug, Default)]
pub struct Checkout {
    tree: HashMap<String, TreeEntry>,
    overlay: HashSet<String>,
    /// Every path the host holds was sent over the checkout (the SSH lane's upload of the
    /// whole working tree): the overlay is the host's tree.
    whole_tree: bool,
    removed: HashSet<String>,
    /// Every directory above a path of the tree or the overlay.
    dirs: HashSet<String>,
}

impl Checkout {
    /// The remote's start from HEAD's `tree` (see [`parse_ls_tree`]), the `overlay` paths sent
    /// from the host over it (a trailing `/` is dropped) and the `removed` paths (each with
    /// everything below it).
    pub fn new(
        tree: HashMap<String, TreeEntry>,
        overlay: impl IntoIterator<Item = String>,
        removed: impl IntoIterator<Item = String>,
    ) -> Checkout {
        let overlay: HashSet<String> =
            overlay.into_iter().map(|p| p.trim_end_matches('/').to_string()).filter(|p| !p.is_empty()).collect();
        let removed: HashSet<String> =
            removed.into_iter().map(|p| p.trim_end_matches('/').to_string()).filter(|p| !p.is_empty()).collect();
        let mut dirs = HashSet::new();
        for rel in tree.keys().chain(overlay.iter()) {
            let mut at = rel.len();
            while let Some(slash) = rel[..at].rfind('/') {
                if !dirs.insert(rel[..slash].to_string()) {
                    break;
                }
                at = slash;
            }
        }
        Checkout { tree, overlay, whole_tree: false, removed, dirs }
    }

    /// A checkout under the host's whole working tree (the SSH lane's), less `removed`.
    pub fn under_whole_tree(tree: HashMap<String, TreeEntry>, removed: impl IntoIterator<Item = String>) -> Checkout {
        Checkout { whole_tree: true, ..Checkout::new(tree, [], removed) }
    }

    /// True when `rel` or a directory above it was removed after the checkout.
    fn removed(&self, rel: &str) -> bool {
        if self.removed.is_empty() {
            return false;
        }
        let mut at = rel.len();
        loop {
            if self.removed.contains(&rel[..at]) {
                return true;
            }
            match rel[..at].rfind('/') {
                Some(slash) => at = slash,
                None => return false,
            }
        }
    }
}

/// What the remote's copy of a path started as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Given<'a> {
    Dir,
    Symlink(&'a str),
    /// A file the host sent: its bytes (SHA-256) and mode as the host held them.
    HostFile {
        mode: u32,
        hash: &'a Hash,
    },
    /// A file the checkout made from a blob: its bytes are the blob's as a checkout writes
    /// them, its mode a checkout's (`0666` or `0777` less a umask).
    Blob {
        oid: ObjectId,
        executable: bool,
    },
}

/// The description of what a prepare staged on the remote (see the module docs).
#[derive(Debug, Default)]
pub struct RemoteStart {
    /// What no transfer carries, in either direction: the union of the prepare's and the
    /// restore's `--exclude` values, with `._*`, as GNU tar matches them.
    untransferred: TarExcludeSet,
    /// A git workspace's checkout; `None`: the remote got every transferable path as the
    /// host held it (a plain workspace, or SSH, whose upload sends the whole working tree).
    checkout: Option<Checkout>,
    /// The permission bits the remote's extraction may clear from the host's modes (its
    /// umask: a non-root tar applies it, a root one keeps the modes), when the prepare learnt
    /// them.
    mask: Option<u32>,
    /// The umask a checkout's files were made under on this host (the prepare's clone):
    /// the remote's copies hold no more than `0666`/`0777` less it.
    checkout_umask: Option<u32>,
}

/// The AppleDouble pattern every tar of both lanes excludes.
pub const APPLE_DOUBLE: &str = "._*";

impl RemoteStart {
    /// A start where the remote got every path the `untransferred` patterns (tar's
    /// `--exclude` values of the send and of the pull; `._*` is added) leave in, as the host
    /// held it.
    pub fn new<S: AsRef<str>>(untransferred: &[S], checkout: Option<Checkout>) -> RemoteStart {
        let mut set = TarExcludeSet::new(untransferred);
        set.push(APPLE_DOUBLE);
        RemoteStart { untransferred: set, checkout, mask: None, checkout_umask: None }
    }

    /// The same start, where the remote's extraction kept the modes the host sent or cleared
    /// exactly the permission bits `mask` (when known) from them, and a checkout's files were
    /// made under the umask `checkout_umask` (when known).
    pub fn with_masks(mut self, mask: Option<u32>, checkout_umask: Option<u32>) -> RemoteStart {
        self.mask = mask.map(|m| m & 0o7777);
        self.checkout_umask = checkout_umask.map(|m| m & 0o777);
        self
    }

    /// True when a file's mode `mode` is what the transfer of `given` left on the remote
    /// (see [`mode_as_given`]; exact for a host file when the remote's mask is known).
    pub fn mode_as_given(&self, mode: u32, given: &Given<'_>) -> bool {
        match (given, self.mask, self.checkout_umask) {
            (Given::HostFile { mode: start, .. }, Some(mask), _) => {
                let (perm, start) = (mode & 0o7777, start & 0o7777);
                perm == start || perm == start & !mask
            }
            (Given::Blob { executable, .. }, mask, Some(umask)) => {
                // The clone's mode here, then what the remote's extraction cleared (exactly,
                // when known; else no more than group, other or special bits).
                let cloned = (if *executable { 0o777 } else { 0o666 }) & !umask;
                match mask {
                    Some(mask) => mode & 0o7777 == cloned || mode & 0o7777 == cloned & !(mask & 0o777),
                    None => mode_as_given(mode, &Given::HostFile { mode: cloned, hash: &[0; 32] }),
                }
            }
            _ => mode_as_given(mode, given),
        }
    }

    /// True when neither transfer leaves `rel` out: no run of its components, from its first,
    /// is excluded (an excluded directory takes its subtree with it).
    pub fn transferable(&self, rel: &str) -> bool {
        let mut at = 0;
        loop {
            let end = rel[at..].find('/').map_or(rel.len(), |i| at + i);
            if self.untransferred.excludes(&rel[..end]) {
                return false;
            }
            if end == rel.len() {
                return true;
            }
            at = end + 1;
        }
    }

    /// The top-level names a checkout gave the remote (HEAD's and the overlay's, less the
    /// removed and what never travels), sorted; `None` without a checkout (every
    /// transferable path of the host's tree was given).
    pub fn checkout_top_level(&self) -> Option<Vec<String>> {
        let checkout = self.checkout.as_ref()?;
        let mut names: Vec<String> = checkout
            .tree
            .keys()
            .chain(checkout.overlay.iter())
            .map(|rel| rel.split('/').next().unwrap_or(rel))
            .filter(|name| !checkout.removed(name) && self.transferable(name))
            .map(str::to_string)
            .collect::<HashSet<String>>()
            .into_iter()
            .collect();
        names.sort();
        Some(names)
    }

    /// What the remote started with at `rel` (`base`: the host baseline's entry there), or
    /// `None` when the prepare gave it nothing there (or the path never travels).
    pub fn given<'a>(&'a self, rel: &str, base: Option<&'a BaselineEntry>) -> Option<Given<'a>> {
        if !self.transferable(rel) {
            return None;
        }
        let from_host = |base: Option<&'a BaselineEntry>| match base? {
            BaselineEntry::Dir => Some(Given::Dir),
            BaselineEntry::File { mode, hash } => Some(Given::HostFile { mode: *mode, hash }),
            BaselineEntry::Symlink { target } => Some(Given::Symlink(target)),
            BaselineEntry::Unmatchable => None,
        };
        let Some(checkout) = &self.checkout else { return from_host(base) };
        if checkout.removed(rel) {
            return None;
        }
        if checkout.overlay.contains(rel) || (checkout.whole_tree && base.is_some()) {
            return from_host(base);
        }
        match checkout.tree.get(rel) {
            Some(TreeEntry::Blob { oid, executable }) => Some(Given::Blob { oid: *oid, executable: *executable }),
            // The link HEAD records; a clean checkout's link is the host's.
            Some(TreeEntry::Symlink) => match base {
                Some(BaselineEntry::Symlink { target }) => Some(Given::Symlink(target)),
                _ => None,
            },
            Some(TreeEntry::Gitlink) => Some(Given::Dir),
            None if checkout.dirs.contains(rel) => Some(Given::Dir),
            None => None,
        }
    }
}

/// True when a file's mode `mode` is what a transfer of `given` may leave where the remote's
/// umask is not known: the same permissions, or those less some group, other or special bits
/// (a remote umask, a non-root extraction), the owner's untouched. A checkout's file: the owner's `rw-` (`rwx` when
/// executable) and nothing beyond `0666` (`0777`). The type bits are ignored.
pub fn mode_as_given(mode: u32, given: &Given<'_>) -> bool {
    let perm = mode & 0o7777;
    let (start, owner) = match given {
        Given::HostFile { mode: start, .. } => (start & 0o7777, start & 0o700),
        Given::Blob { executable: true, .. } => (0o777, 0o700),
        Given::Blob { executable: false, .. } => (0o666, 0o600),
        _ => return false,
    };
    perm == start || (perm & !start == 0 && perm & 0o700 == owner)
}

/// The git blob id of `bytes` read from `file` (`size` bytes): SHA-1 of `blob <size>\0` and
/// the bytes. With `crlf_as_lf`, every CRLF counts as LF (git's text normalization), and the
/// size is the normalized one.
fn blob_id(mut file: impl Read, size: u64, crlf_as_lf: bool) -> io::Result<(ObjectId, bool)> {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut hasher = Sha1::new();
    if !crlf_as_lf {
        hasher.update(format!("blob {size}\0").as_bytes());
        let mut crlf = false;
        let mut last = 0u8;
        let mut read = 0u64;
        loop {
            let n = file.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            read += n as u64;
            let chunk = &buffer[..n];
            crlf |= (last == b'\r' && chunk[0] == b'\n') || chunk.windows(2).any(|w| w == b"\r\n");
            last = chunk[n - 1];
            hasher.update(chunk);
        }
        if read != size {
            return Err(io::Error::other("the file changed size while it was read"));
        }
        return Ok((hasher.finalize().into(), crlf));
    }
    // Normalized: the content is read whole (only files that hold a CRLF get here).
    let mut bytes = Vec::with_capacity(size as usize);
    file.read_to_end(&mut bytes)?;
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    hasher.update(format!("blob {}\0", out.len()).as_bytes());
    hasher.update(&out);
    Ok((hasher.finalize().into(), true))
}

/// True when the file `open()` gives (of `size` bytes) holds the blob `oid` as a checkout
/// writes it: its bytes are the blob's, or are the blob's with every LF written as CRLF (an
/// end-of-line conversion).
pub fn holds_blob(open: impl Fn() -> io::Result<std::fs::File>, size: u64, oid: &ObjectId) -> io::Result<bool> {
    let (raw, crlf) = blob_id(open()?, size, false)?;
    if raw == *oid {
        return Ok(true);
    }
    if !crlf {
        return Ok(false);
    }
    Ok(blob_id(open()?, size, true)?.0 == *oid)
}

/// HEAD's tree from `git ls-tree -r -z --full-tree <commit>` output (records
/// `<mode> <type> <oid>\t<path>\0`). Trees never appear (`-r`); an unknown mode or a
/// malformed record is an error.
pub fn parse_ls_tree(bytes: &[u8]) -> Result<HashMap<String, TreeEntry>> {
    let bad = |what: &str| Error::new(codes::INVALID_ARGUMENT, format!("malformed git ls-tree output: {what}"));
    let mut tree = HashMap::new();
    for record in bytes.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let tab = record.iter().position(|b| *b == b'\t').ok_or_else(|| bad("no tab"))?;
        let (head, path) = (&record[..tab], &record[tab + 1..]);
        let head = std::str::from_utf8(head).map_err(|_| bad("a record's head is not UTF-8"))?;
        let mut fields = head.split(' ');
        let (Some(mode), Some(_kind), Some(oid), None) = (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(bad("a record has not three fields"));
        };
        // A name that is not UTF-8 has no entry (no walk of ours produces it).
        let Ok(path) = std::str::from_utf8(path) else { continue };
        let entry = match mode {
            "100644" | "100755" | "100664" => TreeEntry::Blob {
                oid: parse_oid(oid).ok_or_else(|| bad("an object id"))?,
                executable: mode == "100755",
            },
            "120000" => TreeEntry::Symlink,
            "160000" => TreeEntry::Gitlink,
            _ => return Err(bad("an unknown mode")),
        };
        tree.insert(path.to_string(), entry);
    }
    Ok(tree)
}

/// A 40-digit lowercase hex object id.
pub fn parse_oid(hex: &str) -> Option<ObjectId> {
    crate::snapshot::decode_hex(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid_of(bytes: &[u8]) -> ObjectId {
        let mut hasher = Sha1::new();
        hasher.update(format!("blob {}\0", bytes.len()).as_bytes());
        hasher.update(bytes);
        hasher.finalize().into()
    }

    #[test]
    fn blob_ids_are_gits() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(parse_oid("ce013625030ba8dba906f756967f9e9ca394464a"), Some(oid_of(b"hello\n")));
        let (id, crlf) = blob_id(&b"hello\n"[..], 6, false).unwrap();
        assert_eq!((id, crlf), (oid_of(b"hello\n"), false));
    }

    #[test]
    fn a_checkout_with_crlf_holds_the_lf_blob() {
        let dir = std::env::temp_dir().join(format!("pc-remote-start-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, b"a\r\nb\r\nc").unwrap();
        let open = || std::fs::File::open(&file);
        assert!(holds_blob(open, 7, &oid_of(b"a\nb\nc")).unwrap());
        assert!(holds_blob(open, 7, &oid_of(b"a\r\nb\r\nc")).unwrap());
        assert!(!holds_blob(open, 7, &oid_of(b"a\nb\nd")).unwrap());
        std::fs::write(&file, b"plain\n").unwrap();
        assert!(!holds_blob(|| std::fs::File::open(&file), 6, &oid_of(b"plain\r\n")).unwrap());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn what_travels_is_what_tar_lets_through_at_every_depth() {
        let start =
            RemoteStart::new(&[".git", "secrets", "config/local.json", "report[1].csv", "*/node_modules"], None);
        for rel in ["README.md", "src/a.c", "docs/draft.md", "a._b", "configs/local.json"] {
            assert!(start.transferable(rel), "{rel}");
        }
        for rel in [
            ".git",
            "sub/.git",
            "vendor/clone/.git/HEAD",
            "._notes",
            "docs/._draft.md",
            "app/secrets/key.txt",
            "pkg/config/local.json",
            "report1.csv",
            "x/node_modules/y",
        ] {
            assert!(!start.transferable(rel), "{rel}");
        }
        // A top-level `node_modules` is kept by `*/node_modules` (tar's own rule).
        assert!(start.transferable("node_modules/y"));
    }

    #[test]
    fn a_checkout_gives_heads_blobs_under_the_overlay_less_the_removed() {
        let blob = |n: u8| TreeEntry::Blob { oid: [n; 20], executable: false };
        let tree = HashMap::from([
            ("a.txt".to_string(), blob(1)),
            ("src/b.txt".to_string(), blob(2)),
            ("src/gone/c.txt".to_string(), blob(3)),
            ("sub".to_string(), TreeEntry::Gitlink),
            ("link".to_string(), TreeEntry::Symlink),
        ]);
        let checkout = Checkout::new(tree, ["src/b.txt".into(), "new/".into()], ["src/gone".into()]);
        let start = RemoteStart::new(&[".git"], Some(checkout));
        let hash = [7u8; 32];
        let host_file = BaselineEntry::File { mode: 0o100600, hash };
        assert_eq!(start.given("a.txt", Some(&host_file)), Some(Given::Blob { oid: [1; 20], executable: false }));
        assert_eq!(start.given("src/b.txt", Some(&host_file)), Some(Given::HostFile { mode: 0o100600, hash: &hash }));
        assert_eq!(start.given("src/gone/c.txt", Some(&host_file)), None);
        assert_eq!(start.given("src", Some(&BaselineEntry::Dir)), Some(Given::Dir));
        assert_eq!(start.given("new", Some(&BaselineEntry::Dir)), Some(Given::Dir));
        assert_eq!(start.given("new/inside", Some(&host_file)), None);
        assert_eq!(start.given("sub", Some(&BaselineEntry::Dir)), Some(Given::Dir));
        assert_eq!(start.given("sub/file", Some(&host_file)), None);
        assert_eq!(start.given("empty-dir", Some(&BaselineEntry::Dir)), None);
        let link = BaselineEntry::Symlink { target: "a.txt".into() };
        assert_eq!(start.given("link", Some(&link)), Some(Given::Symlink("a.txt")));
        assert_eq!(start.given("link", Some(&host_file)), None);
    }

    #[test]
    fn under_the_whole_tree_the_checkout_gives_only_what_the_host_lacks() {
        let blob = TreeEntry::Blob { oid: [1; 20], executable: false };
        let tree = HashMap::from([("src/gen/gen.c".to_string(), blob), ("kept.txt".to_string(), blob)]);
        let start = RemoteStart::new(&[".git"], Some(Checkout::under_whole_tree(tree, ["src/gen/gen.c".into()])));
        let hash = [7u8; 32];
        let host_file = BaselineEntry::File { mode: 0o100644, hash };
        // What the host holds was sent; the directory of a deleted file stays from the checkout.
        assert_eq!(start.given("kept.txt", Some(&host_file)), Some(Given::HostFile { mode: 0o100644, hash: &hash }));
        assert_eq!(start.given("src/gen", None), Some(Given::Dir));
        assert_eq!(start.given("src/gen/gen.c", None), None);
    }

    #[test]
    fn modes_as_a_remote_umask_leaves_them() {
        let host = |mode| Given::HostFile { mode, hash: &[0; 32] };
        assert!(mode_as_given(0o100664, &host(0o100664)));
        assert!(mode_as_given(0o100644, &host(0o100664)));
        assert!(mode_as_given(0o100755, &host(0o100775)));
        assert!(mode_as_given(0o100755, &host(0o104755)));
        assert!(mode_as_given(0o100700, &host(0o104755)));
        assert!(!mode_as_given(0o100744, &host(0o100644)));
        assert!(!mode_as_given(0o100644, &host(0o100744)));
        assert!(!mode_as_given(0o100666, &host(0o100644)));
        let blob = |executable| Given::Blob { oid: [0; 20], executable };
        assert!(mode_as_given(0o100644, &blob(false)));
        assert!(mode_as_given(0o100664, &blob(false)));
        assert!(mode_as_given(0o100600, &blob(false)));
        assert!(!mode_as_given(0o100755, &blob(false)));
        assert!(!mode_as_given(0o100400, &blob(false)));
        assert!(mode_as_given(0o100755, &blob(true)));
        assert!(!mode_as_given(0o100644, &blob(true)));
    }

    #[test]
    fn a_known_mask_judges_modes_exactly() {
        let hash = [0u8; 32];
        let given = Given::HostFile { mode: 0o100664, hash: &hash };
        let root = RemoteStart::new::<&str>(&[], None).with_masks(Some(0), None);
        assert!(root.mode_as_given(0o100664, &given));
        assert!(!root.mode_as_given(0o100644, &given), "with no umask, a narrowed mode is the agent's chmod");
        let user = RemoteStart::new::<&str>(&[], None).with_masks(Some(0o022), None);
        assert!(user.mode_as_given(0o100644, &given));
        assert!(user.mode_as_given(0o100664, &given));
        assert!(!user.mode_as_given(0o100640, &given));
        // A checkout's file: umask-agnostic, or exact when the checkout's umask is known.
        let blob = Given::Blob { oid: [0; 20], executable: false };
        assert!(root.mode_as_given(0o100644, &blob) && root.mode_as_given(0o100664, &blob));
        let known = RemoteStart::new::<&str>(&[], None).with_masks(Some(0), Some(0o022));
        assert!(known.mode_as_given(0o100644, &blob));
        assert!(!known.mode_as_given(0o100600, &blob));
        assert!(known.mode_as_given(0o100755, &Given::Blob { oid: [0; 20], executable: true }));
        // The remote's mask unknown: no more than the clone's mode, the owner's bits as they are.
        let clone_only = RemoteStart::new::<&str>(&[], None).with_masks(None, Some(0o022));
        assert!(clone_only.mode_as_given(0o100644, &blob) && clone_only.mode_as_given(0o100600, &blob));
        assert!(!clone_only.mode_as_given(0o100664, &blob), "a bit the clone never had is the agent's");
    }

    #[test]
    fn ls_tree_records() {
        let oid = "ce013625030ba8dba906f756967f9e9ca394464a";
        let out = format!(
            "100644 blob {oid}\ta b.txt\0100755 blob {oid}\tx.sh\0120000 blob {oid}\tlink\0160000 commit {oid}\tsub\0"
        );
        let tree = parse_ls_tree(out.as_bytes()).unwrap();
        assert_eq!(tree["a b.txt"], TreeEntry::Blob { oid: parse_oid(oid).unwrap(), executable: false });
        assert_eq!(tree["x.sh"], TreeEntry::Blob { oid: parse_oid(oid).unwrap(), executable: true });
        assert_eq!(tree["link"], TreeEntry::Symlink);
        assert_eq!(tree["sub"], TreeEntry::Gitlink);
        assert!(parse_ls_tree(b"100644 blob xyz\tp\0").is_err());
        assert!(parse_ls_tree(b"040000 tree ce013625030ba8dba906f756967f9e9ca394464a\td\0").is_err());
    }
}
