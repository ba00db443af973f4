//! Host-side workspace I/O that cannot leave the workspace.
//!
//! Every path is resolved from a directory fd of the workspace with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, so a symlink or `..` the box planted can never
//! steer host I/O outside it, and there is no check-then-open window. Kernels without openat2
//! (before 5.6) get a component-by-component `openat(O_NOFOLLOW)` descent with the same effect.
//! Only regular files are read or written, opened non-blocking so a planted FIFO cannot hang us.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::errors::{Error, Result};
use crate::options::normalize_rel;

/// Set to force the openat fallback (tests cover both paths); also set on ENOSYS.
pub const FORCE_FALLBACK_ENV: &str = "KERN_SANDBOX_NO_OPENAT2";

fn openat2_missing() -> &'static AtomicBool {
    static MISSING: OnceLock<AtomicBool> = OnceLock::new();
    MISSING.get_or_init(|| AtomicBool::new(std::env::var_os(FORCE_FALLBACK_ENV).is_some_and(|v| v == "1")))
}

/// Opens `name` (one component, or a `/`-joined path when openat2 is available) beneath `dir`.
fn open_beneath(dir: BorrowedFd<'_>, name: &str, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    if !openat2_missing().load(Ordering::Relaxed) {
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(dir, name, flags, mode, how) {
            Err(Errno::NOSYS) => openat2_missing().store(true, Ordering::Relaxed),
            r => return r.map_err(io::Error::from),
        }
    }
    // Fallback: callers hand us single components here, so O_NOFOLLOW covers every step.
    debug_assert!(!name.contains('/'));
    rustix::fs::openat(dir, name, flags, mode).map_err(io::Error::from)
}

fn uses_openat2() -> bool {
    !openat2_missing().load(Ordering::Relaxed)
}

/// Describes an open failure in the caller's terms.
fn describe(what: &str, rel: &str, e: io::Error) -> Error {
    let msg = match e.raw_os_error() {
        Some(libc::ELOOP) => format!("{what} {rel:?}: a symlink in the path is refused (it could point outside the workspace)"),
        Some(libc::EXDEV) => format!("{what} {rel:?}: path escapes the workspace"),
        Some(libc::ENXIO) => format!("{what} {rel:?}: not a regular file (a FIFO or socket is refused)"),
        _ => format!("{what} {rel:?}: {e}"),
    };
    Error::sandbox(msg)
}

/// An open workspace: its canonical path and a directory fd every operation starts from.
#[derive(Debug)]
pub struct Workspace {
    path: PathBuf,
    root: OwnedFd,
}

impl Workspace {
    pub fn open(path: &Path) -> Result<Workspace> {
        let root = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io(format!("cannot open the workspace {}", path.display()), e.into()))?;
        Ok(Workspace { path: path.to_path_buf(), root })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// Opens the directory `parts` beneath the root, creating missing levels when `create`.
    pub fn open_dir(&self, parts: &[String], create: bool) -> io::Result<OwnedFd> {
        let dflags = OFlags::RDONLY | OFlags::DIRECTORY;
        if parts.is_empty() {
            return open_beneath(self.root(), ".", dflags, Mode::empty());
        }
        if uses_openat2() && !create {
            return open_beneath(self.root(), &parts.join("/"), dflags, Mode::empty());
        }
        let mut cur = open_beneath(self.root(), ".", dflags, Mode::empty())?;
        for part in parts {
            cur = match open_beneath(cur.as_fd(), part, dflags, Mode::empty()) {
                Err(e) if create && e.raw_os_error() == Some(libc::ENOENT) => {
                    match rustix::fs::mkdirat(&cur, part.as_str(), Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(e.into()),
                    }
                    open_beneath(cur.as_fd(), part, dflags, Mode::empty())?
                }
                r => r?,
            };
        }
        Ok(cur)
    }

    /// Creates (or truncates) the regular file `name` in `dir` for writing.
    pub fn create_in(dir: BorrowedFd<'_>, name: &str, mode: u32) -> io::Result<File> {
        let fd = open_beneath(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::NONBLOCK,
            Mode::from_raw_mode(mode),
        )?;
        require_regular(&fd)?;
        rustix::fs::ftruncate(&fd, 0)?;
        // Regular files ignore O_NONBLOCK; clear it anyway so writes are plain blocking writes.
        rustix::fs::fcntl_setfl(&fd, OFlags::WRONLY)?;
        Ok(File::from(fd))
    }

    /// Opens an existing regular file `name` in `dir` for reading.
    pub fn open_in(dir: BorrowedFd<'_>, name: &str) -> io::Result<File> {
        let fd = open_beneath(dir, name, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())?;
        require_regular(&fd)?;
        rustix::fs::fcntl_setfl(&fd, OFlags::RDONLY)?;
        Ok(File::from(fd))
    }

    /// Splits a workspace-relative path into its parent components and leaf name.
    fn split(rel: &str) -> Result<(Vec<String>, String)> {
        let mut parts = normalize_rel(rel)?;
        let leaf = parts
            .pop()
            .ok_or_else(|| Error::sandbox(format!("not a file path in the workspace: {rel:?}")))?;
        Ok((parts, leaf))
    }

    pub fn write_file(&self, rel: &str, data: &[u8]) -> Result<()> {
        let (parents, leaf) = Self::split(rel)?;
        let dir = self.open_dir(&parents, true).map_err(|e| describe("cannot write", rel, e))?;
        let mut f = Self::create_in(dir.as_fd(), &leaf, 0o644)
            .map_err(|e| describe("cannot write", rel, e))?;
        f.write_all(data).map_err(|e| describe("cannot write", rel, e))
    }

    pub fn read_file(&self, rel: &str, max_bytes: Option<u64>) -> Result<Vec<u8>> {
        let (parents, leaf) = Self::split(rel)?;
        let dir = self.open_dir(&parents, false).map_err(|e| describe("cannot read", rel, e))?;
        let f = Self::open_in(dir.as_fd(), &leaf).map_err(|e| describe("cannot read", rel, e))?;
        let size = f.metadata().map(|m| m.len()).unwrap_or(0);
        if let Some(max) = max_bytes {
            if size > max {
                return Err(Error::sandbox(format!(
                    "cannot read {rel:?}: the file is {size} bytes, over maxBytes ({max})"
                )));
            }
        }
        let limit = max_bytes.map_or(u64::MAX, |m| m + 1);
        let mut out = Vec::with_capacity(size as usize);
        f.take(limit).read_to_end(&mut out).map_err(|e| describe("cannot read", rel, e))?;
        if max_bytes.is_some_and(|m| out.len() as u64 > m) {
            return Err(Error::sandbox(format!("cannot read {rel:?}: the file grew past maxBytes")));
        }
        Ok(out)
    }

    /// Removes a regular file we placed (best effort; a missing file is fine).
    pub fn remove_file(&self, rel: &str) {
        if let Ok((parents, leaf)) = Self::split(rel) {
            if let Ok(dir) = self.open_dir(&parents, false) {
                let _ = rustix::fs::unlinkat(&dir, leaf.as_str(), rustix::fs::AtFlags::empty());
            }
        }
    }
}

/// One entry met by [`Workspace::walk`].
pub enum Entry<'a> {
    Dir { rel: &'a str },
    File { rel: &'a str, dir: BorrowedFd<'a>, name: &'a str, stat: &'a rustix::fs::Stat },
}

impl Workspace {
    /// Walks the tree below `sub` depth-first, never following a symlink and skipping symlinks,
    /// sockets, FIFOs and devices. With `skip_deps`, directories named `.deps` are not entered.
    /// Entries are visited in name order so results are deterministic.
    pub fn walk(
        &self,
        sub: &[String],
        skip_deps: bool,
        visit: &mut dyn FnMut(Entry<'_>) -> Result<()>,
    ) -> Result<()> {
        let top = self
            .open_dir(sub, false)
            .map_err(|e| describe("cannot list", &sub.join("/"), e))?;
        let mut stack: Vec<(OwnedFd, String)> = vec![(top, sub.join("/"))];
        while let Some((dirfd, prefix)) = stack.pop() {
            let mut names: Vec<(String, FileType)> = Vec::new();
            let Ok(dir) = rustix::fs::Dir::read_from(&dirfd) else { continue };
            for ent in dir.flatten() {
                let name = ent.file_name().to_bytes();
                if name == b"." || name == b".." {
                    continue;
                }
                names.push((String::from_utf8_lossy(name).into_owned(), ent.file_type()));
            }
            names.sort_unstable_by(|a, b| b.0.cmp(&a.0));
            let mut subdirs = Vec::new();
            for (name, ty) in names.into_iter().rev() {
                let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
                let stat = match ty {
                    FileType::Directory | FileType::RegularFile | FileType::Unknown => {
                        match rustix::fs::statat(&dirfd, name.as_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                            Ok(s) => s,
                            Err(_) => continue, // vanished meanwhile
                        }
                    }
                    _ => continue,
                };
                match FileType::from_raw_mode(stat.st_mode) {
                    FileType::Directory => {
                        if skip_deps && name == crate::argv::DEPS_DIR {
                            continue;
                        }
                        visit(Entry::Dir { rel: &rel })?;
                        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
                        if let Ok(fd) = open_beneath(dirfd.as_fd(), &name, flags, Mode::empty()) {
                            subdirs.push((fd, rel));
                        }
                    }
                    FileType::RegularFile => visit(Entry::File {
                        rel: &rel,
                        dir: dirfd.as_fd(),
                        name: &name,
                        stat: &stat,
                    })?,
                    _ => {}
                }
            }
            // Reverse so the stack pops subdirectories in name order.
            stack.extend(subdirs.into_iter().rev());
        }
        Ok(())
    }
}

fn require_regular(fd: &OwnedFd) -> io::Result<()> {
    let st = rustix::fs::fstat(fd)?;
    if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::ENXIO))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let d = tempfile::tempdir().unwrap();
        let w = Workspace::open(d.path()).unwrap();
        (d, w)
    }

    #[test]
    fn round_trip_with_parents() {
        let (_d, w) = ws();
        w.write_file("a/b/c.txt", b"hi").unwrap();
        assert_eq!(w.read_file("a/b/c.txt", None).unwrap(), b"hi");
        assert_eq!(w.read_file("/a/./b/../b/c.txt", None).unwrap(), b"hi");
        assert!(w.read_file("a/b/c.txt", Some(1)).is_err());
        assert!(w.read_file("../x", None).is_err());
    }

    #[test]
    fn symlinks_are_refused_anywhere() {
        let (d, w) = ws();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"s").unwrap();
        symlink(outside.path(), d.path().join("link")).unwrap();
        symlink(outside.path().join("secret"), d.path().join("leaf")).unwrap();
        assert!(w.read_file("link/secret", None).is_err());
        assert!(w.read_file("leaf", None).is_err());
        assert!(w.write_file("link/new", b"x").is_err());
        assert!(w.write_file("leaf", b"x").is_err());
        assert!(!outside.path().join("new").exists());
        assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"s");
    }

    #[test]
    fn fifos_are_refused_without_blocking() {
        let (d, w) = ws();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            d.path().join("pipe"),
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        assert!(w.read_file("pipe", None).is_err());
        assert!(w.write_file("pipe", b"x").is_err());
    }
}
