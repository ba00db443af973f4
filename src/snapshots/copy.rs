//! Copying a workspace tree on the host: directory by directory through fds, one name at a time
//! with O_NOFOLLOW (a symlink the box planted is copied as a symlink, never followed), file
//! contents shared with FICLONE where the filesystem can reflink, else copy_file_range (which
//! the kernel may still do without moving bytes through us).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::errors::{Error, Result};
use crate::workspace::{dir_entries, open_beneath};

/// Deeper trees are refused: each level holds two open fds.
const MAX_DEPTH: usize = 512;

/// What a copy moved.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    pub files: u64,
    pub bytes: u64,
    /// Files whose content was shared by a reflink rather than copied.
    pub reflinked: u64,
}

/// Copies the tree in `src` into the existing, empty directory `dst`, files, directories and
/// symlinks with their modes (devices, FIFOs and sockets are left out). `limit`: refused (as
/// `ERR_TOO_LARGE`) once the files' sizes pass it.
pub fn copy_tree(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, limit: u64) -> Result<Copied> {
    let mut done = Copied::default();
    copy_dir(src, dst, "", 0, limit, &mut done)?;
    Ok(done)
}

fn fail(rel: &str) -> impl Fn(io::Error) -> Error + '_ {
    move |e| Error::io(format!("cannot copy the workspace at {rel:?}"), e)
}

fn copy_dir(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    prefix: &str,
    depth: usize,
    limit: u64,
    done: &mut Copied,
) -> Result<()> {
    if depth >= MAX_DEPTH {
        return Err(Error::sandbox(format!(
            "the workspace is nested deeper than {MAX_DEPTH} directories at {prefix:?}"
        )));
    }
    let owned = rustix::fs::openat(src, ".", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
        .map_err(|e| fail(prefix)(e.into()))?;
    for (name, _) in dir_entries(&owned).map_err(fail(prefix))? {
        let rel = crate::workspace::child_rel(prefix, &name);
        let Ok(st) = rustix::fs::statat(src, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) else {
            continue; // gone meanwhile
        };
        let mode = Mode::from_raw_mode(st.st_mode & 0o7777);
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                rustix::fs::mkdirat(dst, name.as_str(), Mode::from_raw_mode(0o700))
                    .map_err(|e| fail(&rel)(e.into()))?;
                let dirs = (|| -> io::Result<(OwnedFd, OwnedFd)> {
                    let flags = OFlags::RDONLY | OFlags::DIRECTORY;
                    Ok((
                        open_beneath(src, &name, flags, Mode::empty())?,
                        open_beneath(dst, &name, flags, Mode::empty())?,
                    ))
                })();
                let (s, d) = dirs.map_err(fail(&rel))?;
                copy_dir(s.as_fd(), d.as_fd(), &rel, depth + 1, limit, done)?;
                // Its own mode last: a read-only directory still received its entries.
                rustix::fs::fchmod(&d, mode).map_err(|e| fail(&rel)(e.into()))?;
            }
            FileType::RegularFile => {
                done.bytes += st.st_size as u64;
                if done.bytes > limit {
                    return Err(Error::TooLarge(format!(
                        "the snapshot is over its size limit of {limit} bytes (snapshotMaxBytes)"
                    )));
                }
                let from =
                    open_beneath(src, &name, OFlags::RDONLY, Mode::empty()).map_err(fail(&rel))?;
                let to = open_beneath(
                    dst,
                    &name,
                    OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
                    Mode::from_raw_mode(0o600),
                )
                .map_err(fail(&rel))?;
                if copy_contents(&from, &to, st.st_size as u64).map_err(fail(&rel))? {
                    done.reflinked += 1;
                }
                rustix::fs::fchmod(&to, mode).map_err(|e| fail(&rel)(e.into()))?;
                done.files += 1;
            }
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(src, name.as_str(), Vec::new())
                    .map_err(|e| fail(&rel)(e.into()))?;
                rustix::fs::symlinkat(target.as_c_str(), dst, name.as_str())
                    .map_err(|e| fail(&rel)(e.into()))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Copies `size` bytes; true when a reflink shared them.
fn copy_contents(from: &OwnedFd, to: &OwnedFd, size: u64) -> io::Result<bool> {
    if size > 0 && rustix::fs::ioctl_ficlone(to, from).is_ok() {
        return Ok(true);
    }
    let mut left = size;
    while left > 0 {
        let chunk = left.min(1 << 30) as usize;
        match rustix::fs::copy_file_range(from, None, to, None, chunk) {
            Ok(0) => break, // shrank meanwhile
            Ok(n) => left -= n as u64,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::XDEV | rustix::io::Errno::NOSYS | rustix::io::Errno::INVAL) => {
                return plain_copy(from, to).map(|_| false)
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}

fn plain_copy(from: &OwnedFd, to: &OwnedFd) -> io::Result<u64> {
    let mut r = std::fs::File::from(from.try_clone()?);
    let mut w = std::fs::File::from(to.try_clone()?);
    io::copy(&mut r, &mut w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir_fd(p: &std::path::Path) -> OwnedFd {
        rustix::fs::open(p, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
    }

    #[test]
    fn files_dirs_modes_and_symlinks_are_copied_and_links_not_followed() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::create_dir_all(a.path().join("d/e")).unwrap();
        std::fs::write(a.path().join("d/e/f"), b"hello").unwrap();
        std::fs::set_permissions(
            a.path().join("d/e/f"),
            std::fs::Permissions::from_mode(0o751),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", a.path().join("l")).unwrap();
        let c = copy_tree(dir_fd(a.path()).as_fd(), dir_fd(b.path()).as_fd(), 100).unwrap();
        assert_eq!((c.files, c.bytes), (1, 5));
        assert_eq!(std::fs::read(b.path().join("d/e/f")).unwrap(), b"hello");
        let m = std::fs::metadata(b.path().join("d/e/f")).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o751);
        assert_eq!(
            std::fs::read_link(b.path().join("l")).unwrap(),
            std::path::Path::new("/etc/passwd")
        );
    }

    #[test]
    fn a_tree_over_the_limit_is_refused() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(a.path().join("f"), vec![0u8; 100]).unwrap();
        let r = copy_tree(dir_fd(a.path()).as_fd(), dir_fd(b.path()).as_fd(), 99);
        assert!(matches!(r, Err(Error::TooLarge(_))));
    }
}
