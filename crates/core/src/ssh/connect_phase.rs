//! The connect deadline of a call (docs/ssh.md, "Deadlines"): every connection a call opens
//! (a session opened ahead, a pooled session's liveness probe and its replacement, each step
//! of a lifecycle) reaches an authenticated session within the call's connect timeout, and
//! the call as a whole loses at most that timeout to connections that fail.
//!
//! * A [`ConnectPhase`] is one attempt at a usable session: a checkout (waiting for a session
//!   opened ahead, probing a pooled one, opening a new one) or an opening ahead. It covers the
//!   TCP connect, the SSH banner, the key exchange, the host-key check and authentication, as
//!   OpenSSH's `ConnectTimeout` covers the connect and the handshake.
//! * A [`ConnectBudget`] is shared by every phase of one call. Time counts against it while
//!   a phase runs and stays counted when the phase fails; a phase that ends with a session
//!   gives its time back (a slow but working link never runs a call out of its budget).
//!   Phases that run at once count their common time once. Once the budget is spent, a new
//!   phase fails at once with the failure that spent it: a step that swallowed a connect
//!   failure (an optional listing, a probe) does not let the next step wait again.
//! * Without a budget, a phase is bounded by the target's connect timeout from its start.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::SshTarget;
use crate::error::{Error, Result};

/// The connect time one call may lose (see the module documentation).
pub struct ConnectBudget {
    limit: Duration,
    state: Mutex<Spans>,
}

#[derive(Default)]
struct Spans {
    /// Phases running (`end: None`) and phases that failed.
    spans: Vec<Span>,
    next_id: u64,
    /// The last failure of a phase, given again to a phase that finds the budget spent.
    failure: Option<Error>,
}

struct Span {
    id: u64,
    start: Instant,
    end: Option<Instant>,
}

impl fmt::Debug for ConnectBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectBudget").field("limit", &self.limit).finish_non_exhaustive()
    }
}

impl ConnectBudget {
    /// A budget of `limit` (the call's connect timeout).
    pub fn new(limit: Duration) -> Arc<ConnectBudget> {
        Arc::new(ConnectBudget { limit, state: Mutex::new(Spans::default()) })
    }

    fn lock(&self) -> MutexGuard<'_, Spans> {
        // Every update is a single push, removal or assignment: consistent after a panic.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The time lost by `now`: the union of the failed phases and of the running ones.
    fn lost(spans: &Spans, now: Instant) -> Duration {
        let mut intervals: Vec<(Instant, Instant)> =
            spans.spans.iter().map(|s| (s.start, s.end.unwrap_or(now).max(s.start))).collect();
        intervals.sort();
        let mut total = Duration::ZERO;
        let mut covered: Option<(Instant, Instant)> = None;
        for (start, end) in intervals {
            match &mut covered {
                Some((_, until)) if start <= *until => *until = (*until).max(end),
                _ => {
                    if let Some((from, until)) = covered {
                        total += until - from;
                    }
                    covered = Some((start, end));
                }
            }
        }
        if let Some((from, until)) = covered {
            total += until - from;
        }
        total
    }

    /// What is left of the budget at `now`.
    fn remaining(&self, now: Instant) -> Duration {
        self.limit.saturating_sub(Self::lost(&self.lock(), now))
    }
}

/// One attempt at a usable session, against the call's budget (see the module
/// documentation). [`ConnectPhase::finish`] says how it ended; dropped unfinished, it counts
/// as failed.
pub struct ConnectPhase {
    clock: ConnectClock,
    id: u64,
    finished: bool,
}

/// When a phase must be over: a copy a connection keeps while it connects.
#[derive(Clone)]
pub(super) struct ConnectClock {
    budget: Option<Arc<ConnectBudget>>,
    start: Instant,
    limit: Duration,
}

impl ConnectClock {
    /// The instant the phase runs out of time, as known now (a budget shared with phases
    /// that ended with a session since can move it later, never earlier).
    pub(super) fn deadline(&self) -> Instant {
        let own = self.start + self.limit;
        match &self.budget {
            Some(budget) => {
                let now = Instant::now();
                own.min(now + budget.remaining(now))
            }
            None => own,
        }
    }

    /// The time left, as known now.
    pub(super) fn remaining(&self) -> Duration {
        self.deadline().saturating_duration_since(Instant::now())
    }

    /// The connect timeout the phase started with.
    pub(super) fn limit(&self) -> Duration {
        self.limit
    }
}

impl ConnectPhase {
    /// Starts a phase for `target`: against its call's budget when it has one.
    pub fn begin(target: &SshTarget) -> ConnectPhase {
        let start = Instant::now();
        let budget = target.connect_budget.clone();
        let id = budget.as_ref().map_or(0, |budget| {
            let mut spans = budget.lock();
            spans.next_id += 1;
            let id = spans.next_id;
            spans.spans.push(Span { id, start, end: None });
            id
        });
        ConnectPhase { clock: ConnectClock { budget, start, limit: target.connect_timeout }, id, finished: false }
    }

    /// The phase's clock (for a connection to check while it connects).
    pub(super) fn clock(&self) -> &ConnectClock {
        &self.clock
    }

    /// `None` while time is left; once the budget is spent, the failure that spent it (or,
    /// when none was recorded, a connect timeout for `target`).
    pub(super) fn spent(&self, target: &SshTarget) -> Option<Error> {
        if !self.clock.remaining().is_zero() {
            return None;
        }
        let recorded = self.clock.budget.as_ref().and_then(|budget| budget.lock().failure.clone());
        Some(recorded.unwrap_or_else(|| connect_timed_out(target)))
    }

    /// Ends the phase: a session gives its time back; a failure keeps it counted and is
    /// remembered for the phases that find the budget spent (an abort is not).
    pub fn finish<T>(mut self, result: &Result<T>) {
        self.finished = true;
        let Some(budget) = &self.clock.budget else { return };
        let mut spans = budget.lock();
        match result {
            Ok(_) => spans.spans.retain(|s| s.id != self.id),
            Err(e) => {
                let now = Instant::now();
                if let Some(span) = spans.spans.iter_mut().find(|s| s.id == self.id) {
                    span.end = Some(now);
                }
                if !e.is_aborted() {
                    spans.failure = Some(e.clone());
                }
            }
        }
    }
}

impl Drop for ConnectPhase {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if let Some(budget) = &self.clock.budget {
            let now = Instant::now();
            if let Some(span) = budget.lock().spans.iter_mut().find(|s| s.id == self.id) {
                span.end = Some(now);
            }
        }
    }
}

/// A connect that did not reach an authenticated session in time, before the TCP connection
/// was made (OpenSSH's message; Node's code, as a TCP connect timeout has).
pub(super) fn connect_timed_out(target: &SshTarget) -> Error {
    Error::new("ETIMEDOUT", format!("ssh: connect to host {} port {}: Connection timed out", target.host, target.port))
}

/// A connect that did not reach an authenticated session in time, after the TCP connection
/// was made: `stage` is where it stood (`banner exchange`, `key exchange`, `authentication`).
pub(super) fn handshake_timed_out(target: &SshTarget, stage: &str) -> Error {
    Error::new(
        "ETIMEDOUT",
        format!("ssh: connect to host {} port {}: Connection timed out during {stage}", target.host, target.port),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::codes;
    use crate::ssh::DEFAULT_CONNECT_TIMEOUT;

    fn target(budget: Option<Arc<ConnectBudget>>, limit: Duration) -> SshTarget {
        SshTarget {
            host: "h".into(),
            port: 22,
            username: "u".into(),
            private_key: None,
            known_hosts: None,
            strict_host_key_checking: false,
            connect_timeout: limit,
            inactivity_timeout: None,
            connect_budget: budget,
        }
    }

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn lost_time_is_the_union_of_failed_and_running_phases() {
        let base = Instant::now();
        let span = |id, start, end: Option<u64>| Span { id, start: at(base, start), end: end.map(|e| at(base, e)) };
        let spans = Spans {
            spans: vec![span(1, 0, Some(100)), span(2, 50, Some(150)), span(3, 300, None), span(4, 320, Some(330))],
            next_id: 4,
            failure: None,
        };
        // [0, 150] and [300, 400]: overlapping phases count their common time once.
        assert_eq!(ConnectBudget::lost(&spans, at(base, 400)), Duration::from_millis(250));
        assert_eq!(ConnectBudget::lost(&Spans::default(), base), Duration::ZERO);
    }

    #[test]
    fn a_phase_without_a_budget_has_its_own_connect_timeout() {
        let t = target(None, Duration::from_millis(300));
        let phase = ConnectPhase::begin(&t);
        let left = phase.clock().remaining();
        assert!(left <= Duration::from_millis(300) && left > Duration::from_millis(200), "{left:?}");
        assert!(phase.spent(&t).is_none());
        assert_eq!(phase.clock().limit(), Duration::from_millis(300));
    }

    #[test]
    fn failed_phases_spend_the_budget_and_successful_ones_give_their_time_back() {
        let budget = ConnectBudget::new(Duration::from_millis(400));
        let t = target(Some(Arc::clone(&budget)), Duration::from_millis(400));
        // A phase that ends with a session: its time comes back.
        let ok = ConnectPhase::begin(&t);
        std::thread::sleep(Duration::from_millis(150));
        ok.finish(&Ok(()));
        assert!(budget.remaining(Instant::now()) > Duration::from_millis(390));
        // A failed phase keeps its time counted, and its failure is what a phase that finds
        // the budget spent reports.
        let failed = ConnectPhase::begin(&t);
        std::thread::sleep(Duration::from_millis(150));
        failed.finish::<()>(&Err(Error::new("ECONNREFUSED", "refused")));
        let left = budget.remaining(Instant::now());
        assert!(left <= Duration::from_millis(250) && left > Duration::from_millis(150), "{left:?}");
        // Two phases at once: their common time counts once, and both see the same deadline.
        let a = ConnectPhase::begin(&t);
        let b = ConnectPhase::begin(&t);
        let (da, db) = (a.clock().deadline(), b.clock().deadline());
        assert!(da.max(db) - da.min(db) < Duration::from_millis(20));
        std::thread::sleep(left + Duration::from_millis(20));
        let spent = b.spent(&t).expect("the budget is spent");
        assert_eq!((spent.code.as_ref(), spent.message.as_str()), ("ECONNREFUSED", "refused"));
        drop(a); // unfinished: counted as failed, no failure recorded
        b.finish::<()>(&Err(Error::aborted()));
        let late = ConnectPhase::begin(&t);
        assert_eq!(late.spent(&t).unwrap().code, "ECONNREFUSED", "an abort is not the failure reported");
        assert!(late.clock().remaining().is_zero());
    }

    #[test]
    fn a_spent_budget_without_a_recorded_failure_is_a_connect_timeout() {
        let budget = ConnectBudget::new(Duration::from_millis(50));
        let t = target(Some(budget), DEFAULT_CONNECT_TIMEOUT);
        let phase = ConnectPhase::begin(&t);
        std::thread::sleep(Duration::from_millis(70));
        let e = phase.spent(&t).unwrap();
        assert_eq!(e.code, "ETIMEDOUT");
        assert_eq!(e.message, "ssh: connect to host h port 22: Connection timed out");
        assert_ne!(e.code, codes::SSH_TIMEOUT);
        phase.finish::<()>(&Err(e));
    }
}
