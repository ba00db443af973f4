//! Shared helpers: run the built stand-in in an isolated state dir, with deadlines, and inspect /proc.

#![allow(dead_code)] // each test binary uses a different subset

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_kern-standin");
pub const IMAGE: &str = "python:3.12-slim";

/// Generous: two cores, parallel tests, boxes that deliberately run for seconds.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Per-test environment: a private state dir and none of the switches leaking in from outside.
pub struct Env {
    pub state: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            state: tempfile::tempdir().expect("state dir"),
        }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("KERN_STANDIN_STATE_DIR", self.state.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for k in [
            "KERN_STARTED_FD",
            "KERN_STANDIN_ARGV_LOG",
            "KERN_STANDIN_LEGACY_STARTED",
            "KERN_STANDIN_WARN_CAPS",
            "KERN_STANDIN_PROFILES",
            "KERN_STANDIN_IMAGES",
            "KERN_REQUIRE_LIMITS",
            "KERN_ALLOW_UNCAPPED",
        ] {
            c.env_remove(k);
        }
        c
    }

    /// Run to completion (bounded by [`DEADLINE`]).
    pub fn run(&self, args: &[&str]) -> Output {
        output(self.cmd(args).spawn().expect("spawn stand-in"))
    }
}

/// A unique token for argv markers and box names, so parallel tests never collide.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A `sleep` argument that doubles as an argv marker: `sleep 61.<digits>` sleeps about a minute.
pub fn marker_sleep() -> String {
    static N: AtomicU32 = AtomicU32::new(1);
    format!(
        "61.{}{:03}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

pub fn wait_deadline(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Collect output while waiting (pipes are drained on threads so a chatty box cannot block).
pub fn output(mut child: Child) -> Output {
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let status = wait_deadline(&mut child, DEADLINE);
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Pids of live (non-zombie) processes whose argv contains `marker`.
pub fn processes_with(marker: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid as u32 != std::process::id())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| text(a).contains(marker)))
        })
        .collect()
}

/// Wait (bounded) until `check` holds.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    check()
}

pub fn assert_no_survivor(marker: &str) {
    assert!(
        eventually(Duration::from_secs(10), || processes_with(marker)
            .is_empty()),
        "processes with {marker:?} survived: {:?}",
        processes_with(marker)
    );
}

/// Run with `KERN_STARTED_FD=9` wired to a pipe; returns the bytes read until EOF and the output.
pub fn run_with_started_fd(cmd: &mut Command) -> (Vec<u8>, Output) {
    let mut fds = [0i32; 2];
    // CLOEXEC: no concurrently spawned child may inherit the write end and delay our EOF.
    // SAFETY: `fds` is a live array of the two ints pipe2 writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (rd, wr) = (fds[0], fds[1]);
    cmd.env("KERN_STARTED_FD", "9");
    // SAFETY: dup2 is async-signal-safe; the duplicate at 9 is not CLOEXEC, so only this child has it.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(wr, 9) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn stand-in");
    // SAFETY: our copy of the write end, closed once; the child holds its own at fd 9.
    unsafe { libc::close(wr) };
    let reader = std::thread::spawn(move || {
        // SAFETY: `rd` is ours alone.
        let mut f = unsafe { <std::fs::File as std::os::unix::io::FromRawFd>::from_raw_fd(rd) };
        let mut bytes = Vec::new();
        let _ = f.read_to_end(&mut bytes);
        bytes
    });
    let out = output(child);
    (reader.join().unwrap(), out)
}

pub fn python(code: &str) -> Vec<String> {
    vec!["python3".into(), "-c".into(), code.into()]
}
