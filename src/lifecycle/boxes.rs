//! The boxes running right now, and killing them: a registry per napi env (exit-time cleanup stops
//! what is still running) and the process-group signalling that every teardown path shares.
//!
//! kern runs in a process group of its own (see `launch`), so its pgid names the whole box.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::lifecycle::{procfs, workload};

/// How long exit-time teardown waits for `kern stop` before killing the groups outright.
const STOP_ALL_BUDGET: Duration = Duration::from_millis(1500);
/// After a box's init is killed at exit, how long kern gets to tear the box down.
const EXIT_REAP: Duration = Duration::from_millis(500);
/// How long an early end waits for kern to be past its setup (`workload::in_setup`).
pub const SETUP_BUDGET: Duration = Duration::from_millis(300);

struct LiveBox {
    env: usize,
    pgid: i32,
    name: String,
    kern: PathBuf,
}

static LIVE: Mutex<BTreeMap<u64, LiveBox>> = Mutex::new(BTreeMap::new());

fn with<T>(f: impl FnOnce(&mut BTreeMap<u64, LiveBox>) -> T) -> T {
    f(&mut LIVE.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Unregisters its box when the call ends.
pub struct BoxGuard(u64);

impl Drop for BoxGuard {
    fn drop(&mut self) {
        with(|r| r.remove(&self.0));
    }
}

/// Registers a running box of napi env `env` until the guard drops.
pub fn track(env: usize, pgid: i32, name: &str, kern: &Path) -> BoxGuard {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let b = LiveBox {
        env,
        pgid,
        name: name.to_string(),
        kern: kern.to_path_buf(),
    };
    with(|r| r.insert(id, b));
    BoxGuard(id)
}

/// Stops every box of napi env `env`, synchronously (the process is exiting): `kern stop` for
/// each in parallel (bounded), then SIGKILL to every group.
pub fn stop_all_blocking(env: usize) {
    let boxes: Vec<LiveBox> = with(|r| {
        let ids: Vec<u64> = r
            .iter()
            .filter(|(_, b)| b.env == env)
            .map(|(id, _)| *id)
            .collect();
        ids.into_iter().filter_map(|id| r.remove(&id)).collect()
    });
    if boxes.is_empty() {
        return;
    }
    // `kern stop` only once no kern is still setting up (see workload::in_setup).
    let setup_deadline = Instant::now() + SETUP_BUDGET;
    while Instant::now() < setup_deadline && boxes.iter().any(|b| workload::in_setup(b.pgid)) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let deadline = Instant::now() + STOP_ALL_BUDGET;
    let mut stops: Vec<std::process::Child> = boxes
        .iter()
        .filter_map(|b| stop_command(&b.kern, &b.name).spawn().ok())
        .collect();
    while !stops.is_empty() && Instant::now() < deadline {
        stops.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_)) | Err(_)));
        std::thread::sleep(Duration::from_millis(10));
    }
    for mut c in stops {
        let _ = c.kill();
        let _ = c.wait();
    }
    // A box `kern stop` does not know (kern does not register an `-it` box, as a machine's is)
    // is ended through its init: kern then tears it down and removes its scratch itself, which a
    // killed kern cannot.
    let left: Vec<&LiveBox> = boxes.iter().filter(|b| procfs::running(b.pgid)).collect();
    for b in &left {
        workload::kill_box(b.pgid);
    }
    let deadline = Instant::now() + EXIT_REAP;
    while Instant::now() < deadline && left.iter().any(|b| procfs::running(b.pgid)) {
        std::thread::sleep(Duration::from_millis(5));
    }
    for b in boxes {
        kill_group(b.pgid);
    }
}

/// `kern stop NAME`, quiet.
pub fn stop_command(kern: &Path, name: &str) -> std::process::Command {
    let mut c = std::process::Command::new(kern);
    c.args(["stop", name])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// SIGKILLs the whole process group `pgid`: kern and whatever of the box is still in it.
pub fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: plain syscall; a vanished group just returns ESRCH.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// SIGKILLs every live member of group `pgid` but its leader (kern), so kern can reap its box and
/// exit by itself (no orphans left to init).
pub fn kill_all_but_leader(pgid: i32) {
    for pid in group_members(pgid).into_iter().filter(|p| *p != pgid) {
        // SAFETY: plain syscall on a pid we just saw in kern's group.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Whether any live (non-zombie) process is still in group `pgid`.
pub fn group_alive(pgid: i32) -> bool {
    pgid > 1 && !group_members(pgid).is_empty()
}

/// Live (non-zombie) members of process group `pgid`, from /proc. Zombies are dead already;
/// orphaned ones wait for init to reap them.
fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|pid| procfs::stat(*pid).is_some_and(|s| s.pgrp == pgid && s.live()))
        .collect()
}
