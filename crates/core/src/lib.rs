//! Pure-Rust core of `@paperclipai/adapter-utils-native`.
//!
//! Nothing in this crate knows about Node-API: the binding crate at the repository root
//! converts arguments and errors and schedules the work; the logic lives here and is tested
//! with `cargo test`.
//!
//! Features (both default): `git` for `ignore_scan` (libgit2) and `ssh` for `ssh`
//! (libssh2, OpenSSL); without them the crate builds in seconds (the fuzz crate does).

// `libc::stat`'s field types differ by platform (`st_dev` is `u64` on Linux, `i32` on
// darwin; `st_mode` `u32` and `u16`): the casts that are no-ops on one are needed on another.
#![allow(clippy::unnecessary_cast)]

pub mod error;
pub mod exclude;
pub mod fsat;
pub mod host_key;
#[cfg(feature = "git")]
pub mod ignore_scan;
pub mod merge;
pub mod pipe;
pub mod remote_start;
pub mod reserved;
pub mod snapshot;
pub mod snapshot_watch;
#[cfg(feature = "ssh")]
pub mod ssh;
pub mod staging;
pub mod tar;
pub mod walk;
pub mod worker;
