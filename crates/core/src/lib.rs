//! Pure-Rust core of `@paperclipai/adapter-utils-native`.
//!
//! Nothing in this crate knows about Node-API: the binding crate at the repository root
//! converts arguments and errors and schedules the work; the logic lives here and is tested
//! with `cargo test`.

pub mod error;
pub mod exclude;
pub mod fsat;
pub mod ignore_scan;
pub mod merge;
pub mod snapshot;
pub mod ssh;
pub mod tar;
pub mod walk;
