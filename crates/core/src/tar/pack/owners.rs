//! User and group names of the members' owners, as GNU tar fills them in.

use std::collections::HashMap;
use std::ffi::CStr;

/// User and group names for uid/gid, looked up once each (GNU tar fills them in too).
#[derive(Default)]
pub(super) struct OwnerNames {
    users: HashMap<u32, Vec<u8>>,
    groups: HashMap<u32, Vec<u8>>,
}

impl OwnerNames {
    pub(super) fn user(&mut self, uid: u32) -> &[u8] {
        self.users.entry(uid).or_insert_with(|| lookup_user(uid))
    }

    pub(super) fn group(&mut self, gid: u32) -> &[u8] {
        self.groups.entry(gid).or_insert_with(|| lookup_group(gid))
    }
}

/// Calls a `get*_r` function with a growing buffer; the name, or empty when there is none.
fn lookup_name(mut call: impl FnMut(&mut [libc::c_char]) -> (libc::c_int, Option<*const libc::c_char>)) -> Vec<u8> {
    let mut buffer: Vec<libc::c_char> = vec![0; 1024];
    loop {
        let (rc, name) = call(&mut buffer);
        if rc == libc::ERANGE && buffer.len() < 1 << 20 {
            buffer.resize(buffer.len() * 2, 0);
            continue;
        }
        return match name {
            // SAFETY: on success the name points into `buffer`, NUL-terminated.
            Some(ptr) if rc == 0 && !ptr.is_null() => unsafe { CStr::from_ptr(ptr) }.to_bytes().to_vec(),
            _ => Vec::new(),
        };
    }
}

fn lookup_user(uid: u32) -> Vec<u8> {
    lookup_name(|buffer| {
        // SAFETY: `passwd` is plain data; getpwuid_r writes it and points `result` at it.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe { libc::getpwuid_r(uid, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut result) };
        (rc, (!result.is_null()).then_some(entry.pw_name as *const libc::c_char))
    })
}

fn lookup_group(gid: u32) -> Vec<u8> {
    lookup_name(|buffer| {
        // SAFETY: as for `lookup_user`, with getgrgid_r.
        let mut entry: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        let rc = unsafe { libc::getgrgid_r(gid, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut result) };
        (rc, (!result.is_null()).then_some(entry.gr_name as *const libc::c_char))
    })
}
