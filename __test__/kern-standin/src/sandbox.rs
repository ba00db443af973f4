//! Spawning the box under bubblewrap and supervising it the way a foreground kern does.
//!
//! Process model (nothing may outlive the supervisor):
//!
//! ```text
//! kern-standin box (supervisor; the caller's pid, in the caller's process group)
//!   └─ bwrap            the supervisor's process group; PDEATHSIG=SIGKILL towards the supervisor
//!        └─ box PID 1   the workload itself (--as-pid-1), PDEATHSIG=SIGKILL towards bwrap
//!             └─ ...    everything else lives in the box's pid namespace and dies with PID 1
//! ```
//!
//! bwrap (0.8) arms the box's PDEATHSIG only after the box's mounts are set up, and never checks
//! that it still has a parent: a bwrap killed inside that window would leave the workload running
//! with nobody above it. So the box also gets a lifeline, a pipe whose write end only the
//! supervisor keeps (bwrap's monitor closes its copy, the shim its own); the shim, with its
//! PDEATHSIG armed, refuses to exec the workload once that end is closed.
//!
//! The supervisor learns PID 1's host pid from bwrap's `--json-status-fd`, then behaves like kern:
//! `--timeout N` sends SIGTERM to PID 1 at N s and SIGKILL 2 s later; a first SIGTERM/SIGINT/SIGHUP/
//! SIGQUIT to the supervisor is forwarded to PID 1 (which, like any pid-namespace init, ignores it
//! unless it installed a handler) and a second one exits at once with 128+signo, taking the box with
//! it through the PDEATHSIG chain. The exit code is PID 1's: its own code, or 128+N for signal N.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::seccomp;
use crate::shim::{ExecSpec, SHIM_PATH, SHIM_VERB};
use crate::state::{PidFd, Registration};

/// Path to the bwrap binary to use instead of the one on `PATH`.
pub const BWRAP_ENV: &str = "KERN_STANDIN_BWRAP";

/// kern's fixed grace between the timeout's SIGTERM and its SIGKILL.
const TIMEOUT_GRACE: Duration = Duration::from_secs(2);

/// Host directories that make up the box's (read-only) root filesystem, when present.
const ROOT_DIRS: &[&str] = &[
    "usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32",
];

/// Capabilities kern always drops from a box (module loading, raw I/O, ptrace, sys_admin, ...).
const DEFAULT_DROP: &[u32] = &[
    12, 16, 17, 19, 20, 21, 22, 25, 30, 32, 33, 34, 35, 37, 38, 39,
];

const CAP_NAMES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

#[derive(Debug, Clone, PartialEq)]
pub struct Volume {
    pub source: PathBuf,
    pub target: String,
    pub read_only: bool,
}

/// kern's capability model: a dangerous baseline always dropped, `--cap-drop` adds to it (`ALL` =
/// everything), `--cap-add` keeps a cap whatever the drops say.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CapPolicy {
    drop_all: bool,
    drops: Vec<u32>,
    adds: Vec<u32>,
}

impl CapPolicy {
    pub fn resolve(adds: &[String], drops: &[String]) -> Result<CapPolicy, Error> {
        let lookup = |kind: &str, name: &str| -> Result<u32, Error> {
            let n = name.trim();
            let n = n
                .strip_prefix("CAP_")
                .or_else(|| n.strip_prefix("cap_"))
                .unwrap_or(n);
            CAP_NAMES
                .iter()
                .position(|c| c.eq_ignore_ascii_case(n))
                .map(|i| i as u32)
                .ok_or_else(|| {
                    Error::Sandbox(format!(
                        "unknown capability '{name}' in --cap-{kind} (e.g. NET_ADMIN, SYS_PTRACE, or ALL)"
                    ))
                })
        };
        let mut p = CapPolicy::default();
        for d in drops {
            if d.eq_ignore_ascii_case("ALL") {
                p.drop_all = true;
            } else {
                p.drops.push(lookup("drop", d)?);
            }
        }
        for a in adds {
            if a.eq_ignore_ascii_case("ALL") {
                p.adds.extend(0..CAP_NAMES.len() as u32);
            } else {
                p.adds.push(lookup("add", a)?);
            }
        }
        Ok(p)
    }

    /// bwrap arguments: start from every cap (bwrap grants none to a non-root caller otherwise),
    /// then drop what kern would.
    fn bwrap_args(&self) -> Vec<String> {
        let mut out = vec!["--cap-add".to_string(), "ALL".to_string()];
        let kept = |c: &u32| !self.adds.contains(c);
        let dropped: Vec<u32> = if self.drop_all {
            out.extend(["--cap-drop".into(), "ALL".into()]);
            out.extend(self.adds.iter().flat_map(|c| {
                [
                    "--cap-add".into(),
                    format!("CAP_{}", CAP_NAMES[*c as usize]),
                ]
            }));
            Vec::new()
        } else {
            DEFAULT_DROP
                .iter()
                .chain(&self.drops)
                .copied()
                .filter(kept)
                .collect()
        };
        out.extend(dropped.iter().flat_map(|c| {
            [
                "--cap-drop".into(),
                format!("CAP_{}", CAP_NAMES[*c as usize]),
            ]
        }));
        out
    }
}

/// Everything the box is built from.
pub struct Sandbox {
    pub hostname: String,
    pub exec: ExecSpec,
    pub read_only: bool,
    pub volumes: Vec<Volume>,
    pub share_net: bool,
    pub caps: CapPolicy,
    pub timeout: u64,
}

/// Run the box to completion and return kern's exit code for it. `Err` only when nothing started.
pub fn run(sb: &Sandbox, reg: &mut Registration) -> Result<i32, Error> {
    let bwrap = find_bwrap()?;
    let shim = std::env::current_exe()
        .map_err(|e| Error::Setup(format!("cannot locate the stand-in binary: {e}")))?;
    let seccomp = Fd::pipe_with(&seccomp::program_bytes())?;
    let spec = Fd::memfd_with(&sb.exec.encode())?;
    let (status_rd, status_wr) = Fd::pipe()?;
    status_wr.inheritable()?;
    let (lifeline_rd, lifeline_wr) = Fd::pipe()?;
    lifeline_rd.inheritable()?;
    lifeline_wr.inheritable()?;

    let mut args = sb.bwrap_args(&shim);
    args.extend(
        [
            "--seccomp".to_string(),
            seccomp.0.to_string(),
            "--json-status-fd".into(),
            status_wr.0.to_string(),
            "--".into(),
            SHIM_PATH.into(),
            SHIM_VERB.into(),
            spec.0.to_string(),
            lifeline_rd.0.to_string(),
            lifeline_wr.0.to_string(),
        ]
        .map(OsString::from),
    );

    let mut cmd = Command::new(&bwrap);
    cmd.args(&args);
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: only async-signal-safe calls, no allocation, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // bwrap stays in the supervisor's process group: a caller that SIGKILLs that group
            // (as the binding does on a timeout) then reaches bwrap and the box at once, instead
            // of relying on the PDEATHSIG chain, which bwrap arms in the box without re-checking
            // its parent (a box could outlive an abort landing during start-up).
            // If the supervisor is SIGKILLed, bwrap goes with it (and the box with bwrap).
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }

    // Fatal signals stay pending until PID 1 is known, then go to the forwarder.
    signals::block();
    let child = cmd.spawn();
    // bwrap holds its copies now. The lifeline's write end stays open as long as we live.
    drop((seccomp, spec, status_wr, lifeline_rd));
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            signals::forward_to(0);
            return Err(Error::Setup(format!("cannot run {}: {e}", bwrap.display())));
        }
    };
    let bwrap_pid = child.id() as i32;
    reg.set_box(0, bwrap_pid);
    let supervision = supervise(bwrap_pid, status_rd, sb.timeout, reg);
    let status = wait(bwrap_pid);
    drop(lifeline_wr);

    if supervision.pid1.is_none() {
        // bwrap never got as far as forking the box: nothing started, kern's pre-fork failure.
        signals::forward_to(0);
        return Err(Error::Setup(format!(
            "bubblewrap could not create the box's namespaces (bwrap {})",
            describe(status)
        )));
    }
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) if supervision.reported_exit => c,
        // PID 1 existed but the workload never got control: kern's in-box setup failure.
        (Some(c), _) => {
            eprintln!(
                "kern: sandbox setup failed: bwrap exited with status {c} before the workload ran"
            );
            125
        }
        (_, Some(sig)) => 128 + sig,
        _ => 1,
    })
}

fn describe(status: std::process::ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (_, Some(s)) => format!("was killed by signal {s}"),
        _ => "ended abnormally".into(),
    }
}

fn find_bwrap() -> Result<PathBuf, Error> {
    if let Some(p) = std::env::var_os(BWRAP_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::Setup(
                "bubblewrap is not installed (the stand-in runs every box with `bwrap`; \
                 apt-get install bubblewrap)"
                    .into(),
            )
        })
}

impl Sandbox {
    fn bwrap_args(&self, shim: &Path) -> Vec<OsString> {
        fn words<const N: usize>(w: [&str; N]) -> [OsString; N] {
            w.map(OsString::from)
        }
        let mut a: Vec<OsString> = Vec::new();
        a.extend(words([
            "--die-with-parent",
            "--unshare-user",
            "--uid",
            "0",
            "--gid",
            "0",
            "--unshare-pid",
            "--as-pid-1",
            "--unshare-ipc",
            "--unshare-uts",
            "--hostname",
            &self.hostname,
            "--clearenv",
        ]));
        if !self.share_net {
            a.extend(words(["--unshare-net"])); // bwrap brings the new namespace's `lo` up
        }
        // The root filesystem: the host's system dirs, read-only; merged-/usr symlinks as symlinks.
        for name in ROOT_DIRS {
            let host = Path::new("/").join(name);
            let dest = OsString::from(format!("/{name}"));
            match std::fs::symlink_metadata(&host) {
                Ok(m) if m.file_type().is_symlink() => {
                    if let Ok(target) = std::fs::read_link(&host) {
                        a.extend(["--symlink".into(), target.into_os_string(), dest]);
                    }
                }
                Ok(m) if m.is_dir() => a.extend(["--ro-bind".into(), host.into_os_string(), dest]),
                _ => {}
            }
        }
        a.extend(words([
            "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp", "--perms",
            "0700", "--dir", "/root", "--perms", "0755", "--dir", "/run",
        ]));
        a.extend(["--ro-bind".into(), shim.into(), SHIM_PATH.into()]);
        for v in &self.volumes {
            let flag = if v.read_only { "--ro-bind" } else { "--bind" };
            a.extend([
                flag.into(),
                v.source.clone().into(),
                v.target.clone().into(),
            ]);
        }
        if self.read_only {
            // Binds keep their own mode (a `-v` stays writable), as under kern.
            a.extend(words(["--remount-ro", "/tmp", "--remount-ro", "/"]));
        }
        a.extend(self.caps.bwrap_args().into_iter().map(OsString::from));
        a
    }
}

/// What supervision learned from bwrap's status channel.
struct Supervision {
    pid1: Option<i32>,
    /// bwrap reported an exit code: the workload got control (setup finished).
    reported_exit: bool,
}

/// Wait for bwrap to exit, enforcing `--timeout` and wiring up signal forwarding.
fn supervise(bwrap_pid: i32, status: Fd, timeout: u64, reg: &mut Registration) -> Supervision {
    let bwrap = PidFd::open(bwrap_pid);
    let mut sv = Supervision {
        pid1: None,
        reported_exit: false,
    };
    let mut pid1_fd: Option<PidFd> = None;
    let mut buf = Vec::new();
    let mut status_open = true;
    let mut term_at = (timeout > 0).then(|| Instant::now() + Duration::from_secs(timeout));
    let mut kill_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if term_at.is_some_and(|t| now >= t) {
            term_at = None;
            if let Some(fd) = &pid1_fd {
                fd.signal(libc::SIGTERM);
            }
            kill_at = Some(now + TIMEOUT_GRACE);
        }
        if kill_at.is_some_and(|t| now >= t) {
            kill_at = None;
            match &pid1_fd {
                Some(fd) => fd.signal(libc::SIGKILL),
                // SAFETY: plain syscall on ints; a group that is gone just gives ESRCH.
                None => unsafe {
                    libc::kill(-bwrap_pid, libc::SIGKILL);
                },
            }
        }
        let wake = [term_at, kill_at].into_iter().flatten().min();
        let ms = wake.map_or(-1, |t| {
            // +1: never wake a hair before the deadline and spin.
            t.saturating_duration_since(now)
                .as_millis()
                .min(i32::MAX as u128 - 1) as i32
                + 1
        });
        let mut fds = [
            libc::pollfd {
                fd: bwrap.as_ref().map_or(-1, PidFd::raw),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if status_open { status.0 } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a live array of exactly 2 pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if fds[1].revents != 0 {
            status_open = read_some(status.0, &mut buf);
            if sv.pid1.is_none() {
                if let Some(pid) = json_number(&buf, "child-pid") {
                    sv.pid1 = Some(pid);
                    pid1_fd = PidFd::open(pid);
                    reg.set_box(pid, bwrap_pid);
                    signals::forward_to(pid);
                }
            }
        }
        if fds[0].revents != 0 || bwrap.is_none() {
            break;
        }
    }
    // bwrap is gone: whatever it wrote is complete.
    while status_open {
        status_open = read_some(status.0, &mut buf);
    }
    sv.reported_exit = json_number(&buf, "exit-code").is_some();
    if sv.pid1.is_none() {
        if let Some(pid) = json_number(&buf, "child-pid") {
            sv.pid1 = Some(pid);
        }
    }
    sv
}

/// Read what is available; false once the writer is gone.
fn read_some(fd: i32, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 512];
    loop {
        // SAFETY: `chunk` is a live buffer of `chunk.len()` bytes.
        let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
        match n {
            n if n > 0 => {
                buf.extend_from_slice(&chunk[..n as usize]);
                return true;
            }
            0 => return false,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return false,
        }
    }
}

/// The integer after `"key":` in bwrap's status JSON lines.
fn json_number(buf: &[u8], key: &str) -> Option<i32> {
    let text = String::from_utf8_lossy(buf);
    let at = text.find(&format!("\"{key}\""))? + key.len() + 2;
    let rest = text[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn wait(pid: i32) -> std::process::ExitStatus {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a live local int; `pid` is our own child.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return std::process::ExitStatus::from_raw(status);
        }
    }
}

/// An owned descriptor.
struct Fd(i32);

impl Fd {
    /// A CLOEXEC pipe.
    fn pipe() -> Result<(Fd, Fd), Error> {
        let mut p = [0i32; 2];
        // SAFETY: `p` is a live array of the two ints pipe2 writes.
        if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(os_error("pipe2"));
        }
        Ok((Fd(p[0]), Fd(p[1])))
    }

    /// The read end of a pipe that already holds `data` (the writer is closed), inheritable.
    fn pipe_with(data: &[u8]) -> Result<Fd, Error> {
        let (rd, wr) = Fd::pipe()?;
        write_all(wr.0, data)?;
        drop(wr);
        rd.inheritable()?;
        Ok(rd)
    }

    /// An inheritable memfd holding `data` (no size limit, unlike a pipe written before spawn).
    fn memfd_with(data: &[u8]) -> Result<Fd, Error> {
        // SAFETY: the name is a NUL-terminated literal.
        let fd = unsafe { libc::memfd_create(c"kern-standin-exec".as_ptr(), 0) };
        if fd < 0 {
            return Err(os_error("memfd_create"));
        }
        let fd = Fd(fd);
        write_all(fd.0, data)?;
        Ok(fd)
    }

    fn inheritable(&self) -> Result<(), Error> {
        // SAFETY: fcntl on a fd we own; no memory is passed.
        if unsafe { libc::fcntl(self.0, libc::F_SETFD, 0) } != 0 {
            return Err(os_error("fcntl"));
        }
        Ok(())
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the fd and close it once, on drop.
        unsafe { libc::close(self.0) };
    }
}

fn write_all(fd: i32, mut data: &[u8]) -> Result<(), Error> {
    while !data.is_empty() {
        // SAFETY: `data` is a live slice of `data.len()` bytes.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(os_error("write"));
        }
        data = &data[n as usize..];
    }
    Ok(())
}

fn os_error(what: &str) -> Error {
    Error::Setup(format!(
        "{what} failed: {}",
        std::io::Error::last_os_error()
    ))
}

/// kern's foreground signal contract, via an async-signal-safe handler (two atomics, `kill`, `_exit`).
mod signals {
    use super::*;

    const FATAL: [i32; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];
    static BOX_PID: AtomicI32 = AtomicI32::new(0);
    static RECEIVED: AtomicU32 = AtomicU32::new(0);

    extern "C" fn on_signal(sig: libc::c_int) {
        // Asked twice: the box's own handling is not our problem any more.
        if RECEIVED.fetch_add(1, Ordering::SeqCst) > 0 {
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(128 + sig) };
        }
        let pid = BOX_PID.load(Ordering::SeqCst);
        if pid > 0 {
            // SAFETY: kill is async-signal-safe; the pid is the box's init.
            unsafe { libc::kill(pid, sig) };
        }
    }

    fn mask() -> libc::sigset_t {
        // SAFETY: a zeroed sigset_t is a valid argument for sigemptyset, which fills it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in FATAL {
                libc::sigaddset(&mut set, s);
            }
            set
        }
    }

    pub fn block() {
        let set = mask();
        // SAFETY: `set` is a valid, initialised sigset_t.
        unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    }

    /// Install the forwarder for `pid` (0: swallow the first signal) and let pending ones in.
    pub fn forward_to(pid: i32) {
        BOX_PID.store(pid, Ordering::SeqCst);
        let set = mask();
        // SAFETY: `sa` is fully set up (zeroed, then handler and mask) before sigaction reads it;
        // the handler only does async-signal-safe work.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_mask = set;
            // No SA_RESTART: the supervision loop handles EINTR itself.
            sa.sa_flags = 0;
            for s in FATAL {
                libc::sigaction(s, &sa, std::ptr::null_mut());
            }
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_json_is_parsed() {
        let buf =
            b"{ \"child-pid\": 1234, \"cgroup-namespace\": 4026531835 }\n{ \"exit-code\": 159 }\n";
        assert_eq!(json_number(buf, "child-pid"), Some(1234));
        assert_eq!(json_number(buf, "exit-code"), Some(159));
        assert_eq!(json_number(b"{ \"child-pid\": 7", "exit-code"), None);
    }

    #[test]
    fn cap_policy_maps_to_bwrap_like_kern() {
        let p = CapPolicy::resolve(&[], &[]).unwrap();
        let args = p.bwrap_args();
        assert!(args
            .windows(2)
            .any(|w| w == ["--cap-drop", "CAP_SYS_ADMIN"]));
        assert!(!args.iter().any(|a| a == "CAP_NET_RAW"));

        let p = CapPolicy::resolve(&["NET_ADMIN".into()], &["cap_net_raw".into()]).unwrap();
        let args = p.bwrap_args();
        assert!(args.windows(2).any(|w| w == ["--cap-drop", "CAP_NET_RAW"]));
        assert!(!args.iter().any(|a| a == "CAP_NET_ADMIN"));

        let p = CapPolicy::resolve(&[], &["ALL".into()]).unwrap();
        assert!(p
            .bwrap_args()
            .ends_with(&["--cap-drop".into(), "ALL".into()]));

        let e = CapPolicy::resolve(&[], &["NET_RAW,SYS_ADMIN".into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sandbox: unknown capability 'NET_RAW,SYS_ADMIN' in --cap-drop (e.g. NET_ADMIN, SYS_PTRACE, or ALL)"
        );
    }
}
