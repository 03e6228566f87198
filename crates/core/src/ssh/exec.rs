//! One remote command on a session channel: its stdin state machine (memory, a reader or
//! a channel of chunks), its stdout (memory, a writer, a channel of chunks) and stderr.

use std::io::{self, Read, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::time::Instant;

use ssh2::{BlockDirections, Channel, ErrorCode};

use super::connection::{Connection, Stop};
use super::warm::{self, Warm};
use super::{CHUNK, POLL_INTERVAL};
use crate::error::{codes, Error, Result};

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

impl Connection {
    /// Runs `command` on a new channel (the remote user's shell runs it, as with `ssh host
    /// command`; on a session kept warm, `sh -c '<script>'` runs as that script on the
    /// channel warm.rs started ahead) and pumps its stdin, stdout and stderr until it exits.
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
        // A warm channel (warm.rs) takes the command as a script on its stdin, ahead of the
        // command's own input; any other command gets a channel of its own.
        let keep_warm = self.keep_warm && !self.warm_failed;
        let script = if keep_warm { warm::script_of(command) } else { None };
        self.settle_warm(script.is_some())?;
        let (mut channel, framing) = match script {
            Some(script) if self.warm_ready() => {
                let channel = self.warm.take().and_then(Warm::take_ready).expect("a ready warm channel");
                (channel, warm::framing(&script))
            }
            _ => {
                let mut channel = match self.ready_channel.take() {
                    Some(channel) => channel,
                    None => self.open_channel()?,
                };
                self.call(|_| channel.exec(command))
                    .map_err(|e| self.ssh_error(e, "the server refused the command"))?;
                (channel, Vec::new())
            }
        };
        // The next command's, started while this one runs (on the channel opened at
        // checkout when this one did not need it).
        if keep_warm && self.warm.is_none() {
            let channel = self.ready_channel.take();
            self.arm_warm(channel);
        }
        let mut out = ExecOutcome::default();
        let mut buf = vec![0u8; 64 * 1024];
        // Input bytes written so far, the framing included (not counted as sent).
        let framing_len = framing.len() as u64;
        let mut written = 0u64;
        let mut pending: Vec<u8> = framing;
        let mut offset = 0usize;
        let mut bytes_used = false; // `Input::Bytes` handed over
        let mut input_open = !pending.is_empty() || !matches!(input, Input::Empty);
        if !input_open {
            self.call(|_| channel.send_eof()).map_err(|e| self.ssh_error(e, "cannot close the command's input"))?;
            out.input_complete = true;
        }
        let mut warm_outbound = false; // a packet of the warm channel is half written
        loop {
            if warm_outbound {
                // Nothing else may be sent before it (see `drain`).
                warm_outbound = self.step_warm();
                if warm_outbound {
                    self.wait()?;
                    continue;
                }
            }
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
                            written += n as u64;
                            out.bytes_sent = written.saturating_sub(framing_len);
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
                if self.warm.is_some() && !self.warm_ready() {
                    warm_outbound = self.step_warm();
                    if warm_outbound {
                        continue;
                    }
                }
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
        // The next command's channel: one round trip, as a probe's, bounded as one (a server
        // silent for a connect timeout leaves this session out of the pool; the command
        // itself succeeded).
        let _ = self.launch_warm(Instant::now() + self.target.connect_timeout);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
