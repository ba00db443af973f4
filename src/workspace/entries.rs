//! Directory-level workspace operations: stat, list one directory, make, rename and remove.
//!
//! Same rules as the rest of the workspace I/O: every path is resolved beneath the workspace's
//! directory fd with no symlink followed, so nothing the box planted can steer these outside it.
//! A symlink is reported and removed or renamed as the link itself, never through it.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{child_rel, describe, dir_entries, normalize_rel, open_beneath, Workspace, MAX_DEPTH};
use crate::errors::{Error, Result};

/// What kind of entry a path names (a symlink is not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
            Kind::Other => "other",
        }
    }

    fn of(st: &rustix::fs::Stat) -> Kind {
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            _ => Kind::Other,
        }
    }
}

/// One entry's facts, its path relative to the workspace root ("" is the root).
#[derive(Debug, Clone)]
pub struct Stat {
    pub rel: String,
    pub name: String,
    pub kind: Kind,
    pub size: u64,
    pub mode: u32,
    pub mtime_ms: f64,
    /// A symlink's target as written (never resolved).
    pub link: Option<String>,
}

fn stat_of(dir: BorrowedFd<'_>, name: &str, rel: String) -> io::Result<Stat> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    let kind = Kind::of(&st);
    let link = if kind == Kind::Symlink {
        rustix::fs::readlinkat(dir, name, Vec::new())
            .ok()
            .map(|t| t.to_string_lossy().into_owned())
    } else {
        None
    };
    Ok(Stat {
        name: rel.rsplit('/').next().unwrap_or_default().to_string(),
        rel,
        kind,
        size: st.st_size.max(0) as u64,
        mode: st.st_mode & 0o7777,
        mtime_ms: st.st_mtime as f64 * 1000.0 + (st.st_mtime_nsec as f64 / 1e6).floor(),
        link,
    })
}

fn not_found(what: &str, rel: &str) -> Error {
    Error::NotFound(format!("{what} {rel:?}: no such file or directory"))
}

impl Workspace {
    /// The entry at `rel`, or None when nothing is there (a missing or non-directory parent
    /// included). The root itself is the entry "".
    pub fn stat(&self, rel: &str) -> Result<Option<Stat>> {
        let mut parts = normalize_rel(rel)?;
        let Some(leaf) = parts.pop() else {
            return stat_of(self.root(), ".", String::new())
                .map(Some)
                .map_err(|e| describe("cannot stat", rel, e));
        };
        let dir = match self.parent_dir(&parts, false) {
            Ok(d) => d,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return Ok(None)
            }
            Err(e) => return Err(describe("cannot stat", rel, e)),
        };
        let path = child_rel(&parts.join("/"), &leaf);
        match stat_of(dir.as_fd(), &leaf, path) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(describe("cannot stat", rel, e)),
        }
    }

    /// The entries of the directory `rel` and, down to `depth` levels (1 = just its own), of its
    /// subdirectories, in name order. Symlinked directories are listed, never entered.
    pub fn list_dir(&self, rel: &str, depth: u32) -> Result<Vec<Stat>> {
        let parts = normalize_rel(rel)?;
        let top = self
            .open_dir(&parts, false)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENOENT) => not_found("cannot list", rel),
                Some(libc::ENOTDIR) => {
                    Error::sandbox(format!("cannot list {rel:?}: not a directory"))
                }
                _ => describe("cannot list", rel, e),
            })?;
        let mut out = Vec::new();
        list_into(
            top,
            &parts.join("/"),
            depth.clamp(1, MAX_DEPTH as u32),
            &mut out,
        )
        .map_err(|e| describe("cannot list", rel, e))?;
        Ok(out)
    }

    /// Creates the directory `rel` and its missing parents. False when it already was one.
    pub fn make_dir(&self, rel: &str) -> Result<bool> {
        let parts = normalize_rel(rel)?;
        match self.stat(rel)? {
            Some(s) if s.kind == Kind::Dir => return Ok(false),
            Some(_) => {
                return Err(Error::sandbox(format!(
                    "cannot make directory {rel:?}: a file is in the way"
                )))
            }
            None => {}
        }
        self.open_dir(&parts, true)
            .map(|_| true)
            .map_err(|e| describe("cannot make directory", rel, e))
    }

    /// Moves `from` to `to` (whose parent must exist), replacing a file there, as rename(2).
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (fparts, fleaf) = Self::split(from)?;
        let (tparts, tleaf) = Self::split(to)?;
        let fdir = self
            .parent_dir(&fparts, false)
            .map_err(|e| describe("cannot rename", from, e))?;
        let tdir = self
            .parent_dir(&tparts, false)
            .map_err(|e| describe("cannot rename to", to, e))?;
        rustix::fs::renameat(&fdir, fleaf.as_str(), &tdir, tleaf.as_str()).map_err(|e| match e {
            Errno::NOENT => not_found("cannot rename", from),
            e => describe("cannot rename", from, e.into()),
        })
    }

    /// Removes the file, link or directory (with everything in it) at `rel`; the root never.
    pub fn remove(&self, rel: &str) -> Result<()> {
        let (parts, leaf) = Self::split(rel).map_err(|_| {
            Error::sandbox(format!("cannot remove {rel:?}: that is the workspace root"))
        })?;
        let dir = self
            .parent_dir(&parts, false)
            .map_err(|e| describe("cannot remove", rel, e))?;
        remove_in(dir.as_fd(), &leaf, 0).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => not_found("cannot remove", rel),
            _ => describe("cannot remove", rel, e),
        })
    }
}

fn list_into(dir: OwnedFd, prefix: &str, depth: u32, out: &mut Vec<Stat>) -> io::Result<()> {
    for (name, _) in dir_entries(&dir)? {
        let rel = child_rel(prefix, &name);
        let Ok(s) = stat_of(dir.as_fd(), &name, rel.clone()) else {
            continue; // vanished meanwhile
        };
        let descend = s.kind == Kind::Dir && depth > 1;
        out.push(s);
        if descend {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY;
            if let Ok(sub) = open_beneath(dir.as_fd(), &name, flags, Mode::empty()) {
                list_into(sub, &rel, depth - 1, out)?;
            }
        }
    }
    Ok(())
}

/// Unlinks `name` in `dir`; a directory is emptied first, one level at a time, never following
/// a symlink (a link is unlinked as itself).
fn remove_in(dir: BorrowedFd<'_>, name: &str, depth: usize) -> io::Result<()> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?);
    }
    if depth >= MAX_DEPTH {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY;
    let sub = open_beneath(dir, name, flags, Mode::empty())?;
    for (child, _) in dir_entries(&sub)? {
        match remove_in(sub.as_fd(), &child, depth + 1) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            r => r?,
        }
    }
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

#[cfg(test)]
mod tests {
    use crate::workspace::temp_workspace as ws;
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn stat_list_make_rename_remove() {
        let (d, w) = ws();
        assert!(w.make_dir("a/b").unwrap());
        assert!(!w.make_dir("a/b").unwrap());
        w.write_file("a/b/f.txt", b"hello").unwrap();
        w.write_file("a/g.txt", b"x").unwrap();
        let s = w.stat("a/b/f.txt").unwrap().unwrap();
        assert_eq!((s.kind, s.size, s.name.as_str()), (Kind::File, 5, "f.txt"));
        assert!(w.stat("a/nope").unwrap().is_none());
        assert!(w.stat("a/g.txt/under").unwrap().is_none());
        assert_eq!(w.stat("").unwrap().unwrap().kind, Kind::Dir);
        let top: Vec<_> = w
            .list_dir("a", 1)
            .unwrap()
            .into_iter()
            .map(|s| s.rel)
            .collect();
        assert_eq!(top, ["a/b", "a/g.txt"]);
        let deep: Vec<_> = w
            .list_dir("", 3)
            .unwrap()
            .into_iter()
            .map(|s| s.rel)
            .collect();
        assert_eq!(deep, ["a", "a/b", "a/b/f.txt", "a/g.txt"]);
        assert!(matches!(w.list_dir("zz", 1), Err(Error::NotFound(_))));
        w.rename("a/g.txt", "a/b/h.txt").unwrap();
        assert!(d.path().join("a/b/h.txt").exists());
        assert!(matches!(w.rename("a/g.txt", "x"), Err(Error::NotFound(_))));
        w.remove("a").unwrap();
        assert!(!d.path().join("a").exists());
        assert!(matches!(w.remove("a"), Err(Error::NotFound(_))));
        assert!(w.remove("").is_err() && w.remove("/").is_err());
        assert!(w.make_dir("../x").is_err());
    }

    #[test]
    fn symlinks_are_handled_as_links_never_followed() {
        let (d, w) = ws();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), b"k").unwrap();
        symlink(outside.path(), d.path().join("link")).unwrap();
        let s = w.stat("link").unwrap().unwrap();
        assert_eq!(s.kind, Kind::Symlink);
        assert_eq!(s.link.as_deref(), outside.path().to_str());
        assert!(w.list_dir("link", 1).is_err());
        assert!(w.stat("link/keep").is_err() || w.stat("link/keep").unwrap().is_none());
        assert!(w.remove("link/keep").is_err());
        assert!(w.make_dir("link/new").is_err());
        assert!(w.rename("link/keep", "stolen").is_err());
        std::fs::create_dir(d.path().join("dir")).unwrap();
        symlink(outside.path(), d.path().join("dir/inner")).unwrap();
        let all: Vec<_> = w
            .list_dir("", 5)
            .unwrap()
            .into_iter()
            .map(|s| s.rel)
            .collect();
        assert_eq!(all, ["dir", "dir/inner", "link"]);
        w.remove("dir").unwrap();
        w.remove("link").unwrap();
        assert!(outside.path().join("keep").exists());
        assert!(!d.path().join("link").exists());
    }
}
