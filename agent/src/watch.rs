//! File watches on one inotify instance, read by one thread.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::error::{self, Fail};
use crate::thread::spawn_thread;
use crate::writer::Writer;

const MASK: u32 = libc::IN_CREATE
    | libc::IN_MOVED_TO
    | libc::IN_MODIFY
    | libc::IN_CLOSE_WRITE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_ATTRIB
    | libc::IN_ONLYDIR;

#[derive(Default)]
struct Inner {
    fd: Option<Arc<OwnedFd>>,
    next: u32,
    /// inotify watch descriptor → the host watches that use it, with the directory it watches.
    by_wd: HashMap<i32, Vec<(u32, PathBuf)>>,
    /// host watch id → (recursive, its watch descriptors).
    watches: HashMap<u32, (bool, Vec<i32>)>,
}

/// The host's watches. Events and the answers to watch/unwatch are queued under one lock, so no
/// event of a watch precedes its `ok` or follows the `ok` of its unwatch.
pub struct Watches {
    writer: Arc<Writer>,
    inner: Arc<Mutex<Inner>>,
}

impl Watches {
    pub fn new(writer: Arc<Writer>) -> Watches {
        Watches {
            writer,
            inner: Arc::default(),
        }
    }

    pub fn add(&self, id: u32, path: &Path, recursive: bool) -> Result<(), Fail> {
        let meta = std::fs::metadata(path).map_err(|e| Fail::io(&e, &path.to_string_lossy()))?;
        if !meta.is_dir() {
            return Err(Fail::new(
                error::NOT_A_DIRECTORY,
                format!("{}: not a directory", path.display()),
            ));
        }
        let mut inner = self.inner.lock().unwrap();
        if inner.fd.is_none() {
            let fd = Arc::new(inotify_init().map_err(|e| Fail::io(&e, "inotify"))?);
            let (fd2, shared, writer) = (fd.clone(), self.inner.clone(), self.writer.clone());
            spawn_thread("watch", move || read_events(&fd2, &shared, &writer));
            inner.fd = Some(fd);
        }
        let wid = inner.next;
        inner.next += 1;
        inner.watches.insert(wid, (recursive, Vec::new()));
        if let Err(e) = inner.add_dir(wid, path) {
            inner.watches.remove(&wid);
            return Err(Fail::io(&e, &path.to_string_lossy()));
        }
        if recursive {
            inner.add_subdirs(wid, path, None);
        }
        self.writer.ok(id, json!({ "watch": wid }));
        Ok(())
    }

    pub fn remove(&self, id: u32, wid: u32) -> Result<(), Fail> {
        let mut inner = self.inner.lock().unwrap();
        if let Some((_, wds)) = inner.watches.remove(&wid) {
            for wd in wds {
                inner.release(wid, wd);
            }
        }
        self.writer.ok(id, json!({}));
        Ok(())
    }
}

impl Inner {
    fn add_dir(&mut self, wid: u32, dir: &Path) -> io::Result<()> {
        let fd = self
            .fd
            .as_ref()
            .expect("created before any watch")
            .as_raw_fd();
        let path =
            CString::new(dir.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: `path` is NUL-terminated and outlives the call; fd is our inotify instance.
        let wd = unsafe { libc::inotify_add_watch(fd, path.as_ptr(), MASK) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        let users = self.by_wd.entry(wd).or_default();
        if !users.iter().any(|(w, _)| *w == wid) {
            users.push((wid, dir.to_path_buf()));
            if let Some((_, wds)) = self.watches.get_mut(&wid) {
                wds.push(wd);
            }
        }
        Ok(())
    }

    /// Watches every directory below `dir` (not through symlinks). With `events`, also reports
    /// what is already there as created: it appeared before its directory was watched.
    fn add_subdirs(
        &mut self,
        wid: u32,
        dir: &Path,
        mut events: Option<&mut Vec<(u32, &'static str, PathBuf)>>,
    ) {
        let Ok(items) = std::fs::read_dir(dir) else {
            return;
        };
        for item in items.flatten() {
            let path = item.path();
            if let Some(ev) = events.as_deref_mut() {
                ev.push((wid, "create", path.clone()));
            }
            if item.file_type().is_ok_and(|t| t.is_dir()) && self.add_dir(wid, &path).is_ok() {
                self.add_subdirs(wid, &path, events.as_deref_mut());
            }
        }
    }

    /// Drops watch `wid`'s use of `wd`; the inotify watch goes when nobody uses it.
    fn release(&mut self, wid: u32, wd: i32) {
        let Some(users) = self.by_wd.get_mut(&wd) else {
            return;
        };
        users.retain(|(w, _)| *w != wid);
        if users.is_empty() {
            self.by_wd.remove(&wd);
            if let Some(fd) = &self.fd {
                // SAFETY: removing a watch descriptor from our inotify instance; no memory involved.
                unsafe { libc::inotify_rm_watch(fd.as_raw_fd(), wd) };
            }
        }
    }

    /// The events (watch id, type, path) one inotify event means.
    fn translate(&mut self, wd: i32, mask: u32, name: &[u8]) -> Vec<(u32, &'static str, PathBuf)> {
        let mut out = Vec::new();
        if mask & libc::IN_IGNORED != 0 {
            // The directory is gone: its watch descriptor is dead.
            for (wid, _) in self.by_wd.remove(&wd).unwrap_or_default() {
                if let Some((_, wds)) = self.watches.get_mut(&wid) {
                    wds.retain(|w| *w != wd);
                }
            }
            return out;
        }
        let kind = match mask {
            m if m & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0 => "create",
            m if m & (libc::IN_MODIFY | libc::IN_CLOSE_WRITE) != 0 => "write",
            m if m & libc::IN_DELETE != 0 => "remove",
            m if m & libc::IN_MOVED_FROM != 0 => "rename",
            m if m & libc::IN_ATTRIB != 0 => "chmod",
            _ => return out,
        };
        let users = self.by_wd.get(&wd).cloned().unwrap_or_default();
        for (wid, dir) in users {
            let path = if name.is_empty() {
                dir
            } else {
                dir.join(std::ffi::OsStr::from_bytes(name))
            };
            out.push((wid, kind, path.clone()));
            let recursive = self.watches.get(&wid).is_some_and(|(r, _)| *r);
            if kind == "create"
                && mask & libc::IN_ISDIR != 0
                && recursive
                && self.add_dir(wid, &path).is_ok()
            {
                self.add_subdirs(wid, &path, Some(&mut out));
            }
        }
        out
    }
}

fn inotify_init() -> io::Result<OwnedFd> {
    // SAFETY: inotify_init1 takes flags and returns a new fd or -1.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Splits a buffer of inotify records into (wd, mask, name without its NUL padding).
fn records(buf: &[u8]) -> Vec<(i32, u32, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 16 <= buf.len() {
        let word =
            |i: usize| u32::from_ne_bytes(buf[at + i..at + i + 4].try_into().expect("4 bytes"));
        let (wd, mask, len) = (word(0) as i32, word(4), word(12) as usize);
        let end = (at + 16 + len).min(buf.len());
        let name = &buf[at + 16..end];
        let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
        out.push((wd, mask, name));
        at = end;
    }
    out
}

fn read_events(fd: &OwnedFd, inner: &Mutex<Inner>, writer: &Writer) {
    let mut buf = vec![0u8; 64 << 10];
    // The last write reported, kept across reads: a modify and the close that ends it are one
    // event even when the kernel hands them over in two reads.
    let mut last_write: Option<((u32, PathBuf), u64)> = None;
    let mut reads = 0u64;
    loop {
        // SAFETY: read into the buffer we own, at most its length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        writer.wait_room();
        let mut inner = inner.lock().unwrap();
        // Within one read, repeated modifies of a file are one write; across reads only the
        // closing of a file just reported as written is folded, so a later write still shows.
        reads += 1;
        for (wd, mask, name) in records(&buf[..n as usize]) {
            let closing = mask & libc::IN_MODIFY == 0;
            for (wid, kind, path) in inner.translate(wd, mask, name) {
                let key = (wid, path);
                if kind == "write"
                    && last_write
                        .as_ref()
                        .is_some_and(|(k, read)| *k == key && (closing || *read == reads))
                {
                    continue;
                }
                writer.push(
                    json!({"t": "event", "watch": key.0, "type": kind, "path": key.1}),
                    Vec::new(),
                );
                last_write = (kind == "write").then_some((key, reads));
            }
        }
    }
}
