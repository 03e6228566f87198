//! Worker threads: fallible work on a named thread of its own, with a stop flag the work
//! polls, and a join that turns a panic into an error. The one way the crate and the
//! binding start a thread (the packer or extractor of a transfer, a stream's thread, a
//! call that waits on the network).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{codes, Error, Result};

/// How often a linked worker's flag looks at the caller's flag ([`Worker::linked`]).
pub const LINK_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Work running on a thread of its own.
pub struct Worker<T> {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<T>>,
    name: String,
}

impl<T: Send + 'static> Worker<T> {
    /// Starts `work` on a new thread named `name`, with a fresh stop flag.
    pub fn spawn(name: &str, work: impl FnOnce(&AtomicBool) -> Result<T> + Send + 'static) -> Result<Worker<T>> {
        Worker::with_flag(name, Arc::new(AtomicBool::new(false)), work)
    }

    /// Starts `work` on a new thread named `name`, handing it `stop` (which the caller may
    /// set, as [`Worker::stop`] does).
    pub fn with_flag(
        name: &str,
        stop: Arc<AtomicBool>,
        work: impl FnOnce(&AtomicBool) -> Result<T> + Send + 'static,
    ) -> Result<Worker<T>> {
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || work(&flag))
            .map_err(|e| Error::new(codes::INTERNAL, format!("cannot start the {name} thread: {e}")))?;
        Ok(Worker { stop, thread, name: name.to_string() })
    }

    /// Starts `work` on a new thread named `name`, handing it a flag that is set once
    /// `cancel` (the caller's cancellation) is or [`Worker::stop`] is called, whichever
    /// comes first: a helper thread looks at both every [`LINK_POLL_INTERVAL`], and is woken
    /// when the work ends (the result is not held back by the helper's sleep).
    pub fn linked(
        name: &str,
        cancel: &Arc<AtomicBool>,
        work: impl FnOnce(&AtomicBool) -> Result<T> + Send + 'static,
    ) -> Result<Worker<T>> {
        let outer = Arc::clone(cancel);
        Worker::spawn(name, move |own| either(own, &outer, work))
    }

    /// Asks the work to stop (sets its flag).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits for the work's result; a panic is an internal error.
    pub fn join(self) -> Result<T> {
        let name = self.name;
        self.thread.join().unwrap_or_else(|_| Err(Error::new(codes::INTERNAL, format!("the {name} thread panicked"))))
    }

    /// Lets the work run on without anyone waiting for it (it reports its result by
    /// other means, a channel).
    pub fn detach(self) {}
}

/// Runs `work` with one flag that follows both `a` and `b`.
fn either<T>(a: &AtomicBool, b: &AtomicBool, work: impl FnOnce(&AtomicBool) -> T) -> T {
    either_every(a, b, LINK_POLL_INTERVAL, work)
}

/// [`either`], the helper looking at `a` and `b` every `interval`.
fn either_every<T>(a: &AtomicBool, b: &AtomicBool, interval: Duration, work: impl FnOnce(&AtomicBool) -> T) -> T {
    let merged = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let helper = scope.spawn(|| {
            while !done.load(Ordering::Acquire) {
                if a.load(Ordering::Relaxed) || b.load(Ordering::Relaxed) {
                    merged.store(true, Ordering::Relaxed);
                    break;
                }
                // Woken early by the end of the work (a spurious wake-up only looks again).
                std::thread::park_timeout(interval);
            }
        });
        let result = work(&merged);
        done.store(true, Ordering::Release);
        helper.thread().unpark();
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until `flag` is set; false if it was not within 30 s (a broken link).
    fn wait_for(flag: &AtomicBool) -> bool {
        for _ in 0..6000 {
            if flag.load(Ordering::Relaxed) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn the_work_runs_on_a_named_thread_and_returns_its_result() {
        let worker = Worker::spawn("paperclip-test-name", |_| Ok(std::thread::current().name().map(str::to_string)));
        assert_eq!(worker.unwrap().join().unwrap().as_deref(), Some("paperclip-test-name"));
        let failing = Worker::<()>::spawn("paperclip-test-fail", |_| Err(Error::new(codes::BAD_ARCHIVE, "no")));
        assert_eq!(failing.unwrap().join().unwrap_err().code, codes::BAD_ARCHIVE);
    }

    #[test]
    fn a_panic_is_an_internal_error_naming_the_thread() {
        let worker = Worker::<()>::spawn("paperclip-test-panic", |_| panic!("boom")).unwrap();
        let err = worker.join().unwrap_err();
        assert_eq!(err.code, codes::INTERNAL);
        assert!(err.message.contains("paperclip-test-panic"), "{}", err.message);
    }

    #[test]
    fn stop_and_the_callers_flag_both_reach_a_linked_work() {
        for by_caller in [false, true] {
            let cancel = Arc::new(AtomicBool::new(false));
            let worker = Worker::linked("paperclip-test-linked", &cancel, |flag| Ok(wait_for(flag))).unwrap();
            if by_caller {
                cancel.store(true, Ordering::Relaxed);
            } else {
                worker.stop();
            }
            assert!(worker.join().unwrap(), "by caller: {by_caller}");
        }
    }

    #[test]
    fn a_linked_work_is_not_held_back_by_the_helpers_sleep() {
        // With an hour between the helper's looks at the flags, the result still comes back
        // when the work ends: the end wakes the helper.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (a, b) = (AtomicBool::new(false), AtomicBool::new(false));
            // The work outlasts the helper's first look, so the helper is asleep when it ends.
            let work = |_: &AtomicBool| {
                std::thread::sleep(Duration::from_millis(100));
                7
            };
            let _ = tx.send(either_every(&a, &b, Duration::from_secs(3600), work));
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(7), "the helper held the result back");
    }

    #[test]
    fn with_flag_hands_the_given_flag_to_the_work() {
        let flag = Arc::new(AtomicBool::new(false));
        let worker = Worker::with_flag("paperclip-test-flag", Arc::clone(&flag), |f| Ok(wait_for(f))).unwrap();
        flag.store(true, Ordering::Relaxed);
        assert!(worker.join().unwrap());
    }
}
