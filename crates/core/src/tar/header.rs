//! The 512-byte tar header: writing GNU-format headers (what `tar -c` writes by default) and
//! reading GNU, POSIX ustar/pax and old V7 headers.

/// The tar block size.
pub(crate) const BLOCK: usize = 512;

/// Longest name or link target that fits in a header field without a GNU long-name entry.
pub(crate) const NAME_FIELD: usize = 100;

/// The name GNU tar gives its long-name and long-link pseudo entries.
const LONG_LINK_NAME: &[u8] = b"././@LongLink";

/// Entry type flags.
pub(crate) mod kind {
    pub const REGULAR: u8 = b'0';
    pub const REGULAR_OLD: u8 = b'\0';
    pub const HARD_LINK: u8 = b'1';
    pub const SYMLINK: u8 = b'2';
    pub const CHAR_DEVICE: u8 = b'3';
    pub const BLOCK_DEVICE: u8 = b'4';
    pub const DIRECTORY: u8 = b'5';
    pub const FIFO: u8 = b'6';
    pub const CONTIGUOUS: u8 = b'7';
    pub const GNU_LONG_NAME: u8 = b'L';
    pub const GNU_LONG_LINK: u8 = b'K';
    pub const GNU_VOLUME_LABEL: u8 = b'V';
    pub const PAX_LOCAL: u8 = b'x';
    pub const PAX_GLOBAL: u8 = b'g';
}

// Field offsets of the header block.
const NAME: std::ops::Range<usize> = 0..100;
const MODE: std::ops::Range<usize> = 100..108;
const UID: std::ops::Range<usize> = 108..116;
const GID: std::ops::Range<usize> = 116..124;
const SIZE: std::ops::Range<usize> = 124..136;
const MTIME: std::ops::Range<usize> = 136..148;
const CHECKSUM: std::ops::Range<usize> = 148..156;
const TYPEFLAG: usize = 156;
const LINKNAME: std::ops::Range<usize> = 157..257;
const MAGIC: std::ops::Range<usize> = 257..265;
const UNAME: std::ops::Range<usize> = 265..297;
const GNAME: std::ops::Range<usize> = 297..329;
const DEVMAJOR: std::ops::Range<usize> = 329..337;
const DEVMINOR: std::ops::Range<usize> = 337..345;
const PREFIX: std::ops::Range<usize> = 345..500;

/// GNU tar's magic and version (`"ustar  \0"`).
const GNU_MAGIC: &[u8; 8] = b"ustar  \0";
/// POSIX ustar's magic (`"ustar\0"`), followed by the version `"00"`.
const USTAR_MAGIC: &[u8; 6] = b"ustar\0";

/// What one header describes, for writing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeaderSpec<'a> {
    /// The member name; only its first 100 bytes are stored here (see [`long_entry`]).
    pub name: &'a [u8],
    /// The link target of a symlink or hard link; first 100 bytes stored.
    pub link: &'a [u8],
    pub typeflag: u8,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub size: u64,
    pub mtime: i64,
    pub uname: &'a [u8],
    pub gname: &'a [u8],
    /// Device numbers, written for character and block devices only.
    pub device: Option<(u64, u64)>,
}

/// Encodes a GNU-format header block.
pub(crate) fn encode(spec: &HeaderSpec<'_>) -> [u8; BLOCK] {
    let mut block = [0u8; BLOCK];
    put_bytes(&mut block[NAME], spec.name);
    put_number(&mut block[MODE], u64::from(spec.mode));
    put_number(&mut block[UID], spec.uid);
    put_number(&mut block[GID], spec.gid);
    put_number(&mut block[SIZE], spec.size);
    put_signed(&mut block[MTIME], spec.mtime);
    block[TYPEFLAG] = spec.typeflag;
    put_bytes(&mut block[LINKNAME], spec.link);
    block[MAGIC].copy_from_slice(GNU_MAGIC);
    put_bytes(&mut block[UNAME], spec.uname);
    put_bytes(&mut block[GNAME], spec.gname);
    if let Some((major, minor)) = spec.device {
        put_number(&mut block[DEVMAJOR], major);
        put_number(&mut block[DEVMINOR], minor);
    }
    let sum = checksum(&block);
    // Six octal digits, NUL, space: the layout every tar writes.
    let digits = format!("{:06o}", sum & 0o777_777);
    block[CHECKSUM.start..CHECKSUM.start + 6].copy_from_slice(digits.as_bytes());
    block[CHECKSUM.start + 6] = 0;
    block[CHECKSUM.start + 7] = b' ';
    block
}

/// The header of a GNU long-name (`L`) or long-link (`K`) pseudo entry carrying `value`; its
/// data is `value` plus a NUL, padded to a block. Laid out as GNU tar 1.34 writes it.
pub(crate) fn long_entry(typeflag: u8, value: &[u8]) -> [u8; BLOCK] {
    encode(&HeaderSpec {
        name: LONG_LINK_NAME,
        link: b"",
        typeflag,
        mode: 0o644,
        uid: 0,
        gid: 0,
        size: value.len() as u64 + 1,
        mtime: 0,
        uname: b"root",
        gname: b"root",
        device: None,
    })
}

/// Bytes a name or link target of `len` bytes costs beyond the main header: nothing when it
/// fits the field, else a long-name header plus its padded data (value and NUL).
pub(crate) fn long_entry_cost(len: usize) -> u64 {
    if len <= NAME_FIELD {
        0
    } else {
        BLOCK as u64 + padded(len as u64 + 1)
    }
}

/// `size` rounded up to whole blocks.
pub(crate) fn padded(size: u64) -> u64 {
    size.div_ceil(BLOCK as u64) * BLOCK as u64
}

/// Copies as much of `value` as fits; the rest of the field stays NUL.
fn put_bytes(field: &mut [u8], value: &[u8]) {
    let len = value.len().min(field.len());
    field[..len].copy_from_slice(&value[..len]);
}

/// Writes a non-negative number as zero-padded octal with a NUL terminator, or in GNU's
/// base-256 form (high bit set, big-endian) when it does not fit.
fn put_number(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    if digits * 3 >= 64 || value < 1u64 << (3 * digits) {
        let text = format!("{value:0digits$o}");
        field[..digits].copy_from_slice(text.as_bytes());
        field[digits] = 0;
    } else {
        put_base256(field, value.to_be_bytes(), 0);
        field[0] |= 0x80;
    }
}

/// Like [`put_number`], with GNU's two's-complement base-256 form for negative values.
fn put_signed(field: &mut [u8], value: i64) {
    match u64::try_from(value) {
        Ok(value) => put_number(field, value),
        Err(_) => put_base256(field, value.to_be_bytes(), 0xff),
    }
}

/// Right-aligns `bytes` in `field`, filling the left with `fill`.
fn put_base256(field: &mut [u8], bytes: [u8; 8], fill: u8) {
    let len = field.len();
    if len >= 8 {
        field[..len - 8].fill(fill);
        field[len - 8..].copy_from_slice(&bytes);
    } else {
        field.copy_from_slice(&bytes[8 - len..]);
    }
}

/// The unsigned header checksum, counting the checksum field as spaces.
fn checksum(block: &[u8; BLOCK]) -> u32 {
    block.iter().enumerate().map(|(i, &b)| if CHECKSUM.contains(&i) { u32::from(b' ') } else { u32::from(b) }).sum()
}

/// The same sum over signed bytes, which some historic tars wrote.
fn signed_checksum(block: &[u8; BLOCK]) -> i64 {
    block
        .iter()
        .enumerate()
        .map(|(i, &b)| if CHECKSUM.contains(&i) { i64::from(b' ') } else { i64::from(b as i8) })
        .sum()
}

/// A header as read from an archive, before GNU long names and pax records are applied.
#[derive(Debug, Clone)]
pub(crate) struct ParsedHeader {
    pub typeflag: u8,
    pub name: Vec<u8>,
    pub link: Vec<u8>,
    pub mode: u32,
    pub size: u64,
    pub mtime: i64,
}

/// Why a header block was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeaderError {
    Checksum,
    Field(&'static str),
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::Checksum => f.write_str("header checksum mismatch"),
            HeaderError::Field(field) => write!(f, "invalid {field} field in header"),
        }
    }
}

/// True for an end-of-archive block.
pub(crate) fn is_zero_block(block: &[u8; BLOCK]) -> bool {
    block.iter().all(|&b| b == 0)
}

/// Parses one (non-zero) header block.
pub(crate) fn parse(block: &[u8; BLOCK]) -> Result<ParsedHeader, HeaderError> {
    let stored = parse_number(&block[CHECKSUM]).ok_or(HeaderError::Checksum)?;
    if stored != i128::from(checksum(block)) && stored != i128::from(signed_checksum(block)) {
        return Err(HeaderError::Checksum);
    }
    let typeflag = block[TYPEFLAG];
    let mut name = until_nul(&block[NAME]).to_vec();
    if block[MAGIC.start..MAGIC.start + 6] == *USTAR_MAGIC {
        let prefix = until_nul(&block[PREFIX]);
        if !prefix.is_empty() {
            let mut full = prefix.to_vec();
            full.push(b'/');
            full.extend_from_slice(&name);
            name = full;
        }
    }
    let mode = parse_number(&block[MODE]).ok_or(HeaderError::Field("mode"))?;
    let size = parse_number(&block[SIZE]).ok_or(HeaderError::Field("size"))?;
    let mtime = parse_number(&block[MTIME]).ok_or(HeaderError::Field("mtime"))?;
    Ok(ParsedHeader {
        typeflag,
        name,
        link: until_nul(&block[LINKNAME]).to_vec(),
        mode: u32::try_from(mode & 0o7777).map_err(|_| HeaderError::Field("mode"))?,
        size: u64::try_from(size).map_err(|_| HeaderError::Field("size"))?,
        mtime: i64::try_from(mtime).map_err(|_| HeaderError::Field("mtime"))?,
    })
}

/// The bytes of a field up to its first NUL.
fn until_nul(field: &[u8]) -> &[u8] {
    match field.iter().position(|&b| b == 0) {
        Some(end) => &field[..end],
        None => field,
    }
}

/// Reads a numeric field: octal digits (leading spaces allowed, ended by a space, a NUL or the
/// field's end) or GNU base-256. An empty field is zero. `None` for anything else.
fn parse_number(field: &[u8]) -> Option<i128> {
    let first = *field.first()?;
    if first & 0x80 != 0 {
        // Base-256: a two's-complement big-endian number once the marker bit is dropped
        // (0x80 starts a positive number, 0xff a negative one).
        let negative = first == 0xff;
        let mut value: i128 = if negative { -1 } else { i128::from(first & 0x7f) };
        for &byte in &field[1..] {
            value = value.checked_mul(256)?.checked_add(i128::from(byte))?;
        }
        return (value.unsigned_abs() <= u128::from(u64::MAX)).then_some(value);
    }
    let text = until_nul(field);
    let text = match text.iter().position(|&b| b != b' ') {
        Some(start) => &text[start..],
        None => return Some(0),
    };
    let end = text.iter().position(|&b| b == b' ').unwrap_or(text.len());
    if text[end..].iter().any(|&b| b != b' ') {
        return None;
    }
    let digits = &text[..end];
    let mut value: i128 = 0;
    for &digit in digits {
        if !(b'0'..=b'7').contains(&digit) {
            return None;
        }
        value = value.checked_mul(8)?.checked_add(i128::from(digit - b'0'))?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &[u8]) -> HeaderSpec<'_> {
        HeaderSpec {
            name,
            link: b"",
            typeflag: kind::REGULAR,
            mode: 0o644,
            uid: 1000,
            gid: 100,
            size: 5,
            mtime: 1_700_000_000,
            uname: b"user",
            gname: b"users",
            device: None,
        }
    }

    #[test]
    fn encoded_headers_parse_back() {
        let block = encode(&spec(b"dir/file.txt"));
        assert_eq!(&block[257..265], b"ustar  \0");
        assert_eq!(&block[100..108], b"0000644\0");
        assert_eq!(&block[124..136], b"00000000005\0");
        let parsed = parse(&block).unwrap();
        assert_eq!(parsed.name, b"dir/file.txt");
        assert_eq!(parsed.typeflag, kind::REGULAR);
        assert_eq!(parsed.mode, 0o644);
        assert_eq!(parsed.size, 5);
        assert_eq!(parsed.mtime, 1_700_000_000);
    }

    #[test]
    fn big_and_negative_numbers_use_base256() {
        let mut s = spec(b"big");
        s.size = 20 * 1024 * 1024 * 1024; // over the 8 GiB octal limit
        s.mtime = -86_400;
        s.uid = 1 << 40;
        let block = encode(&s);
        assert_eq!(block[124], 0x80);
        assert_eq!(block[136], 0xff);
        let parsed = parse(&block).unwrap();
        assert_eq!(parsed.size, 20 * 1024 * 1024 * 1024);
        assert_eq!(parsed.mtime, -86_400);
    }

    #[test]
    fn corrupt_checksums_are_rejected() {
        let mut block = encode(&spec(b"f"));
        block[0] = b'g';
        assert_eq!(parse(&block).unwrap_err(), HeaderError::Checksum);
    }

    #[test]
    fn ustar_prefix_is_joined() {
        let mut block = [0u8; BLOCK];
        block[..4].copy_from_slice(b"name");
        block[100..108].copy_from_slice(b"0000644\0");
        block[124..136].copy_from_slice(b"00000000000\0");
        block[136..148].copy_from_slice(b"00000000000\0");
        block[156] = b'0';
        block[257..263].copy_from_slice(b"ustar\0");
        block[263..265].copy_from_slice(b"00");
        block[345..351].copy_from_slice(b"prefix");
        let sum = checksum(&block);
        block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        assert_eq!(parse(&block).unwrap().name, b"prefix/name");
    }

    #[test]
    fn long_entries_cost_what_gnu_tar_writes() {
        assert_eq!(long_entry_cost(100), 0);
        assert_eq!(long_entry_cost(101), 1024);
        assert_eq!(long_entry_cost(511), 1024);
        assert_eq!(long_entry_cost(512), 1536);
        let block = long_entry(kind::GNU_LONG_NAME, &[b'x'; 120]);
        assert_eq!(&block[..13], b"././@LongLink");
        assert_eq!(&block[124..136], b"00000000171\0");
        assert_eq!(block[156], b'L');
    }
}
