//! Warm channels: the remote shell of the next command started before that command is known.
//!
//! Every remote command starts the remote user's login shell (`$SHELL -c command`), which
//! reads its startup files; a version manager's init in `~/.bashrc` makes that 100 ms or
//! more, paid by each command. A session that goes back to the pool therefore keeps one
//! channel whose login shell already ran and now runs [`BOOTSTRAP`]: POSIX `sh`, which says
//! it is ready ([`READY`] on stdout) and waits for a script on stdin. The next command of the
//! form `sh -c '<script>'` (every command of the SSH lane, upstream's and ours) is then sent
//! as that script, ended by the line [`END`]; the bootstrap `exec`s `sh -c "<script>"`,
//! which is what the login shell would have run, in the same environment, with the
//! command's stdin following on the same channel, its stdout, stderr, exit status and
//! signal the channel's own. The channel open and exec round trips and the shell startup
//! happen while the previous command runs and while the session waits in the pool (the
//! exec request is sent before a command returns: `Connection::launch_warm`).
//!
//! A warm channel is used only when it said exactly [`READY`] and nothing else (a startup
//! file that prints, a forced command, a login shell that cannot run `sh -c`: those
//! channels are dropped, the command runs on a channel of its own, as it always did, and
//! that session starts no other).
//! Scripts longer than [`MAX_SCRIPT`] (dash's `read` takes one byte per system call), or
//! holding the line [`END`], are not sent this way. `PAPERCLIP_NATIVE_SSH_WARM=0` turns it
//! off.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

use ssh2::{BlockDirections, Channel, ErrorCode};

use super::connection::Connection;

/// What the bootstrap prints once its login shell has started.
pub const READY: &[u8] = b"__paperclip_native_warm__\n";
/// The line that ends the script on a warm channel's stdin.
pub const END: &str = "__paperclip_native_script_end__";
/// Longest script sent to a warm channel.
pub const MAX_SCRIPT: usize = 16 * 1024;
/// The bootstrap (POSIX `sh`): ready, then the lines up to [`END`] become the script that
/// replaces it. Run through the login shell as `sh -c '<this>'`.
const BOOTSTRAP: &str = "sh -c 'printf \"%s\\n\" __paperclip_native_warm__; s=; \
while IFS= read -r l; do if [ \"$l\" = __paperclip_native_script_end__ ]; then exec sh -c \"$s\"; fi; s=\"$s$l\n\"; done'";
/// libssh2's "would block" code.
const EAGAIN: ErrorCode = ErrorCode::Session(-37);

static USED: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Commands run on a warm channel, and warm channels dropped unused because they did not
/// say exactly [`READY`] (process-wide counters).
pub fn stats() -> (u64, u64) {
    (USED.load(Ordering::Relaxed), DROPPED.load(Ordering::Relaxed))
}

/// False when `PAPERCLIP_NATIVE_SSH_WARM=0`.
pub fn enabled() -> bool {
    std::env::var_os("PAPERCLIP_NATIVE_SSH_WARM").is_none_or(|v| v != "0")
}

/// The script of `sh -c '<script>'` as our callers quote it (single-quoted pieces, a quote
/// as `'"'"'` or `\'`), when it may go to a warm channel.
pub fn script_of(command: &str) -> Option<String> {
    let mut rest = command.strip_prefix("sh -c ")?.chars().peekable();
    let mut script = String::new();
    rest.peek()?;
    while let Some(c) = rest.next() {
        match c {
            '\'' => loop {
                match rest.next()? {
                    '\'' => break,
                    c => script.push(c),
                }
            },
            '"' => {
                if rest.next()? != '\'' || rest.next()? != '"' {
                    return None;
                }
                script.push('\'');
            }
            '\\' if rest.next()? == '\'' => script.push('\''),
            _ => return None,
        }
    }
    (script.len() <= MAX_SCRIPT && !script.lines().any(|line| line == END)).then_some(script)
}

/// What goes first on a warm channel's stdin for `script`.
pub fn framing(script: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(script.len() + END.len() + 2);
    bytes.extend_from_slice(script.as_bytes());
    if !script.ends_with('\n') {
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(END.as_bytes());
    bytes.push(b'\n');
    bytes
}

/// A warm channel on its way to ready.
pub enum Warm {
    /// The channel open is under way.
    Opening,
    /// The bootstrap's exec request is under way (`sent`: it went out; the reply is awaited).
    Starting { channel: Channel, sent: bool },
    /// Started; `seen` is what its stdout said so far (a prefix of [`READY`]).
    Waiting { channel: Channel, seen: Vec<u8> },
    /// Said [`READY`]: waits for a script.
    Ready(Channel),
}

/// The outcome of one step of a warm channel.
pub enum Step {
    /// Not ready yet; `outbound` when a packet of ours is half written (the same step must
    /// be repeated before anything else is sent on the session).
    Pending { outbound: bool },
    /// Ready.
    Ready,
    /// Unusable (dropped).
    Failed,
}

impl Warm {
    /// A warm channel started on `channel` (already open), or on a new channel.
    pub fn start(channel: Option<Channel>) -> Warm {
        channel.map_or(Warm::Opening, |channel| Warm::Starting { channel, sent: false })
    }

    /// True once the bootstrap's exec request went out: the remote shell starts whether or
    /// not anyone waits for it.
    pub fn launched(&self) -> bool {
        !matches!(self, Warm::Opening | Warm::Starting { sent: false, .. })
    }

    /// Moves on as far as it can without waiting.
    pub fn step(&mut self, conn: &Connection) -> Step {
        loop {
            let next = match self {
                Warm::Opening => match conn.session.channel_session() {
                    Ok(channel) => Warm::Starting { channel, sent: false },
                    Err(e) => return pending_or_failed(conn, &e),
                },
                Warm::Starting { channel, sent } => match channel.exec(BOOTSTRAP) {
                    Ok(()) => {
                        let Warm::Starting { channel, .. } = std::mem::replace(self, Warm::Opening) else {
                            unreachable!()
                        };
                        Warm::Waiting { channel, seen: Vec::new() }
                    }
                    Err(e) => {
                        let step = pending_or_failed(conn, &e);
                        // Nothing half written: the request is out, its reply awaited.
                        *sent = matches!(step, Step::Pending { outbound: false });
                        return step;
                    }
                },
                Warm::Waiting { channel, seen } => {
                    let mut buf = [0u8; 64];
                    let mut quiet = true;
                    match channel.stderr().read(&mut buf) {
                        Ok(0) => {}
                        Ok(_) => return failed(),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return failed(),
                    }
                    let room = READY.len() - seen.len();
                    match channel.read(&mut buf[..room]) {
                        Ok(0) if channel.eof() => return failed(), // the channel ended
                        Ok(0) => {}
                        Ok(n) => {
                            seen.extend_from_slice(&buf[..n]);
                            quiet = false;
                            if !READY.starts_with(seen) {
                                return failed();
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return failed(),
                    }
                    if seen.len() < READY.len() {
                        if quiet {
                            return Step::Pending { outbound: outbound(conn) };
                        }
                        continue;
                    }
                    let Warm::Waiting { channel, .. } = std::mem::replace(self, Warm::Opening) else { unreachable!() };
                    Warm::Ready(channel)
                }
                Warm::Ready(channel) => {
                    return if channel.eof() { failed() } else { Step::Ready };
                }
            };
            *self = next;
        }
    }

    /// The ready channel, counted as used.
    pub fn take_ready(self) -> Option<Channel> {
        match self {
            Warm::Ready(channel) => {
                USED.fetch_add(1, Ordering::Relaxed);
                Some(channel)
            }
            _ => None,
        }
    }
}

fn failed() -> Step {
    DROPPED.fetch_add(1, Ordering::Relaxed);
    Step::Failed
}

fn pending_or_failed(conn: &Connection, e: &ssh2::Error) -> Step {
    if e.code() == EAGAIN {
        Step::Pending { outbound: outbound(conn) }
    } else {
        failed()
    }
}

fn outbound(conn: &Connection) -> bool {
    matches!(conn.session.block_directions(), BlockDirections::Outbound | BlockDirections::Both)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quote(s: &str) -> String {
        format!("'{}'", s.replace('\'', "'\"'\"'"))
    }

    #[test]
    fn reads_back_the_script_of_a_quoted_command() {
        for script in ["true", "cd '/a b' && tar -xf -", "set -e\nprintf '%s\\n' \"$x\"\n", "it's", "''", ""] {
            assert_eq!(script_of(&format!("sh -c {}", quote(script))).as_deref(), Some(script), "{script:?}");
        }
        assert_eq!(script_of("sh -c 'a'\\''b'").as_deref(), Some("a'b"));
    }

    #[test]
    fn leaves_other_commands_alone() {
        for command in [
            "tar -cf - .",
            "sh -c",
            "sh -c ",
            "sh -c 'a' b",
            "sh -c 'a' 'b' ; rm -rf x",
            "sh -c 'unterminated",
            "sh -c \"double\"",
            "sh -c 'a'\"b\"",
            "bash -c 'true'",
            " sh -c 'true'",
        ] {
            assert_eq!(script_of(command), None, "{command:?}");
        }
        assert_eq!(script_of(&format!("sh -c {}", quote(&format!("a\n{END}\nb")))), None);
        assert_eq!(script_of(&format!("sh -c {}", quote(&"x".repeat(MAX_SCRIPT + 1)))), None);
        assert!(script_of(&format!("sh -c {}", quote(&"x".repeat(MAX_SCRIPT)))).is_some());
    }

    #[test]
    fn frames_a_script_with_the_end_line() {
        assert_eq!(framing("a\nb"), format!("a\nb\n{END}\n").into_bytes());
        assert_eq!(framing("a\n"), format!("a\n{END}\n").into_bytes());
    }

    #[test]
    fn the_bootstrap_runs_the_script_with_the_rest_of_stdin() {
        // The bootstrap through a local `sh -c`, as the login shell would run it.
        let bootstrap = script_of(BOOTSTRAP).expect("the bootstrap is a quoted sh -c");
        let script = "set -e\nprintf '%s|' \"$0\" 'it'\"'\"'s'\ncat\nexit 7";
        let mut stdin = framing(script);
        stdin.extend_from_slice(b"rest of\nstdin\\ \0bytes");
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(&bootstrap)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        let mut expected = READY.to_vec();
        expected.extend_from_slice(b"sh|it's|rest of\nstdin\\ \0bytes");
        assert_eq!(String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&expected));
        assert_eq!(out.status.code(), Some(7));
    }
}
