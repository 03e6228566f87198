//! Tar archives written and read in-process.
//!
//! * [`TarExcludeSet`]: GNU tar's default `--exclude` semantics.
//! * [`pack`], [`precompute_size`], [`pack_to_file`]: a directory as a tar stream with exactly
//!   the members `tar -c --no-xattrs [-h] -C root --exclude ._* --exclude … -- <names>`
//!   archives (upstream's `createTarballFromDirectory`), GNU-format headers, optional gzip.
//! * [`extract`]: a tar or tar.gz stream into a directory, refusing every member that would
//!   land or point outside it.
//!
//! Nothing here knows about Node-API; errors are [`crate::error::Error`]s with stable codes.
//!
//! Where the stream differs from what `tar -c` writes (the member set never does):
//!
//! * No padding to tar's 10 240-byte records: the stream ends after the two zero blocks, so
//!   its size is exactly [`precompute_size`]. Every tar reads it.
//! * Hard links are stored as regular files (each name with its own copy of the data).
//! * GNU tar unquotes the names given after `--` (`a\b` becomes `a` + backspace + … and
//!   upstream's `tar … -- 'a\b'` fails with "Cannot stat"); here names are taken as they are.
//! * A symbolic-link cycle under `follow_symlinks` is an error; `tar -h` descends until the
//!   path is too long.
//! * With gzip, pieces of file data whose bytes look incompressible (evenly spread, no
//!   nearby repeats) are written as stored deflate blocks, never compressed; the rest is
//!   zlib-rs at the chosen level. `gzip -N` would try to compress everything.
//!
//! GNU tar behaviour found while testing against GNU tar 1.34 on glibc 2.36 and reproduced
//! by [`TarExcludeSet`]: in a UTF-8 locale `fnmatch` tries wide characters, then bytes (so
//! `??` excludes `é`); an unterminated `[` is always literal; a pattern ending in `/` excludes
//! nothing. bsdtar, by contrast, strips a leading `\` from member names when extracting
//! unless given `-P`.

mod exclude;
mod extract;
#[cfg(test)]
mod fuzz_seeds;
mod gzip;
mod header;
mod members;
mod pack;
mod stream;
#[cfg(test)]
mod testutil;
mod walk;

pub use exclude::TarExcludeSet;
pub(crate) use extract::roll_forward;
pub use extract::{default_min_free_bytes, extract, ArchiveLimits, ExtractOptions, ExtractSummary};
pub use members::MemberRecord;
pub use pack::{
    member_records, pack, pack_selected, pack_to_file, precompute_size, precompute_size_selected, PackOptions,
    PackSummary, APPLE_DOUBLE_EXCLUDE,
};
