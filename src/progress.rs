//! Byte progress from native work to a JS callback: a running count forwarded through a
//! non-blocking threadsafe function, coalesced so the JS thread is never flooded. Shared by
//! the tar and SSH bindings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::bindgen_prelude::Unknown;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;

/// Shortest time between two progress calls into JS.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(25);

/// A progress callback: receives a running byte count.
pub(crate) type ProgressCallback = ThreadsafeFunction<f64, Unknown<'static>, f64, Status, false>;

/// Forwards a running byte count to a JS callback without flooding the JS thread: a call
/// is made only when none is queued and [`PROGRESS_INTERVAL`] passed since the last one.
/// The final count is not guaranteed to arrive; callers report it from the result.
pub(crate) struct Progress {
    callback: Option<ProgressCallback>,
    queued: Arc<AtomicBool>,
    last: Option<Instant>,
}

impl Progress {
    /// A forwarder to `callback` (`None`: updates go nowhere).
    pub(crate) fn new(callback: Option<ProgressCallback>) -> Self {
        Progress { callback, queued: Arc::new(AtomicBool::new(false)), last: None }
    }

    /// Reports `bytes` done so far, unless a call is still queued or the last one was
    /// made less than [`PROGRESS_INTERVAL`] ago.
    pub(crate) fn update(&mut self, bytes: u64) {
        let Some(callback) = &self.callback else { return };
        let now = Instant::now();
        if self.last.is_some_and(|last| now.duration_since(last) < PROGRESS_INTERVAL) {
            return;
        }
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        self.last = Some(now);
        let queued = Arc::clone(&self.queued);
        let status =
            callback.call_with_return_value(bytes as f64, ThreadsafeFunctionCallMode::NonBlocking, move |_, _| {
                queued.store(false, Ordering::Release);
                Ok(())
            });
        if status != Status::Ok {
            self.queued.store(false, Ordering::Release);
        }
    }
}
