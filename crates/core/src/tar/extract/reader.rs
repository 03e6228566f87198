//! Format parsing: the archive as a sequence of members. A streaming reader of GNU, ustar,
//! pax and V7 archives (optionally gzip-compressed) that applies GNU long names, long links
//! and pax records to the member they describe, bounded in memory, and refuses every length
//! record a tar could read two ways.

use std::io::{self, BufReader, Cursor, Read};

use flate2::read::MultiGzDecoder;

use super::bad;
use crate::error::{Error, Result};
use crate::tar::header::{self, kind, padded, BLOCK};
use crate::tar::stream::{ReadState, COPY_BUFFER};

/// Largest GNU long name, long link or pax header accepted (they are held in memory).
const MAX_METADATA: u64 = 1 << 20;

/// Largest member size accepted: what a file offset (`off_t`) holds. A larger size (base-256
/// headers and pax records can state up to 2^64 - 1) can only be corrupt, and rounding it up
/// to whole blocks would overflow.
const MAX_MEMBER_SIZE: u64 = i64::MAX as u64;

/// Wraps `source` in a gzip decoder when it starts with the gzip magic bytes.
pub(super) fn decompressed<'a>(mut source: impl Read + 'a) -> io::Result<Box<dyn Read + 'a>> {
    let mut magic = Vec::with_capacity(2);
    while magic.len() < 2 {
        let mut byte = [0u8; 2];
        let want = 2 - magic.len();
        match source.read(&mut byte[..want]) {
            Ok(0) => break,
            Ok(n) => magic.extend_from_slice(&byte[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let is_gzip = magic == [0x1f, 0x8b];
    let input = BufReader::with_capacity(COPY_BUFFER, Cursor::new(magic).chain(source));
    Ok(if is_gzip { Box::new(MultiGzDecoder::new(input)) } else { Box::new(input) })
}

/// One archive member, with GNU long names and pax records applied.
#[derive(Debug)]
pub(super) struct Member {
    pub(super) typeflag: u8,
    pub(super) path: Vec<u8>,
    pub(super) link: Vec<u8>,
    pub(super) mode: u32,
    pub(super) mtime: i64,
    pub(super) size: u64,
    pub(super) sparse: bool,
}

/// A streaming tar parser (GNU, ustar, pax, V7), bounded in memory.
pub(super) struct ArchiveReader<'a> {
    inner: Box<dyn Read + 'a>,
    state: &'a ReadState,
    /// Unread data bytes of the current member, then its padding.
    data_left: u64,
    pad_left: u64,
    seen_header: bool,
}

/// Values from a pax extended header that override the next header's fields.
#[derive(Debug, Default)]
struct Pax {
    path: Option<Vec<u8>>,
    linkpath: Option<Vec<u8>>,
    size: Option<u64>,
    mtime: Option<i64>,
    sparse: bool,
}

impl<'a> ArchiveReader<'a> {
    /// A reader of the (decompressed) archive `inner`, whose read errors `state` records.
    pub(super) fn new(inner: Box<dyn Read + 'a>, state: &'a ReadState) -> Self {
        ArchiveReader { inner, state, data_left: 0, pad_left: 0, seen_header: false }
    }

    /// An I/O error from below: the source's own error or the cancellation if that is what
    /// happened, else a decompression failure.
    fn failure(&self, err: io::Error) -> Error {
        self.state.take_failure().unwrap_or_else(|| bad(format!("corrupt compressed stream ({err})")))
    }

    /// Reads into `buf` until it is full or the input ends; returns the count.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.failure(e)),
            }
        }
        Ok(filled)
    }

    /// Skips `count` bytes, which must be there.
    fn skip(&mut self, mut count: u64) -> Result<()> {
        let mut scratch = [0u8; 8 * BLOCK];
        while count > 0 {
            let want = count.min(scratch.len() as u64) as usize;
            if self.fill(&mut scratch[..want])? < want {
                return Err(bad("unexpected end of input inside a member (truncated archive)"));
            }
            count -= want as u64;
        }
        Ok(())
    }

    /// The next member, or `None` after the end-of-archive block.
    pub(super) fn next_member(&mut self) -> Result<Option<Member>> {
        self.skip(self.data_left + self.pad_left)?;
        self.data_left = 0;
        self.pad_left = 0;
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        let mut pax: Option<Pax> = None;
        loop {
            let mut block = [0u8; BLOCK];
            match self.fill(&mut block)? {
                BLOCK => {}
                0 if !self.seen_header => return Err(bad("empty input")),
                0 => return Err(bad("unexpected end of input: no end-of-archive marker (truncated archive)")),
                _ => return Err(bad("unexpected end of input inside a header (truncated archive)")),
            }
            if header::is_zero_block(&block) {
                if long_name.is_some() || long_link.is_some() || pax.is_some() {
                    return Err(bad("end of archive right after an extended header"));
                }
                // Zero blocks alone are an empty archive (what an empty tree packs to).
                return Ok(None);
            }
            let parsed = header::parse(&block).map_err(|err| {
                if self.seen_header {
                    bad(err)
                } else {
                    bad(format!("this does not look like a tar archive ({err})"))
                }
            })?;
            self.seen_header = true;
            checked_size(parsed.size)?;
            let pending = long_name.is_some() || long_link.is_some() || pax.is_some();
            match parsed.typeflag {
                kind::GNU_LONG_NAME => {
                    if long_name.is_some() {
                        return Err(bad("two GNU long-name records for one member"));
                    }
                    long_name = Some(long_record_value(self.metadata(parsed.size)?, "long-name")?)
                }
                kind::GNU_LONG_LINK => {
                    if long_link.is_some() {
                        return Err(bad("two GNU long-link records for one member"));
                    }
                    long_link = Some(long_record_value(self.metadata(parsed.size)?, "long-link")?)
                }
                kind::PAX_LOCAL => {
                    if pax.is_some() {
                        return Err(bad("two pax extended headers for one member"));
                    }
                    pax = Some(parse_pax(&self.metadata(parsed.size)?)?)
                }
                kind::PAX_GLOBAL | kind::GNU_VOLUME_LABEL if pending => {
                    return Err(bad("a global header or volume label between an extended header and its member"));
                }
                kind::PAX_GLOBAL => {
                    // GNU tar applies a global path, link target or size to the members that
                    // follow and bsdtar ignores it; neither reading is safe to pick.
                    let global = parse_pax(&self.metadata(parsed.size)?)?;
                    if global.path.is_some() || global.linkpath.is_some() || global.size.is_some() {
                        return Err(bad("a global pax header sets a path, link target or size"));
                    }
                }
                kind::GNU_VOLUME_LABEL => self.skip(padded(parsed.size))?,
                _ => {
                    let pax = pax.take().unwrap_or_default();
                    if long_name.is_some() && pax.path.is_some() {
                        return Err(bad("a member named by both a GNU long name and a pax path"));
                    }
                    if long_link.is_some() && pax.linkpath.is_some() {
                        return Err(bad("a member with both a GNU long link and a pax link target"));
                    }
                    let is_link = matches!(parsed.typeflag, kind::SYMLINK | kind::HARD_LINK);
                    if !is_link && (long_link.is_some() || pax.linkpath.is_some()) {
                        return Err(bad("a long link target for a member that is not a link"));
                    }
                    let member = Member {
                        typeflag: parsed.typeflag,
                        path: pax.path.or(long_name.take()).unwrap_or(parsed.name),
                        link: pax.linkpath.or(long_link.take()).unwrap_or(parsed.link),
                        mode: parsed.mode,
                        mtime: pax.mtime.unwrap_or(parsed.mtime),
                        size: pax.size.unwrap_or(parsed.size),
                        sparse: pax.sparse,
                    };
                    self.data_left = member.size;
                    self.pad_left = padded(member.size) - member.size;
                    return Ok(Some(member));
                }
            }
        }
    }

    /// Reads a metadata member's data (and padding), bounded by [`MAX_METADATA`].
    fn metadata(&mut self, size: u64) -> Result<Vec<u8>> {
        if size > MAX_METADATA {
            return Err(bad(format!("extended header of {size} bytes exceeds the {MAX_METADATA}-byte limit")));
        }
        let mut data = vec![0u8; size as usize];
        if self.fill(&mut data)? < data.len() {
            return Err(bad("unexpected end of input inside an extended header (truncated archive)"));
        }
        self.skip(padded(size) - size)?;
        Ok(data)
    }

    /// Reads the current member's data; 0 at its end.
    pub(super) fn read_data(&mut self, buf: &mut [u8]) -> Result<usize> {
        if self.data_left == 0 {
            return Ok(0);
        }
        let want = self.data_left.min(buf.len() as u64) as usize;
        loop {
            match self.inner.read(&mut buf[..want]) {
                Ok(0) => return Err(bad("unexpected end of input inside a member (truncated archive)")),
                Ok(n) => {
                    self.data_left -= n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.failure(e)),
            }
        }
    }

    /// Reads and discards the rest of the input.
    pub(super) fn drain(&mut self) -> Result<()> {
        let mut scratch = [0u8; 8 * BLOCK];
        while self.fill(&mut scratch)? > 0 {}
        Ok(())
    }
}

/// The value of a GNU long-name or long-link record: its data up to the NUL terminator every
/// writer stores, which must come within the declared size and be followed by NULs only. A
/// record without it is refused: read as declared, its last byte would belong to whatever
/// follows (the next header, when a writer declares one byte more than it writes).
fn long_record_value(mut data: Vec<u8>, what: &str) -> Result<Vec<u8>> {
    let Some(end) = data.iter().position(|&b| b == 0) else {
        return Err(bad(format!("GNU {what} record of {} bytes has no NUL terminator", data.len())));
    };
    if data[end..].iter().any(|&b| b != 0) {
        return Err(bad(format!("GNU {what} record has data after its NUL terminator")));
    }
    if end == 0 {
        return Err(bad(format!("empty GNU {what} record")));
    }
    data.truncate(end);
    Ok(data)
}

/// Parses pax records (`"<length> <key>=<value>\n"`).
fn parse_pax(data: &[u8]) -> Result<Pax> {
    let malformed = || bad("malformed pax extended header");
    let mut pax = Pax::default();
    let mut rest = data;
    while !rest.is_empty() {
        if rest.iter().all(|&b| b == 0) {
            break; // some writers pad with NULs
        }
        // The length: decimal digits only (no sign, no spaces), counting the whole record.
        let space = rest.iter().position(|&b| b == b' ').ok_or_else(malformed)?;
        if space == 0 || !rest[..space].iter().all(u8::is_ascii_digit) {
            return Err(malformed());
        }
        let length: usize =
            std::str::from_utf8(&rest[..space]).ok().and_then(|digits| digits.parse().ok()).ok_or_else(malformed)?;
        if length <= space + 1 || length > rest.len() || rest[length - 1] != b'\n' {
            return Err(malformed());
        }
        let record = &rest[space + 1..length - 1];
        rest = &rest[length..];
        let equals = record.iter().position(|&b| b == b'=').ok_or_else(malformed)?;
        let (key, value) = (&record[..equals], &record[equals + 1..]);
        if key.is_empty() {
            return Err(malformed());
        }
        // A field set twice, or a name or link target "unset" by an empty value, has no one
        // reading every tar shares.
        let twice = |set: bool| {
            if set {
                Err(bad(format!("pax extended header sets '{}' twice", String::from_utf8_lossy(key))))
            } else {
                Ok(())
            }
        };
        if value.is_empty() && matches!(key, b"path" | b"linkpath") {
            return Err(bad(format!("pax extended header with an empty '{}'", String::from_utf8_lossy(key))));
        }
        match key {
            b"path" => {
                twice(pax.path.is_some())?;
                pax.path = Some(value.to_vec())
            }
            b"linkpath" => {
                twice(pax.linkpath.is_some())?;
                pax.linkpath = Some(value.to_vec())
            }
            b"size" => {
                twice(pax.size.is_some())?;
                pax.size = Some(checked_size(parse_decimal(value).ok_or_else(malformed)?)?)
            }
            b"mtime" => {
                twice(pax.mtime.is_some())?;
                pax.mtime = Some(parse_pax_time(value).ok_or_else(malformed)?)
            }
            key if key.starts_with(b"GNU.sparse.") => pax.sparse = true,
            _ => {}
        }
    }
    Ok(pax)
}

/// `size` if it is at most [`MAX_MEMBER_SIZE`].
fn checked_size(size: u64) -> Result<u64> {
    if size > MAX_MEMBER_SIZE {
        return Err(bad(format!("member size {size} exceeds the {MAX_MEMBER_SIZE}-byte limit")));
    }
    Ok(size)
}

/// Decimal digits only (`str::parse` would also take a leading `+`).
fn parse_decimal(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// A pax time (`"1700000000.25"`, `"-5"`) in whole seconds, rounded down; `None` when
/// malformed or when that is below `i64::MIN`.
fn parse_pax_time(value: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(value).ok()?;
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seconds: i64 = whole.parse().ok()?;
    let has_fraction = fraction.bytes().any(|b| b != b'0');
    if seconds < 0 || whole.starts_with('-') {
        seconds.checked_sub(i64::from(has_fraction))
    } else {
        Some(seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tar::extract::test_support::*;
    use crate::tar::testutil::*;

    #[test]
    fn long_names() {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        // 40 components of 120 bytes: a 4.8 KB path, past PATH_MAX, through GNU long names.
        let deep: Vec<String> = (0..40).map(|i| format!("{i:03}{}", "n".repeat(117))).collect();
        let deep = deep.join("/");
        let archive = RawArchive::new().file(&format!("{deep}/leaf"), b"deep").finish();
        run(&archive, &dest).unwrap();
        let mut dir = Dir::open(&dest).unwrap();
        for component in deep.split('/') {
            dir = dir.open_dir_nofollow(&c_name(component.as_bytes()).unwrap()).unwrap();
        }
        assert!(dir.node(&c_name(b"leaf").unwrap()).unwrap().is_some());
        // Through a pax path, too.
        let long = format!("{}/pax-file", "p".repeat(200));
        let archive = RawArchive::new().pax(&[("path", long.as_bytes())]).file("short", b"pax").finish();
        run(&archive, &dest).unwrap();
        assert_eq!(fs::read(dest.join(&long)).unwrap(), b"pax");
        // A component over the file system's limit is an OS error, not a panic.
        let archive = RawArchive::new().file(&"x".repeat(300), b"").finish();
        assert_eq!(run(&archive, &dest).unwrap_err().code, "ENAMETOOLONG");
        // A long-name entry over the metadata limit is refused before it is read whole.
        let mut archive = RawArchive::new();
        archive.entry(b'L', b"././@LongLink", b"", 0o644, &vec![b'a'; 2 << 20]).file("x", b"");
        sandbox.refuses(&archive.finish(), codes::BAD_ARCHIVE, "huge long name");
    }

    /// GNU long-name and long-link records and pax headers are read exactly as declared: a
    /// value filling its record to a block boundary is whole, and anything a tar could read
    /// two ways (no NUL terminator, bytes after it, an empty value, two records for one
    /// field, a long link on a member that is no link, a pax length field that disagrees
    /// with its record, a global header naming members) is refused as a bad archive.
    #[test]
    fn extended_records_are_read_exactly() {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        let raw = |typeflag: u8, data: &[u8]| {
            let mut archive = RawArchive::new();
            archive.entry(typeflag, b"././@LongLink", b"", 0o644, data);
            archive
        };
        // Values whose record (value and NUL) ends at, just before and just after a block.
        for len in [101, 510, 511, 512, 513, 1022, 1023, 1024, 1025, 1535, 1536] {
            let name = path_of_len("n", len, 'a', false);
            let target = path_of_len("t", len, '€', true);
            let archive = RawArchive::new().file(&name, b"named").symlink(&format!("link{len}"), &target).finish();
            let summary = run(&archive, &dest).unwrap_or_else(|e| panic!("{len}: {e}"));
            assert_eq!(summary.entries, 2, "{len}");
            assert_eq!(fs::read(dest.join(&name)).unwrap(), b"named");
            assert_eq!(fs::read_link(dest.join(format!("link{len}"))).unwrap(), Path::new(&target));
            // The same through pax, with records of 511 to 513 bytes around the value.
            let pax_name = path_of_len("p", len, 'é', false);
            let archive = RawArchive::new().pax(&[("path", pax_name.as_bytes())]).file("short", b"pax").finish();
            run(&archive, &dest).unwrap_or_else(|e| panic!("pax {len}: {e}"));
            assert_eq!(fs::read(dest.join(&pax_name)).unwrap(), b"pax");
        }
        // A record with NULs to spare is unambiguous.
        let mut padded_name = b"spare/name".to_vec();
        padded_name.resize(1024, 0);
        run(&raw(b'L', &padded_name).file("x", b"spare").finish(), &dest).unwrap();
        assert_eq!(fs::read(dest.join("spare/name")).unwrap(), b"spare");

        // What the packer wrote for a 512-byte name before its fix: a record declaring 513
        // bytes of which the last is the first byte of the member's own header.
        let name = path_of_len("old", 512, 'a', false);
        let mut swallowed = header::long_entry(kind::GNU_LONG_NAME, name.as_bytes()).to_vec();
        swallowed.extend_from_slice(name.as_bytes());
        let mut rest = RawArchive::new();
        rest.entry(b'0', &name.as_bytes()[..100], b"", 0o644, &RawArchive::new().file("evil", b"x").finish());
        swallowed.extend_from_slice(&rest.finish());
        let err = sandbox.refuses(&swallowed, codes::BAD_ARCHIVE, "swallowed header");
        assert!(err.message.contains("NUL"), "{}", err.message);

        let long = "l".repeat(150);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("long name without its NUL", raw(b'L', long.as_bytes()).file("x", b"").finish()),
            ("long name of exactly a block, no NUL", raw(b'L', &[b'm'; 512]).file("x", b"").finish()),
            ("long link without its NUL", raw(b'K', long.as_bytes()).symlink("x", "y").finish()),
            ("bytes after the NUL", raw(b'L', b"first\0second\0").file("x", b"").finish()),
            ("empty long name", raw(b'L', b"\0").file("x", b"").finish()),
            ("zero-size long name", raw(b'L', b"").file("x", b"").finish()),
            ("empty long link", raw(b'K', b"\0\0").symlink("x", "y").finish()),
            (
                "two long names",
                raw(b'L', b"one\0").entry(b'L', b"././@LongLink", b"", 0o644, b"two\0").file("x", b"").finish(),
            ),
            (
                "two long links",
                raw(b'K', b"one\0").entry(b'K', b"././@LongLink", b"", 0o644, b"two\0").symlink("x", "y").finish(),
            ),
            ("a long link on a regular file", raw(b'K', b"target\0").file("x", b"").finish()),
            ("a long link on a directory", raw(b'K', b"target\0").dir("x/", 0o755).finish()),
            (
                "a long name and a pax path",
                raw(b'L', b"gnu-name\0").pax(&[("path", b"pax-name")]).file("x", b"").finish(),
            ),
            (
                "a long link and a pax linkpath",
                raw(b'K', b"gnu-target\0").pax(&[("linkpath", b"pax-target")]).symlink("x", "y").finish(),
            ),
            (
                "two pax headers",
                RawArchive::new().pax(&[("path", b"one")]).pax(&[("mtime", b"5")]).file("x", b"").finish(),
            ),
            ("a pax path twice", RawArchive::new().pax(&[("path", b"one"), ("path", b"two")]).file("x", b"").finish()),
            ("an empty pax path", RawArchive::new().pax(&[("path", b"")]).file("x", b"").finish()),
            ("an empty pax linkpath", RawArchive::new().pax(&[("linkpath", b"")]).symlink("x", "y").finish()),
            ("a pax linkpath on a file", RawArchive::new().pax(&[("linkpath", b"y")]).file("x", b"").finish()),
            ("a pax record without a key", raw(b'x', b"6 =ab\n").file("x", b"").finish()),
            ("a signed pax length", raw(b'x', b"+11 path=a\n").file("x", b"").finish()),
            ("a pax length with a space", raw(b'x', b" 11 path=a\n").file("x", b"").finish()),
            ("a pax length one short", raw(b'x', b"10 path=ab\n").file("x", b"").finish()),
            ("a pax length one long", raw(b'x', b"12 path=a\n").file("x", b"").finish()),
            ("a pax length past its data", raw(b'x', b"600 path=a\n").file("x", b"").finish()),
            ("a signed pax size", RawArchive::new().pax(&[("size", b"+0")]).file("x", b"").finish()),
            ("a global pax path", RawArchive::new().pax_global(&[("path", b"all")]).file("x", b"").finish()),
            ("a global pax size", RawArchive::new().pax_global(&[("size", b"0")]).file("x", b"").finish()),
            (
                "a global header between a long name and its member",
                raw(b'L', b"name\0").pax_global(&[("comment", b"c")]).file("x", b"").finish(),
            ),
        ];
        for (what, archive) in cases {
            sandbox.refuses(&archive, codes::BAD_ARCHIVE, what);
        }
        // A global header with only a comment (what `git archive` writes) is fine.
        let archive = RawArchive::new().pax_global(&[("comment", b"abc123")]).file("g", b"ok").finish();
        run(&archive, &dest).unwrap();
        assert_eq!(fs::read(dest.join("g")).unwrap(), b"ok");
    }

    #[test]
    fn truncated_and_corrupt_archives_are_bad() {
        let sandbox = Sandbox::new();
        let good = RawArchive::new().file("a", &[7u8; 3000]).file("b", b"bee").finish();
        // Cut inside data, at a header boundary (no end marker), inside a header.
        for cut in [600, 1000, 512 + 3072, 512 + 3072 + 100, good.len() - 1024] {
            let err = sandbox.refuses(&good[..cut], codes::BAD_ARCHIVE, &format!("cut at {cut}"));
            assert!(err.message.contains("truncated"), "{}", err.message);
        }
        sandbox.refuses(b"", codes::BAD_ARCHIVE, "empty input");
        sandbox.refuses(&[0x42; 4096], codes::BAD_ARCHIVE, "garbage");
        let mut corrupt = good.clone();
        corrupt[3] ^= 0x20;
        sandbox.refuses(&corrupt, codes::BAD_ARCHIVE, "checksum");
        let mut bad_size = good.clone();
        bad_size[124..136].copy_from_slice(b"0000000009x\0");
        sandbox.refuses(&bad_size, codes::BAD_ARCHIVE, "bad size field");
        // A truncated gzip stream.
        let mut gz = Vec::new();
        {
            let mut encoder = flate2::write::GzEncoder::new(&mut gz, flate2::Compression::default());
            encoder.write_all(&good).unwrap();
            encoder.finish().unwrap();
        }
        sandbox.refuses(&gz[..gz.len() / 2], codes::BAD_ARCHIVE, "truncated gzip");
        let mut flipped = gz.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0xff;
        let err = run(&flipped, &sandbox.dest()).unwrap_err();
        assert_eq!(err.code, codes::BAD_ARCHIVE, "{}", err.message);
        // A malformed pax record.
        let mut pax = RawArchive::new();
        pax.entry(b'x', b"PaxHeader", b"", 0o644, b"99 path=x\n").file("x", b"");
        sandbox.refuses(&pax.finish(), codes::BAD_ARCHIVE, "bad pax");
        // Only zero blocks: an empty archive, which is fine.
        assert_eq!(run(&[0u8; 1024], &sandbox.dest()).unwrap().entries, 0);
    }

    /// Regressions: sizes near 2^64 overflowed the rounding to whole blocks, and a pax mtime
    /// of i64::MIN with a fraction overflowed the rounding down (panics with overflow checks,
    /// as in `cargo test` and the fuzz build; in a release build a directory member of size
    /// 2^64 - 1 made the reader skip nothing and parse its "data" as members).
    #[test]
    fn extreme_sizes_and_times_are_bad_not_overflows() {
        let sandbox = Sandbox::new();
        for size in [u64::MAX, u64::MAX - 511, 1 << 63] {
            let value = size.to_string();
            let archive = RawArchive::new().pax(&[("size", value.as_bytes())]).dir("d/", 0o755).finish();
            let err = sandbox.refuses(&archive, codes::BAD_ARCHIVE, &format!("pax size {size}"));
            assert!(err.message.contains("exceeds"), "{}", err.message);
            let archive = base256_size(RawArchive::new().dir("d/", 0o755).finish(), size);
            let err = sandbox.refuses(&archive, codes::BAD_ARCHIVE, &format!("base-256 {size}"));
            assert!(err.message.contains("exceeds"), "{}", err.message);
            let mut label = RawArchive::new();
            label.entry(b'V', b"label", b"", 0o644, b"").file("x", b"");
            let archive = base256_size(label.finish(), size);
            sandbox.refuses(&archive, codes::BAD_ARCHIVE, &format!("volume label size {size}"));
        }
        // The largest size accepted is a truncated archive, not an overflow.
        let value = (i64::MAX as u64).to_string();
        let archive = RawArchive::new().pax(&[("size", value.as_bytes())]).file("f", b"").finish();
        // No file system has that much room: the free-space guard refuses it at its header.
        sandbox.refuses(&archive, codes::INSUFFICIENT_SPACE, "pax size i64::MAX");
        let no_floor = limited(ArchiveLimits { min_free_bytes: Some(0), ..Default::default() });
        let err = extract(&archive[..], &sandbox.dest(), &no_floor, |_| {}, &AtomicBool::new(false)).unwrap_err();
        assert_eq!(err.code, codes::BAD_ARCHIVE, "{}", err.message);
        assert!(err.message.contains("truncated"), "{}", err.message);

        let archive = RawArchive::new().pax(&[("mtime", b"-9223372036854775808.5")]).file("f", b"").finish();
        sandbox.refuses(&archive, codes::BAD_ARCHIVE, "pax mtime below i64::MIN");
        assert_eq!(parse_pax_time(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_pax_time(b"-9223372036854775807.5"), Some(i64::MIN));
        assert_eq!(parse_pax_time(b"-0.5"), Some(-1));
        assert_eq!(parse_pax_time(b"9223372036854775807.9"), Some(i64::MAX));
    }

    /// `archive` with its first header's size field in base-256 (0x80, zeros, then `size`
    /// big-endian) and its checksum recomputed.
    fn base256_size(mut archive: Vec<u8>, size: u64) -> Vec<u8> {
        archive[124] = 0x80;
        archive[125..128].fill(0);
        archive[128..136].copy_from_slice(&size.to_be_bytes());
        archive[148..156].fill(b' ');
        let sum: u32 = archive[..512].iter().map(|&b| u32::from(b)).sum();
        archive[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        archive
    }

    /// GNU tar's own archives in its gnu, pax and ustar formats extract to the same tree.
    #[test]
    fn reads_gnu_tar_formats() {
        if !have_gnu_tar("reads_gnu_tar_formats") {
            return;
        }
        for (format, long_names) in [("gnu", true), ("pax", true), ("ustar", false), ("oldgnu", true)] {
            for case in 0..4 {
                let seed = 0xf0_0000 + case;
                let mut rng = Rng::new(seed);
                let src = TempDir::new("extract-fmt");
                let options =
                    TreeOptions { long_names, modes_and_times: true, inside_links: true, ..Default::default() };
                build_tree(&mut rng, src.path(), &options);
                let names = crate::walk::sorted_names(src.path()).unwrap();
                let mut command = tar_command("tar");
                command
                    .args(["-c", "--no-unquote", &format!("--format={format}"), "-f", "-", "-C"])
                    .arg(src.path())
                    .args(["--exclude", "._*", "--"])
                    .args(&names);
                let archive = run_with_input(command, b"");
                let out = TempDir::new("extract-fmt-out");
                run(&archive, out.path()).unwrap_or_else(|e| panic!("{format} seed {seed}: {e}"));
                assert_same_tree(
                    &snapshot(out.path(), true),
                    &expected_after_extract(src.path()),
                    &format!("{format} seed {seed}"),
                );
            }
        }
        // An archive of `.` has a `./` entry and `./` prefixes.
        let src = TempDir::new("extract-dot");
        fs::write(src.join("f"), b"dot").unwrap();
        let mut command = tar_command("tar");
        command.args(["-c", "-f", "-", "-C"]).arg(src.path()).arg(".");
        let archive = run_with_input(command, b"");
        let out = TempDir::new("extract-dot-out");
        assert_eq!(run(&archive, out.path()).unwrap().entries, 1);
        assert_eq!(fs::read(out.join("f")).unwrap(), b"dot");
    }

    /// GNU tar's gnu, oldgnu and pax archives of names and link targets at every length
    /// boundary, and its ustar archives of names split at exactly 155 + 100 bytes, extract to
    /// the same tree.
    #[test]
    fn reads_gnu_tar_formats_at_every_boundary() {
        if !have_gnu_tar("reads_gnu_tar_formats_at_every_boundary") {
            return;
        }
        let create = |src: &Path, format: &str| {
            let names = crate::walk::sorted_names(src).unwrap();
            let mut command = tar_command("tar");
            command
                .args(["-c", "--no-unquote", &format!("--format={format}"), "-f", "-", "-C"])
                .arg(src)
                .arg("--")
                .args(&names);
            run_with_input(command, b"")
        };
        let src = TempDir::new("extract-bound");
        build_boundary_tree(src.path());
        for format in ["gnu", "oldgnu", "pax"] {
            let out = TempDir::new("extract-bound-out");
            run(&create(src.path(), format), out.path()).unwrap_or_else(|e| panic!("{format}: {e}"));
            assert_same_tree(&snapshot(out.path(), true), &snapshot(src.path(), true), format);
        }
        // ustar: a prefix of up to 155 bytes, a name of up to 100, a 100-byte link target.
        let src = TempDir::new("extract-ustar");
        for (prefix, name) in [(155, 100), (154, 100), (155, 99), (100, 100), (6, 100), (155, 1)] {
            for (fill, pad_first) in [('a', false), ('€', true)] {
                // Components of at most 90 bytes, so that each directory fits ustar, too.
                let mut dir = format!("u{prefix}");
                while dir.len() < prefix {
                    let left = prefix - dir.len() - 1;
                    let size = if left > 90 { 90.min(left - 2) } else { left };
                    dir = format!("{dir}/{}", filled(size, fill, pad_first));
                }
                let file = format!("{dir}/{}", filled(name, fill, pad_first));
                fs::create_dir_all(src.join(&dir)).unwrap();
                fs::write(src.join(&file), planted_tar(&format!("{prefix}-{name}"))).unwrap();
            }
        }
        let target = filled(100, '€', false);
        std::os::unix::fs::symlink(&target, src.join("link")).unwrap();
        let out = TempDir::new("extract-ustar-out");
        run(&create(src.path(), "ustar"), out.path()).unwrap();
        assert_same_tree(&snapshot(out.path(), true), &snapshot(src.path(), true), "ustar");
    }
}
