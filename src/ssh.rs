//! The SSH lane (docs/ssh.md): remote commands and streamed transfers over in-process SSH
//! sessions, each call on a session of its own leased from the process-wide pool (the
//! logic is `paperclip_sync_core::ssh`; this is conversion and scheduling only).
//!
//! Every call runs on a thread of its own ([`run_dedicated`]): an SSH peer may keep a call
//! waiting for as long as it likes, so no call ever holds one of the bounded pool's threads
//! or a libuv thread. Transfers add a second thread (the packer or the extractor), so
//! packing and encryption overlap. Byte progress reaches JS through the coalescing
//! [`Progress`] forwarder (`src/progress.rs`) shared with the tar binding.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use paperclip_sync_core::error::{codes, Error as CoreError};
use paperclip_sync_core::ssh::{
    self, ConnectBudget, Input, Output, Sessions, SshTarget, StderrLimit, TransferSummary, DEFAULT_CONNECT_TIMEOUT,
};
use paperclip_sync_core::tar::{self, MemberRecord};

use crate::cancel;
use crate::error::{run_blocking, to_napi};
use crate::handles::Handles;
use crate::progress::{Progress, ProgressCallback};
use crate::runtime::run_dedicated;
use crate::tar::{TarExtractInput, TarPackInput};

/// Where and how to connect (internal): upstream's `SshConnectionConfig` fields that matter
/// to the connection, plus our connection timeouts and the reuse switch.
#[napi(object)]
pub struct SshTargetInput {
    pub host: String,
    pub port: u32,
    pub username: String,
    pub private_key: Option<String>,
    pub known_hosts: Option<String>,
    pub strict_host_key_checking: bool,
    /// Limit on reaching an authenticated session (TCP connect, banner, key exchange,
    /// authentication), in ms (default 10 000, upstream's `ConnectTimeout=10`).
    pub connect_timeout_ms: Option<f64>,
    /// Fails the call when no byte moved for this long, in ms (absent or 0: never).
    pub inactivity_timeout_ms: Option<f64>,
    /// Lease the session from the pool and keep it for the next call when this one ends
    /// cleanly (default true; lib/ssh-common.js passes false for
    /// `PAPERCLIP_NATIVE_SSH_REUSE=0`).
    pub reuse: Option<bool>,
    /// The id of the calling public function's connect budget (`sshConnectBudgetCreate`),
    /// shared by every connection it opens; absent or released: each connection has its own
    /// connect timeout.
    pub connect_budget: Option<u32>,
}

/// The connect budgets the JS layer holds for its calls in flight.
static BUDGETS: Handles<ConnectBudget> = Handles::new();

/// Creates the connect budget of one public SSH call (internal; lib/ssh-common.js
/// `withConnectBudget`): the connect timeout, in ms (default 10 000), that the connections
/// of the call may lose in all (`paperclip_sync_core::ssh::ConnectBudget`). Returns its id.
#[napi]
pub fn ssh_connect_budget_create(connect_timeout_ms: Option<f64>) -> u32 {
    let limit = millis(connect_timeout_ms).unwrap_or(DEFAULT_CONNECT_TIMEOUT);
    BUDGETS.insert(ConnectBudget::new(limit))
}

/// Forgets a connect budget once its call settled (internal; connections still opening keep it).
#[napi]
pub fn ssh_connect_budget_release(id: u32) {
    BUDGETS.remove(id);
}

/// The sessions a call with `target` uses: the process-wide pool, reusing unless turned off.
fn sessions_for(target: &SshTargetInput) -> Sessions<'static> {
    Sessions::shared(target.reuse.unwrap_or(true))
}

impl TryFrom<SshTargetInput> for SshTarget {
    type Error = napi::Error;

    fn try_from(input: SshTargetInput) -> napi::Result<SshTarget> {
        let port = u16::try_from(input.port).ok().filter(|p| *p > 0).ok_or_else(|| {
            to_napi(CoreError::new(codes::INVALID_ARGUMENT, format!("port {} is out of range 1-65535", input.port)))
        })?;
        Ok(SshTarget {
            host: input.host,
            port,
            username: input.username,
            private_key: input.private_key.filter(|k| !k.is_empty()),
            known_hosts: input.known_hosts,
            strict_host_key_checking: input.strict_host_key_checking,
            connect_timeout: millis(input.connect_timeout_ms).unwrap_or(DEFAULT_CONNECT_TIMEOUT),
            inactivity_timeout: millis(input.inactivity_timeout_ms),
            connect_budget: input.connect_budget.and_then(|id| BUDGETS.get(id)),
        })
    }
}

/// A positive finite number of milliseconds as a duration.
fn millis(ms: Option<f64>) -> Option<Duration> {
    ms.filter(|ms| ms.is_finite() && *ms > 0.0).map(|ms| Duration::from_micros((ms * 1000.0) as u64))
}

/// What a remote command left (internal; see `runSshCommand`).
#[napi(object)]
pub struct SshExecResult {
    pub stdout: Buffer,
    pub stderr: Buffer,
    /// The exit status (0 when the server sent none).
    pub exit_status: i32,
    /// The signal that ended the command, with its `SIG` prefix (`SIGTERM`), if any.
    pub exit_signal: Option<String>,
}

/// What a transfer moved (internal).
#[napi(object)]
pub struct SshTransferSummary {
    /// Bytes sent (uploads) or received (downloads) on the channel.
    pub bytes: f64,
    /// Archive members packed or extracted (0 for a file).
    pub entries: f64,
}

impl From<TransferSummary> for SshTransferSummary {
    fn from(summary: TransferSummary) -> Self {
        SshTransferSummary { bytes: summary.bytes as f64, entries: summary.entries as f64 }
    }
}

/// Runs `command` on a new session (internal; see `runSshCommand`). `stdin` is sent and
/// closed; stdout and stderr are collected up to `max_buffer` bytes each (more fails with
/// `ERR_CHILD_PROCESS_STDIO_MAXBUFFER`); `timeout_ms` bounds the whole call, connect
/// included (`ERR_PAPERCLIP_NATIVE_SSH_TIMEOUT`). A non-zero exit is a result, not an error.
#[napi]
pub async fn ssh_exec(
    target: SshTargetInput,
    command: String,
    stdin: Option<Buffer>,
    timeout_ms: Option<f64>,
    max_buffer: Option<f64>,
    cancel_id: Option<u32>,
) -> napi::Result<SshExecResult> {
    let sessions = sessions_for(&target);
    let target = SshTarget::try_from(target)?;
    let cancel = cancel::flag(cancel_id);
    let stdin: Option<Vec<u8>> = stdin.map(|b| b.to_vec());
    let limit = max_buffer.filter(|n| n.is_finite() && *n >= 0.0).map_or(128 * 1024, |n| n as usize);
    let deadline = millis(timeout_ms).map(|t| Instant::now() + t);
    let outcome = run_dedicated("paperclip-ssh-exec", move || {
        let input = match &stdin {
            Some(bytes) => Input::Bytes(bytes),
            None => Input::Empty,
        };
        sessions.run(&target, cancel, deadline, |conn| {
            conn.exec(&command, input, Output::Collect(limit), StderrLimit::Fail(limit), |_, _| {})
        })
    })
    .await?;
    Ok(SshExecResult {
        stdout: outcome.stdout.into(),
        stderr: outcome.stderr.into(),
        exit_status: outcome.exit_status,
        exit_signal: outcome.exit_signal.map(|s| format!("SIG{s}")),
    })
}

/// Runs one transfer on a thread of its own (`thread`): the target converted, the call's
/// cancel flag looked up, byte progress forwarded to `on_progress`.
async fn transfer(
    thread: &'static str,
    target: SshTargetInput,
    cancel_id: Option<u32>,
    on_progress: Option<ProgressCallback>,
    run: impl FnOnce(
            Sessions<'static>,
            &SshTarget,
            Arc<AtomicBool>,
            &mut dyn FnMut(u64),
        ) -> Result<TransferSummary, CoreError>
        + Send
        + 'static,
) -> napi::Result<SshTransferSummary> {
    let sessions = sessions_for(&target);
    let target = SshTarget::try_from(target)?;
    let cancel = cancel::flag(cancel_id);
    run_dedicated(thread, move || {
        let mut progress = Progress::new(on_progress);
        run(sessions, &target, cancel, &mut |n| progress.update(n)).map(SshTransferSummary::from)
    })
    .await
}

/// What an upload asks for beyond the archive (internal; the SSH lane's delta uploads).
#[napi(object)]
pub struct SshUploadOptions {
    /// Return the `stat` record of every member written (see `members`).
    pub record: Option<bool>,
    /// Collect the remote command's stdout up to this many bytes; absent: discard it.
    pub collect_stdout: Option<f64>,
}

/// What an upload moved (internal).
#[napi(object)]
pub struct SshUploadResult {
    /// Bytes sent on the channel (compressed when the pack is).
    pub bytes: f64,
    /// Archive members packed.
    pub entries: f64,
    /// Bytes of the uncompressed tar stream.
    pub tar_bytes: f64,
    /// The remote command's stdout (with `collectStdout`).
    pub stdout: Option<Buffer>,
    /// The members written, as JSON (with `record`; see `members_json`).
    pub members: Option<String>,
}

/// Packs `pack` into the stdin of `command` on a new session (internal; see
/// `syncDirectoryToSsh`). `on_progress` receives the bytes of the uncompressed tar stream
/// packed so far.
#[napi]
pub async fn ssh_upload_tar(
    target: SshTargetInput,
    command: String,
    pack: TarPackInput,
    cancel_id: Option<u32>,
    #[napi(ts_arg_type = "((bytes: number) => void) | undefined | null")] on_progress: Option<ProgressCallback>,
    options: Option<SshUploadOptions>,
) -> napi::Result<SshUploadResult> {
    let (pack, only) = pack.into_core();
    let options = options.unwrap_or(SshUploadOptions { record: None, collect_stdout: None });
    let record = options.record.unwrap_or(false);
    let opts = ssh::UploadTarOptions {
        only,
        record,
        collect_stdout: options.collect_stdout.filter(|n| n.is_finite() && *n >= 0.0).map(|n| n as usize),
    };
    let sessions = sessions_for(&target);
    let target = SshTarget::try_from(target)?;
    let cancel = cancel::flag(cancel_id);
    let outcome = run_dedicated("paperclip-ssh-upload", move || {
        let mut progress = Progress::new(on_progress);
        ssh::upload_tar(sessions, &target, &command, pack, opts, cancel, |n| progress.update(n))
    })
    .await?;
    Ok(SshUploadResult {
        bytes: outcome.summary.bytes as f64,
        entries: outcome.summary.entries as f64,
        tar_bytes: outcome.tar_bytes as f64,
        stdout: options.collect_stdout.map(|_| outcome.stdout.into()),
        members: record.then(|| members_json(&outcome.members)),
    })
}

/// Member records as JSON: `[[member, kind, size, mode, mtimeNs, ctimeNs, ino, dev,
/// link|null], …]`, the nanosecond times, inode and device as decimal strings (they do not
/// fit a double).
pub(crate) fn members_json(members: &[MemberRecord]) -> String {
    use std::fmt::Write;
    // Written directly (a `serde_json::Value` per row cost more than the walk's own time on
    // large trees); the strings go through serde_json for their escaping.
    let quoted = |text: &str| serde_json::to_string(text).expect("a string serializes");
    let mut out = String::with_capacity(members.len() * 96 + 2);
    out.push('[');
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let link = m.link.as_ref().map_or_else(|| "null".to_string(), |l| quoted(&String::from_utf8_lossy(l)));
        let _ = write!(
            out,
            "[{},\"{}\",{},{},\"{}\",\"{}\",\"{}\",\"{}\",{}]",
            quoted(&m.member),
            m.kind,
            m.size,
            m.mode,
            m.mtime_ns,
            m.ctime_ns,
            m.ino,
            m.dev,
            link
        );
    }
    out.push(']');
    out
}

/// The member records of everything `pack` would archive now, as JSON (see
/// `members_json`; internal: the SSH lane's delta plan).
#[napi]
pub async fn tar_list_members(pack: TarPackInput, cancel_id: Option<u32>) -> napi::Result<String> {
    let cancel = cancel::flag(cancel_id);
    let opts = pack.into_whole().map_err(to_napi)?;
    run_blocking(move || tar::member_records(&opts, &cancel).map(|m| members_json(&m))).await
}

/// Upstream's progress total of an SSH upload of `root` (internal; see
/// `paperclip_sync_core::ssh::upload_estimate`).
#[napi]
pub async fn ssh_upload_estimate(
    root: String,
    exclude: Vec<String>,
    follow_symlinks: bool,
    cancel_id: Option<u32>,
) -> napi::Result<f64> {
    let cancel = cancel::flag(cancel_id);
    run_blocking(move || ssh::upload_estimate(Path::new(&root), &exclude, follow_symlinks, &cancel).map(|n| n as f64))
        .await
}

/// Extracts the stdout of `command` (a tar stream) as `extract` says on a new session
/// (internal; see `syncDirectoryFromSsh`). `on_progress` receives the bytes read from the
/// channel.
#[napi]
pub async fn ssh_download_tar(
    target: SshTargetInput,
    command: String,
    extract: TarExtractInput,
    cancel_id: Option<u32>,
    #[napi(ts_arg_type = "((bytes: number) => void) | undefined | null")] on_progress: Option<ProgressCallback>,
) -> napi::Result<SshTransferSummary> {
    let (dest, opts) = extract.into_core();
    transfer("paperclip-ssh-download", target, cancel_id, on_progress, move |sessions, target, cancel, progress| {
        ssh::download_tar(sessions, target, &command, &dest, opts, cancel, progress)
    })
    .await
}

/// Streams the file `path` into the stdin of `command` (internal; the git-bundle upload).
#[napi]
pub async fn ssh_upload_file(
    target: SshTargetInput,
    command: String,
    path: String,
    cancel_id: Option<u32>,
    #[napi(ts_arg_type = "((bytes: number) => void) | undefined | null")] on_progress: Option<ProgressCallback>,
) -> napi::Result<SshTransferSummary> {
    transfer("paperclip-ssh-upload", target, cancel_id, on_progress, move |sessions, target, cancel, progress| {
        ssh::upload_file(sessions, target, &command, Path::new(&path), cancel, progress)
    })
    .await
}

/// Writes the stdout of `command` to a new 0600 file `path`, removed on failure (internal;
/// the git-bundle download).
#[napi]
pub async fn ssh_download_file(
    target: SshTargetInput,
    command: String,
    path: String,
    cancel_id: Option<u32>,
    #[napi(ts_arg_type = "((bytes: number) => void) | undefined | null")] on_progress: Option<ProgressCallback>,
) -> napi::Result<SshTransferSummary> {
    transfer("paperclip-ssh-download", target, cancel_id, on_progress, move |sessions, target, cancel, progress| {
        ssh::download_file(sessions, target, &command, Path::new(&path), cancel, progress)
    })
    .await
}

/// What the SSH session pool did in this process (diagnostics; see `sshPoolStats`).
#[napi(object)]
pub struct SshPoolStats {
    /// Sessions opened (connected, host key verified, authenticated).
    pub opened: f64,
    /// Calls served by an idle pooled session instead of a new one.
    pub reused: f64,
    /// Sessions put back into the pool after a clean call.
    pub returned: f64,
    /// Sessions disconnected after an error, a cancellation or a timeout.
    pub dropped: f64,
    /// Sessions closed after a clean call without being kept (reuse off, pool full).
    pub closed: f64,
    /// Idle sessions closed after the idle timeout.
    pub expired: f64,
    /// Idle sessions closed because they stopped answering keepalives (docs/ssh.md).
    pub dead: f64,
    /// Pooled sessions found closed by the server at checkout and replaced by a new one.
    pub retried: f64,
    /// Calls served by a session opened ahead of them (counted in `opened`, not `reused`).
    pub opened_ahead: f64,
    /// Idle sessions held now.
    pub idle: f64,
    /// Commands run on a warm channel (their remote shell started while the previous
    /// command ran; docs/ssh.md).
    pub warm_used: f64,
    /// Warm channels dropped unused because their shell printed something of its own or
    /// could not start (the command then ran on a channel of its own).
    pub warm_dropped: f64,
}

/// The counters of the process-wide SSH session pool (internal; see `sshPoolStats`).
#[napi]
pub fn ssh_pool_stats() -> SshPoolStats {
    let s = ssh::SessionPool::shared().stats();
    let (warm_used, warm_dropped) = ssh::warm_stats();
    SshPoolStats {
        warm_used: warm_used as f64,
        warm_dropped: warm_dropped as f64,
        opened: s.opened as f64,
        reused: s.reused as f64,
        returned: s.returned as f64,
        dropped: s.dropped as f64,
        closed: s.closed as f64,
        expired: s.expired as f64,
        dead: s.dead as f64,
        retried: s.retried as f64,
        opened_ahead: s.opened_ahead as f64,
        idle: s.idle as f64,
    }
}

/// Starts opening a pooled SSH session for `target` ahead of the calls that will use it, on
/// a thread of its own (internal; see `openSshSessionAhead` in lib/ssh-common.js). Nothing
/// happens without session reuse, or when a session of the same key is idle or already
/// being opened. Returns at once; the next call for that key takes the session (a failure
/// to open it is that call's error).
#[napi]
pub fn ssh_open_ahead(target: SshTargetInput) -> napi::Result<()> {
    if !target.reuse.unwrap_or(true) {
        return Ok(());
    }
    let target = SshTarget::try_from(target)?;
    ssh::SessionPool::shared().open_ahead(&target);
    Ok(())
}

/// Closes every idle pooled SSH session now (internal; see `closeIdleSshSessions`).
#[napi]
pub fn ssh_pool_clear() {
    ssh::SessionPool::shared().clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_json_is_the_json_of_the_rows() {
        let record = |member: &str, kind: char, link: Option<&[u8]>| MemberRecord {
            member: member.to_string(),
            kind,
            size: 42,
            mode: 0o644,
            mtime_ns: -1_500_000_000,
            ctime_ns: 1_700_000_000_123_456_789,
            ino: u64::MAX,
            dev: 2049,
            link: link.map(<[u8]>::to_vec),
        };
        let members = [
            record("a \"quoted\"\\ name\nwith\ta newline", 'f', None),
            record("dir/ünïcödé", 'd', None),
            record("link", 'l', Some(b"../target \xff\"x\"")),
        ];
        let parsed: serde_json::Value = serde_json::from_str(&members_json(&members)).unwrap();
        let expected: Vec<serde_json::Value> = members
            .iter()
            .map(|m| {
                serde_json::json!([
                    m.member,
                    m.kind.to_string(),
                    m.size,
                    m.mode,
                    m.mtime_ns.to_string(),
                    m.ctime_ns.to_string(),
                    m.ino.to_string(),
                    m.dev.to_string(),
                    m.link.as_ref().map(|l| String::from_utf8_lossy(l).into_owned()),
                ])
            })
            .collect();
        assert_eq!(parsed, serde_json::Value::Array(expected));
        assert_eq!(members_json(&[]), "[]");
    }
}
