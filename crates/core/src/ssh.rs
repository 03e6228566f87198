//! Hot path 4 (SSH lane): remote commands and streamed transfers over one in-process SSH
//! session (libssh2 through the `ssh2` crate), with no `ssh` or `tar` child process.
//!
//! * [`Connection::open`]: TCP connect with a timeout, handshake, host-key verification
//!   against OpenSSH `known_hosts` content (strict mode), public-key authentication.
//! * [`Connection::exec`]: runs one command on a session channel, feeding its stdin from
//!   memory, a reader or a bounded channel of chunks, and delivering its stdout to memory
//!   (bounded), a writer, a bounded channel of chunks, or nowhere.
//! * [`upload_tar`] / [`download_tar`]: a directory packed by [`crate::tar::pack`] on a
//!   thread of its own straight into the remote command's stdin, or the remote command's
//!   stdout extracted by [`crate::tar::extract`] on a thread of its own. Each side is its own
//!   thread so encryption and packing (or extraction) overlap, as `tar | ssh` overlaps.
//!
//! Everything here blocks its calling thread; callers run it on a thread of its own. The
//! session is non-blocking underneath: every wait is a `poll(2)` of at most
//! [`POLL_INTERVAL`], so cancellation, the inactivity timeout and the deadline are noticed
//! promptly whatever the remote does.
//!
//! A transfer succeeds only when all of its input reached the remote command and the command
//! exited with status 0. A remote command that exits early (a `tar` that failed, a `mkdir`
//! that was refused) or a connection that breaks is a failure, never a success.

use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ssh2::{BlockDirections, Channel, CheckResult, ErrorCode, KnownHostFileKind, MethodType, Session};

use crate::error::{codes, errno_name, Error, Result};
use crate::tar::{self, ExtractOptions, ExtractSummary, PackOptions, PackSummary};

/// Longest single wait on the socket (or on the local side of a pipeline) before the stop
/// conditions are checked again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// OpenSSH's `ConnectTimeout` that upstream passes (`-o ConnectTimeout=10`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Size of the chunks that travel between a pipeline's threads.
const CHUNK: usize = 256 * 1024;
/// Chunks a pipeline may hold between its two threads.
const PIPELINE_DEPTH: usize = 8;
/// Remote stderr kept for the error message of a transfer (the start of it).
pub const TRANSFER_STDERR_LIMIT: usize = 64 * 1024;
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

/// Where and how to connect: upstream's `SshConnectionConfig` plus our limits.
#[derive(Debug, Clone)]
pub struct SshTarget {
    /// Host name or address.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Remote user name.
    pub username: String,
    /// Private key (OpenSSH or PEM format, unencrypted). `None`: the SSH agent, then the
    /// default identities in `~/.ssh` (what `ssh` does without `-i`).
    pub private_key: Option<String>,
    /// `known_hosts` content. `None` with strict checking: `~/.ssh/known_hosts` and
    /// `/etc/ssh/ssh_known_hosts` (what `ssh` reads by default).
    pub known_hosts: Option<String>,
    /// Verify the server's host key (upstream's `StrictHostKeyChecking=yes`); when false
    /// the key is not checked at all (`StrictHostKeyChecking=no`, `UserKnownHostsFile=/dev/null`).
    pub strict_host_key_checking: bool,
    /// Limit on establishing the TCP connection (each resolved address).
    pub connect_timeout: Duration,
    /// Fails a command or transfer when no byte moved for this long (`None`: never).
    pub inactivity_timeout: Option<Duration>,
}

impl SshTarget {
    /// `[host]:port` as OpenSSH shows it (plain `host` for port 22).
    pub fn display(&self) -> String {
        if self.port == 22 {
            self.host.clone()
        } else {
            format!("[{}]:{}", self.host, self.port)
        }
    }
}

/// Where a remote command's stdin comes from.
pub enum Input<'a> {
    /// Nothing: EOF at once.
    Empty,
    /// These bytes, then EOF.
    Bytes(&'a [u8]),
    /// A reader (a file), until it ends.
    Reader(&'a mut dyn Read),
    /// Chunks from another thread; EOF after [`Piece::End`]. A sender that goes away without
    /// sending `End` failed: the channel gets no EOF and the exec fails.
    Chunks(Receiver<Piece>),
}

/// One message of an [`Input::Chunks`] pipeline.
pub enum Piece {
    /// More bytes.
    Data(Vec<u8>),
    /// The input is complete.
    End,
}

/// Where a remote command's stdout goes.
pub enum Output<'a> {
    /// Dropped.
    Discard,
    /// Kept in memory; more than this many bytes fails the exec with [`codes::MAX_BUFFER`].
    Collect(usize),
    /// Written to a writer (a file).
    Writer(&'a mut dyn Write),
    /// Sent to another thread; a receiver that goes away fails the exec.
    Chunks(SyncSender<Vec<u8>>),
}

/// How stderr is kept.
#[derive(Debug, Clone, Copy)]
pub enum StderrLimit {
    /// Keep the first `n` bytes, drop the rest.
    Truncate(usize),
    /// Fail the exec with [`codes::MAX_BUFFER`] beyond `n` bytes.
    Fail(usize),
}

/// What a finished remote command left.
#[derive(Debug, Clone, Default)]
pub struct ExecOutcome {
    /// Collected stdout ([`Output::Collect`] only).
    pub stdout: Vec<u8>,
    /// Collected stderr (see [`StderrLimit`]).
    pub stderr: Vec<u8>,
    /// The exit status (0 when the server sent none).
    pub exit_status: i32,
    /// The signal that ended the command, without `SIG` (`TERM`), if any.
    pub exit_signal: Option<String>,
    /// True when all of the input reached the command and its EOF was sent.
    pub input_complete: bool,
    /// Input bytes the channel accepted.
    pub bytes_sent: u64,
    /// Stdout bytes received.
    pub bytes_received: u64,
}

impl ExecOutcome {
    /// True for a clean exit with all input consumed.
    pub fn succeeded(&self) -> bool {
        self.exit_status == 0 && self.exit_signal.is_none() && self.input_complete
    }

    /// The failure of a command that did not succeed, as upstream words it: the remote
    /// stderr, else `ssh exited with code N`.
    pub fn failure(&self) -> Error {
        let stderr = String::from_utf8_lossy(&self.stderr);
        let stderr = stderr.trim();
        let message = if !stderr.is_empty() {
            stderr.to_string()
        } else if let Some(signal) = &self.exit_signal {
            format!("ssh exited: the remote command was killed by signal SIG{signal}")
        } else if self.exit_status != 0 {
            format!("ssh exited with code {}", self.exit_status)
        } else {
            "ssh exited with code 0 before the remote command read all of its input".to_string()
        };
        Error::new(codes::SSH_REMOTE_FAILED, message)
    }
}

/// An authenticated SSH session. Dropping it disconnects.
pub struct Connection {
    session: Session,
    socket: TcpStream,
    target: SshTarget,
    cancel: Arc<AtomicBool>,
    deadline: Option<Instant>,
    last_activity: Instant,
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
    pub fn open(target: &SshTarget, cancel: Arc<AtomicBool>, deadline: Option<Instant>) -> Result<Connection> {
        check_stop(&cancel)?;
        let socket = connect_tcp(target, deadline)?;
        let _ = socket.set_nodelay(true);
        let mut session = Session::new().map_err(|e| protocol(target, "cannot create an SSH session", &e))?;
        session.set_tcp_stream(socket.try_clone().map_err(|e| io_failure(target, e))?);
        session.set_blocking(false);
        session.set_compress(false);
        let mut conn =
            Connection { session, socket, target: target.clone(), cancel, deadline, last_activity: Instant::now() };
        conn.prefer_methods()?;
        // `handshake` wants `&mut Session`; a clone shares the same libssh2 session.
        let mut handshake = conn.session.clone();
        conn.call(|_| handshake.handshake()).map_err(|e| conn.ssh_error(e, "SSH handshake failed"))?;
        if target.strict_host_key_checking {
            conn.verify_host_key()?;
        }
        conn.authenticate()?;
        Ok(conn)
    }

    /// The target this connection was opened for.
    pub fn target(&self) -> &SshTarget {
        &self.target
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

    /// Runs `command` on a new channel (the remote user's shell runs it, as with `ssh host
    /// command`) and pumps its stdin, stdout and stderr until it exits.
    ///
    /// `on_bytes(sent, received)` is called after every movement. A connection failure, the
    /// cancellation, the deadline, inactivity and a broken pipeline end are errors; a
    /// command's own failure is not (see [`ExecOutcome::succeeded`]).
    pub fn exec(
        &mut self,
        command: &str,
        mut input: Input<'_>,
        mut stdout: Output<'_>,
        stderr_limit: StderrLimit,
        mut on_bytes: impl FnMut(u64, u64),
    ) -> Result<ExecOutcome> {
        let mut channel = self.call(|s| s.channel_session()).map_err(|e| self.ssh_error(e, "cannot open a channel"))?;
        self.call(|_| channel.exec(command)).map_err(|e| self.ssh_error(e, "the server refused the command"))?;
        let mut out = ExecOutcome::default();
        let mut buf = vec![0u8; 64 * 1024];
        let mut pending: Vec<u8> = Vec::new();
        let mut offset = 0usize;
        let mut bytes_used = false; // `Input::Bytes` handed over
        let mut input_open = !matches!(input, Input::Empty);
        if !input_open {
            self.call(|_| channel.send_eof()).map_err(|e| self.ssh_error(e, "cannot close the command's input"))?;
            out.input_complete = true;
        }
        loop {
            let mut moved = false;
            let mut starved = false; // waiting on the local input, not on the socket
            let mut outbound_pending = false;
            if input_open {
                if offset == pending.len() {
                    pending.clear();
                    offset = 0;
                    match next_input(&mut input, &mut pending, &mut bytes_used)? {
                        InputState::Data => {}
                        InputState::Pending => starved = true,
                        InputState::End => {
                            out.input_complete = true;
                            match self.call(|_| channel.send_eof()) {
                                Ok(()) => {}
                                Err(Stop::Ssh(e)) if closed(&e) => {}
                                Err(e) => return Err(self.ssh_error(e, "cannot close the command's input")),
                            }
                            input_open = false;
                            moved = true;
                        }
                        InputState::Failed => {
                            return Err(Error::new(codes::INTERNAL, "the input of the remote command failed"));
                        }
                    }
                }
                if input_open && offset < pending.len() {
                    match channel.write(&pending[offset..]) {
                        Ok(n) => {
                            offset += n;
                            out.bytes_sent += n as u64;
                            moved = n > 0;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            outbound_pending = matches!(
                                self.session.block_directions(),
                                BlockDirections::Outbound | BlockDirections::Both
                            );
                        }
                        Err(_) => {
                            let e = self.last_error();
                            if closed(&e) || channel.eof() {
                                // The command stopped reading: its exit says why.
                                input_open = false;
                            } else {
                                return Err(self.ssh_error(Stop::Ssh(e), "the connection failed"));
                            }
                        }
                    }
                }
            }
            // A data packet half written must be completed before anything else is sent
            // (reading may send window adjustments), so reads wait for it.
            if !outbound_pending {
                moved |= self.drain(&mut channel, 0, &mut buf, &mut stdout, &mut out, stderr_limit)?;
                moved |= self.drain(&mut channel, 1, &mut buf, &mut stdout, &mut out, stderr_limit)?;
                if channel.eof() {
                    // The command closed its output (it exited): input not yet written
                    // never will be.
                    if input_open && offset < pending.len() {
                        input_open = false;
                    }
                    if !input_open {
                        break;
                    }
                }
            }
            if moved {
                self.last_activity = Instant::now();
                on_bytes(out.bytes_sent, out.bytes_received);
                continue;
            }
            if starved && !outbound_pending {
                if let Input::Chunks(rx) = &input {
                    self.check()?;
                    match rx.recv_timeout(POLL_INTERVAL) {
                        Ok(piece) => push_piece(piece, &mut pending, &mut input_open, &mut out, self, &mut channel)?,
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => {
                            return Err(Error::new(codes::INTERNAL, "the input of the remote command failed"));
                        }
                    }
                    // Inactivity counts from the last byte on the wire, but a slow local
                    // producer is activity too.
                    self.last_activity = Instant::now();
                    continue;
                }
            }
            self.wait()?;
        }
        self.call(|_| channel.wait_close()).map_err(|e| self.ssh_error(e, "the connection failed"))?;
        out.exit_status = channel.exit_status().unwrap_or(0);
        out.exit_signal = channel.exit_signal().ok().and_then(|s| s.exit_signal).filter(|s| !s.is_empty());
        // Dropping `stdout` (a pipeline's sender) tells its consumer the stream ended.
        Ok(out)
    }

    /// Reads what is available on stream `id` (0 stdout, 1 stderr) without waiting.
    fn drain(
        &self,
        channel: &mut Channel,
        id: i32,
        buf: &mut [u8],
        stdout: &mut Output<'_>,
        out: &mut ExecOutcome,
        stderr_limit: StderrLimit,
    ) -> Result<bool> {
        let mut moved = false;
        let mut stream = channel.stream(id);
        for _ in 0..16 {
            let n = match stream.read(buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return Err(self.ssh_error(Stop::Ssh(self.last_error()), "the connection failed")),
            };
            moved = true;
            let data = &buf[..n];
            if id == 1 {
                match stderr_limit {
                    StderrLimit::Truncate(limit) => {
                        let room = limit.saturating_sub(out.stderr.len());
                        out.stderr.extend_from_slice(&data[..room.min(n)]);
                    }
                    StderrLimit::Fail(limit) => {
                        if out.stderr.len() + n > limit {
                            return Err(Error::new(codes::MAX_BUFFER, "stderr maxBuffer length exceeded"));
                        }
                        out.stderr.extend_from_slice(data);
                    }
                }
                continue;
            }
            out.bytes_received += n as u64;
            match stdout {
                Output::Discard => {}
                Output::Collect(limit) => {
                    if out.stdout.len() + n > *limit {
                        return Err(Error::new(codes::MAX_BUFFER, "stdout maxBuffer length exceeded"));
                    }
                    out.stdout.extend_from_slice(data);
                }
                Output::Writer(writer) => writer.write_all(data).map_err(|e| Error::os(e, "write"))?,
                Output::Chunks(tx) => {
                    // Blocks while the consumer is behind: the remote waits on its window.
                    if tx.send(data.to_vec()).is_err() {
                        return Err(Error::new(codes::INTERNAL, "the consumer of the remote output failed"));
                    }
                }
            }
        }
        Ok(moved)
    }

    /// The session's last libssh2 error (the code an `io::Error` from a stream lost).
    fn last_error(&self) -> ssh2::Error {
        ssh2::Error::last_session_error(&self.session)
            .unwrap_or_else(|| ssh2::Error::from_errno(ErrorCode::Session(-14)))
    }

    /// Fails once cancelled, past the deadline, or inactive for too long.
    fn check(&self) -> Result<()> {
        check_stop(&self.cancel)?;
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::new(codes::SSH_TIMEOUT, format!("ssh to {} timed out", self.target.display())));
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
    fn wait(&self) -> Result<()> {
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
    fn call<T>(
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
    fn ssh_error(&self, stop: Stop, what: &str) -> Error {
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
enum Stop {
    Ssh(ssh2::Error),
    Core(Error),
}

fn attempt<T>(result: std::result::Result<T, ssh2::Error>) -> Attempt<T> {
    match result {
        Ok(value) => Attempt::Done(value),
        Err(e) => Attempt::Failed(e),
    }
}

enum InputState {
    Data,
    Pending,
    End,
    Failed,
}

/// Fills `pending` with the next piece of input, without blocking on another thread.
fn next_input(input: &mut Input<'_>, pending: &mut Vec<u8>, bytes_used: &mut bool) -> Result<InputState> {
    Ok(match input {
        Input::Empty => InputState::End,
        Input::Bytes(bytes) => {
            if *bytes_used || bytes.is_empty() {
                InputState::End
            } else {
                *bytes_used = true;
                pending.extend_from_slice(bytes);
                InputState::Data
            }
        }
        Input::Reader(reader) => {
            pending.resize(CHUNK, 0);
            let n = loop {
                match reader.read(pending) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        pending.clear();
                        return Err(Error::os(e, "read"));
                    }
                }
            };
            pending.truncate(n);
            if n == 0 {
                InputState::End
            } else {
                InputState::Data
            }
        }
        Input::Chunks(rx) => match rx.try_recv() {
            Ok(Piece::Data(data)) => {
                *pending = data;
                if pending.is_empty() {
                    InputState::Pending
                } else {
                    InputState::Data
                }
            }
            Ok(Piece::End) => InputState::End,
            Err(TryRecvError::Empty) => InputState::Pending,
            Err(TryRecvError::Disconnected) => InputState::Failed,
        },
    })
}

/// Applies a piece received while waiting for input.
fn push_piece(
    piece: Piece,
    pending: &mut Vec<u8>,
    input_open: &mut bool,
    out: &mut ExecOutcome,
    conn: &Connection,
    channel: &mut Channel,
) -> Result<()> {
    match piece {
        Piece::Data(data) => *pending = data,
        Piece::End => {
            out.input_complete = true;
            match conn.call(|_| channel.send_eof()) {
                Ok(()) => {}
                Err(Stop::Ssh(e)) if closed(&e) => {}
                Err(e) => return Err(conn.ssh_error(e, "cannot close the command's input")),
            }
            *input_open = false;
        }
    }
    Ok(())
}

/// True for the errors of writing to a channel the remote already closed.
fn closed(e: &ssh2::Error) -> bool {
    matches!(e.code(), ErrorCode::Session(-26 | -27))
}

/// True when libssh2 could not parse a key given in memory (it may read it from a file).
fn key_unreadable(e: &ssh2::Error) -> bool {
    matches!(e.code(), ErrorCode::Session(-16 | -33 | -51))
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

/// A connection-level OS failure, with Node's code.
fn io_failure(target: &SshTarget, e: io::Error) -> Error {
    let port = target.port;
    let host = &target.host;
    match e.raw_os_error() {
        Some(raw) => {
            let (code, description) = errno_name(raw);
            Error {
                errno: Some(-raw),
                syscall: Some("connect"),
                ..Error::new(code, format!("ssh: connect to host {host} port {port}: {description}"))
            }
        }
        None if e.kind() == io::ErrorKind::TimedOut => {
            Error::new("ETIMEDOUT", format!("ssh: connect to host {host} port {port}: Connection timed out"))
        }
        None => Error::new(codes::SSH_PROTOCOL, format!("ssh: connect to host {host} port {port}: {e}")),
    }
}

/// Resolves and connects, each address within the connect timeout (and the deadline).
fn connect_tcp(target: &SshTarget, deadline: Option<Instant>) -> Result<TcpStream> {
    let addrs: Vec<SocketAddr> = (target.host.as_str(), target.port)
        .to_socket_addrs()
        .map_err(|e| Error::new("ENOTFOUND", format!("ssh: Could not resolve hostname {}: {e}", target.host)))?
        .collect();
    let mut last = None;
    for addr in addrs {
        let mut limit = target.connect_timeout;
        if let Some(deadline) = deadline {
            limit = limit.min(deadline.saturating_duration_since(Instant::now()));
        }
        if limit.is_zero() {
            last = Some(io::Error::from(io::ErrorKind::TimedOut));
            break;
        }
        match TcpStream::connect_timeout(&addr, limit) {
            Ok(socket) => return Ok(socket),
            Err(e) => last = Some(e),
        }
    }
    Err(io_failure(target, last.unwrap_or_else(|| io::Error::from(io::ErrorKind::NotFound))))
}

/// The `known_hosts` content to check against: the configured one, or OpenSSH's defaults.
fn known_hosts_content(target: &SshTarget) -> String {
    if let Some(content) = &target.known_hosts {
        return content.clone();
    }
    let mut content = String::new();
    let mut files = vec![PathBuf::from("/etc/ssh/ssh_known_hosts")];
    if let Some(home) = std::env::var_os("HOME") {
        files.insert(0, Path::new(&home).join(".ssh").join("known_hosts"));
    }
    for file in files {
        if let Ok(text) = fs::read_to_string(file) {
            content.push_str(&text);
            content.push('\n');
        }
    }
    content
}

/// The entry lines of `known_hosts` content (no blank lines, comments or `@` markers,
/// which libssh2 does not read).
fn known_hosts_lines(content: &str) -> impl Iterator<Item = &str> {
    content.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('@'))
}

/// True when a `@revoked` line holds `key`.
fn revoked(content: &str, key: &[u8]) -> bool {
    let encoded = base64(key);
    content
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("@revoked"))
        .any(|l| l.split_whitespace().nth(3) == Some(encoded.as_str()))
}

/// The host-key algorithms for the key types `content` records for `host:port`, in file
/// order. A line is for this host when libssh2 reports a mismatch for a key no line holds.
fn known_key_types(session: &Session, content: &str, host: &str, port: u16) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in known_hosts_lines(content) {
        let Some(kind) = line.split_whitespace().nth(1) else {
            continue;
        };
        let Ok(mut one) = session.known_hosts() else {
            continue;
        };
        if one.read_str(line, KnownHostFileKind::OpenSSH).is_err() {
            continue;
        }
        if !matches!(one.check_port(host, port, b"\0paperclip-probe"), CheckResult::Mismatch) {
            continue;
        }
        let algs: &[&str] = match kind {
            "ssh-rsa" => &["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"],
            other => &[other],
        };
        for alg in algs {
            if !out.iter().any(|a| a == alg) {
                out.push((*alg).to_string());
            }
        }
    }
    out
}

fn key_type_name(kind: ssh2::HostKeyType) -> &'static str {
    match kind {
        ssh2::HostKeyType::Rsa => "RSA",
        ssh2::HostKeyType::Dss => "DSA",
        ssh2::HostKeyType::Ecdsa256 | ssh2::HostKeyType::Ecdsa384 | ssh2::HostKeyType::Ecdsa521 => "ECDSA",
        ssh2::HostKeyType::Ed25519 => "ED25519",
        _ => "unknown-type",
    }
}

/// OpenSSH's `SHA256:` fingerprint of a raw host key.
fn fingerprint(key: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(key);
    format!("SHA256:{}", base64(&digest).trim_end_matches('='))
}

/// Standard base64 with padding.
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A private key written for libssh2 to read: mode 0600 in a fresh 0700 directory, both
/// removed on drop.
struct PrivateKeyFile {
    dir: PathBuf,
    path: PathBuf,
}

impl PrivateKeyFile {
    fn write(key: &str) -> io::Result<PrivateKeyFile> {
        let base = std::env::temp_dir();
        for attempt in 0..16u32 {
            let nonce = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let dir = base.join(format!("paperclip-ssh-key-{}-{nonce:08x}-{attempt}", std::process::id()));
            match fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
            let path = dir.join("payload");
            let file = PrivateKeyFile { dir, path };
            let mut out = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&file.path)?;
            out.write_all(key.as_bytes())?;
            return Ok(file);
        }
        Err(io::Error::from(io::ErrorKind::AlreadyExists))
    }
}

impl Drop for PrivateKeyFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        let _ = fs::remove_dir(&self.dir);
    }
}

// ---------------------------------------------------------------------------------------
// Transfers

/// What a transfer moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferSummary {
    /// Bytes sent to the remote command's stdin (uploads) or read from its stdout (downloads).
    pub bytes: u64,
    /// Archive members packed or extracted (0 for a plain file).
    pub entries: u64,
}

/// Runs `command` with `input`, failing unless it succeeded; its stdout is discarded.
fn run_upload(conn: &mut Connection, command: &str, input: Input<'_>, progress: &mut impl FnMut(u64)) -> Result<u64> {
    let outcome =
        conn.exec(command, input, Output::Discard, StderrLimit::Truncate(TRANSFER_STDERR_LIMIT), |sent, _| {
            progress(sent)
        })?;
    if outcome.succeeded() {
        Ok(outcome.bytes_sent)
    } else {
        Err(outcome.failure())
    }
}

/// Packs `pack` (on a thread of its own) into the stdin of `command` on a new session:
/// upstream's `tar -cf - … | ssh host "sh -c 'mkdir -p dir && tar -xf - -C dir'"`, in
/// process. `progress` receives the bytes the channel accepted. Fails unless the whole
/// archive reached the command and it exited with status 0.
pub fn upload_tar(
    target: &SshTarget,
    command: &str,
    pack: PackOptions,
    cancel: Arc<AtomicBool>,
    mut progress: impl FnMut(u64),
) -> Result<TransferSummary> {
    let mut conn = Connection::open(target, Arc::clone(&cancel), None)?;
    let (tx, rx) = mpsc::sync_channel::<Piece>(PIPELINE_DEPTH);
    let packer = Worker::spawn("pack", &cancel, move |cancel| {
        let mut writer = PieceWriter { tx: &tx, chunk: Vec::with_capacity(CHUNK) };
        let summary = tar::pack(&pack, &mut writer, |_| {}, cancel)?;
        writer.flush_chunk().map_err(|_| Error::aborted())?;
        tx.send(Piece::End).map_err(|_| Error::aborted())?;
        Ok(summary)
    })?;
    let sent = run_upload(&mut conn, command, Input::Chunks(rx), &mut progress);
    if sent.is_err() {
        packer.stop();
    }
    let packed: Result<PackSummary> = packer.join();
    match (sent, packed) {
        (Ok(bytes), Ok(summary)) => Ok(TransferSummary { bytes, entries: summary.entries }),
        // The packer's own failure explains a broken input; otherwise the transfer's.
        (Err(e), Err(pack_err)) if !pack_err.is_aborted() && e.code == codes::INTERNAL => Err(pack_err),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e),
    }
}

/// Streams the stdout of `command` (upstream's remote `tar -cf - .`) into a safe extraction
/// of `dest` on a thread of its own. `progress` receives the bytes read from the channel.
/// Fails unless the command exited with status 0 and the archive extracted completely.
pub fn download_tar(
    target: &SshTarget,
    command: &str,
    dest: &Path,
    opts: ExtractOptions,
    cancel: Arc<AtomicBool>,
    mut progress: impl FnMut(u64),
) -> Result<TransferSummary> {
    let mut conn = Connection::open(target, Arc::clone(&cancel), None)?;
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(PIPELINE_DEPTH);
    let dest = dest.to_path_buf();
    let extractor = Worker::spawn("extract", &cancel, move |cancel| {
        let reader = ChunkReader { rx, current: Vec::new(), offset: 0 };
        tar::extract(reader, &dest, &opts, |_| {}, cancel)
    })?;
    let outcome = conn.exec(
        command,
        Input::Empty,
        Output::Chunks(tx),
        StderrLimit::Truncate(TRANSFER_STDERR_LIMIT),
        |_, received| progress(received),
    );
    // `tx` went with the exec: the extraction sees the end of its input now.
    if outcome.is_err() {
        extractor.stop();
    }
    let extracted: Result<ExtractSummary> = extractor.join();
    let outcome = match outcome {
        Ok(outcome) => outcome,
        // The extraction's own failure explains a consumer that went away.
        Err(e) if e.code == codes::INTERNAL => return Err(extracted.err().unwrap_or(e)),
        Err(e) => return Err(e),
    };
    if !outcome.succeeded() {
        return Err(outcome.failure());
    }
    let summary = extracted?;
    Ok(TransferSummary { bytes: outcome.bytes_received, entries: summary.entries })
}

/// Streams the file `path` into the stdin of `command` (upstream's bundle upload,
/// `streamLocalFileToSsh`). Fails unless all of it was read by a command that exited 0.
pub fn upload_file(
    target: &SshTarget,
    command: &str,
    path: &Path,
    cancel: Arc<AtomicBool>,
    mut progress: impl FnMut(u64),
) -> Result<TransferSummary> {
    let mut file = fs::File::open(path).map_err(|e| Error::io(e, "open", path))?;
    let mut conn = Connection::open(target, cancel, None)?;
    let bytes = run_upload(&mut conn, command, Input::Reader(&mut file), &mut progress)?;
    Ok(TransferSummary { bytes, entries: 0 })
}

/// Writes the stdout of `command` to a new file `path` (mode 0600; upstream's bundle
/// download, `streamSshToLocalFile`). On failure the file is removed.
pub fn download_file(
    target: &SshTarget,
    command: &str,
    path: &Path,
    cancel: Arc<AtomicBool>,
    mut progress: impl FnMut(u64),
) -> Result<TransferSummary> {
    let mut conn = Connection::open(target, cancel, None)?;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io(e, "open", path))?;
    let result = conn
        .exec(command, Input::Empty, Output::Writer(&mut file), StderrLimit::Truncate(TRANSFER_STDERR_LIMIT), |_, r| {
            progress(r)
        })
        .and_then(|outcome| if outcome.succeeded() { Ok(outcome.bytes_received) } else { Err(outcome.failure()) })
        .and_then(|bytes| file.sync_all().map(|()| bytes).map_err(|e| Error::io(e, "fsync", path)));
    match result {
        Ok(bytes) => Ok(TransferSummary { bytes, entries: 0 }),
        Err(e) => {
            drop(file);
            let _ = fs::remove_file(path);
            Err(e)
        }
    }
}

/// The second thread of a transfer (the packer or the extractor): its work runs with a
/// cancellation flag that follows the caller's and [`Worker::stop`] (the channel side
/// failed).
struct Worker<T> {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<T>>,
    what: &'static str,
}

impl<T: Send + 'static> Worker<T> {
    /// Starts `work` on a thread named `paperclip-ssh-<what>`.
    fn spawn(
        what: &'static str,
        cancel: &Arc<AtomicBool>,
        work: impl FnOnce(&AtomicBool) -> Result<T> + Send + 'static,
    ) -> Result<Worker<T>> {
        let stop = Arc::new(AtomicBool::new(false));
        let (own, outer) = (Arc::clone(&stop), Arc::clone(cancel));
        let thread = std::thread::Builder::new()
            .name(format!("paperclip-ssh-{what}"))
            .spawn(move || CancelEither { a: &own, b: &outer }.with(work))
            .map_err(|e| Error::new(codes::INTERNAL, format!("cannot start the {what} thread: {e}")))?;
        Ok(Worker { stop, thread, what })
    }

    /// Makes the work stop: the other side of the pipeline failed.
    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The work's result (a panic is an internal error).
    fn join(self) -> Result<T> {
        let what = self.what;
        self.thread.join().unwrap_or_else(|_| Err(Error::new(codes::INTERNAL, format!("the {what} thread panicked"))))
    }
}

/// A cancellation flag set when either of two flags is (the caller's, or the pipeline's
/// own stop when the other side failed), polled by a helper thread.
struct CancelEither<'a> {
    a: &'a AtomicBool,
    b: &'a AtomicBool,
}

impl CancelEither<'_> {
    /// Runs `work` with one flag that follows both.
    fn with<T>(&self, work: impl FnOnce(&AtomicBool) -> T) -> T {
        let merged = AtomicBool::new(false);
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    if self.a.load(Ordering::Relaxed) || self.b.load(Ordering::Relaxed) {
                        merged.store(true, Ordering::Relaxed);
                        break;
                    }
                    std::thread::sleep(POLL_INTERVAL);
                }
            });
            let result = work(&merged);
            done.store(true, Ordering::Relaxed);
            result
        })
    }
}

/// The pack thread's writer: [`CHUNK`]-sized pieces into the pipeline.
struct PieceWriter<'a> {
    tx: &'a SyncSender<Piece>,
    chunk: Vec<u8>,
}

impl PieceWriter<'_> {
    fn flush_chunk(&mut self) -> io::Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let data = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK));
        self.tx.send(Piece::Data(data)).map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the SSH channel closed"))
    }
}

impl Write for PieceWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let take = (CHUNK - self.chunk.len()).min(buf.len());
        self.chunk.extend_from_slice(&buf[..take]);
        if self.chunk.len() == CHUNK {
            self.flush_chunk()?;
        }
        Ok(take)
    }

    /// Pieces are handed over full, or at the end ([`PieceWriter::flush_chunk`]).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The extract thread's reader: the chunks the channel delivered, EOF when it ended.
struct ChunkReader {
    rx: Receiver<Vec<u8>>,
    current: Vec<u8>,
    offset: usize,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.offset == self.current.len() {
            match self.rx.recv() {
                Ok(chunk) => {
                    self.current = chunk;
                    self.offset = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.offset);
        buf[..n].copy_from_slice(&self.current[self.offset..self.offset + n]);
        self.offset += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn known_hosts_lines_skip_comments_blanks_and_markers() {
        let content = "# c\n\n[h]:2222 ssh-ed25519 AAAA\n@cert-authority * ssh-rsa BBBB\n  h2 ssh-rsa CCCC  \n";
        let lines: Vec<&str> = known_hosts_lines(content).collect();
        assert_eq!(lines, ["[h]:2222 ssh-ed25519 AAAA", "h2 ssh-rsa CCCC"]);
    }

    #[test]
    fn revoked_keys_are_recognised() {
        let key = b"\x00\x00\x00\x0bssh-ed25519key";
        let content = format!("@revoked [h]:22 ssh-ed25519 {}\n", base64(key));
        assert!(revoked(&content, key));
        assert!(!revoked(&content, b"other"));
    }

    #[test]
    fn display_follows_openssh() {
        let mut t = SshTarget {
            host: "h".into(),
            port: 22,
            username: "u".into(),
            private_key: None,
            known_hosts: None,
            strict_host_key_checking: true,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            inactivity_timeout: None,
        };
        assert_eq!(t.display(), "h");
        t.port = 2222;
        assert_eq!(t.display(), "[h]:2222");
    }

    #[test]
    fn failure_messages_follow_upstream() {
        let mut out = ExecOutcome { exit_status: 2, input_complete: true, ..Default::default() };
        assert_eq!(out.failure().message, "ssh exited with code 2");
        out.stderr = b"  tar: boom\n".to_vec();
        assert_eq!(out.failure().message, "tar: boom");
        assert_eq!(out.failure().code, codes::SSH_REMOTE_FAILED);
        let early = ExecOutcome { exit_status: 0, input_complete: false, ..Default::default() };
        assert!(!early.succeeded());
        assert!(early.failure().message.contains("before the remote command read all of its input"));
    }

    #[test]
    fn known_key_types_follow_the_host() {
        let session = Session::new().unwrap();
        // Two real-format lines for different hosts (the key blobs need only parse).
        let ed = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
        let content = format!("[127.0.0.1]:2222 ssh-ed25519 {ed}\nother.example ssh-ed25519 {ed}\n");
        assert_eq!(known_key_types(&session, &content, "127.0.0.1", 2222), ["ssh-ed25519"]);
        assert!(known_key_types(&session, &content, "127.0.0.1", 22).is_empty());
    }

    #[test]
    fn connect_failures_carry_node_codes() {
        // A port nobody listens on (bind one, close it).
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let target = SshTarget {
            host: "127.0.0.1".into(),
            port,
            username: "u".into(),
            private_key: None,
            known_hosts: Some(String::new()),
            strict_host_key_checking: true,
            connect_timeout: Duration::from_secs(2),
            inactivity_timeout: None,
        };
        let err = Connection::open(&target, Arc::new(AtomicBool::new(false)), None).err().unwrap();
        assert_eq!(err.code, "ECONNREFUSED");
        assert!(err.message.contains(&format!("port {port}")), "{}", err.message);
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
        };
        let err = Connection::open(&target, Arc::new(AtomicBool::new(true)), None).err().unwrap();
        assert!(err.is_aborted());
    }
}
