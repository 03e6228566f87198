//! Core errors → JS errors with stable codes.
//!
//! A native rejection carries the code as napi's status and the details (message, errno,
//! syscall, path) as JSON in the reason; `lib/native.js` turns that into a JS `Error` shaped
//! like Node's own (`error.code`, `error.errno`, `error.syscall`, `error.path`), or into an
//! `AbortError` for a cancelled call. The JSON never holds more than the core error did.

use paperclip_sync_core::error::Error as CoreError;
use serde::Serialize;

/// Marks a reason as structured, so the JS layer only parses what we produced.
pub const STRUCTURED_PREFIX: &str = "\u{0}paperclip-native:";

#[derive(Serialize)]
struct Details<'a> {
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    errno: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    syscall: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
}

/// The napi error for a core error.
pub fn to_napi(err: CoreError) -> napi::Error {
    let details = Details {
        message: &err.message,
        errno: err.errno,
        syscall: err.syscall,
        path: err.path.as_ref().map(|p| p.to_string_lossy().into_owned()),
    };
    let json = serde_json::to_string(&details).unwrap_or_else(|_| "{}".to_string());
    napi::Error::new(napi::Status::GenericFailure, format!("{STRUCTURED_PREFIX}{}\u{0}{json}", err.code))
}

/// The napi error for a failed join of a blocking task (a panic in native code).
pub fn join_error(err: tokio::task::JoinError) -> napi::Error {
    to_napi(CoreError::new(paperclip_sync_core::error::codes::INTERNAL, format!("native task failed: {err}")))
}

/// Runs blocking core work on the runtime's bounded blocking pool.
pub async fn run_blocking<T, F>(work: F) -> napi::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, CoreError> + Send + 'static,
{
    tokio::task::spawn_blocking(work).await.map_err(join_error)?.map_err(to_napi)
}
