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
