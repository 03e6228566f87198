//! Hot path 4: tar archives written and read in-process.
//!
//! * [`TarExcludeSet`]: GNU tar's default `--exclude` semantics (U§3.5).
//! * [`pack`], [`precompute_size`], [`pack_to_file`]: a directory as a tar stream with exactly
//!   the members `tar -c --no-xattrs [-h] -C root --exclude ._* --exclude … -- <names>`
//!   archives (U§7.1), GNU-format headers, optional gzip.
//! * [`extract`]: a tar or tar.gz stream into a directory, refusing every member that would
//!   land or point outside it.
//!
//! Nothing here knows about Node-API; errors are [`crate::error::Error`]s with stable codes.

mod dirfd;
mod exclude;
mod extract;
mod header;
mod pack;
mod stream;
#[cfg(test)]
mod testutil;
mod walk;

pub use exclude::TarExcludeSet;
pub use extract::{extract, ExtractOptions, ExtractSummary};
pub use pack::{
    pack, pack_to_file, precompute_size, PackOptions, PackSummary, APPLE_DOUBLE_EXCLUDE,
};
