//! OpenSSH `known_hosts` content: where it comes from, its entry lines, `@revoked` keys,
//! the key types recorded for a host, and host-key names and fingerprints.

use std::fs;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine as _;
use ssh2::{CheckResult, KnownHostFileKind, Session};

use super::SshTarget;

/// The `known_hosts` content to check against: the configured one, or OpenSSH's defaults.
pub(super) fn known_hosts_content(target: &SshTarget) -> String {
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
pub(super) fn known_hosts_lines(content: &str) -> impl Iterator<Item = &str> {
    content.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('@'))
}

/// True when a `@revoked` line holds `key`.
pub(super) fn revoked(content: &str, key: &[u8]) -> bool {
    let encoded = base64(key);
    content
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("@revoked"))
        .any(|l| l.split_whitespace().nth(3) == Some(encoded.as_str()))
}

/// The host-key algorithms for the key types `content` records for `host:port`, in file
/// order. A line is for this host when libssh2 reports a mismatch for a key no line holds.
pub(super) fn known_key_types(session: &Session, content: &str, host: &str, port: u16) -> Vec<String> {
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

pub(super) fn key_type_name(kind: ssh2::HostKeyType) -> &'static str {
    match kind {
        ssh2::HostKeyType::Rsa => "RSA",
        ssh2::HostKeyType::Dss => "DSA",
        ssh2::HostKeyType::Ecdsa256 | ssh2::HostKeyType::Ecdsa384 | ssh2::HostKeyType::Ecdsa521 => "ECDSA",
        ssh2::HostKeyType::Ed25519 => "ED25519",
        _ => "unknown-type",
    }
}

/// OpenSSH's `SHA256:` fingerprint of a raw host key.
pub(super) fn fingerprint(key: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(key);
    format!("SHA256:{}", STANDARD_NO_PAD.encode(digest))
}

/// Standard base64 with padding, as `known_hosts` records keys.
pub(super) fn base64(data: &[u8]) -> String {
    STANDARD.encode(data)
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
    fn fingerprints_match_ssh_keygen() {
        // `ssh-keygen -lf` of a known_hosts line holding this key prints this fingerprint.
        let key = STANDARD.decode("AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl").unwrap();
        assert_eq!(fingerprint(&key), "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU");
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
    fn known_key_types_follow_the_host() {
        let session = Session::new().unwrap();
        // Two real-format lines for different hosts (the key blobs need only parse).
        let ed = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
        let content = format!("[127.0.0.1]:2222 ssh-ed25519 {ed}\nother.example ssh-ed25519 {ed}\n");
        assert_eq!(known_key_types(&session, &content, "127.0.0.1", 2222), ["ssh-ed25519"]);
        assert!(known_key_types(&session, &content, "127.0.0.1", 22).is_empty());
    }
}
