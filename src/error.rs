//! Core errors → JS errors with stable codes.
//!
//! A native rejection carries its details (code, message, errno, syscall, path, and for a
//! breached archive limit the limit's name and value) as JSON in the reason, behind a prefix;
//! `lib/native.js` turns that into a JS `Error` shaped like Node's own (`error.code`,
//! `error.errno`, `error.syscall`, `error.path`), or into an `AbortError` for a cancelled call.
//! napi's own `Error` reaches JS with only a `code` (its status), a message and a `cause`,
//! hence the payload. The JSON never holds more than the core error did.

use std::collections::HashMap;

use napi_derive::napi;
use paperclip_sync_core::error::{codes, Error as CoreError};
use serde::Serialize;

/// Our stable error codes by name (`{ INVALID_ARGUMENT: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT",
/// … }`): the core crate's table, which the JS layer reads instead of repeating the strings.
#[napi]
pub fn error_codes() -> HashMap<&'static str, &'static str> {
    codes::ALL.iter().copied().collect()
}

/// Marks a reason as structured, so the JS layer only parses what we produced (read by
/// `lib/native.js` as `constants.structuredErrorPrefix`, see `src/constants.rs`).
pub const STRUCTURED_PREFIX: &str = "\u{0}paperclip-native:";

/// What crosses to JS for one core error.
#[derive(Serialize)]
struct Payload<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    errno: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    syscall: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<u64>,
}

/// The napi error for a core error.
pub fn to_napi(err: CoreError) -> napi::Error {
    let payload = Payload {
        code: &err.code,
        message: &err.message,
        errno: err.errno,
        syscall: err.syscall,
        path: err.path.as_ref().map(|p| p.to_string_lossy().into_owned()),
        limit: err.limit.map(|(name, _)| name),
        value: err.limit.map(|(_, value)| value),
    };
    // Serializing strings and integers cannot fail; `lib/native.js` reads `{}` as internal.
    let json = serde_json::to_string(&payload).unwrap_or_else(|_| "{}".to_string());
    napi::Error::new(napi::Status::GenericFailure, format!("{STRUCTURED_PREFIX}{json}"))
}

/// The napi error for a failed join of a blocking task (a panic in native code).
pub fn join_error(err: tokio::task::JoinError) -> napi::Error {
    to_napi(CoreError::new(codes::INTERNAL, format!("native task failed: {err}")))
}

/// Runs blocking core work on the runtime's bounded blocking pool.
pub async fn run_blocking<T, F>(work: F) -> napi::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, CoreError> + Send + 'static,
{
    tokio::task::spawn_blocking(work).await.map_err(join_error)?.map_err(to_napi)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The payload `lib/native.js` parses: the prefix, then one JSON object with only the
    /// fields the core error has.
    #[test]
    fn the_payload_carries_every_field_and_nothing_more() {
        let io = std::io::Error::from_raw_os_error(libc_enoent());
        let err = to_napi(CoreError::io(io, "open", std::path::Path::new("/x/\"q\"")));
        let json: serde_json::Value =
            serde_json::from_str(err.reason.strip_prefix(STRUCTURED_PREFIX).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "code": "ENOENT",
                "message": "ENOENT: no such file or directory, open '/x/\"q\"'",
                "errno": -libc_enoent(),
                "syscall": "open",
                "path": "/x/\"q\"",
            })
        );
        let limited = CoreError::new(codes::ARCHIVE_LIMIT_EXCEEDED, "archive limit exceeded").with_limit("maxBytes", 7);
        let json: serde_json::Value =
            serde_json::from_str(to_napi(limited).reason.strip_prefix(STRUCTURED_PREFIX).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "code": codes::ARCHIVE_LIMIT_EXCEEDED,
                "message": "archive limit exceeded",
                "limit": "maxBytes",
                "value": 7,
            })
        );
    }

    /// `ENOENT` (2 on Linux and macOS; the binding does not depend on `libc`).
    fn libc_enoent() -> i32 {
        2
    }
}
