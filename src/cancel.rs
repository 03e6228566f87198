//! Cancellation tokens: the JS layer turns an `AbortSignal` into a token id, and the native
//! work polls the token's flag between units of work (a directory, a buffer of a file).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use napi_derive::napi;

fn tokens() -> &'static Mutex<HashMap<u32, Arc<AtomicBool>>> {
    static TOKENS: OnceLock<Mutex<HashMap<u32, Arc<AtomicBool>>>> = OnceLock::new();
    TOKENS.get_or_init(|| Mutex::new(HashMap::new()))
}

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// Creates a cancellation token and returns its id (internal; used by the JS layer).
#[napi]
pub fn cancel_token_create() -> u32 {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut map) = tokens().lock() {
        map.insert(id, Arc::new(AtomicBool::new(false)));
    }
    id
}

/// Signals the token's work to stop (internal).
#[napi]
pub fn cancel_token_abort(id: u32) {
    if let Some(flag) = tokens().lock().ok().and_then(|map| map.get(&id).cloned()) {
        flag.store(true, Ordering::Relaxed);
    }
}

/// Forgets a token once its call settled (internal).
#[napi]
pub fn cancel_token_release(id: u32) {
    if let Ok(mut map) = tokens().lock() {
        map.remove(&id);
    }
}

/// The flag behind a token id; a fresh, never-set flag when there is none.
pub fn flag(id: Option<u32>) -> Arc<AtomicBool> {
    id.and_then(|id| tokens().lock().ok().and_then(|map| map.get(&id).cloned()))
        .unwrap_or_else(|| Arc::new(AtomicBool::new(false)))
}
