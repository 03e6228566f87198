//! Cancellation tokens: the JS layer turns an `AbortSignal` into a token id, and the native
//! work polls the token's flag between units of work (a directory, a buffer of a file).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use napi_derive::napi;

use crate::handles::Handles;

static TOKENS: Handles<AtomicBool> = Handles::new();

/// Creates a cancellation token and returns its id (internal; used by the JS layer).
#[napi]
pub fn cancel_token_create() -> u32 {
    TOKENS.insert(Arc::new(AtomicBool::new(false)))
}

/// Signals the token's work to stop (internal).
#[napi]
pub fn cancel_token_abort(id: u32) {
    if let Some(flag) = TOKENS.get(id) {
        flag.store(true, Ordering::Relaxed);
    }
}

/// Forgets a token once its call settled (internal).
#[napi]
pub fn cancel_token_release(id: u32) {
    TOKENS.remove(id);
}

/// The flag behind a token id; a fresh, never-set flag when there is none.
pub fn flag(id: Option<u32>) -> Arc<AtomicBool> {
    id.and_then(|id| TOKENS.get(id)).unwrap_or_else(|| Arc::new(AtomicBool::new(false)))
}
