//! Which workspace files a call created or modified.
//!
//! A session keeps one index of its regular files (mtime ns, size, inode), kept current by an
//! inotify watch on every directory: a call re-stats only the paths that events name, so `files`
//! costs what changed, not two walks of the whole workspace. Without inotify (no instance or
//! watch left, a queue overflow, a name that is not UTF-8) the index is reconciled by a full walk
//! instead, so the answer never depends on events arriving. Each call remembers the pre-call meta
//! of every path that changes while it runs; concurrent calls each get their own view.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use napi_derive::napi;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{AtFlags, FileType, Stat};
use rustix::io::Errno;

use crate::errors::Result;
use crate::workspace::{Entry, Workspace, DEPS_DIR};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    mtime_ns: i128,
    size: u64,
    ino: u64,
}

impl Meta {
    fn of(st: &Stat) -> Meta {
        Meta {
            mtime_ns: st.st_mtime as i128 * 1_000_000_000 + st.st_mtime_nsec as i128,
            size: st.st_size as u64,
            ino: st.st_ino,
        }
    }
}

/// A file and how a step touched it; `listFiles` reports every file as "created".
#[napi(object)]
#[derive(Debug, Clone, PartialEq)]
pub struct FileInfo {
    pub path: String,
    pub size: f64,
    pub change: String,
}

/// Our helper files at the workspace root, which no listing shows: `.cell-<8 hex>.<py|sh|js|json>`
/// (code too long for argv, a Python cell, or a prepared JavaScript cell), `.run-<8 hex>.<py|js>`
/// (the rich-result runners), `.res-<8 hex>.json` (the results they write back) and
/// `.cap-<8 hex>.py` (the Python runner's capture code).
pub fn is_helper_file(rel: &str) -> bool {
    let tagged = |rest: &str, exts: &[&str]| {
        rest.split_once('.').is_some_and(|(tag, ext)| {
            tag.len() == 8 && tag.bytes().all(|b| b.is_ascii_hexdigit()) && exts.contains(&ext)
        })
    };
    if let Some(rest) = rel.strip_prefix(".cell-") {
        tagged(rest, &["py", "sh", "js", "json"])
    } else if let Some(rest) = rel.strip_prefix(".run-") {
        tagged(rest, &["py", "js", "bin"])
    } else if let Some(rest) = rel.strip_prefix(".res-") {
        tagged(rest, &["json"])
    } else if let Some(rest) = rel.strip_prefix(".cap-") {
        tagged(rest, &["py"])
    } else {
        false
    }
}

/// Regular files below `sub` (`.deps` and code cells excluded), and with `dirs` the directories
/// the walk opened.
fn walk_files(
    ws: &Workspace,
    sub: &[String],
    dirs: &mut dyn FnMut(&str, BorrowedFd<'_>, &Stat) -> std::result::Result<(), Errno>,
) -> Result<Vec<(String, Meta)>> {
    let mut out = Vec::new();
    ws.walk(sub, true, false, &mut |e| {
        match e {
            Entry::File { rel, stat, .. } if !is_helper_file(rel) => {
                out.push((rel.to_string(), Meta::of(stat)))
            }
            Entry::Dir { rel, fd, stat } => dirs(rel, fd, stat)
                .map_err(|e| crate::errors::Error::io("cannot watch the workspace", e.into()))?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

/// What `listFiles` reports: a subdirectory that does not exist (yet) lists as empty, as in 0.1.1;
/// one reached through a symlink is refused, as readFile and writeFile refuse it.
pub fn list(ws: &Workspace, sub: &[String]) -> Result<Vec<FileInfo>> {
    if !sub.is_empty() {
        if let Err(e) = ws.open_dir(sub, false) {
            if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) {
                return Ok(Vec::new());
            }
        }
    }
    let mut files: Vec<FileInfo> = walk_files(ws, sub, &mut |_, _, _| Ok(()))?
        .into_iter()
        .map(|(path, m)| FileInfo {
            path,
            size: m.size as f64,
            change: "created".into(),
        })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

const WATCH: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::ONLYDIR)
    .union(WatchFlags::EXCL_UNLINK);

#[derive(Debug, Clone, Copy)]
struct Watched {
    wd: i32,
    ino: u64,
}

/// Watches one session may hold: inotify watches come out of a per-user budget
/// (`fs.inotify.max_user_watches`) shared with the user's other programs, and a box can create
/// directories without end. Past this the session walks instead.
const MAX_WATCHES: usize = 8192;

/// Why incremental sync gave up; the index is then rebuilt by a walk.
struct Lost;

/// A session's live file index.
pub struct LiveIndex {
    inotify: Option<OwnedFd>,
    built: bool,
    files: BTreeMap<String, Meta>,
    /// Watched directories by workspace-relative path ("" is the root), and back.
    dirs: BTreeMap<String, Watched>,
    wds: HashMap<i32, String>,
    /// Per call in flight: each path changed since it began, with its meta back then.
    calls: HashMap<u64, HashMap<String, Option<Meta>>>,
    max_watches: usize,
    /// The event read buffer, kept: two syncs a call.
    events: Vec<MaybeUninit<u8>>,
}

impl LiveIndex {
    /// Built lazily on the first call. Without an inotify instance (none left for this user)
    /// every sync is a full walk.
    pub fn new() -> LiveIndex {
        LiveIndex {
            inotify: new_inotify(),
            built: false,
            files: BTreeMap::new(),
            dirs: BTreeMap::new(),
            wds: HashMap::new(),
            calls: HashMap::new(),
            max_watches: MAX_WATCHES,
            events: Vec::new(),
        }
    }

    /// An index that walks on every sync, as one without inotify does.
    #[cfg(test)]
    fn walking() -> LiveIndex {
        LiveIndex {
            inotify: None,
            ..LiveIndex::new()
        }
    }

    #[cfg(test)]
    fn is_watching(&self) -> bool {
        self.inotify.is_some()
    }

    /// Whether a sync is a few syscalls (watching, and little queued) rather than walking or
    /// re-reading many paths: then callers need not leave the async runtime for it.
    pub fn is_cheap(&self) -> bool {
        const QUEUED_MAX: i32 = 16 * 1024; // about 500 events
        self.queued().is_some_and(|q| q < QUEUED_MAX)
    }

    /// Whether a sync is one read that finds nothing (watching, no event queued): cheap enough
    /// for the JS thread. A single event can mean a walk (a directory moved in, a name that is not
    /// UTF-8), which must not stall the event loop.
    pub fn is_quiet(&self) -> bool {
        self.queued() == Some(0)
    }

    /// The bytes of events waiting, when the index is built and watching (else a sync walks).
    fn queued(&self) -> Option<i32> {
        let fd = self.inotify.as_ref().filter(|_| self.built)?;
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut queued) };
        (r == 0).then_some(queued)
    }

    /// Brings the index up to date and starts remembering changes for `call`.
    pub fn begin(&mut self, ws: &Workspace, call: u64) {
        self.sync(ws);
        self.calls.insert(call, HashMap::new());
    }

    /// Brings the index up to date and reports what changed since `call` began.
    pub fn finish(&mut self, ws: &Workspace, call: u64) -> Vec<FileInfo> {
        self.sync(ws);
        let Some(changed) = self.calls.remove(&call) else {
            return Vec::new();
        };
        let mut files: Vec<FileInfo> = changed
            .into_iter()
            .filter_map(|(path, before)| {
                let now = *self.files.get(&path)?;
                let change = match before {
                    None => "created",
                    Some(b) if b != now => "modified",
                    Some(_) => return None,
                };
                Some(FileInfo {
                    path,
                    size: now.size as f64,
                    change: change.into(),
                })
            })
            .collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }

    /// Forgets a call that ends without asking for its files.
    pub fn abandon(&mut self, call: u64) {
        self.calls.remove(&call);
    }

    fn sync(&mut self, ws: &Workspace) {
        if !self.built || self.inotify.is_none() {
            return self.rebuild(ws);
        }
        match self.drain() {
            Ok(paths) => {
                let mut parents = HashMap::new();
                for rel in paths {
                    if self.examine(ws, &rel, &mut parents).is_err() {
                        return self.rebuild(ws);
                    }
                }
            }
            Err(Lost) => self.rebuild(ws),
        }
    }

    /// Reads every queued event; returns the paths they name, each once, in queue order.
    fn drain(&mut self) -> std::result::Result<Vec<String>, Lost> {
        let Some(fd) = self.inotify.as_ref() else {
            return Err(Lost);
        };
        let mut raw: Vec<(i32, ReadFlags, Option<Vec<u8>>)> = Vec::new();
        if self.events.is_empty() {
            self.events.resize(64 * 1024, MaybeUninit::uninit());
        }
        let mut reader = inotify::Reader::new(fd.as_fd(), &mut self.events);
        loop {
            match reader.next() {
                Ok(ev) => raw.push((
                    ev.wd(),
                    ev.events(),
                    ev.file_name().map(|n| n.to_bytes().to_vec()),
                )),
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(_) => return Err(Lost),
            }
        }
        let mut seen = HashSet::new();
        let mut paths = Vec::new();
        for (wd, flags, name) in raw {
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                return Err(Lost);
            }
            if flags.contains(ReadFlags::IGNORED) {
                // The kernel dropped this watch (its directory is gone); the parent's event
                // already names the directory itself.
                if let Some(rel) = self.wds.remove(&wd) {
                    if self.dirs.get(&rel).is_some_and(|w| w.wd == wd) {
                        self.dirs.remove(&rel);
                    }
                }
                continue;
            }
            let (Some(dir), Some(name)) = (self.wds.get(&wd), name) else {
                continue;
            };
            // The walk cannot stat such a name either (it lists names lossily): skipped by both.
            let Ok(name) = String::from_utf8(name) else {
                continue;
            };
            let rel = if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            };
            if seen.insert(rel.clone()) {
                paths.push(rel);
            }
        }
        Ok(paths)
    }

    /// Re-reads one path and updates the index (a new directory is watched and scanned whole).
    fn examine(
        &mut self,
        ws: &Workspace,
        rel: &str,
        parents: &mut HashMap<String, Option<OwnedFd>>,
    ) -> std::result::Result<(), Lost> {
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let dir = parents
            .entry(parent.to_string())
            .or_insert_with(|| ws.open_dir(&split(parent), false).ok());
        let st = dir
            .as_ref()
            .and_then(|d| rustix::fs::statat(d, name, AtFlags::SYMLINK_NOFOLLOW).ok());
        let known_dir = self.dirs.get(rel).map(|w| w.ino);
        match st.as_ref().map(|s| (FileType::from_raw_mode(s.st_mode), s)) {
            Some((FileType::RegularFile, s)) if !is_helper_file(rel) => {
                if known_dir.is_some() {
                    self.forget_tree(rel);
                }
                self.set(rel, Some(Meta::of(s)));
            }
            Some((FileType::Directory, s)) if name != DEPS_DIR => {
                self.set(rel, None);
                if known_dir != Some(s.st_ino) {
                    if known_dir.is_some() {
                        self.forget_tree(rel);
                    }
                    self.scan(ws, rel)?;
                }
            }
            _ => {
                self.set(rel, None);
                if known_dir.is_some() {
                    self.forget_tree(rel);
                }
            }
        }
        Ok(())
    }

    /// Watches and indexes the directory `rel` and everything below it.
    fn scan(&mut self, ws: &Workspace, rel: &str) -> std::result::Result<(), Lost> {
        let parts = split(rel);
        let Ok(fd) = ws.open_dir(&parts, false) else {
            return Ok(());
        }; // gone, or not ours to read
        let Ok(st) = rustix::fs::fstat(&fd) else {
            return Ok(());
        };
        self.watch(rel, fd.as_fd(), &st).map_err(|_| Lost)?;
        drop(fd);
        let found =
            walk_files(ws, &parts, &mut |r, fd, st| self.watch(r, fd, st)).map_err(|_| Lost)?;
        for (path, meta) in found {
            self.set(&path, Some(meta));
        }
        Ok(())
    }

    fn watch(
        &mut self,
        rel: &str,
        fd: BorrowedFd<'_>,
        st: &Stat,
    ) -> std::result::Result<(), Errno> {
        let Some(inotify) = self.inotify.as_ref() else {
            return Ok(());
        };
        if self.dirs.len() >= self.max_watches && !self.dirs.contains_key(rel) {
            return Err(Errno::NOSPC);
        }
        // The magic link names exactly the directory we opened beneath the root; no path race.
        let wd = inotify::add_watch(inotify, format!("/proc/self/fd/{}", fd.as_raw_fd()), WATCH)?;
        if let Some(prev) = self.wds.insert(wd, rel.to_string()) {
            if prev != rel {
                // The same directory under an older name: that name is stale.
                self.dirs.remove(&prev);
                self.forget_files(&prev);
            }
        }
        self.dirs
            .insert(rel.to_string(), Watched { wd, ino: st.st_ino });
        Ok(())
    }

    /// Drops a directory that is gone or replaced: its watches and every file below it.
    fn forget_tree(&mut self, rel: &str) {
        let prefix = format!("{rel}/");
        let mut gone: Vec<String> = self
            .dirs
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
            .cloned()
            .collect();
        gone.push(rel.to_string());
        for d in gone {
            if let Some(w) = self.dirs.remove(&d) {
                self.wds.remove(&w.wd);
                if let Some(fd) = self.inotify.as_ref() {
                    let _ = inotify::remove_watch(fd, w.wd);
                }
            }
        }
        self.forget_files(rel);
    }

    fn forget_files(&mut self, rel: &str) {
        let prefix = format!("{rel}/");
        let gone: Vec<String> = self
            .files
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
            .cloned()
            .collect();
        for f in gone {
            self.set(&f, None);
        }
    }

    /// Sets one path's meta, noting the old value for every call that has not seen it change.
    fn set(&mut self, rel: &str, meta: Option<Meta>) {
        let old = match meta {
            Some(m) => self.files.insert(rel.to_string(), m),
            None => self.files.remove(rel),
        };
        if old != meta {
            note(&mut self.calls, rel, old);
        }
    }

    /// Walks everything again and notes the differences; with inotify, starts over with fresh
    /// watches (a new instance also discards whatever was queued).
    fn rebuild(&mut self, ws: &Workspace) {
        if self.inotify.is_some() {
            self.inotify = new_inotify();
        }
        self.dirs.clear();
        self.wds.clear();
        let mut found = self.walk_all(ws);
        if found.is_err() && self.inotify.is_some() {
            // Out of watches (or inotify refused the workspace): walk on every call from now on.
            self.inotify = None;
            self.dirs.clear();
            self.wds.clear();
            found = self.walk_all(ws);
        }
        // A workspace we cannot walk costs the calls their `files`, never the calls themselves.
        let Ok(found) = found else { return };
        self.built = true;
        let fresh: BTreeMap<String, Meta> = found.into_iter().collect();
        for (path, old) in &self.files {
            if fresh.get(path) != Some(old) {
                note(&mut self.calls, path, Some(*old));
            }
        }
        for path in fresh.keys() {
            if !self.files.contains_key(path) {
                note(&mut self.calls, path, None);
            }
        }
        self.files = fresh;
    }

    fn walk_all(&mut self, ws: &Workspace) -> Result<Vec<(String, Meta)>> {
        let root = ws
            .open_dir(&[], false)
            .map_err(|e| crate::errors::Error::io("cannot list the workspace", e))?;
        let st = rustix::fs::fstat(&root)
            .map_err(|e| crate::errors::Error::io("cannot list the workspace", e.into()))?;
        self.watch("", root.as_fd(), &st)
            .map_err(|e| crate::errors::Error::io("cannot watch the workspace", e.into()))?;
        walk_files(ws, &[], &mut |r, fd, st| self.watch(r, fd, st))
    }
}

fn note(calls: &mut HashMap<u64, HashMap<String, Option<Meta>>>, rel: &str, old: Option<Meta>) {
    for changed in calls.values_mut() {
        if !changed.contains_key(rel) {
            changed.insert(rel.to_string(), old);
        }
    }
}

fn new_inotify() -> Option<OwnedFd> {
    inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()
}

fn split(rel: &str) -> Vec<String> {
    if rel.is_empty() {
        Vec::new()
    } else {
        rel.split('/').map(str::to_string).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn code_cells_are_recognised() {
        assert!(is_helper_file(".cell-0a1b2c3d.py"));
        assert!(!is_helper_file("sub/.cell-0a1b2c3d.py"));
        assert!(!is_helper_file(".cell-xyz.py"));
        assert!(!is_helper_file(".cell-0a1b2c3d.txt"));
        assert!(is_helper_file(".run-0a1b2c3d.py"));
        assert!(is_helper_file(".res-0a1b2c3d.json"));
        assert!(!is_helper_file(".res-0a1b2c3d.py"));
        assert!(!is_helper_file("d/.res-0a1b2c3d.json"));
        assert!(is_helper_file(".cell-0a1b2c3d.json"));
        assert!(is_helper_file(".run-0a1b2c3d.js"));
        assert!(!is_helper_file(".run-0a1b2c3d.sh"));
    }

    fn changes(files: Vec<FileInfo>) -> Vec<(String, String)> {
        files.into_iter().map(|f| (f.path, f.change)).collect()
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// Every scenario runs with inotify and with the walk fallback: same answers.
    fn both(check: impl Fn(&std::path::Path, &Workspace, &mut LiveIndex)) {
        for watch in [true, false] {
            let d = tempfile::tempdir().unwrap();
            let ws = Workspace::open(d.path()).unwrap();
            let mut live = if watch {
                LiveIndex::new()
            } else {
                LiveIndex::walking()
            };
            check(d.path(), &ws, &mut live);
            assert_eq!(live.is_watching(), watch);
        }
    }

    #[test]
    fn created_and_modified_but_not_deps_cells_or_links() {
        both(|p, ws, live| {
            fs::write(p.join("same"), b"1").unwrap();
            fs::write(p.join("grow"), b"1").unwrap();
            live.begin(ws, 1);
            fs::write(p.join("grow"), b"12").unwrap();
            fs::create_dir_all(p.join("sub/.deps")).unwrap();
            fs::write(p.join("sub/new"), b"abc").unwrap();
            fs::write(p.join("sub/.deps/pkg"), b"x").unwrap();
            fs::write(p.join(".cell-0a1b2c3d.py"), b"x").unwrap();
            std::os::unix::fs::symlink("/etc/passwd", p.join("link")).unwrap();
            assert_eq!(
                changes(live.finish(ws, 1)),
                pairs(&[("grow", "modified"), ("sub/new", "created")])
            );
        });
    }

    #[test]
    fn changes_between_calls_belong_to_no_call() {
        both(|p, ws, live| {
            live.begin(ws, 1);
            fs::write(p.join("a"), b"1").unwrap();
            assert_eq!(changes(live.finish(ws, 1)), pairs(&[("a", "created")]));
            fs::write(p.join("b"), b"1").unwrap();
            live.begin(ws, 2);
            assert_eq!(changes(live.finish(ws, 2)), vec![]);
            live.begin(ws, 3);
            fs::write(p.join("b"), b"22").unwrap();
            fs::remove_file(p.join("a")).unwrap();
            assert_eq!(changes(live.finish(ws, 3)), pairs(&[("b", "modified")]));
        });
    }

    #[test]
    fn overlapping_calls_each_see_their_own_window() {
        both(|p, ws, live| {
            live.begin(ws, 1);
            fs::write(p.join("x"), b"1").unwrap();
            live.begin(ws, 2);
            fs::write(p.join("y"), b"1").unwrap();
            assert_eq!(
                changes(live.finish(ws, 1)),
                pairs(&[("x", "created"), ("y", "created")])
            );
            fs::write(p.join("x"), b"22").unwrap();
            assert_eq!(
                changes(live.finish(ws, 2)),
                pairs(&[("x", "modified"), ("y", "created")])
            );
        });
    }

    #[test]
    fn renamed_replaced_and_new_trees() {
        both(|p, ws, live| {
            fs::create_dir_all(p.join("a/deep")).unwrap();
            fs::write(p.join("a/deep/f"), b"1").unwrap();
            fs::write(p.join("keep"), b"1").unwrap();
            live.begin(ws, 1);
            fs::rename(p.join("a"), p.join("b")).unwrap();
            fs::create_dir_all(p.join("a")).unwrap();
            fs::write(p.join("a/g"), b"1").unwrap();
            fs::create_dir_all(p.join("n/m/o")).unwrap();
            fs::write(p.join("n/m/o/h"), b"1").unwrap();
            fs::remove_file(p.join("keep")).unwrap();
            fs::create_dir(p.join("keep")).unwrap();
            assert_eq!(
                changes(live.finish(ws, 1)),
                pairs(&[
                    ("a/g", "created"),
                    ("b/deep/f", "created"),
                    ("n/m/o/h", "created")
                ])
            );
            // The moved tree is watched under its new name, and the old name is forgotten.
            live.begin(ws, 2);
            fs::write(p.join("b/deep/f"), b"22").unwrap();
            fs::write(p.join("n/m/o/h"), b"22").unwrap();
            fs::remove_dir_all(p.join("a")).unwrap();
            fs::write(p.join("keep/z"), b"1").unwrap();
            assert_eq!(
                changes(live.finish(ws, 2)),
                pairs(&[
                    ("b/deep/f", "modified"),
                    ("keep/z", "created"),
                    ("n/m/o/h", "modified")
                ])
            );
        });
    }

    #[test]
    fn a_replaced_file_is_modified_even_with_the_same_size() {
        both(|p, ws, live| {
            fs::write(p.join("f"), b"1").unwrap();
            live.begin(ws, 1);
            fs::write(p.join("f.tmp"), b"2").unwrap();
            fs::rename(p.join("f.tmp"), p.join("f")).unwrap();
            assert_eq!(changes(live.finish(ws, 1)), pairs(&[("f", "modified")]));
        });
    }

    #[test]
    fn names_that_are_not_utf8_are_skipped_like_the_walk_skips_them() {
        both(|p, ws, live| {
            use std::os::unix::ffi::OsStrExt;
            live.begin(ws, 1);
            fs::write(p.join(std::ffi::OsStr::from_bytes(b"bad\xff")), b"1").unwrap();
            fs::write(p.join("ok"), b"1").unwrap();
            assert_eq!(changes(live.finish(ws, 1)), pairs(&[("ok", "created")]));
        });
    }

    #[test]
    fn past_its_watch_budget_a_session_walks_instead() {
        let d = tempfile::tempdir().unwrap();
        let ws = Workspace::open(d.path()).unwrap();
        let mut live = LiveIndex::new();
        live.max_watches = 3;
        fs::create_dir_all(d.path().join("a/b")).unwrap();
        live.begin(&ws, 1);
        assert!(live.is_watching());
        fs::create_dir_all(d.path().join("c/d")).unwrap();
        fs::write(d.path().join("c/d/f"), b"1").unwrap();
        assert_eq!(changes(live.finish(&ws, 1)), pairs(&[("c/d/f", "created")]));
        assert!(!live.is_watching());
        live.begin(&ws, 2);
        fs::write(d.path().join("a/b/g"), b"1").unwrap();
        assert_eq!(changes(live.finish(&ws, 2)), pairs(&[("a/b/g", "created")]));
    }

    #[test]
    fn an_overflowed_queue_is_rebuilt_by_a_walk() {
        let d = tempfile::tempdir().unwrap();
        let ws = Workspace::open(d.path()).unwrap();
        let mut live = LiveIndex::new();
        live.begin(&ws, 1);
        // Three events per file: past the default queue of 16384 events.
        let max = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .map_or(16384, |s| s.trim().parse().unwrap());
        let n = max / 3 + 100;
        for i in 0..n {
            fs::write(d.path().join(format!("f{i}")), b"1").unwrap();
        }
        let got = live.finish(&ws, 1);
        assert_eq!(got.len(), n);
        assert!(got.iter().all(|f| f.change == "created"));
        live.begin(&ws, 2);
        fs::write(d.path().join("f7"), b"22").unwrap();
        assert_eq!(changes(live.finish(&ws, 2)), pairs(&[("f7", "modified")]));
        assert!(live.is_watching());
    }
}
