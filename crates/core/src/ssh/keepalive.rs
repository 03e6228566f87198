//! Keepalives of the sessions that wait in the pool (OpenSSH's `ServerAliveInterval` and
//! `ServerAliveCountMax`, docs/ssh.md): a session the server stopped answering (a link that
//! died, a wedged server) is closed and dropped from the pool instead of waiting there for a
//! call to find it dead.
//!
//! While a session is idle nothing reads it, so whatever the server sends stays in the
//! socket's receive queue. Every interval the pool's reaper looks at that queue: when it grew
//! since the last keepalive, the server answered (the reply to a keepalive, or anything else
//! it sent); then it sends the next keepalive (libssh2's `keepalive@libssh2.org` global
//! request, reply wanted: OpenSSH answers it with a failure message). A session whose last
//! `count_max` keepalives went unanswered, whose socket reports an error or a hang-up, or that
//! cannot send a keepalive whole, is dead. The replies wait in the queue until the session's
//! next call reads them (a few dozen bytes each; a session stays idle 10 s at most). libssh2
//! then keeps each reply in its packet list until the session closes (and every channel read
//! walks that list), so a session sends at most [`MAX_KEEPALIVES`] in its life (about 8
//! minutes of idle time at the default interval); after that it waits without keepalives, as
//! before, and a dead one is found by the probe at its next checkout.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use ssh2::BlockDirections;

use super::Connection;

/// Default seconds between two keepalives of an idle session.
pub const DEFAULT_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
/// Default keepalives that may go unanswered before the session is dropped.
pub const DEFAULT_KEEPALIVE_COUNT_MAX: u32 = 2;
/// libssh2 sends a keepalive at most every 2 s (it takes an interval of 1 s as 2 s).
const MIN_INTERVAL_SECS: u64 = 2;
/// Keepalives one session sends in its life (see the module documentation).
pub const MAX_KEEPALIVES: u32 = 256;

/// How idle sessions are kept alive: every `interval`, dropped after `count_max` unanswered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepaliveSettings {
    pub interval: Duration,
    pub count_max: u32,
}

impl KeepaliveSettings {
    /// `PAPERCLIP_NATIVE_SSH_KEEPALIVE_INTERVAL` (whole seconds, at least 2; `0`: no
    /// keepalives) and `PAPERCLIP_NATIVE_SSH_KEEPALIVE_COUNT_MAX` (at least 1), read now;
    /// `None` when keepalives are off.
    pub fn from_env() -> Option<KeepaliveSettings> {
        let read = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok());
        Self::from_values(
            read("PAPERCLIP_NATIVE_SSH_KEEPALIVE_INTERVAL"),
            read("PAPERCLIP_NATIVE_SSH_KEEPALIVE_COUNT_MAX"),
        )
    }

    fn from_values(interval: Option<u64>, count_max: Option<u64>) -> Option<KeepaliveSettings> {
        let interval = match interval {
            Some(0) => return None,
            Some(secs) => Duration::from_secs(secs.max(MIN_INTERVAL_SECS)),
            None => DEFAULT_KEEPALIVE_INTERVAL,
        };
        let count_max = count_max.map_or(DEFAULT_KEEPALIVE_COUNT_MAX, |n| n.clamp(1, u64::from(u32::MAX)) as u32);
        Some(KeepaliveSettings { interval, count_max })
    }
}

/// The keepalive state of one idle session.
#[derive(Debug, Default)]
pub(super) struct Keepalive {
    /// When the next look at the session is due (`None`: not idle).
    next: Option<Instant>,
    /// Bytes in the socket's receive queue at the last look.
    queued: usize,
    /// Keepalives sent since the server last sent anything.
    unanswered: u32,
    /// A keepalive went out at the last look.
    sent: bool,
    /// Keepalives sent in the session's life.
    total: u32,
}

impl Connection {
    /// The session went idle at `now`: its first keepalive is due one interval later.
    pub(super) fn keepalive_start(&mut self, now: Instant, settings: Option<KeepaliveSettings>) {
        let total = self.keepalive.total;
        self.keepalive = Keepalive {
            next: settings.filter(|_| total < MAX_KEEPALIVES).map(|s| now + s.interval),
            queued: queued_bytes(self.socket_fd()).unwrap_or(0),
            unanswered: 0,
            sent: false,
            total,
        };
    }

    /// When this idle session's next keepalive is due.
    pub(super) fn keepalive_due(&self) -> Option<Instant> {
        self.keepalive.next
    }

    /// Looks at an idle session when its keepalive is due (nothing before); false when it is
    /// dead (see the module documentation). Never waits.
    pub(super) fn keepalive_tick(&mut self, now: Instant, settings: Option<KeepaliveSettings>) -> bool {
        let Some(settings) = settings.filter(|_| self.keepalive.total < MAX_KEEPALIVES || self.keepalive.sent) else {
            self.keepalive.next = None;
            return true;
        };
        let due = *self.keepalive.next.get_or_insert(now + settings.interval);
        if now < due {
            return true;
        }
        let fd = self.socket_fd();
        if socket_failed(fd) {
            return false;
        }
        let Some(queued) = queued_bytes(fd) else { return false };
        if queued > self.keepalive.queued {
            self.keepalive.unanswered = 0;
        } else if self.keepalive.sent {
            self.keepalive.unanswered += 1;
        }
        self.keepalive.queued = queued;
        if self.keepalive.unanswered >= settings.count_max {
            return false;
        }
        if self.keepalive.total >= MAX_KEEPALIVES {
            // The last one was answered (or is due to be counted): no more.
            self.keepalive.sent = false;
            self.keepalive.next = None;
            return true;
        }
        let secs = settings.interval.as_secs().max(MIN_INTERVAL_SECS) as u32;
        self.session.set_keepalive(true, secs);
        match self.session.keepalive_send() {
            // libssh2 sends only when its own interval passed: then the next is a whole
            // interval away.
            Ok(to_next) => {
                self.keepalive.sent = to_next >= secs;
                self.keepalive.total += u32::from(self.keepalive.sent);
            }
            Err(_) => return false,
        }
        // A keepalive not written whole leaves the session unable to send anything else.
        if matches!(self.session.block_directions(), BlockDirections::Outbound | BlockDirections::Both) {
            return false;
        }
        self.keepalive.next = Some(now + settings.interval);
        true
    }
}

/// Bytes waiting in the receive queue of socket `fd`; `None` when it cannot be read.
fn queued_bytes(fd: i32) -> Option<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, valid for the call.
    let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n as *mut libc::c_int) };
    (rc == 0).then_some(n.max(0) as usize)
}

/// True when socket `fd` reports an error or a hang-up (a reset connection).
fn socket_failed(fd: i32) -> bool {
    let mut pfd = libc::pollfd { fd, events: 0, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call; no wait.
    let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
    rc < 0 || pfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0
}

impl Connection {
    fn socket_fd(&self) -> i32 {
        self.socket.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_follow_the_environment_values() {
        let default =
            KeepaliveSettings { interval: DEFAULT_KEEPALIVE_INTERVAL, count_max: DEFAULT_KEEPALIVE_COUNT_MAX };
        assert_eq!(KeepaliveSettings::from_values(None, None), Some(default));
        assert_eq!(KeepaliveSettings::from_values(Some(0), Some(3)), None, "0 turns keepalives off");
        assert_eq!(
            KeepaliveSettings::from_values(Some(1), Some(0)),
            Some(KeepaliveSettings { interval: Duration::from_secs(2), count_max: 1 }),
            "libssh2's 2 s floor, at least one keepalive"
        );
        assert_eq!(
            KeepaliveSettings::from_values(Some(15), Some(3)),
            Some(KeepaliveSettings { interval: Duration::from_secs(15), count_max: 3 })
        );
    }

    #[test]
    fn queued_bytes_count_what_nobody_read() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        assert_eq!(queued_bytes(client.as_raw_fd()), Some(0));
        assert!(!socket_failed(client.as_raw_fd()));
        server.write_all(b"0123456789").unwrap();
        for _ in 0..200 {
            if queued_bytes(client.as_raw_fd()) == Some(10) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(queued_bytes(client.as_raw_fd()), Some(10));
        assert_eq!(queued_bytes(-1), None);
    }
}
