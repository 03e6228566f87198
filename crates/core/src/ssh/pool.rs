//! Authenticated sessions kept for the next call to the same server as the same user, so a
//! workspace lifecycle (bundle import, tree push, clean-up command, bundle export, tree
//! pull) pays for TCP, key exchange, host-key check and authentication once instead of at
//! every step.
//!
//! * A session is keyed by everything that decides whom we talk to and as whom
//!   ([`PoolKey`]): host, port, user name, a SHA-256 of the private key (without one, of
//!   the agent socket and home directory that supply the identity), a SHA-256 of the
//!   `known_hosts` content checked against, strict checking and the connect timeout. Keys
//!   and `known_hosts` never appear in a key or a message, only their digests.
//! * A session is leased exclusively ([`Lease`]): one command or transfer at a time, so
//!   concurrent callers for one key get sessions of their own.
//! * A lease that ends cleanly (the call succeeded, its channel closed, not cancelled, not
//!   past its deadline) puts the session back; any error, cancellation or timeout
//!   disconnects it.
//! * Bounded: at most [`MAX_IDLE_PER_KEY`] idle sessions per key and [`MAX_IDLE_TOTAL`] in
//!   all (the oldest idle one is closed to make room), each closed after [`IDLE_TIMEOUT`].
//!   Expiry is checked at checkout and by a reaper thread that exists only while the pool
//!   holds idle sessions (a plain Rust thread: it never keeps a Node process alive).
//! * A reused session is re-armed with the new call's cancel flag and deadline, and its
//!   first channel is opened at checkout: when that fails (the server closed the session
//!   meanwhile: sshd restarted, a server-side idle timeout), nothing was sent yet and the
//!   call goes on with a fresh connection instead (once).
//! * Host keys are verified when a session is opened; a reused session was verified for the
//!   same key (the `known_hosts` digest is part of it).
//! * A checkout is one connect phase (connect_phase.rs): the wait for a session opened ahead,
//!   the probe of a reused session (at most half the connect timeout) and the fresh
//!   connection that replaces a dead one all end within one connect timeout (and within the
//!   call's connect budget).
//! * Idle sessions get keepalives (keepalive.rs, from the reaper thread): one that stops
//!   answering is closed and dropped ([`PoolStats::dead`]).
//! * A session may be opened ahead ([`SessionPool::open_ahead`]: a lifecycle that knows it will
//!   talk to a server opens the session while it does its local work). The next checkout for
//!   its key takes it, waiting while it opens (cancellable, bounded by its deadline); its
//!   failure is that checkout's failure. Nobody claiming it, it goes idle like any other.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::connect_phase::{connect_timed_out, ConnectPhase};
use super::connection::timed_out;
use super::keepalive::KeepaliveSettings;
use super::known_hosts::known_hosts_content;
use super::warm;
use super::{Connection, SshTarget, POLL_INTERVAL};
use crate::error::{Error, Result};

/// Idle sessions kept per [`PoolKey`] (a lifecycle runs at most two calls at once).
pub const MAX_IDLE_PER_KEY: usize = 4;
/// Idle sessions kept in all.
pub const MAX_IDLE_TOTAL: usize = 16;
/// An idle session is closed after this long unused (well under sshd's and most
/// firewalls' idle limits, so a pooled session is rarely found dead).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Shortest sleep of the reaper thread between two expiry checks.
const REAPER_MIN_SLEEP: Duration = Duration::from_millis(20);
/// How long a checkout waits for a session opened ahead past its own connect deadline: the
/// opener notices that deadline itself within a poll, and its error says where it stood.
const CLAIM_GRACE: Duration = Duration::from_millis(200);

/// Everything that decides whom a session talks to and as whom.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    host: String,
    port: u16,
    username: String,
    /// SHA-256 of the private key, or, without one, of where the agent and the default
    /// identities are found (`SSH_AUTH_SOCK`, `HOME`), which decide the identity then.
    identity: [u8; 32],
    /// SHA-256 of the `known_hosts` content the host key was checked against.
    known_hosts: [u8; 32],
    strict_host_key_checking: bool,
    connect_timeout: Duration,
}

impl PoolKey {
    /// The key of `target`. With strict checking and no `known_hosts` content, the default
    /// files are read (as a connection would read them), so an edit to them keys apart.
    pub fn of(target: &SshTarget) -> PoolKey {
        let known_hosts = if target.strict_host_key_checking {
            digest(known_hosts_content(target).as_bytes())
        } else {
            digest(target.known_hosts.as_deref().unwrap_or("").as_bytes())
        };
        PoolKey {
            host: target.host.clone(),
            port: target.port,
            username: target.username.clone(),
            identity: match target.private_key.as_deref() {
                Some(key) => digest(format!("key\0{key}").as_bytes()),
                None => {
                    let var =
                        |name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()).unwrap_or_default();
                    digest(format!("default\0{}\0{}", var("SSH_AUTH_SOCK"), var("HOME")).as_bytes())
                }
            },
            known_hosts,
            strict_host_key_checking: target.strict_host_key_checking,
            connect_timeout: target.connect_timeout,
        }
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The bounds of a pool.
#[derive(Debug, Clone, Copy)]
pub struct PoolLimits {
    /// Idle sessions kept per key.
    pub per_key: usize,
    /// Idle sessions kept in all.
    pub total: usize,
    /// Idle time after which a session is closed.
    pub idle_timeout: Duration,
}

impl Default for PoolLimits {
    fn default() -> Self {
        PoolLimits { per_key: MAX_IDLE_PER_KEY, total: MAX_IDLE_TOTAL, idle_timeout: IDLE_TIMEOUT }
    }
}

/// What a pool did since it was created (diagnostics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Sessions opened (connected, verified and authenticated).
    pub opened: u64,
    /// Checkouts served by an idle session.
    pub reused: u64,
    /// Sessions put back after a clean lease.
    pub returned: u64,
    /// Sessions disconnected after an error, a cancellation or a timeout.
    pub dropped: u64,
    /// Sessions closed after a clean lease without being kept (reuse off, or the pool was
    /// full and this or an older one made room).
    pub closed: u64,
    /// Idle sessions closed after [`PoolLimits::idle_timeout`].
    pub expired: u64,
    /// Idle sessions closed because they stopped answering keepalives (keepalive.rs).
    pub dead: u64,
    /// Reused sessions found dead at checkout and replaced by a fresh connection.
    pub retried: u64,
    /// Checkouts served by a session opened ahead ([`SessionPool::open_ahead`]) on its first
    /// call, whether it was still opening or already idle (counted in `opened`, not in
    /// `reused`).
    pub opened_ahead: u64,
    /// Idle sessions held now.
    pub idle: u64,
}

/// Which sessions a call uses: `pool`, and whether it may reuse and keep them (`reuse:
/// false` opens a fresh session and closes it after the call, as with no pool at all).
#[derive(Clone, Copy)]
pub struct Sessions<'a> {
    /// The pool that opens, lends and keeps the sessions.
    pub pool: &'a SessionPool,
    /// Reuse idle sessions and keep clean ones.
    pub reuse: bool,
}

impl<'a> Sessions<'a> {
    /// The process-wide pool, reusing when `reuse`.
    pub fn shared(reuse: bool) -> Sessions<'static> {
        Sessions { pool: SessionPool::shared(), reuse }
    }

    /// Leases a session for `target` (see [`SessionPool::checkout`]).
    pub fn checkout(self, target: &SshTarget, cancel: Arc<AtomicBool>, deadline: Option<Instant>) -> Result<Lease<'a>> {
        self.pool.checkout(target, self.reuse, cancel, deadline)
    }

    /// Runs `call` on a leased session; the session goes back to the pool when `call`
    /// succeeded and the lease ended cleanly, and is disconnected otherwise.
    pub fn run<T>(
        self,
        target: &SshTarget,
        cancel: Arc<AtomicBool>,
        deadline: Option<Instant>,
        call: impl FnOnce(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        let mut lease = self.checkout(target, cancel, deadline)?;
        let result = call(lease.connection());
        lease.finish(result.is_ok());
        result
    }
}

/// A pool of idle authenticated sessions (see the module documentation).
pub struct SessionPool {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the reaper when a session goes idle (its keepalives start).
    wake: Condvar,
}

struct State {
    idle: IdleSet<PoolKey, Connection>,
    /// Sessions being opened ahead, not claimed yet.
    opening: Vec<(PoolKey, Arc<Opening>)>,
    stats: PoolStats,
    /// True while a reaper thread runs for this pool.
    reaper: bool,
    /// Counts the sessions that went idle (the reaper waits only when none did meanwhile).
    generation: u64,
}

impl SessionPool {
    /// An empty pool with these bounds.
    pub fn new(limits: PoolLimits) -> SessionPool {
        SessionPool {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    idle: IdleSet::new(limits),
                    opening: Vec::new(),
                    stats: PoolStats::default(),
                    reaper: false,
                    generation: 0,
                }),
                wake: Condvar::new(),
            }),
        }
    }

    /// The process-wide pool (default bounds), created on first use.
    pub fn shared() -> &'static SessionPool {
        static POOL: OnceLock<SessionPool> = OnceLock::new();
        POOL.get_or_init(|| SessionPool::new(PoolLimits::default()))
    }

    /// What the pool did so far, and the idle sessions it holds now.
    pub fn stats(&self) -> PoolStats {
        let state = self.lock();
        PoolStats { idle: state.idle.len() as u64, ..state.stats }
    }

    /// Closes every idle session now.
    pub fn clear(&self) {
        let closed = {
            let mut state = self.lock();
            let closed = state.idle.drain();
            state.stats.closed += closed.len() as u64;
            closed
        };
        drop(closed);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent bookkeeping (every update is a
        // single push, remove or counter increment).
        self.shared.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Opens a session for `target` on a thread of its own and starts its first command's
    /// shell (warm.rs), for the next checkout of its key (see the module documentation).
    /// Nothing happens when the pool already holds an idle session of that key or one is
    /// being opened ahead. Bounded as a checkout's connection is (the connect and inactivity
    /// timeouts of `target`).
    pub fn open_ahead(&'static self, target: &SshTarget) {
        let key = PoolKey::of(target);
        let opening = {
            let mut state = self.lock();
            if state.idle.has(&key) || state.opening.iter().any(|(k, _)| *k == key) {
                return;
            }
            let opening = Arc::new(Opening::default());
            state.opening.push((key.clone(), Arc::clone(&opening)));
            opening
        };
        let target = target.clone();
        let ahead = Arc::clone(&opening);
        let started = std::thread::Builder::new().name("paperclip-ssh-open-ahead".into()).spawn(move || {
            // One connect phase: the login and the first warm channel's start.
            let phase = ConnectPhase::begin(&target);
            let opened =
                Connection::open_in(&target, Arc::new(AtomicBool::new(false)), None, &phase).and_then(|mut conn| {
                    conn.keep_warm = warm::enabled();
                    conn.start_warm(&phase)?;
                    conn.ahead = true;
                    Ok(conn)
                });
            phase.finish(&opened);
            self.deliver(&key, &ahead, opened);
        });
        if started.is_err() {
            // No thread: nothing is opened ahead; the checkout opens its own.
            self.lock().opening.retain(|(_, o)| !Arc::ptr_eq(o, &opening));
        }
    }

    /// The end of an opening ahead: unclaimed, the session goes idle (a failure is
    /// forgotten); claimed, it is handed to the claimer, or goes idle if the claimer gave up.
    fn deliver(&self, key: &PoolKey, opening: &Arc<Opening>, opened: Result<Connection>) {
        let unclaimed = {
            let mut state = self.lock();
            if opened.is_ok() {
                state.stats.opened += 1;
            }
            let at = state.opening.iter().position(|(_, o)| Arc::ptr_eq(o, opening));
            at.map(|at| state.opening.remove(at))
        };
        let idle = if unclaimed.is_some() {
            opened.ok()
        } else {
            let mut slot = opening.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if slot.abandoned {
                opened.ok()
            } else {
                slot.result = Some(opened);
                opening.ready.notify_all();
                None
            }
        };
        if let Some(conn) = idle {
            // Nobody returned it: idle without counting in `returned`.
            self.put_idle(key.clone(), conn);
        }
    }

    /// Waits for a claimed opening ahead, as a checkout with `cancel`, `deadline` and `phase`
    /// would wait for its own connection.
    fn claim(
        &self,
        target: &SshTarget,
        opening: &Opening,
        cancel: &AtomicBool,
        deadline: Option<Instant>,
        phase: &ConnectPhase,
    ) -> Result<Connection> {
        let mut slot = opening.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        loop {
            if let Some(result) = slot.result.take() {
                return result;
            }
            let stop = if cancel.load(Ordering::Relaxed) {
                Some(Error::aborted())
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                Some(timed_out(target))
            } else if Instant::now() >= phase.clock().deadline() + CLAIM_GRACE {
                Some(phase.spent(target).unwrap_or_else(|| connect_timed_out(target)))
            } else {
                None
            };
            if let Some(error) = stop {
                // The session, once open, goes idle (deliver sees this).
                slot.abandoned = true;
                return Err(error);
            }
            slot = opening.ready.wait_timeout(slot, POLL_INTERVAL).unwrap_or_else(|poisoned| poisoned.into_inner()).0;
        }
    }

    /// Leases a session for `target`: with `reuse`, the newest idle one of its key (re-armed
    /// with `cancel` and `deadline`, its first channel opened; a dead one is replaced by a
    /// fresh connection once) or the one being opened ahead for it, else a fresh connection.
    /// All of it is one connect phase (see the module documentation).
    pub fn checkout(
        &self,
        target: &SshTarget,
        reuse: bool,
        cancel: Arc<AtomicBool>,
        deadline: Option<Instant>,
    ) -> Result<Lease<'_>> {
        let phase = ConnectPhase::begin(target);
        let leased = self.checkout_in(target, reuse, cancel, deadline, &phase);
        phase.finish(&leased);
        leased
    }

    fn checkout_in(
        &self,
        target: &SshTarget,
        reuse: bool,
        cancel: Arc<AtomicBool>,
        deadline: Option<Instant>,
        phase: &ConnectPhase,
    ) -> Result<Lease<'_>> {
        let key = reuse.then(|| PoolKey::of(target));
        if let Some(key) = &key {
            let (found, expired, ahead) = {
                let mut state = self.lock();
                let (found, expired) = state.idle.take(key, Instant::now());
                state.stats.expired += expired.len() as u64;
                let ahead = match found {
                    Some(_) => None,
                    None => state.opening.iter().position(|(k, _)| k == key).map(|at| state.opening.remove(at).1),
                };
                (found, expired, ahead)
            };
            drop(expired);
            if let Some(opening) = ahead {
                let mut conn = self.claim(target, &opening, &cancel, deadline, phase)?;
                conn.ahead = false;
                conn.rearm(target, cancel, deadline);
                conn.keep_warm = warm::enabled();
                self.lock().stats.opened_ahead += 1;
                return Ok(Lease { pool: self, conn: Some(conn), key: Some(key.clone()) });
            }
            if let Some(mut conn) = found {
                conn.rearm(target, Arc::clone(&cancel), deadline);
                conn.keep_warm = warm::enabled();
                // A live server answers in a round trip; half the connect timeout at most, so
                // a fresh connection still has the rest when this one is dead.
                let probe_by = phase.clock().deadline().min(Instant::now() + phase.clock().limit() / 2);
                match conn.open_first_channel(probe_by) {
                    Ok(()) => {
                        // Opened ahead and gone idle before its first call came: that call's.
                        let first = std::mem::take(&mut conn.ahead);
                        let mut state = self.lock();
                        if first {
                            state.stats.opened_ahead += 1;
                        } else {
                            state.stats.reused += 1;
                        }
                        drop(state);
                        return Ok(Lease { pool: self, conn: Some(conn), key: Some(key.clone()) });
                    }
                    Err(e) => {
                        drop(conn);
                        if e.is_aborted() {
                            self.lock().stats.dropped += 1;
                            return Err(e);
                        }
                        self.lock().stats.retried += 1;
                    }
                }
            }
        }
        let mut conn = Connection::open_in(target, cancel, deadline, phase)?;
        // A session the pool may keep starts the next command's shell ahead (warm.rs).
        conn.keep_warm = reuse && warm::enabled();
        self.lock().stats.opened += 1;
        Ok(Lease { pool: self, conn: Some(conn), key })
    }

    /// Takes a session back after a clean lease (or closes it when it may not be kept).
    fn give_back(&self, key: Option<PoolKey>, conn: Connection) {
        let Some(key) = key else {
            self.lock().stats.closed += 1;
            return drop(conn);
        };
        self.lock().stats.returned += 1;
        self.put_idle(key, conn);
    }

    /// Keeps `conn` idle under `key` (closing what that pushes out) and starts the reaper (or
    /// wakes it: the session's keepalives start).
    fn put_idle(&self, key: PoolKey, mut conn: Connection) {
        let now = Instant::now();
        conn.keepalive_start(now, KeepaliveSettings::from_env());
        let (closed, start_reaper) = {
            let mut state = self.lock();
            let closed = state.idle.put(key, conn, now);
            state.generation += 1;
            state.stats.closed += closed.len() as u64;
            let start = !state.reaper && state.idle.len() > 0;
            if start {
                state.reaper = true;
            }
            (closed, start)
        };
        self.shared.wake.notify_all();
        drop(closed);
        if start_reaper {
            let weak = Arc::downgrade(&self.shared);
            if std::thread::Builder::new().name("paperclip-ssh-pool".into()).spawn(move || reap(weak)).is_err() {
                // No reaper: keep nothing that nobody would close.
                self.clear();
                self.lock().reaper = false;
            }
        }
    }
}

/// The reaper: closes idle sessions as they expire and those that stop answering their
/// keepalives; ends when the pool holds none (or the pool itself is gone).
fn reap(pool: Weak<Shared>) {
    loop {
        let Some(shared) = pool.upgrade() else { return };
        let settings = KeepaliveSettings::from_env();
        let (closing, next, generation) = {
            let mut state = shared.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let now = Instant::now();
            let expired = state.idle.expire(now);
            state.stats.expired += expired.len() as u64;
            // Non-blocking: a look at each socket and at most one small packet each.
            let dead = state.idle.retain(|conn| conn.keepalive_tick(now, settings));
            state.stats.dead += dead.len() as u64;
            let keepalive = state.idle.items().filter_map(Connection::keepalive_due).min();
            let next = match (state.idle.next_expiry(), keepalive) {
                (Some(expiry), Some(keepalive)) => Some(expiry.min(keepalive)),
                (next, _) => next,
            };
            if next.is_none() {
                state.reaper = false;
            }
            ((expired, dead), next, state.generation)
        };
        // Closed outside the lock (a goodbye each, without waiting).
        drop(closing);
        let Some(at) = next else { return };
        let wait = at.saturating_duration_since(Instant::now()).max(REAPER_MIN_SLEEP);
        let state = shared.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Woken early when a session goes idle (its keepalives start), or went idle meanwhile.
        if state.generation == generation {
            drop(shared.wake.wait_timeout(state, wait).unwrap_or_else(|poisoned| poisoned.into_inner()));
        }
    }
}

/// One session lent to one call. [`Lease::finish`] with `true` puts it back when it ended
/// cleanly; anything else (including dropping the lease) disconnects it.
pub struct Lease<'p> {
    pool: &'p SessionPool,
    conn: Option<Connection>,
    /// The pool key when the session may be kept.
    key: Option<PoolKey>,
}

impl Lease<'_> {
    /// The leased session.
    pub fn connection(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("a lease holds its connection until it ends")
    }

    /// Ends the lease: `succeeded` and a clean session (no channel left open, not
    /// cancelled, not past its deadline) go back to the pool; otherwise it is disconnected.
    pub fn finish(mut self, succeeded: bool) {
        let Some(conn) = self.conn.take() else { return };
        if succeeded && conn.reusable() {
            self.pool.give_back(self.key.take(), conn);
        } else {
            self.pool.lock().stats.dropped += 1;
            drop(conn);
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.lock().stats.dropped += 1;
            drop(conn);
        }
    }
}

/// A session being opened ahead, once claimed: where its opener leaves it.
#[derive(Default)]
struct Opening {
    slot: Mutex<OpeningSlot>,
    ready: Condvar,
}

#[derive(Default)]
struct OpeningSlot {
    /// The opener's result, until the claimer takes it.
    result: Option<Result<Connection>>,
    /// The claimer stopped waiting (cancelled, past its deadline).
    abandoned: bool,
}

/// The idle entries of a pool: bounded per key and in all, newest last, each with the time
/// it went idle. Generic so its bookkeeping is tested without a server.
struct IdleSet<K, C> {
    entries: VecDeque<(K, C, Instant)>,
    limits: PoolLimits,
}

impl<K: PartialEq, C> IdleSet<K, C> {
    fn new(limits: PoolLimits) -> Self {
        IdleSet { entries: VecDeque::new(), limits }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn has(&self, key: &K) -> bool {
        self.entries.iter().any(|(k, _, _)| k == key)
    }

    /// The newest unexpired entry of `key`, and the expired entries removed on the way (to
    /// be closed by the caller, outside any lock).
    fn take(&mut self, key: &K, now: Instant) -> (Option<C>, Vec<C>) {
        let expired = self.expire(now);
        let found = self.entries.iter().rposition(|(k, _, _)| k == key).and_then(|at| self.entries.remove(at));
        (found.map(|(_, c, _)| c), expired)
    }

    /// Keeps `item` under `key`; returns what was removed to stay in bounds (the oldest of
    /// the key, then the oldest overall; `item` itself when the bounds are zero).
    fn put(&mut self, key: K, item: C, now: Instant) -> Vec<C> {
        let mut removed = self.expire(now);
        if self.limits.per_key == 0 || self.limits.total == 0 {
            removed.push(item);
            return removed;
        }
        while self.entries.iter().filter(|(k, _, _)| *k == key).count() >= self.limits.per_key {
            let at = self.entries.iter().position(|(k, _, _)| *k == key).expect("counted above");
            removed.extend(self.entries.remove(at).map(|(_, c, _)| c));
        }
        while self.entries.len() >= self.limits.total {
            removed.extend(self.entries.pop_front().map(|(_, c, _)| c));
        }
        self.entries.push_back((key, item, now));
        removed
    }

    /// Removes and returns the entries idle for the timeout or longer.
    fn expire(&mut self, now: Instant) -> Vec<C> {
        let timeout = self.limits.idle_timeout;
        self.split(|_, since| now.saturating_duration_since(since) < timeout)
    }

    /// Removes and returns the entries `keep` refuses.
    fn retain(&mut self, mut keep: impl FnMut(&mut C) -> bool) -> Vec<C> {
        self.split(|c, _| keep(c))
    }

    /// Removes and returns the entries `keep` (given each with the time it went idle) refuses.
    fn split(&mut self, mut keep: impl FnMut(&mut C, Instant) -> bool) -> Vec<C> {
        let mut out = Vec::new();
        let mut kept = VecDeque::with_capacity(self.entries.len());
        for (k, mut c, since) in self.entries.drain(..) {
            if keep(&mut c, since) {
                kept.push_back((k, c, since));
            } else {
                out.push(c);
            }
        }
        self.entries = kept;
        out
    }

    /// The entries, oldest first.
    fn items(&self) -> impl Iterator<Item = &C> {
        self.entries.iter().map(|(_, c, _)| c)
    }

    /// When the next entry expires.
    fn next_expiry(&self) -> Option<Instant> {
        self.entries.iter().map(|(_, _, since)| *since + self.limits.idle_timeout).min()
    }

    fn drain(&mut self) -> Vec<C> {
        self.entries.drain(..).map(|(_, c, _)| c).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::codes;
    use crate::ssh::{ConnectBudget, DEFAULT_CONNECT_TIMEOUT};

    fn target() -> SshTarget {
        SshTarget {
            host: "127.0.0.1".into(),
            port: 2222,
            username: "agent".into(),
            private_key: Some("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n".into()),
            known_hosts: Some("[127.0.0.1]:2222 ssh-ed25519 AAAA\n".into()),
            strict_host_key_checking: true,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            inactivity_timeout: None,
            connect_budget: None,
        }
    }

    fn limits(per_key: usize, total: usize, idle_ms: u64) -> PoolLimits {
        PoolLimits { per_key, total, idle_timeout: Duration::from_millis(idle_ms) }
    }

    #[test]
    fn the_key_holds_everything_that_decides_the_peer_and_the_identity() {
        let base = PoolKey::of(&target());
        assert_eq!(PoolKey::of(&target()), base);
        // Limits that do not change whom we talk to share a key.
        let mut t = target();
        t.inactivity_timeout = Some(Duration::from_secs(5));
        assert_eq!(PoolKey::of(&t), base);
        type Change = Box<dyn Fn(&mut SshTarget)>;
        let changes: Vec<Change> = vec![
            Box::new(|t| t.host = "localhost".into()),
            Box::new(|t| t.port = 2223),
            Box::new(|t| t.username = "other".into()),
            Box::new(|t| t.private_key = Some("another key".into())),
            Box::new(|t| t.private_key = None),
            Box::new(|t| t.known_hosts = Some("[127.0.0.1]:2222 ssh-ed25519 BBBB\n".into())),
            Box::new(|t| t.strict_host_key_checking = false),
            Box::new(|t| t.connect_timeout = Duration::from_secs(3)),
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut t = target();
            change(&mut t);
            assert_ne!(PoolKey::of(&t), base, "change {i} must key apart");
        }
    }

    #[test]
    fn the_key_never_holds_the_private_key_or_known_hosts() {
        let shown = format!("{:?}", PoolKey::of(&target()));
        assert!(!shown.contains("secret") && !shown.contains("PRIVATE KEY"), "{shown}");
        assert!(!shown.contains("AAAA"), "{shown}");
    }

    #[test]
    fn take_is_exclusive_and_newest_first() {
        let now = Instant::now();
        let mut set = IdleSet::new(limits(4, 16, 10_000));
        set.put("a", 1, now);
        set.put("a", 2, now);
        set.put("b", 3, now);
        // Each idle item goes to one caller only; a second caller for the key gets the other
        // one, a third none (it would open a session of its own).
        assert_eq!(set.take(&"a", now).0, Some(2));
        assert_eq!(set.take(&"a", now).0, Some(1));
        assert_eq!(set.take(&"a", now).0, None);
        assert_eq!(set.take(&"b", now).0, Some(3));
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn bounds_per_key_and_in_all_close_the_oldest() {
        let now = Instant::now();
        let mut set = IdleSet::new(limits(2, 3, 10_000));
        assert!(set.put("a", 1, now).is_empty());
        assert!(set.put("a", 2, now).is_empty());
        assert_eq!(set.put("a", 3, now), vec![1], "the oldest of the key makes room");
        assert!(set.put("b", 4, now).is_empty());
        assert_eq!(set.put("c", 5, now), vec![2], "the oldest overall makes room");
        assert_eq!(set.len(), 3);
        let mut none = IdleSet::new(limits(0, 3, 10_000));
        assert_eq!(none.put("a", 9, now), vec![9], "a zero bound keeps nothing");
        assert_eq!(none.len(), 0);
    }

    #[test]
    fn idle_entries_expire() {
        let start = Instant::now();
        let mut set = IdleSet::new(limits(4, 16, 100));
        set.put("a", 1, start);
        set.put("a", 2, start + Duration::from_millis(60));
        assert_eq!(set.next_expiry(), Some(start + Duration::from_millis(100)));
        // At checkout, an expired entry is not handed out: it comes back to be closed.
        let (found, expired) = set.take(&"a", start + Duration::from_millis(170));
        assert_eq!((found, expired), (None, vec![1, 2]));
        set.put("a", 3, start);
        assert_eq!(set.expire(start + Duration::from_millis(99)), Vec::<i32>::new());
        assert_eq!(set.expire(start + Duration::from_millis(100)), vec![3]);
        assert_eq!(set.next_expiry(), None);
    }

    /// A TCP server that accepts and, with `hold`, keeps each connection silent (else closes
    /// it after 200 ms, so an opening ahead is still under way when a checkout comes);
    /// counts the connections.
    fn counting_server(hold: bool) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&count);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::SeqCst);
                if hold {
                    held.push(stream);
                } else {
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(200));
                        drop(stream);
                    });
                }
            }
        });
        (port, count)
    }

    fn leaked_pool() -> &'static SessionPool {
        Box::leak(Box::new(SessionPool::new(limits(4, 16, 10_000))))
    }

    fn wait_until(what: impl Fn() -> bool) {
        for _ in 0..3000 {
            if what() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("timed out");
    }

    #[test]
    fn a_checkout_takes_the_session_opened_ahead_and_its_failure() {
        // The server drops every connection: the opening ahead fails, and the checkout (come
        // while it is under way) gets that failure without connecting again.
        let (port, connections) = counting_server(false);
        let pool = leaked_pool();
        let t = SshTarget { port, known_hosts: Some(String::new()), ..target() };
        pool.open_ahead(&t);
        pool.open_ahead(&t); // one opening per key
        let err = pool.checkout(&t, true, Arc::new(AtomicBool::new(false)), None).err().unwrap();
        assert!(!err.message.contains("secret"), "{}", err.message);
        assert_eq!(connections.load(Ordering::SeqCst), 1);
        assert_eq!(pool.stats(), PoolStats::default());
        assert!(pool.lock().opening.is_empty());
        // Without reuse, nothing opened ahead is taken: the call connects itself.
        pool.open_ahead(&t);
        wait_until(|| pool.lock().opening.is_empty());
        let before = connections.load(Ordering::SeqCst);
        assert!(pool.checkout(&t, false, Arc::new(AtomicBool::new(false)), None).is_err());
        assert_eq!(connections.load(Ordering::SeqCst), before + 1);
    }

    #[test]
    fn a_checkout_waiting_for_a_session_opened_ahead_stops_on_cancel_and_deadline() {
        // A server that never answers: the opening ahead waits out its inactivity limit.
        let (port, connections) = counting_server(true);
        let pool = leaked_pool();
        let t = SshTarget {
            port,
            known_hosts: Some(String::new()),
            inactivity_timeout: Some(Duration::from_millis(600)),
            ..target()
        };
        pool.open_ahead(&t);
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancel);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            flag.store(true, Ordering::Relaxed);
        });
        let err = pool.checkout(&t, true, cancel, None).err().unwrap();
        assert_eq!(err.code, codes::ABORTED);
        assert_eq!(connections.load(Ordering::SeqCst), 1, "the waiting checkout opened nothing of its own");
        // The abandoned opening ends by itself at its inactivity limit; nothing is kept.
        assert!(pool.lock().opening.is_empty());
        std::thread::sleep(Duration::from_millis(900));
        assert_eq!(pool.stats(), PoolStats::default());

        pool.open_ahead(&t);
        let deadline = Some(Instant::now() + Duration::from_millis(100));
        let err = pool.checkout(&t, true, Arc::new(AtomicBool::new(false)), deadline).err().unwrap();
        assert_eq!(err.code, codes::SSH_TIMEOUT);
        assert_eq!(connections.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_checkout_and_the_session_opened_ahead_for_it_share_one_connect_deadline() {
        // A server that never speaks: the opening ahead and the checkout that waits for it end
        // at the call's connect timeout together (the connect covers the banner), not at the
        // inactivity limit, and not one connect timeout after the other.
        let (port, connections) = counting_server(true);
        let pool = leaked_pool();
        let budget = ConnectBudget::new(Duration::from_millis(500));
        let t = SshTarget {
            port,
            known_hosts: Some(String::new()),
            connect_timeout: Duration::from_millis(500),
            inactivity_timeout: Some(Duration::from_secs(30)),
            connect_budget: Some(budget),
            ..target()
        };
        let started = Instant::now();
        pool.open_ahead(&t);
        std::thread::sleep(Duration::from_millis(200));
        let err = pool.checkout(&t, true, Arc::new(AtomicBool::new(false)), None).err().unwrap();
        let took = started.elapsed();
        assert_eq!(err.code, "ETIMEDOUT", "{}", err.message);
        assert!(err.message.ends_with("Connection timed out during banner exchange"), "{}", err.message);
        assert!(took >= Duration::from_millis(500) && took < Duration::from_millis(2000), "{took:?}");
        assert_eq!(connections.load(Ordering::SeqCst), 1, "the checkout waited for the opening ahead");
        // The budget is spent: the call's next checkout fails at once, connecting nowhere.
        let again = Instant::now();
        let next = pool.checkout(&t, true, Arc::new(AtomicBool::new(false)), None).err().unwrap();
        assert!(again.elapsed() < Duration::from_millis(100));
        assert_eq!(next.message, err.message);
        assert_eq!(connections.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn idle_entries_are_dropped_when_refused() {
        let now = Instant::now();
        let mut set = IdleSet::new(limits(4, 16, 10_000));
        for i in 1..=4 {
            set.put("a", i, now);
        }
        assert_eq!(set.retain(|i| *i % 2 == 0), vec![1, 3]);
        assert_eq!(set.items().copied().collect::<Vec<_>>(), vec![2, 4]);
        assert_eq!(set.next_expiry(), Some(now + Duration::from_millis(10_000)));
    }

    #[test]
    fn a_failed_connect_counts_nothing_as_opened_or_kept() {
        let pool = SessionPool::new(limits(4, 16, 10_000));
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let t = SshTarget { port, known_hosts: Some(String::new()), ..target() };
        for reuse in [true, false] {
            let err = pool.checkout(&t, reuse, Arc::new(AtomicBool::new(false)), None).err().unwrap();
            assert_eq!(err.code, "ECONNREFUSED");
        }
        assert_eq!(pool.stats(), PoolStats::default());
    }
}
