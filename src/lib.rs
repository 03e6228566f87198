//! napi-rs binding layer of `@paperclipai/adapter-utils-native`.
//!
//! Only argument conversion, error mapping and scheduling live here; the logic is in the
//! `paperclip-sync-core` crate. The raw binding this produces (`native/binding.cjs`) is
//! internal: the public API is the ESM layer in `index.js` and `lib/`.

#![deny(clippy::all)]
// Exports are reached through napi's load-time registration, which a `cargo test` binary
// never runs, so its unit tests would see them as dead code.
#![cfg_attr(test, allow(dead_code))]

mod cancel;
mod constants;
mod error;
mod exclude;
mod handles;
mod ignore_scan;
mod merge;
mod progress;
mod runtime;
mod snapshot;
mod snapshot_watch;
mod ssh;
mod staging;
mod tar;
