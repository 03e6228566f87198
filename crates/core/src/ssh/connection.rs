//! The session: TCP connect, handshake, host-key verification, authentication, and the
//! non-blocking polling every libssh2 call goes through (cancellation, deadline, inactivity).

use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ssh2::{BlockDirections, Channel, CheckResult, ErrorCode, KnownHostFileKind, MethodType, Session};

use super::connect_phase::{handshake_timed_out, ConnectClock, ConnectPhase};
use super::keepalive::Keepalive;
use super::key_file::PrivateKeyFile;
use super::known_hosts::{
    fingerprint, key_type_name, known_hosts_content, known_hosts_lines, known_key_types, revoked,
};
use super::tcp::{connect_tcp, io_failure};
use super::warm::{Step, Warm};
use super::{SshTarget, POLL_INTERVAL};
use crate::error::{codes, Error, Result};

/// Ciphers preferred when the server offers them: AEAD first (no separate MAC pass).
const CIPHER_PREFERENCE: &[&str] = &[
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
];
/// libssh2's "would block" code.
const EAGAIN: ErrorCode = ErrorCode::Session(-37);

/// An authenticated SSH session. Dropping it disconnects.
pub struct Connection {
    pub(super) session: Session,
    pub(super) socket: TcpStream,
    pub(super) target: SshTarget,
    cancel: Arc<AtomicBool>,
    deadline: Option<Instant>,
    pub(super) last_activity: Instant,
    /// A channel opened at checkout of a reused session (see `open_first_channel`), taken by
    /// the next `exec`.
    pub(super) ready_channel: Option<Channel>,
    /// The next command's channel, its remote shell started ahead (warm.rs).
    pub(super) warm: Option<Warm>,
    /// Whether commands keep a warm channel started (a session the pool keeps).
    pub(super) keep_warm: bool,
    /// A warm channel of this session failed: none is started again on it.
    pub(super) warm_failed: bool,
    /// Opened ahead of its first call (pool.rs), which has not come yet.
    pub(super) ahead: bool,
    /// While it connects: the connect phase's clock and the step it is at (past the phase's
    /// deadline, waits fail with a connect timeout naming that step).
    connecting: Option<(ConnectClock, Handshake)>,
    /// A round trip of this session went unanswered for a connect timeout (warm.rs launch):
    /// it is not put back into the pool.
    pub(super) silent: bool,
    /// Keepalives while it waits in the pool (keepalive.rs).
    pub(super) keepalive: Keepalive,
}

/// Where a connection stands in its handshake (for the message of a connect timeout).
#[derive(Clone, Copy)]
enum Handshake {
    /// The banner, then the key exchange (told apart by whether the banner arrived).
    KeyExchange,
    Authentication,
}

/// The result of one attempt of a non-blocking libssh2 call.
enum Attempt<T> {
    Done(T),
    Failed(ssh2::Error),
}

impl Connection {
    /// Connects, verifies the host key (strict mode) and authenticates. Nothing runs on the
    /// remote before this returns. `deadline` bounds the whole life of the connection
    /// (connect, commands and transfers): past it, calls fail with [`codes::SSH_TIMEOUT`].
    /// Reaching the authenticated session is one connect phase (connect_phase.rs): within the
    /// target's connect timeout and its call's connect budget, else `ETIMEDOUT`.
    pub fn open(target: &SshTarget, cancel: Arc<AtomicBool>, deadline: Option<Instant>) -> Result<Connection> {
        let phase = ConnectPhase::begin(target);
        let opened = Connection::open_in(target, cancel, deadline, &phase);
        phase.finish(&opened);
        opened
    }

    /// [`Connection::open`] as part of `phase` (a checkout's or an opening ahead's).
    pub(super) fn open_in(
        target: &SshTarget,
        cancel: Arc<AtomicBool>,
        deadline: Option<Instant>,
        phase: &ConnectPhase,
    ) -> Result<Connection> {
        check_stop(&cancel)?;
        if let Some(spent) = phase.spent(target) {
            return Err(spent);
        }
        let by = phase.clock().deadline();
        let socket = connect_tcp(target, Some(deadline.map_or(by, |d| d.min(by))))?;
        let _ = socket.set_nodelay(true);
        let mut session = Session::new().map_err(|e| protocol(target, "cannot create an SSH session", &e))?;
        session.set_tcp_stream(socket.try_clone().map_err(|e| io_failure(target, e))?);
        session.set_blocking(false);
        session.set_compress(false);
        let mut conn = Connection {
            session,
            socket,
            target: target.clone(),
            cancel,
            deadline,
            last_activity: Instant::now(),
            ready_channel: None,
            warm: None,
            keep_warm: false,
            warm_failed: false,
            ahead: false,
            connecting: Some((phase.clock().clone(), Handshake::KeyExchange)),
            silent: false,
            keepalive: Keepalive::default(),
        };
        conn.prefer_methods()?;
        // `handshake` wants `&mut Session`; a clone shares the same libssh2 session.
        let mut handshake = conn.session.clone();
        conn.call(|_| handshake.handshake()).map_err(|e| conn.ssh_error(e, "SSH handshake failed"))?;
        if target.strict_host_key_checking {
            conn.verify_host_key()?;
        }
        if let Some((_, step)) = &mut conn.connecting {
            *step = Handshake::Authentication;
        }
        conn.authenticate()?;
        // Up: from here on its waits answer to the call's deadline and inactivity limit.
        conn.connecting = None;
        Ok(conn)
    }

    /// The target this connection was opened for.
    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// Re-arms a pooled session for a new call: that call's target (the same peer and
    /// identity; its own inactivity limit), cancel flag and deadline.
    pub(super) fn rearm(&mut self, target: &SshTarget, cancel: Arc<AtomicBool>, deadline: Option<Instant>) {
        self.target = target.clone();
        self.cancel = cancel;
        self.deadline = deadline;
        self.last_activity = Instant::now();
    }

    /// Opens the channel the next `exec` uses, on a reused session: the first round trip to
    /// the server, so a session the server closed meanwhile fails here, before anything of
    /// the call was sent. Bounded by `by` (a silent peer is a dead one).
    pub(super) fn open_first_channel(&mut self, by: Instant) -> Result<()> {
        let deadline = self.deadline;
        self.deadline = Some(deadline.map_or(by, |d| d.min(by)));
        let opened = self.settle_warm(false).and_then(|()| self.open_channel());
        self.deadline = deadline;
        self.ready_channel = Some(opened?);
        Ok(())
    }

    /// Moves the warm channel on until it is ready (`until_ready`) or at least its exec
    /// request sent (nothing of it half done that another channel open would trip over); drops
    /// it when it fails (and starts none again on this session: its login prints, or the
    /// server refuses a second channel).
    pub(super) fn settle_warm(&mut self, until_ready: bool) -> Result<()> {
        while let Some(mut warm) = self.warm.take() {
            let step = warm.step(self);
            match step {
                Step::Failed => {
                    self.warm_failed = true;
                    break;
                }
                Step::Ready => {
                    self.warm = Some(warm);
                    break;
                }
                Step::Pending { .. } => {
                    let settled = !until_ready && warm.launched();
                    self.warm = Some(warm);
                    if settled {
                        break;
                    }
                    self.wait()?;
                }
            }
        }
        Ok(())
    }

    /// Sends the warm channel's exec request if it is not out yet (waiting for the channel
    /// open's reply if need be, at most until `by`), so its remote shell starts while the
    /// session waits in the pool. A stop here (cancellation, deadline, `by`) drops the warm
    /// channel, not the call; a server silent until `by` leaves the session out of the pool
    /// (`silent`) and is the error.
    pub(super) fn launch_warm(&mut self, by: Instant) -> Result<()> {
        let deadline = self.deadline;
        self.deadline = Some(deadline.map_or(by, |d| d.min(by)));
        let mut result = Ok(());
        while self.warm.as_ref().is_some_and(|warm| !warm.launched()) {
            self.step_warm();
            if self.warm.as_ref().is_none_or(|warm| warm.launched()) {
                break;
            }
            if let Err(e) = self.wait() {
                self.warm = None;
                self.warm_failed = true;
                self.silent = Instant::now() >= by;
                result = Err(e);
                break;
            }
        }
        self.deadline = deadline;
        result
    }

    /// Starts the first command's warm channel on a session opened ahead of its first call
    /// (pool.rs), its exec request sent: the remote shell starts while nobody waits for it.
    /// Part of the opening's connect phase: a server silent until its end fails the opening.
    pub(super) fn start_warm(&mut self, phase: &ConnectPhase) -> Result<()> {
        if !self.arm_warm(None) {
            return Ok(());
        }
        let by = phase.clock().deadline();
        match self.launch_warm(by) {
            Err(_) if self.silent => Err(handshake_timed_out(&self.target, "session start")),
            _ => Ok(()),
        }
    }

    /// Gives a session kept warm the next command's warm channel (warm.rs) when it has none,
    /// on `channel` when one is at hand; false (and `channel` dropped) when it keeps none.
    pub(super) fn arm_warm(&mut self, channel: Option<Channel>) -> bool {
        if !self.keep_warm || self.warm_failed || self.warm.is_some() {
            return false;
        }
        self.warm = Some(Warm::start(channel));
        true
    }

    /// One step of the warm channel without waiting; true when a packet of it is half
    /// written (to be completed before anything else is sent).
    pub(super) fn step_warm(&mut self) -> bool {
        let Some(mut warm) = self.warm.take() else { return false };
        match warm.step(self) {
            Step::Failed => {
                self.warm_failed = true;
                false
            }
            Step::Ready => {
                self.warm = Some(warm);
                false
            }
            Step::Pending { outbound } => {
                self.warm = Some(warm);
                outbound
            }
        }
    }

    /// True when the warm channel said it is ready.
    pub(super) fn warm_ready(&self) -> bool {
        matches!(self.warm, Some(Warm::Ready(_)))
    }

    /// A new session channel.
    pub(super) fn open_channel(&self) -> Result<Channel> {
        self.call(|s| s.channel_session()).map_err(|e| self.ssh_error(e, "cannot open a channel"))
    }

    /// True when the session may serve another call: no channel left open, not cancelled,
    /// not past its deadline, still authenticated, not found silent.
    pub(super) fn reusable(&self) -> bool {
        self.ready_channel.is_none() && !self.silent && self.check().is_ok() && self.session.authenticated()
    }

    /// Host-key and cipher preferences: the key types `known_hosts` records for this host
    /// (as OpenSSH orders them), and AEAD ciphers first.
    fn prefer_methods(&mut self) -> Result<()> {
        if self.target.strict_host_key_checking {
            let content = known_hosts_content(&self.target);
            let types = known_key_types(&self.session, &content, &self.target.host, self.target.port);
            if !types.is_empty() {
                let supported = self.session.supported_algs(MethodType::HostKey).unwrap_or_default();
                let wanted: Vec<&str> = types.iter().map(String::as_str).filter(|t| supported.contains(t)).collect();
                if !wanted.is_empty() {
                    let _ = self.session.method_pref(MethodType::HostKey, &wanted.join(","));
                }
            }
        }
        for kind in [MethodType::CryptCs, MethodType::CryptSc] {
            let supported = self.session.supported_algs(kind).unwrap_or_default();
            let mut prefs: Vec<&str> = CIPHER_PREFERENCE.iter().copied().filter(|c| supported.contains(c)).collect();
            for alg in supported {
                if !prefs.contains(&alg) {
                    prefs.push(alg);
                }
            }
            if !prefs.is_empty() {
                let _ = self.session.method_pref(kind, &prefs.join(","));
            }
        }
        Ok(())
    }

    /// Strict host-key checking: the presented key must be recorded for this host.
    fn verify_host_key(&self) -> Result<()> {
        let (key, kind) = self
            .session
            .host_key()
            .ok_or_else(|| Error::new(codes::SSH_PROTOCOL, "the server presented no host key"))?;
        let content = known_hosts_content(&self.target);
        let mut known = self.session.known_hosts().map_err(|e| protocol(&self.target, "known hosts", &e))?;
        for line in known_hosts_lines(&content) {
            let _ = known.read_str(line, KnownHostFileKind::OpenSSH);
        }
        let key_name = key_type_name(kind);
        let fingerprint = fingerprint(key);
        let shown = self.target.display();
        if revoked(&content, key) {
            return Err(Error::new(
                codes::SSH_HOST_KEY_CHANGED,
                format!("{key_name} host key for {shown} ({fingerprint}) is marked as revoked.\nHost key verification failed."),
            ));
        }
        match known.check_port(&self.target.host, self.target.port, key) {
            CheckResult::Match => Ok(()),
            CheckResult::Mismatch => Err(Error::new(
                codes::SSH_HOST_KEY_CHANGED,
                format!(
                    "REMOTE HOST IDENTIFICATION HAS CHANGED: the {key_name} host key for {shown} is {fingerprint}, \
                     which the known hosts do not hold for it.\nHost key verification failed."
                ),
            )),
            CheckResult::NotFound | CheckResult::Failure => Err(Error::new(
                codes::SSH_HOST_KEY_UNKNOWN,
                format!(
                    "No {key_name} host key is known for {shown} and you have requested strict checking \
                     (the server's key is {fingerprint}).\nHost key verification failed."
                ),
            )),
        }
    }

    /// Public-key authentication: the configured key, else the agent and default identities.
    fn authenticate(&mut self) -> Result<()> {
        let user = self.target.username.clone();
        if let Some(key) = self.target.private_key.clone() {
            let key = if key.ends_with('\n') { key } else { format!("{key}\n") };
            match self.call(|s| s.userauth_pubkey_memory(&user, None, &key, None)) {
                Ok(()) => {}
                // libssh2 could not use the key from memory (a format it only reads from a
                // file): retry through a 0600 file in a private directory removed at once.
                Err(Stop::Ssh(e)) if key_unreadable(&e) => {
                    let file = PrivateKeyFile::write(&key).map_err(|e| io_failure(&self.target, e))?;
                    let path = file.path.clone();
                    let result = self.call(|s| s.userauth_pubkey_file(&user, None, &path, None));
                    drop(file);
                    result.map_err(|e| self.auth_error(e))?;
                }
                Err(e) => return Err(self.auth_error(e)),
            }
        } else {
            self.authenticate_default()?;
        }
        if self.session.authenticated() {
            Ok(())
        } else {
            Err(self.denied())
        }
    }

    /// `ssh` without `-i`: the agent's identities, then `~/.ssh/id_{ed25519,ecdsa,rsa}`.
    fn authenticate_default(&mut self) -> Result<()> {
        let user = self.target.username.clone();
        if std::env::var_os("SSH_AUTH_SOCK").is_some() {
            if let Ok(mut agent) = self.session.agent() {
                if agent.connect().is_ok() && agent.list_identities().is_ok() {
                    for identity in agent.identities().unwrap_or_default() {
                        if self.call(|_| agent.userauth(&user, &identity)).is_ok() {
                            return Ok(());
                        }
                        check_stop(&self.cancel)?;
                    }
                }
            }
        }
        if let Some(home) = std::env::var_os("HOME") {
            for name in ["id_ed25519", "id_ecdsa", "id_rsa"] {
                let path = Path::new(&home).join(".ssh").join(name);
                if path.is_file() && self.call(|s| s.userauth_pubkey_file(&user, None, &path, None)).is_ok() {
                    return Ok(());
                }
                check_stop(&self.cancel)?;
            }
        }
        Err(self.denied())
    }

    fn denied(&self) -> Error {
        Error::new(
            codes::SSH_AUTH_FAILED,
            format!("{}@{}: Permission denied (publickey).", self.target.username, self.target.host),
        )
    }

    fn auth_error(&self, stop: Stop) -> Error {
        match stop {
            Stop::Ssh(e) => {
                let mut err = self.denied();
                err.message = format!("{} ({})", err.message, e.message());
                err
            }
            Stop::Core(e) => e,
        }
    }
}

impl Connection {
    /// The session's last libssh2 error (the code an `io::Error` from a stream lost).
    pub(super) fn last_error(&self) -> ssh2::Error {
        ssh2::Error::last_session_error(&self.session)
            .unwrap_or_else(|| ssh2::Error::from_errno(ErrorCode::Session(-14)))
    }

    /// Fails once cancelled, past the deadline, past the connect phase's deadline while it
    /// connects, or inactive for too long.
    pub(super) fn check(&self) -> Result<()> {
        check_stop(&self.cancel)?;
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(timed_out(&self.target));
        }
        if let Some((clock, step)) = &self.connecting {
            if Instant::now() >= clock.deadline() {
                let stage = match step {
                    Handshake::KeyExchange if self.session.banner().is_none() => "banner exchange",
                    Handshake::KeyExchange => "key exchange",
                    Handshake::Authentication => "authentication",
                };
                return Err(handshake_timed_out(&self.target, stage));
            }
        }
        if let Some(limit) = self.target.inactivity_timeout {
            if self.last_activity.elapsed() >= limit {
                return Err(Error::new(
                    codes::SSH_TIMEOUT,
                    format!(
                        "ssh to {}: no data moved for {} s (inactivity timeout)",
                        self.target.display(),
                        limit.as_secs_f64()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Waits (at most [`POLL_INTERVAL`]) for the socket to be ready in the direction libssh2
    /// is blocked on, after checking the stop conditions.
    pub(super) fn wait(&self) -> Result<()> {
        self.check()?;
        let events = match self.session.block_directions() {
            BlockDirections::Outbound => libc::POLLOUT,
            BlockDirections::Both => libc::POLLIN | libc::POLLOUT,
            _ => libc::POLLIN,
        };
        let mut fd = libc::pollfd { fd: self.socket.as_raw_fd(), events, revents: 0 };
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut fd, 1, POLL_INTERVAL.as_millis() as libc::c_int) };
        Ok(())
    }

    /// Repeats a non-blocking libssh2 call until it stops asking to be called again.
    pub(super) fn call<T>(
        &self,
        mut op: impl FnMut(&Session) -> std::result::Result<T, ssh2::Error>,
    ) -> std::result::Result<T, Stop> {
        loop {
            match attempt(op(&self.session)) {
                Attempt::Done(value) => return Ok(value),
                Attempt::Failed(e) if e.code() == EAGAIN => self.wait().map_err(Stop::Core)?,
                Attempt::Failed(e) => return Err(Stop::Ssh(e)),
            }
        }
    }

    /// The error for a failed libssh2 call: the connection broke, or a protocol failure.
    pub(super) fn ssh_error(&self, stop: Stop, what: &str) -> Error {
        match stop {
            Stop::Core(e) => e,
            Stop::Ssh(e) => match e.code() {
                ErrorCode::Session(-7 | -13 | -43 | -45 | -30) => Error::new(
                    codes::SSH_CONNECTION_LOST,
                    format!("ssh connection to {} lost: {}", self.target.display(), e.message()),
                ),
                _ => protocol(&self.target, what, &e),
            },
        }
    }
}

impl Drop for Connection {
    /// Says goodbye without waiting for the server (a few non-blocking attempts).
    fn drop(&mut self) {
        for _ in 0..3 {
            match self.session.disconnect(None, "done", None) {
                Err(e) if e.code() == EAGAIN => std::thread::sleep(Duration::from_millis(1)),
                _ => break,
            }
        }
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }
}

/// A stopped libssh2 call: a libssh2 failure, or one of our stop conditions.
pub(super) enum Stop {
    Ssh(ssh2::Error),
    Core(Error),
}

fn attempt<T>(result: std::result::Result<T, ssh2::Error>) -> Attempt<T> {
    match result {
        Ok(value) => Attempt::Done(value),
        Err(e) => Attempt::Failed(e),
    }
}

/// True when libssh2 could not parse a key given in memory (it may read it from a file).
fn key_unreadable(e: &ssh2::Error) -> bool {
    matches!(e.code(), ErrorCode::Session(-16 | -33 | -51))
}

/// A call past its deadline (`SSH_TIMEOUT`), for a session and for a wait for one alike.
pub(super) fn timed_out(target: &SshTarget) -> Error {
    Error::new(codes::SSH_TIMEOUT, format!("ssh to {} timed out", target.display()))
}

fn check_stop(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::Relaxed) {
        Err(Error::aborted())
    } else {
        Ok(())
    }
}

fn protocol(target: &SshTarget, what: &str, e: &ssh2::Error) -> Error {
    Error::new(codes::SSH_PROTOCOL, format!("ssh to {}: {what}: {}", target.display(), e.message()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssh::DEFAULT_CONNECT_TIMEOUT;

    #[test]
    fn connect_failures_carry_node_codes() {
        // A port nobody listens on (bind one, close it).
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let target = SshTarget { inactivity_timeout: None, ..silent_target(port, 2000) };
        let err = Connection::open(&target, Arc::new(AtomicBool::new(false)), None).err().unwrap();
        assert_eq!(err.code, "ECONNREFUSED");
        assert!(err.message.contains(&format!("port {port}")), "{}", err.message);
    }

    /// A TCP server that accepts every connection and sends `greeting` (nothing at all when
    /// empty), then keeps it open without a word more.
    fn silent_server(greeting: &'static [u8]) -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for mut stream in listener.incoming().flatten() {
                use std::io::Write;
                let _ = stream.write_all(greeting);
                held.push(stream);
            }
        });
        port
    }

    fn silent_target(port: u16, connect_ms: u64) -> SshTarget {
        SshTarget {
            host: "127.0.0.1".into(),
            port,
            username: "u".into(),
            private_key: None,
            known_hosts: Some(String::new()),
            strict_host_key_checking: true,
            connect_timeout: Duration::from_millis(connect_ms),
            // What bounded a silent server before the connect timeout covered the handshake.
            inactivity_timeout: Some(Duration::from_secs(5)),
            connect_budget: None,
        }
    }

    #[test]
    fn the_connect_timeout_covers_the_banner_and_the_key_exchange() {
        for (greeting, stage) in [(&b""[..], "banner exchange"), (&b"SSH-2.0-OpenSSH_9.2\r\n"[..], "key exchange")] {
            let target = silent_target(silent_server(greeting), 400);
            let started = Instant::now();
            let err = Connection::open(&target, Arc::new(AtomicBool::new(false)), None).err().unwrap();
            let took = started.elapsed();
            assert_eq!(err.code, "ETIMEDOUT", "{}", err.message);
            assert_eq!(
                err.message,
                format!("ssh: connect to host 127.0.0.1 port {}: Connection timed out during {stage}", target.port)
            );
            assert!(took >= Duration::from_millis(400) && took < Duration::from_millis(2500), "{took:?}");
        }
    }

    #[test]
    fn connections_of_one_call_share_its_connect_budget() {
        let budget = crate::ssh::ConnectBudget::new(Duration::from_millis(500));
        let target = SshTarget { connect_budget: Some(budget), ..silent_target(silent_server(b""), 500) };
        let started = Instant::now();
        let first = Connection::open(&target, Arc::new(AtomicBool::new(false)), None).err().unwrap();
        let spent = started.elapsed();
        assert!(spent >= Duration::from_millis(500), "{spent:?}");
        // The budget is spent: the next connection of the call fails at once, with the same error.
        let again = Instant::now();
        let second = Connection::open(&target, Arc::new(AtomicBool::new(false)), None).err().unwrap();
        assert!(again.elapsed() < Duration::from_millis(100), "{:?}", again.elapsed());
        assert_eq!((second.code, second.message), (first.code, first.message));
        // Another call (its own budget) has its own connect timeout.
        let other =
            SshTarget { connect_budget: Some(crate::ssh::ConnectBudget::new(Duration::from_millis(300))), ..target };
        let started = Instant::now();
        assert_eq!(Connection::open(&other, Arc::new(AtomicBool::new(false)), None).err().unwrap().code, "ETIMEDOUT");
        assert!(started.elapsed() >= Duration::from_millis(300));
    }

    #[test]
    fn a_cancelled_connection_does_not_start() {
        let target = SshTarget {
            host: "127.0.0.1".into(),
            port: 1,
            username: "u".into(),
            private_key: None,
            known_hosts: None,
            strict_host_key_checking: false,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            inactivity_timeout: None,
            connect_budget: None,
        };
        let err = Connection::open(&target, Arc::new(AtomicBool::new(true)), None).err().unwrap();
        assert!(err.is_aborted());
    }
}
