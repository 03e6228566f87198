//! The TCP connection under a session, with the connect timeout and Node's error codes.

use std::io;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Instant;

use super::SshTarget;
use crate::error::{codes, errno_name, Error, Result};

/// A connection-level OS failure, with Node's code.
pub(super) fn io_failure(target: &SshTarget, e: io::Error) -> Error {
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
pub(super) fn connect_tcp(target: &SshTarget, deadline: Option<Instant>) -> Result<TcpStream> {
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
