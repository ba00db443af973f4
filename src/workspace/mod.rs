//! Host-side workspace I/O that cannot leave the workspace.
//!
//! Every path is resolved from a directory fd of the workspace with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, so a symlink or `..` the box planted can never
//! steer host I/O outside it, and there is no check-then-open window. Kernels without openat2
//! (before 5.6) get a component-by-component `openat(O_NOFOLLOW)` descent with the same effect.
//! Only regular files are read or written, opened non-blocking so a planted FIFO cannot hang us.

pub mod entries;
pub mod snapshot;
pub mod track;

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::errors::{Error, Result};

/// Set to force the openat fallback (tests cover both paths); also set on ENOSYS.
pub const FORCE_FALLBACK_ENV: &str = "KERN_SANDBOX_NO_OPENAT2";

fn openat2_missing() -> &'static AtomicBool {
    static MISSING: OnceLock<AtomicBool> = OnceLock::new();
    MISSING.get_or_init(|| {
        AtomicBool::new(std::env::var_os(FORCE_FALLBACK_ENV).is_some_and(|v| v == "1"))
    })
}

/// Opens `name` (one component, or a `/`-joined path when openat2 is available) beneath `dir`.
pub(crate) fn open_beneath(
    dir: BorrowedFd<'_>,
    name: &str,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
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
pub(crate) fn describe(what: &str, rel: &str, e: io::Error) -> Error {
    let msg = match e.raw_os_error() {
        Some(libc::ELOOP) => format!("{what} {rel:?}: a symlink in the path is refused (it could point outside the workspace)"),
        Some(libc::EXDEV) => return Error::PathEscapes(format!("{what} {rel:?}: path escapes the workspace")),
        Some(libc::ENXIO) => format!("{what} {rel:?}: not a regular file (a FIFO or socket is refused)"),
        Some(libc::ENOENT) => return Error::NotFound(format!("{what} {rel:?}: ENOENT: no such file or directory")),
        _ => format!("{what} {rel:?}: {e}"),
    };
    Error::sandbox(msg)
}

/// The directory in the workspace that `pip install` in `setup` fills: bound read-only into run
/// boxes with `depsReadonly`, and left out of file tracking and `listFiles`.
pub const DEPS_DIR: &str = ".deps";

/// Lexically normalises a workspace-relative path: leading `/` and `.` dropped, `..` applied.
/// Symlinks are refused later at open time, so lexical `..` equals the physical one.
pub fn normalize_rel(rel: &str) -> Result<Vec<String>> {
    if rel.contains('\0') {
        return Err(Error::sandbox(format!(
            "path must not contain a NUL byte: {rel:?}"
        )));
    }
    let mut parts: Vec<String> = Vec::new();
    for c in Path::new(rel).components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(Error::PathEscapes(format!(
                        "path escapes the workspace: {rel:?}"
                    )));
                }
            }
            Component::Normal(n) => parts.push(n.to_string_lossy().into_owned()),
        }
    }
    Ok(parts)
}

/// Without `maxBytes`, readFile refuses files larger than this: a Node Buffer holds at most 4 GiB.
pub const MAX_READ: u64 = 4 << 30;

/// An open workspace: its canonical path and a directory fd every operation starts from.
#[derive(Debug)]
pub struct Workspace {
    path: PathBuf,
    root: OwnedFd,
}

/// See [`Workspace::parent_dir`].
enum ParentDir<'a> {
    Root(BorrowedFd<'a>),
    Opened(OwnedFd),
}

impl AsFd for ParentDir<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            ParentDir::Root(fd) => *fd,
            ParentDir::Opened(fd) => fd.as_fd(),
        }
    }
}

impl Workspace {
    pub fn open(path: &Path) -> Result<Workspace> {
        let root = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            Error::io(
                format!("cannot open the workspace {}", path.display()),
                e.into(),
            )
        })?;
        Ok(Workspace {
            path: path.to_path_buf(),
            root,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `.deps` is a directory (not a symlink) at the workspace's path, which is what a
    /// box would get bound.
    pub fn has_deps_dir(&self) -> bool {
        self.path
            .join(DEPS_DIR)
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir())
    }

    pub fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// Opens the directory `parts` beneath the root, creating missing levels when `create`. A
    /// symlink on the way is ELOOP, wherever it is.
    pub fn open_dir(&self, parts: &[String], create: bool) -> io::Result<OwnedFd> {
        self.open_dir_as_is(parts, create)
            .map_err(|e| self.symlink_on_the_way(parts, e))
    }

    /// O_DIRECTORY with O_NOFOLLOW reports a symlink as ENOTDIR when it is the last component
    /// opened: tell it from a plain file on the way, so callers can say a symlink was refused.
    fn symlink_on_the_way(&self, parts: &[String], e: io::Error) -> io::Error {
        if e.raw_os_error() != Some(libc::ENOTDIR) {
            return e;
        }
        let dflags = OFlags::RDONLY | OFlags::DIRECTORY;
        let Ok(mut cur) = open_beneath(self.root(), ".", dflags, Mode::empty()) else {
            return e;
        };
        for part in parts {
            let nofollow = rustix::fs::AtFlags::SYMLINK_NOFOLLOW;
            match rustix::fs::statat(&cur, part.as_str(), nofollow) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                    return io::Error::from_raw_os_error(libc::ELOOP)
                }
                Ok(_) => match open_beneath(cur.as_fd(), part, dflags, Mode::empty()) {
                    Ok(next) => cur = next,
                    Err(_) => return e,
                },
                Err(_) => return e,
            }
        }
        e
    }

    fn open_dir_as_is(&self, parts: &[String], create: bool) -> io::Result<OwnedFd> {
        // Components are single names: the same contract for openat2 and the fallback.
        if parts
            .iter()
            .any(|p| p.is_empty() || p == "." || p == ".." || p.contains(['/', '\0']))
        {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
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
        let st = require_regular(&fd)?;
        // Only truncate what has content: on ext4 a truncate marks the file for writeback at
        // close, which costs restores of many new files dearly.
        if st.st_size > 0 {
            rustix::fs::ftruncate(&fd, 0)?;
        }
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
    pub(crate) fn split(rel: &str) -> Result<(Vec<String>, String)> {
        let mut parts = normalize_rel(rel)?;
        let leaf = parts
            .pop()
            .ok_or_else(|| Error::sandbox(format!("not a file path in the workspace: {rel:?}")))?;
        Ok((parts, leaf))
    }

    /// The directory a single-entry operation works in: the root itself for a name at the root
    /// (no open and close of it per operation: a runCode's helper files are all there), else
    /// [`Workspace::open_dir`].
    fn parent_dir(&self, parts: &[String], create: bool) -> io::Result<ParentDir<'_>> {
        if parts.is_empty() {
            return Ok(ParentDir::Root(self.root()));
        }
        self.open_dir(parts, create).map(ParentDir::Opened)
    }

    pub fn write_file(&self, rel: &str, data: &[u8]) -> Result<()> {
        let (parents, leaf) = Self::split(rel)?;
        let dir = self
            .parent_dir(&parents, true)
            .map_err(|e| describe("cannot write", rel, e))?;
        let mut f = Self::create_in(dir.as_fd(), &leaf, 0o644)
            .map_err(|e| describe("cannot write", rel, e))?;
        f.write_all(data)
            .map_err(|e| describe("cannot write", rel, e))
    }

    pub fn read_file(&self, rel: &str, max_bytes: Option<u64>) -> Result<Vec<u8>> {
        let (parents, leaf) = Self::split(rel)?;
        let dir = self
            .parent_dir(&parents, false)
            .map_err(|e| describe("cannot read", rel, e))?;
        let f = Self::open_in(dir.as_fd(), &leaf).map_err(|e| describe("cannot read", rel, e))?;
        let size = f.metadata().map(|m| m.len()).unwrap_or(0);
        let max = max_bytes.unwrap_or(MAX_READ);
        if size > max {
            return Err(Error::TooLarge(format!(
                "cannot read {rel:?}: the file is {size} bytes, over the {max}-byte read limit"
            )));
        }
        // The size is the box's to choose: never allocate from it up front beyond a chunk, and
        // grow with try_reserve so memory pressure is an error, not an abort of Node.
        let mut out: Vec<u8> = Vec::new();
        // One past the limit tells a file that grew from one that is exactly at it; saturating, as
        // a maxBytes past u64 means no limit (a wrapped 0 would read nothing).
        let mut f = f.take(max.saturating_add(1));
        let mut chunk = vec![0u8; (size.min(1 << 20) as usize).max(8192)];
        loop {
            let n = match f.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(describe("cannot read", rel, e)),
            };
            out.try_reserve(n)
                .map_err(|_| Error::sandbox(format!("cannot read {rel:?}: out of memory")))?;
            out.extend_from_slice(&chunk[..n]);
        }
        if out.len() as u64 > max {
            return Err(Error::TooLarge(format!(
                "cannot read {rel:?}: the file grew past the read limit"
            )));
        }
        Ok(out)
    }

    /// Removes a regular file we placed (best effort; a missing file is fine).
    pub fn remove_file(&self, rel: &str) {
        if let Ok((parents, leaf)) = Self::split(rel) {
            if let Ok(dir) = self.parent_dir(&parents, false) {
                let _ = rustix::fs::unlinkat(dir, leaf.as_str(), rustix::fs::AtFlags::empty());
            }
        }
    }
}

/// One entry met by [`Workspace::walk`].
pub enum Entry<'a> {
    /// A directory the walk opened and is about to list (so a watch set on `fd` now misses nothing).
    Dir {
        rel: &'a str,
        fd: BorrowedFd<'a>,
        stat: &'a rustix::fs::Stat,
    },
    File {
        rel: &'a str,
        dir: BorrowedFd<'a>,
        name: &'a str,
        stat: &'a rustix::fs::Stat,
    },
}

impl Workspace {
    /// Walks the tree below `sub` depth-first, never following a symlink and skipping symlinks,
    /// sockets, FIFOs and devices. With `skip_deps`, directories named `.deps` are not entered.
    /// Entries come in name order. Only the directories on the current path are open, so a
    /// wide tree cannot exhaust our fds. A directory that vanished or was swapped for a
    /// non-directory is skipped. One we may not open (the box can `chmod 000` it) or one nested
    /// too deep is an error when `strict` (a snapshot must not silently miss files) and skipped
    /// otherwise (file tracking and listing must not fail the session's later calls).
    pub fn walk(
        &self,
        sub: &[String],
        skip_deps: bool,
        strict: bool,
        visit: &mut dyn FnMut(Entry<'_>) -> Result<()>,
    ) -> Result<()> {
        let top = self
            .open_dir(sub, false)
            .map_err(|e| describe("cannot list", &sub.join("/"), e))?;
        let mut stack = vec![Frame::read(top, sub.join("/"))?];
        loop {
            let depth = stack.len();
            let Some(frame) = stack.last_mut() else { break };
            let Some((name, ty)) = frame.names.pop() else {
                stack.pop();
                continue;
            };
            let rel = child_rel(&frame.prefix, &name);
            if !matches!(
                ty,
                FileType::Directory | FileType::RegularFile | FileType::Unknown
            ) {
                continue;
            }
            let Ok(stat) = rustix::fs::statat(
                &frame.fd,
                name.as_str(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            ) else {
                continue; // vanished meanwhile
            };
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile => visit(Entry::File {
                    rel: &rel,
                    dir: frame.fd.as_fd(),
                    name: &name,
                    stat: &stat,
                })?,
                FileType::Directory if !(skip_deps && name == DEPS_DIR) => {
                    if depth >= MAX_DEPTH {
                        if !strict {
                            continue;
                        }
                        return Err(Error::sandbox(format!(
                            "the workspace is nested deeper than {MAX_DEPTH} directories at {rel:?}"
                        )));
                    }
                    let flags = OFlags::RDONLY | OFlags::DIRECTORY;
                    match open_beneath(frame.fd.as_fd(), &name, flags, Mode::empty()) {
                        Ok(fd) => {
                            visit(Entry::Dir {
                                rel: &rel,
                                fd: fd.as_fd(),
                                stat: &stat,
                            })?;
                            let next = Frame::read(fd, rel)?;
                            stack.push(next);
                        }
                        // Removed, or swapped for a symlink or file, since we listed it.
                        Err(e)
                            if matches!(
                                e.raw_os_error(),
                                Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR)
                            ) => {}
                        Err(e)
                            if !strict
                                && matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
                        }
                        Err(e) => return Err(describe("cannot list", &rel, e)),
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Deeper trees are refused rather than walked: each level holds one open fd.
pub(crate) const MAX_DEPTH: usize = 512;

/// One open directory of a walk and the entries still to visit (last = next).
struct Frame {
    fd: OwnedFd,
    prefix: String,
    names: Vec<(String, FileType)>,
}

impl Frame {
    fn read(fd: OwnedFd, prefix: String) -> Result<Frame> {
        let mut names = dir_entries(&fd).map_err(|e| describe("cannot list", &prefix, e))?;
        names.reverse(); // popped from the end: name order
        Ok(Frame { fd, prefix, names })
    }
}

/// The entries of `dir` but `.` and `..`, in name order, with their types.
pub(crate) fn dir_entries(dir: &OwnedFd) -> io::Result<Vec<(String, FileType)>> {
    let mut names = Vec::new();
    for ent in rustix::fs::Dir::read_from(dir)? {
        let ent = ent?;
        let name = ent.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push((String::from_utf8_lossy(name).into_owned(), ent.file_type()));
        }
    }
    names.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(names)
}

/// The workspace-relative path of `name` in the directory `prefix` ("" is the root).
pub(crate) fn child_rel(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

/// Host paths a mount (or the workspace) may never expose, as the reference refuses them.
const REFUSED_SOURCES: &[&str] = &[
    "/",
    "/etc",
    "/root",
    "/boot",
    "/proc",
    "/sys",
    "/dev",
    "/var/run/docker.sock",
    "/run/docker.sock",
];

/// The canonical (realpath) $HOME, if there is one.
fn home_dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(std::fs::canonicalize(&home).unwrap_or_else(|_| PathBuf::from(home)))
}

/// Refuses a canonical host path that is a sensitive location or contains one (mounting `/home`
/// would expose `$HOME`, `/run` the docker socket).
pub fn check_source_not_sensitive(real: &Path) -> Result<()> {
    let home = home_dir();
    let sensitive = REFUSED_SOURCES.iter().map(Path::new).chain(home.as_deref());
    for s in sensitive {
        if real == s || s.starts_with(real) {
            return Err(Error::mount(format!(
                "refusing to mount the sensitive host path {:?} into a sandbox (this would \
                 defeat the isolation)",
                real.display().to_string()
            )));
        }
    }
    Ok(())
}

/// A caller-named workspace: absolute, created when missing, canonical, not sensitive.
pub fn user_workspace(w: &Path) -> Result<PathBuf> {
    let shown = w.display().to_string();
    if !w.is_absolute() {
        return Err(Error::mount(format!(
            "workspace must be an absolute host path, got {shown:?}"
        )));
    }
    std::fs::create_dir_all(w)
        .map_err(|e| Error::io(format!("cannot create the workspace {shown:?}"), e))?;
    let real = std::fs::canonicalize(w)
        .map_err(|_| Error::mount(format!("workspace does not exist: {shown:?}")))?;
    check_source_not_sensitive(&real)?;
    if real.as_os_str().as_encoded_bytes().contains(&b':') {
        return Err(Error::mount(format!(
            "workspace path contains ':': {shown:?}"
        )));
    }
    Ok(real)
}

/// The file's stat, or ENXIO when it is anything but a regular file.
fn require_regular(fd: &OwnedFd) -> io::Result<rustix::fs::Stat> {
    let st = rustix::fs::fstat(fd)?;
    if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
        Ok(st)
    } else {
        Err(io::Error::from_raw_os_error(libc::ENXIO))
    }
}

/// A workspace in a fresh temp dir, for unit tests across modules.
#[cfg(test)]
pub fn temp_workspace() -> (tempfile::TempDir, Workspace) {
    let d = tempfile::tempdir().unwrap();
    let w = Workspace::open(d.path()).unwrap();
    (d, w)
}

#[cfg(test)]
mod tests {
    use super::temp_workspace as ws;
    use super::*;
    use std::os::unix::fs::symlink;

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
    fn a_symlinked_directory_is_eloop_wherever_it_is() {
        let (d, w) = ws();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("d/sub")).unwrap();
        std::fs::write(d.path().join("d/file"), b"x").unwrap();
        symlink(outside.path(), d.path().join("d/esc")).unwrap();
        let parts = |p: &str| p.split('/').map(String::from).collect::<Vec<_>>();
        let errno =
            |p: &str, create: bool| w.open_dir(&parts(p), create).unwrap_err().raw_os_error();
        for create in [false, true] {
            assert_eq!(errno("d/esc", create), Some(libc::ELOOP));
            assert_eq!(errno("d/esc/deeper", create), Some(libc::ELOOP));
            assert_eq!(errno("d/file", create), Some(libc::ENOTDIR));
        }
        assert_eq!(errno("d/missing", false), Some(libc::ENOENT));
        assert!(w.open_dir(&parts("d/sub"), false).is_ok());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn too_deep_trees_fail_strict_walks_only() {
        let (d, w) = ws();
        let deep: std::path::PathBuf = (0..MAX_DEPTH + 2).map(|_| "d").collect();
        std::fs::create_dir_all(d.path().join(&deep)).unwrap();
        std::fs::write(d.path().join("top"), b"x").unwrap();
        let mut files = 0;
        let mut count = |e: Entry<'_>| {
            if let Entry::File { .. } = e {
                files += 1;
            }
            Ok(())
        };
        assert!(w.walk(&[], false, false, &mut count).is_ok());
        assert_eq!(files, 1);
        assert!(w.walk(&[], false, true, &mut |_| Ok(())).is_err());
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

    #[test]
    fn relative_paths_normalise_inside() {
        assert_eq!(normalize_rel("a/./b/../c").unwrap(), vec!["a", "c"]);
        assert_eq!(normalize_rel("/out.txt").unwrap(), vec!["out.txt"]);
        assert!(normalize_rel("../x").is_err());
        assert!(normalize_rel("a/../../x").is_err());
        assert!(normalize_rel("a\0b").is_err());
    }
}
