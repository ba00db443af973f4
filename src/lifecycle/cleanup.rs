//! What must not outlive the Node process: running boxes and the session directories we own.
//!
//! Session directories are registered here per napi env; running boxes in `boxes`. When an env
//! goes away (its cleanup hook: normal exit, worker teardown; or lib/native.js's
//! `process.once('exit')`, since `process.exit()` skips the hooks) its boxes are stopped and its
//! directories removed. A SIGKILLed Node cannot run hooks: PDEATHSIG takes kern down, and the next
//! `open()` reclaims session directories whose owning process is gone (the owner's pid is in the
//! name).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::lifecycle::boxes;

/// Session directories are `<tmp>/kern-sbx-<pid>-<random>`.
pub const SESSION_PREFIX: &str = "kern-sbx-";

/// Owned session directories and the napi env of each.
static DIRS: Mutex<BTreeMap<PathBuf, usize>> = Mutex::new(BTreeMap::new());

fn with<T>(f: impl FnOnce(&mut BTreeMap<PathBuf, usize>) -> T) -> T {
    f(&mut DIRS.lock().unwrap_or_else(|p| p.into_inner()))
}

pub fn track_dir(env: usize, dir: &Path) {
    with(|d| d.insert(dir.to_path_buf(), env));
}

pub fn untrack_dir(dir: &Path) {
    with(|d| d.remove(dir));
}

/// An env is going away: stop its boxes, then remove its directories.
pub fn on_env_exit(env: usize) {
    boxes::stop_all_blocking(env);
    let gone: Vec<PathBuf> = with(|d| {
        let gone: Vec<PathBuf> = d
            .iter()
            .filter(|(_, e)| **e == env)
            .map(|(p, _)| p.clone())
            .collect();
        for p in &gone {
            d.remove(p);
        }
        gone
    });
    for p in gone {
        let _ = std::fs::remove_dir_all(p);
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
        // Above any pid_max (at most 2^22), so never a live process.
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
