//! Extended attributes in the `user.` namespace: what a file entry reports, and what a file write
//! sets (E2B keeps file metadata as `user.e2b.*` attributes; a program in the box may set them too).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Only this namespace is reported or written: `trusted.`/`security.` are not the user's.
const USER: &str = "user.";
/// Linux caps one attribute value at 64 KiB.
const MAX_VALUE: usize = 64 << 10;

/// NUL-separated names, as listxattr gives them.
fn names(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    buf.split(|b| *b == 0).filter(|n| !n.is_empty())
}

/// Calls `get(buf)` (a listxattr/getxattr) with a buffer that grows until the answer fits.
fn sized(get: impl Fn(&mut [u8]) -> isize, max: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 1024];
    loop {
        let n = get(&mut buf);
        if n >= 0 {
            buf.truncate(n as usize);
            return Ok(buf);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ERANGE) || buf.len() >= max {
            return Err(e);
        }
        buf.resize((buf.len() * 4).min(max), 0);
    }
}

/// The `user.*` attributes of `path` itself (a symlink is not followed), values as UTF-8 (lossy).
/// A filesystem without them, or an unreadable one, has none.
pub fn user_attrs(path: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(cpath) = CString::new(path.as_os_str().as_bytes()) else {
        return out;
    };
    // SAFETY: cpath is a NUL-terminated path; the buffer pointer and length describe `buf`.
    let list = sized(
        |buf| unsafe { libc::llistxattr(cpath.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) },
        1 << 20,
    );
    let Ok(list) = list else { return out };
    for name in names(&list) {
        if !name.starts_with(USER.as_bytes()) {
            continue;
        }
        let Ok(cname) = CString::new(name) else {
            continue;
        };
        // SAFETY: both strings are NUL-terminated; the buffer pointer and length describe `buf`.
        let value = sized(
            |buf| unsafe {
                libc::lgetxattr(
                    cpath.as_ptr(),
                    cname.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            },
            MAX_VALUE,
        );
        if let Ok(value) = value {
            out.insert(
                String::from_utf8_lossy(name).into_owned(),
                String::from_utf8_lossy(&value).into_owned(),
            );
        }
    }
    out
}

/// Removes the attributes of `file` whose names start with `prefix` (a `user.` one), then sets
/// `set` (each name in `user.`).
pub fn replace(
    file: &File,
    prefix: Option<&str>,
    set: &BTreeMap<String, String>,
) -> io::Result<()> {
    let fd = file.as_raw_fd();
    if let Some(prefix) = prefix {
        // SAFETY: fd is open for the call; the buffer pointer and length describe `buf`.
        let list = sized(
            |buf| unsafe { libc::flistxattr(fd, buf.as_mut_ptr().cast(), buf.len()) },
            1 << 20,
        );
        // A filesystem without extended attributes has none to clear.
        let list = match list {
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Vec::new(),
            other => other?,
        };
        for name in names(&list).filter(|n| n.starts_with(prefix.as_bytes())) {
            let cname = CString::new(name).map_err(io::Error::other)?;
            // SAFETY: fd is open; cname is NUL-terminated.
            if unsafe { libc::fremovexattr(fd, cname.as_ptr()) } != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::ENODATA) {
                    return Err(e);
                }
            }
        }
    }
    for (name, value) in set {
        let cname = CString::new(name.as_str()).map_err(io::Error::other)?;
        // SAFETY: fd is open; cname is NUL-terminated; the value pointer and length describe it.
        let r =
            unsafe { libc::fsetxattr(fd, cname.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether `name` is one `replace` may set or clear: in `user.`, something after it, no NUL.
pub fn valid_name(name: &str) -> bool {
    name.len() > USER.len() && name.starts_with(USER) && !name.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_clear_and_report_user_attrs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = File::create(&path).unwrap();
        let set: BTreeMap<String, String> = [
            ("user.e2b.a".to_string(), "1".to_string()),
            ("user.other".to_string(), "2".to_string()),
        ]
        .into();
        if let Err(e) = replace(&file, None, &set) {
            // A filesystem without user xattrs (tmpfs on old kernels): nothing to check here.
            assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}");
            return;
        }
        assert_eq!(user_attrs(&path), set);
        let b: BTreeMap<String, String> = [("user.e2b.b".to_string(), "x".to_string())].into();
        replace(&file, Some("user.e2b."), &b).unwrap();
        let left: BTreeMap<String, String> = [
            ("user.e2b.b".to_string(), "x".to_string()),
            ("user.other".to_string(), "2".to_string()),
        ]
        .into();
        assert_eq!(user_attrs(&path), left);
        assert!(valid_name("user.e2b.k"));
        assert!(!valid_name("user."));
        assert!(!valid_name("trusted.k"));
    }
}
