//! What must not outlive the Node process: running boxes and the session directories we own.
//!
//! Live boxes and owned directories are registered here per napi env. An env cleanup hook (normal
//! exit, `process.exit`, worker teardown) stops that env's boxes and removes its directories. A
//! SIGKILLed Node cannot run hooks: PDEATHSIG takes kern down, and the next `open()` reclaims
//! session directories whose owning process is gone (the owner's pid is in the name).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::spawn;

/// Session directories are `<tmp>/kern-sbx-<pid>-<random>`.
pub const SESSION_PREFIX: &str = "kern-sbx-";

struct LiveBox {
    env: usize,
    pgid: i32,
    name: String,
    kern: PathBuf,
}

#[derive(Default)]
struct Registry {
    boxes: HashMap<u64, LiveBox>,
    dirs: HashMap<PathBuf, usize>,
}

fn registry() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(Default::default)
}

fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut g = registry().lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g)
}

/// Unregisters its box when the call ends.
pub struct BoxGuard(u64);

impl Drop for BoxGuard {
    fn drop(&mut self) {
        with(|r| r.boxes.remove(&self.0));
    }
}

pub fn track_box(env: usize, pgid: i32, name: &str, kern: &Path) -> BoxGuard {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let b = LiveBox {
        env,
        pgid,
        name: name.to_string(),
        kern: kern.to_path_buf(),
    };
    with(|r| r.boxes.insert(id, b));
    BoxGuard(id)
}

pub fn track_dir(env: usize, dir: &Path) {
    with(|r| r.dirs.insert(dir.to_path_buf(), env));
}

pub fn untrack_dir(dir: &Path) {
    with(|r| r.dirs.remove(dir));
}

/// The env cleanup hook: stop this env's boxes, then remove its directories.
pub fn on_env_exit(env: usize) {
    let (boxes, dirs) = with(|r| {
        let ids: Vec<u64> = r
            .boxes
            .iter()
            .filter(|(_, b)| b.env == env)
            .map(|(id, _)| *id)
            .collect();
        let boxes: Vec<_> = ids
            .into_iter()
            .filter_map(|id| r.boxes.remove(&id))
            .map(|b| (b.pgid, b.name, b.kern))
            .collect();
        let dirs: Vec<PathBuf> = r
            .dirs
            .iter()
            .filter(|(_, e)| **e == env)
            .map(|(d, _)| d.clone())
            .collect();
        for d in &dirs {
            r.dirs.remove(d);
        }
        (boxes, dirs)
    });
    if !boxes.is_empty() {
        spawn::teardown_all_blocking(boxes);
    }
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only probes; EPERM still means the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// The owning pid encoded in a session directory name, if it is one of ours.
pub fn owner_pid(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(SESSION_PREFIX)?;
    let (pid, tag) = rest.split_once('-')?;
    if tag.is_empty() || !tag.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    pid.parse().ok()
}

/// Removes session directories in `tmp` whose owning process is dead. Only directories owned by
/// our uid are touched.
pub fn reclaim_stale(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        if pid as u32 == std::process::id() || pid_alive(pid) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        use std::os::unix::fs::MetadataExt;
        if meta.is_dir() && meta.uid() == me {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_parses_only_our_names() {
        assert_eq!(owner_pid("kern-sbx-123-abcdef"), Some(123));
        assert_eq!(owner_pid("kern-sbx-123-"), None);
        assert_eq!(owner_pid("kern-sbx-x-ab"), None);
        assert_eq!(owner_pid("kern-ws-123-ab"), None);
    }

    #[test]
    fn reclaim_removes_dead_owners_only() {
        let tmp = tempfile::tempdir().unwrap();
        // pid 0x7fffffff is never a live process.
        let dead = tmp.path().join(format!("{SESSION_PREFIX}2147483646-abcd"));
        let live = tmp
            .path()
            .join(format!("{SESSION_PREFIX}{}-abcd", std::process::id()));
        std::fs::create_dir_all(dead.join("ws")).unwrap();
        std::fs::create_dir_all(&live).unwrap();
        reclaim_stale(tmp.path());
        assert!(!dead.exists());
        assert!(live.exists());
    }
}
