//! git's index file (`.git/index`, formats 2, 3 and 4), read for what the ignore scan needs
//! from each entry: its name, mode, stage, skip-worktree bit and object id.
//!
//! Read as git itself reads it for `ls-files`: the header's signature and version are
//! checked, every entry and extension must lie inside the file, and the trailing checksum is
//! not verified (git checks it only under `fsck`; hashing the whole file was most of what a
//! first scan of a repository paid for its index). Extensions git may skip (a signature
//! starting with `A`..`Z`: the cache tree, the untracked cache, the end-of-index entry …) are
//! skipped; any other (`link`, a split index; `sdir`, a sparse index) fails the read, as it
//! did when libgit2 read the index. Nothing is executed or written; the bytes are the caller's.

use std::fmt;

const SIGNATURE: &[u8; 4] = b"DIRC";
/// SHA-1 object ids (a SHA-256 repository is refused before its index is read).
const OID_LEN: usize = 20;
const HEADER_LEN: usize = 12;
/// ctime, mtime (seconds and nanoseconds), dev, ino, mode, uid, gid, size: ten 32-bit fields.
const STAT_LEN: usize = 40;
const FLAG_EXTENDED: u16 = 0x4000;
const NAME_MASK: u16 = 0x0fff;
const EXT_SKIP_WORKTREE: u16 = 0x4000;

/// One index entry, borrowed for the duration of the callback.
#[derive(Clone, Copy, Debug)]
pub struct IndexEntry<'a> {
    /// Toplevel-relative name (bytes, `/`-separated).
    pub name: &'a [u8],
    pub mode: u32,
    /// 0 for a merged entry, 1–3 for the sides of a conflict.
    pub stage: u8,
    pub skip_worktree: bool,
    pub oid: [u8; OID_LEN],
}

/// Why an index file was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexError(pub String);

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn corrupt(what: &str) -> IndexError {
    IndexError(format!("index file corrupt: {what}"))
}

fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    data.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]))
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    data.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The offset encoding of pack files (`OFS_DELTA`), which format 4 uses for the number of
/// bytes a name drops from the previous one. Returns the value and the bytes it took.
fn varint(data: &[u8]) -> Option<(usize, usize)> {
    let mut used = 0;
    let mut byte = *data.first()?;
    used += 1;
    let mut value = usize::from(byte & 0x7f);
    while byte & 0x80 != 0 {
        byte = *data.get(used)?;
        used += 1;
        value = value.checked_add(1)?.checked_mul(128)?.checked_add(usize::from(byte & 0x7f))?;
    }
    Some((value, used))
}

/// Calls `each` for every entry of the index file `data`, in file order (git's: by name,
/// then stage).
pub fn read_entries(data: &[u8], mut each: impl FnMut(IndexEntry<'_>)) -> Result<(), IndexError> {
    if data.len() < HEADER_LEN + OID_LEN {
        return Err(IndexError("index file smaller than expected".into()));
    }
    if &data[..4] != SIGNATURE {
        return Err(IndexError("bad index file signature".into()));
    }
    let version = u32_at(data, 4).unwrap_or(0);
    if !(2..=4).contains(&version) {
        return Err(IndexError(format!("bad index file version {version}")));
    }
    let count = u32_at(data, 8).unwrap_or(0) as usize;
    // Entries and extensions end where the trailing checksum starts.
    let end = data.len() - OID_LEN;
    let body = &data[..end];
    let mut at = HEADER_LEN;
    let mut name: Vec<u8> = Vec::new();
    for _ in 0..count {
        let fixed = at + STAT_LEN + OID_LEN;
        let mode = u32_at(body, at + 24).ok_or_else(|| corrupt("entry past the end"))?;
        let oid: [u8; OID_LEN] = body
            .get(at + STAT_LEN..fixed)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| corrupt("entry past the end"))?;
        let flags = u16_at(body, fixed).ok_or_else(|| corrupt("entry past the end"))?;
        let mut name_at = fixed + 2;
        let mut skip_worktree = false;
        if flags & FLAG_EXTENDED != 0 {
            if version < 3 {
                return Err(corrupt("extended flags in a version 2 index"));
            }
            let extended = u16_at(body, name_at).ok_or_else(|| corrupt("entry past the end"))?;
            skip_worktree = extended & EXT_SKIP_WORKTREE != 0;
            name_at += 2;
        }
        let stage = ((flags >> 12) & 3) as u8;
        let rest = body.get(name_at..).ok_or_else(|| corrupt("entry past the end"))?;
        if version == 4 {
            let (drop, used) = varint(rest).ok_or_else(|| corrupt("bad name prefix"))?;
            if drop > name.len() {
                return Err(corrupt("name prefix longer than the previous name"));
            }
            name.truncate(name.len() - drop);
            let suffix = &rest[used..];
            let nul = suffix.iter().position(|&c| c == 0).ok_or_else(|| corrupt("unterminated name"))?;
            name.extend_from_slice(&suffix[..nul]);
            let len = usize::from(flags & NAME_MASK);
            if len != usize::from(NAME_MASK) && len != name.len() {
                return Err(corrupt("name length does not match its flags"));
            }
            at = name_at + used + nul + 1;
        } else {
            let nul = rest.iter().position(|&c| c == 0).ok_or_else(|| corrupt("unterminated name"))?;
            let len = usize::from(flags & NAME_MASK);
            if len != usize::from(NAME_MASK) && len != nul {
                return Err(corrupt("name length does not match its flags"));
            }
            name.clear();
            name.extend_from_slice(&rest[..nul]);
            // 1 to 8 NULs pad the entry to a multiple of eight bytes (git's `align_flex_name`).
            at += (name_at - at + nul + 8) & !7;
            if at > end {
                return Err(corrupt("entry past the end"));
            }
        }
        each(IndexEntry { name: &name, mode, stage, skip_worktree, oid });
    }
    // Extensions: a 4-byte signature, a 32-bit size, the data. Like git, fewer than 8 bytes
    // left end them, and so does an extension to skip that claims to run past the end.
    while at + 8 <= end {
        let signature = &body[at..at + 4];
        let size = u32_at(body, at + 4).unwrap_or(0) as usize;
        if !signature[0].is_ascii_uppercase() {
            return Err(IndexError(format!(
                "index uses the {} extension, which this scan does not read",
                String::from_utf8_lossy(signature)
            )));
        }
        at = at.saturating_add(8).saturating_add(size);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry in format 2/3 form (stat data zero, `oid` repeated from one byte).
    fn entry(name: &[u8], mode: u32, stage: u16, extended: Option<u16>, oid: u8) -> Vec<u8> {
        let mut out = vec![0u8; STAT_LEN];
        out[24..28].copy_from_slice(&mode.to_be_bytes());
        out.extend_from_slice(&[oid; OID_LEN]);
        let len = name.len().min(usize::from(NAME_MASK)) as u16;
        let flags = len | (stage << 12) | if extended.is_some() { FLAG_EXTENDED } else { 0 };
        out.extend_from_slice(&flags.to_be_bytes());
        if let Some(x) = extended {
            out.extend_from_slice(&x.to_be_bytes());
        }
        out.extend_from_slice(name);
        let padded = (out.len() + 8) & !7;
        out.resize(padded, 0);
        out
    }

    fn index(version: u32, entries: &[Vec<u8>], extensions: &[u8]) -> Vec<u8> {
        let mut out = b"DIRC".to_vec();
        out.extend_from_slice(&version.to_be_bytes());
        out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        for e in entries {
            out.extend_from_slice(e);
        }
        out.extend_from_slice(extensions);
        out.extend_from_slice(&[0xab; OID_LEN]);
        out
    }

    /// What a test compares of an entry: name, mode, stage, skip-worktree, first oid byte.
    type Seen = (Vec<u8>, u32, u8, bool, u8);

    fn names(data: &[u8]) -> Result<Vec<Seen>, IndexError> {
        let mut out = Vec::new();
        read_entries(data, |e| out.push((e.name.to_vec(), e.mode, e.stage, e.skip_worktree, e.oid[0])))?;
        Ok(out)
    }

    #[test]
    fn reads_versions_2_and_3_with_padding_stages_and_skip_worktree() {
        let long = vec![b'n'; 5000];
        let data = index(
            3,
            &[
                entry(b"a", 0o100644, 0, None, 1),
                entry(b"conflict", 0o100644, 2, None, 2),
                entry(b"dir/sparse.txt", 0o100755, 0, Some(EXT_SKIP_WORKTREE), 3),
                entry(&long, 0o160000, 0, None, 4),
                entry(b"exactly8", 0o120000, 0, None, 5),
            ],
            b"TREE\0\0\0\x03xyzUNTR\0\0\0\0",
        );
        let read = names(&data).unwrap();
        assert_eq!(
            read,
            [
                (b"a".to_vec(), 0o100644, 0, false, 1),
                (b"conflict".to_vec(), 0o100644, 2, false, 2),
                (b"dir/sparse.txt".to_vec(), 0o100755, 0, true, 3),
                (long.clone(), 0o160000, 0, false, 4),
                (b"exactly8".to_vec(), 0o120000, 0, false, 5),
            ]
        );
        // Version 2 has no extended flags.
        assert!(names(&index(2, &[entry(b"x", 0o100644, 0, Some(0), 1)], b"")).is_err());
        assert_eq!(names(&index(2, &[entry(b"x", 0o100644, 0, None, 1)], b"")).unwrap().len(), 1);
    }

    #[test]
    fn reads_version_4_prefix_compression() {
        let mut data = b"DIRC\0\0\0\x04\0\0\0\x03".to_vec();
        for (drop, suffix, len) in [(0u8, &b"src/a.ts"[..], 8u16), (4, b"b.ts", 8), (8, b"zz", 2)] {
            data.extend_from_slice(&[0u8; STAT_LEN]);
            data.extend_from_slice(&[7; OID_LEN]);
            data.extend_from_slice(&len.to_be_bytes());
            data.push(drop);
            data.extend_from_slice(suffix);
            data.push(0);
        }
        data.extend_from_slice(&[0; OID_LEN]);
        let read: Vec<Vec<u8>> = names(&data).unwrap().into_iter().map(|e| e.0).collect();
        assert_eq!(read, [b"src/a.ts".to_vec(), b"src/b.ts".to_vec(), b"zz".to_vec()]);
        // A prefix longer than the previous name; a name whose length is not its flags'.
        let last = data.len() - OID_LEN - 4;
        assert_eq!(&data[last..last + 4], &[8, b'z', b'z', 0]);
        let bad = [&data[..last], &[9, b'z', b'z', 0], &[0; OID_LEN][..]].concat();
        assert!(names(&bad).is_err());
        let bad = [&data[..last], &[8, b'z', b'z', b'z', 0], &[0; OID_LEN][..]].concat();
        assert!(names(&bad).is_err());
    }

    #[test]
    fn varint_is_the_pack_offset_encoding() {
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x80, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0x81, 0x7f]), Some((383, 2)));
        assert_eq!(varint(&[0x80]), None);
    }

    #[test]
    fn refuses_what_git_refuses_or_this_scan_cannot_read() {
        let good = index(2, &[entry(b"a", 0o100644, 0, None, 1)], b"");
        assert!(names(&good).is_ok());
        // Too small, bad signature, bad version, garbage after the header.
        assert!(names(&good[..HEADER_LEN + OID_LEN - 1]).is_err());
        assert!(names(&[b"DIRX", &good[4..]].concat()).is_err());
        assert!(names(&[b"DIRC\0\0\0\x05", &good[8..]].concat()).is_err());
        assert!(names(b"DIRC\0\0\0\x02garbage").is_err());
        // More entries than the file holds; a truncated entry; a name length that lies.
        let mut more = good.clone();
        more[11] = 2;
        assert!(names(&more).is_err());
        assert!(names(&[&good[..HEADER_LEN + 50], &[0; OID_LEN][..]].concat()).is_err());
        let mut lying = good.clone();
        lying[HEADER_LEN + STAT_LEN + OID_LEN + 1] = 3;
        assert!(names(&lying).is_err());
        // A split index, a sparse index, any other extension git may not skip.
        assert!(names(&index(2, &[], b"link\0\0\0\x00")).is_err());
        assert!(names(&index(2, &[], b"sdir\0\0\0\x00")).is_err());
        assert!(names(&index(2, &[], b"TREE\0\0\0\x00_new\0\0\0\x00")).is_err());
        // What git passes over: a skippable extension claiming more than is left, a short tail.
        assert_eq!(names(&index(2, &[entry(b"a", 0o100644, 0, None, 1)], b"TREE\0\0\0\x09xyz")).unwrap().len(), 1);
        assert_eq!(names(&index(2, &[entry(b"a", 0o100644, 0, None, 1)], b"link")).unwrap().len(), 1);
        // An empty index.
        assert_eq!(names(&index(2, &[], b"")).unwrap(), []);
    }
}
