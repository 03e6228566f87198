//! The SSH lane (docs/ssh.md): remote commands and streamed transfers over in-process SSH
//! sessions (libssh2 through the `ssh2` crate, kept in a pool between calls), with no `ssh`
//! or `tar` child process.
//!
//! * [`Connection::open`]: TCP connect with a timeout, handshake, host-key verification
//!   against OpenSSH `known_hosts` content (strict mode), public-key authentication.
//! * [`Connection::exec`]: runs one command on a session channel, feeding its stdin from
//!   memory, a reader or a bounded channel of chunks, and delivering its stdout to memory
//!   (bounded), a writer, a bounded channel of chunks, or nowhere.
//! * [`SessionPool`] / [`Sessions`]: authenticated sessions kept for the next call to the
//!   same peer as the same identity (reuse across a lifecycle's commands and transfers).
//!   A kept session starts the remote shell of its next command ahead (warm.rs).
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

mod connect_phase;
mod connection;
mod exec;
mod keepalive;
mod key_file;
mod known_hosts;
mod pool;
mod tcp;
mod transfer;
mod upload_estimate;
mod warm;

use std::sync::Arc;
use std::time::Duration;

pub use connect_phase::{ConnectBudget, ConnectPhase};
pub use connection::Connection;
pub use exec::{ExecOutcome, Input, Output, Piece, StderrLimit};
pub use keepalive::{KeepaliveSettings, DEFAULT_KEEPALIVE_COUNT_MAX, DEFAULT_KEEPALIVE_INTERVAL};
pub use pool::{
    Lease, PoolKey, PoolLimits, PoolStats, SessionPool, Sessions, IDLE_TIMEOUT, MAX_IDLE_PER_KEY, MAX_IDLE_TOTAL,
};
pub use transfer::{
    download_file, download_tar, upload_file, upload_tar, TransferSummary, UploadTarOptions, UploadTarOutcome,
};
pub use upload_estimate::upload_estimate;
pub use warm::stats as warm_stats;

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

/// Where and how to connect: upstream's `SshConnectionConfig` plus our connection timeouts.
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
    /// Limit on reaching an authenticated session: the TCP connect (each resolved address
    /// within it), the SSH banner, the key exchange, the host-key check and authentication
    /// (OpenSSH's `ConnectTimeout` covers the connect and the handshake).
    pub connect_timeout: Duration,
    /// Fails a command or transfer when no byte moved for this long (`None`: never).
    pub inactivity_timeout: Option<Duration>,
    /// The connect budget of the call this target belongs to (connect_phase.rs), shared by
    /// every connection the call opens; `None`: each connection has its own timeout.
    pub connect_budget: Option<Arc<ConnectBudget>>,
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

#[cfg(test)]
mod tests {
    use super::*;

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
            connect_budget: None,
        };
        assert_eq!(t.display(), "h");
        t.port = 2222;
        assert_eq!(t.display(), "[h]:2222");
    }
}
