//! Finding the kern binary: `$KERN_BIN` when set, else the first executable `kern` on `$PATH`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::errors::{Error, Result};

fn is_executable_file(p: &Path) -> bool {
    // access(2) answers for the real uid, as the reference's X_OK check does.
    let Ok(meta) = std::fs::metadata(p) else {
        return false;
    };
    meta.is_file()
        && meta.permissions().mode() & 0o111 != 0
        && rustix::fs::access(p, rustix::fs::Access::EXEC_OK).is_ok()
}

pub fn find_kern() -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("KERN_BIN").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(&bin);
        return if is_executable_file(&p) {
            Ok(p)
        } else {
            Err(Error::NoKern(format!(
                "$KERN_BIN='{}' is not an executable file",
                p.display()
            )))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join("kern"))
        .find(|c| is_executable_file(c))
        .ok_or_else(|| {
            Error::NoKern(
                "the `kern` binary was not found on PATH - install it \
                 (https://github.com/getkern/kern) or set $KERN_BIN"
                    .into(),
            )
        })
}

/// The egress proxy's executable (`kern-sandbox-egress`, crate egress/):
/// `$KERN_SANDBOX_EGRESS` when set, else beside this addon's .node file, where `npm run build`
/// puts it in a checkout and scripts/pack.js ships it in every platform package.
pub fn find_egress() -> Result<PathBuf> {
    const NAME: &str = "kern-sandbox-egress";
    if let Some(p) = std::env::var_os("KERN_SANDBOX_EGRESS").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        return if is_executable_file(&p) {
            Ok(p)
        } else {
            Err(Error::sandbox(format!(
                "$KERN_SANDBOX_EGRESS='{}' is not an executable file",
                p.display()
            )))
        };
    }
    let beside = own_file().and_then(|f| Some(f.parent()?.join(NAME)));
    match beside {
        Some(p) if is_executable_file(&p) => Ok(p),
        other => Err(Error::sandbox(format!(
            "a network policy needs the {NAME} binary and none was found{}; in a checkout, \
             `npm run build` builds it (KERN_SANDBOX_EGRESS may point at one)",
            other
                .map(|p| format!(" (looked at {})", p.display()))
                .unwrap_or_default()
        ))),
    }
}

/// The file this code was loaded from: the .node in Node (the test executable under cargo test).
fn own_file() -> Option<PathBuf> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr reads the address (a function of this object, so mapped) and fills `info`,
    // a valid out-pointer; it returns 0 without touching `info` when it finds nothing.
    let found = unsafe { libc::dladdr(own_file as *const libc::c_void, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: dladdr returned non-zero, so it initialised `info`.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the dynamic loader, live while the
    // object stays loaded (it is: this code runs from it); it is copied out at once.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    use std::os::unix::ffi::OsStrExt;
    let p = PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
    // A bare name (no '/') comes from the executable itself: resolve it through /proc.
    if p.is_absolute() {
        Some(p)
    } else {
        std::fs::canonicalize(&p)
            .ok()
            .or_else(|| std::env::current_exe().ok())
    }
}
