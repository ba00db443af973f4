//! Starting kern with `clone(CLONE_VM | CLONE_VFORK)`, the way glibc's posix_spawn does, plus the
//! two things posix_spawn cannot do for us: `PR_SET_PDEATHSIG` and handing kern one extra fd.
//!
//! Why not `std::process::Command::pre_exec`: any pre_exec closure makes std fall back to a full
//! fork(), which copies Node's page tables; that alone measured ~3 ms per call against ~0.9 ms for
//! the vfork path. The child below shares our memory until it execs, so it makes raw,
//! async-signal-safe calls only: no allocation, no locks, nothing that touches shared state except
//! the parent thread's errno (the parent is suspended until the exec).
//!
//! Where the kernel has it (5.5+, and no seccomp filter refuses it) the clone is a `clone3` with
//! `CLONE_CLEAR_SIGHAND`: the kernel resets the child's signal handlers, which spares the child a
//! query of each of the 64 signals while the parent waits for its exec.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the child needs, prepared before the clone (everything allocated up front).
struct ChildArgs {
    path: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    /// The fd kern reports "started" on: [`STARTED_FD`] in the child.
    keep: RawFd,
    /// Where the child leaves errno if it fails before exec; shared memory, as in glibc's
    /// posix_spawn (no error pipe: the parent resumes only after exec or exit).
    err: *mut i32,
    parent: libc::pid_t,
    /// The kernel already reset the handlers (`CLONE_CLEAR_SIGHAND`): only SIGPIPE is left to do.
    cleared: bool,
}

pub struct Spawned {
    pub pid: libc::pid_t,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// The fd kern gets its started pipe on, whatever fd it has here: one number, so the environment
/// that says it is the same on every start.
pub const STARTED_FD: RawFd = 3;

/// `KERN_STARTED_FD`, as kern reads it.
pub const STARTED_FD_ENV: &CStr = c"KERN_STARTED_FD=3";

pub struct Spec<'a> {
    pub program: &'a OsStr,
    pub args: &'a [std::ffi::OsString],
    /// `NAME=value` entries added to (or replacing in) the inherited environment.
    pub env: &'a [&'static CStr],
    pub keep_fd: RawFd,
    /// kern's stdin; /dev/null when absent.
    pub stdin: Option<RawFd>,
}

fn cstr(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in argv or env"))
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(io::Error::from)
}

/// Blocks every signal on the calling thread and returns the mask it had. Each spawner thread
/// calls this once: a signal handler must never run in the vfork child, which shares the parent's
/// memory.
pub fn block_signals_on_this_thread() -> libc::sigset_t {
    // SAFETY: plain libc calls on local sigsets.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        old
    }
}

/// Every signal blocked on the calling thread until this is dropped (a start on a thread that
/// otherwise takes signals: see [`block_signals_on_this_thread`]).
pub struct SignalsBlocked(libc::sigset_t, std::marker::PhantomData<*const ()>);

impl SignalsBlocked {
    pub fn now() -> SignalsBlocked {
        SignalsBlocked(block_signals_on_this_thread(), std::marker::PhantomData)
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `now`, on the same thread (the guard is !Send).
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points at the parent's ChildArgs, alive while the parent is suspended.
    unsafe {
        let a = &*(arg as *const ChildArgs);
        // Signals handled in the parent must not run handlers here; ignored ones stay ignored
        // across exec except SIGPIPE, which Node ignores and kern expects at its default.
        let last = if a.cleared {
            default_disposition(libc::SIGPIPE);
            0
        } else {
            libc::SIGRTMAX()
        };
        for sig in 1..last {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let handled = old.sa_sigaction != libc::SIG_IGN && old.sa_sigaction != libc::SIG_DFL;
            if handled || sig == libc::SIGPIPE {
                default_disposition(sig);
            }
        }
        if libc::setpgid(0, 0) != 0
            || libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
        {
            fail(a.err);
        }
        // The parent may have died before PDEATHSIG was armed: then nobody would stop us.
        if libc::getppid() != a.parent {
            libc::_exit(127);
        }
        if libc::dup2(a.stdin, 0) < 0 || libc::dup2(a.stdout, 1) < 0 || libc::dup2(a.stderr, 2) < 0
        {
            fail(a.err);
        }
        // Our stdio fds are 0-2 by now, so fd 3 is free to take (dup2 clears its FD_CLOEXEC);
        // the pipe already there only needs its FD_CLOEXEC cleared.
        if a.keep != STARTED_FD {
            if libc::dup2(a.keep, STARTED_FD) < 0 {
                fail(a.err);
            }
        } else {
            let flags = libc::fcntl(a.keep, libc::F_GETFD);
            if flags < 0 || libc::fcntl(a.keep, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                fail(a.err);
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(a.path, a.argv, a.envp);
        fail(a.err)
    }
}

/// Sets `sig` to its default disposition.
///
/// # Safety
/// A raw sigaction: callable from the vfork child.
unsafe fn default_disposition(sig: libc::c_int) {
    // SAFETY: a zeroed sigaction with SIG_DFL is a valid argument.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
    }
}

/// Reports errno to the parent and exits without running any of the parent's exit handlers.
///
/// # Safety
/// Only for the vfork child before its exec: `err` is the suspended parent's `ChildArgs::err`.
unsafe fn fail(err: *mut i32) -> ! {
    // SAFETY: `err` is valid and written by nobody else while the parent is suspended; errno is
    // this thread's own.
    unsafe {
        std::ptr::write_volatile(err, (*libc::__errno_location()).max(1));
        libc::_exit(127)
    }
}

/// The clone stack and stdin of one spawner thread, reused by each of its spawns.
pub struct Launcher {
    stack: Vec<u8>,
    devnull: OwnedFd,
}

impl Launcher {
    pub fn new() -> io::Result<Launcher> {
        const STACK: usize = 64 * 1024;
        let devnull = rustix::fs::open(
            "/dev/null",
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        Ok(Launcher {
            stack: vec![0u8; STACK],
            devnull,
        })
    }
}

/// Starts `spec` with stdin on /dev/null (or `spec.stdin`) and stdout/stderr on fresh pipes. Call it from a thread
/// that blocks all signals and lives as long as the process (PDEATHSIG follows that thread).
pub fn spawn(launcher: &mut Launcher, spec: &Spec<'_>) -> io::Result<Spawned> {
    let path = cstr(spec.program)?;
    let mut argv_c = Vec::with_capacity(spec.args.len() + 1);
    argv_c.push(path.clone());
    for a in spec.args {
        argv_c.push(cstr(a)?);
    }
    let argv: Vec<*const libc::c_char> = argv_c
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp = environment(spec.env);
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let mut failed: i32 = 0;
    let args = ChildArgs {
        path: path.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        stdin: spec.stdin.unwrap_or(launcher.devnull.as_raw_fd()),
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        keep: spec.keep_fd,
        err: &mut failed,
        parent: std::process::id() as libc::pid_t,
        cleared: false,
    };
    let pid = clone_child(&mut launcher.stack, args)?;
    drop((out_w, err_w));
    // The child has exec'd, or exited after leaving errno in `failed`.
    // SAFETY: the child is done with our memory; volatile because it wrote behind the compiler.
    let errno = unsafe { std::ptr::read_volatile(&failed) };
    if errno != 0 {
        let mut status = 0;
        // SAFETY: reaping our own child that already exited.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(Spawned {
        pid,
        stdout: out_r,
        stderr: err_r,
    })
}

/// Whether `clone3` with `CLONE_CLEAR_SIGHAND` is still worth trying here: off after the first
/// refusal (an older kernel, or a container's seccomp filter answering ENOSYS or EPERM).
static CLONE3: AtomicBool = AtomicBool::new(cfg!(target_arch = "x86_64"));

/// Clones the vfork child on `stack` running [`child`] with `args`; returns once it has exec'd
/// or exited.
fn clone_child(stack: &mut [u8], mut args: ChildArgs) -> io::Result<libc::pid_t> {
    // The stack grows down from a 16-byte aligned top, as the ABI wants at the child's first call.
    let base = stack.as_mut_ptr() as usize;
    let top = (base + stack.len()) & !15;
    if CLONE3.load(Ordering::Relaxed) {
        args.cleared = true;
        // SAFETY: as for clone below.
        match unsafe { clone3_vfork(base, top - base, &args) } {
            Ok(pid) => return Ok(pid),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOSYS | libc::EINVAL | libc::EPERM)
                ) =>
            {
                CLONE3.store(false, Ordering::Relaxed);
                args.cleared = false;
            }
            Err(e) => return Err(e),
        }
    }
    // SAFETY: the stack outlives the child's use of it (CLONE_VFORK suspends us until the child
    // execs or exits); `child` never returns.
    let pid = unsafe {
        libc::clone(
            child,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &args as *const ChildArgs as *mut libc::c_void,
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// `struct clone_args` up to `tls` (CLONE_ARGS_SIZE_VER0).
#[cfg(target_arch = "x86_64")]
#[repr(C)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
}

/// `clone3(CLONE_VM | CLONE_VFORK | CLONE_CLEAR_SIGHAND)` running [`child`] on the stack at
/// `stack` (`size` bytes, its top 16-byte aligned). glibc has no clone3 wrapper, and a child on a
/// new stack cannot return into Rust code: it starts in the asm below, which calls [`child`] (which
/// execs or `_exit`s) and, should it ever return, exits the child.
///
/// # Safety
/// `stack..stack + size` is memory the child may use until the call returns, and `args` stays
/// valid until then (the parent is suspended until the child has exec'd or exited).
#[cfg(target_arch = "x86_64")]
unsafe fn clone3_vfork(stack: usize, size: usize, args: &ChildArgs) -> io::Result<libc::pid_t> {
    const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
    let ca = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_CLEAR_SIGHAND,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack as u64,
        stack_size: size as u64,
        tls: 0,
    };
    let entry: extern "C" fn(*mut libc::c_void) -> libc::c_int = child;
    let ret: isize;
    // SAFETY: the parent resumes after `syscall` with rax = pid or -errno (rcx and r11 clobbered).
    // The child resumes there too, with rax = 0, every other register as the parent had it and rsp
    // at the top of its own stack: it clears the frame pointer, calls `child(args)` (r12, r13 are
    // callee-saved inputs) and exits with what it returns; it never reaches Rust code again.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r12",
            "call r13",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") &ca as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") args as *const ChildArgs,
            in("r13") entry as usize,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if ret < 0 {
        return Err(io::Error::from_raw_os_error(-ret as i32));
    }
    Ok(ret as libc::pid_t)
}

/// Elsewhere the plain clone serves (`CLONE3` starts off).
#[cfg(not(target_arch = "x86_64"))]
unsafe fn clone3_vfork(_stack: usize, _size: usize, _args: &ChildArgs) -> io::Result<libc::pid_t> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// The child's environment: ours, as the pointers `environ` holds (no copy: glibc never frees a
/// string it put there, so each stays valid while the child execs), without the entries `add`
/// replaces, then `add`; null-terminated.
fn environment(add: &[&'static CStr]) -> Vec<*const libc::c_char> {
    unsafe extern "C" {
        static environ: *const *const libc::c_char;
    }
    let mut envp = Vec::with_capacity(64);
    let replaced = |entry: &[u8]| {
        add.iter().any(|a| {
            let a = a.to_bytes();
            let name = &a[..=a.iter().position(|&b| b == b'=').unwrap_or(a.len() - 1)];
            entry.starts_with(name)
        })
    };
    // SAFETY: `environ` is the process's environment, a null-terminated array of C strings; it is
    // read here as std::env reads it (a setenv racing with it could move the array, as it could
    // under std::env).
    unsafe {
        let mut p = environ;
        while !p.is_null() && !(*p).is_null() {
            if !replaced(CStr::from_ptr(*p).to_bytes()) {
                envp.push(*p);
            }
            p = p.add(1);
        }
    }
    envp.extend(add.iter().map(|a| a.as_ptr()));
    envp.push(std::ptr::null());
    envp
}

/// Waits for our child `pid` without blocking the runtime: a pidfd where the kernel has them
/// (5.3+), else a blocking-pool thread.
pub struct Reaper {
    pid: libc::pid_t,
    pidfd: Option<tokio::io::unix::AsyncFd<OwnedFd>>,
    /// Set once reaped; shared with a blocking-pool wait so a cancelled wait loses nothing.
    status: std::sync::Arc<std::sync::OnceLock<i32>>,
}

/// Reaps `pid` if it has exited, recording its status.
fn reap(pid: libc::pid_t, status: &std::sync::OnceLock<i32>) -> Option<i32> {
    if status.get().is_none() {
        let mut st = 0;
        // SAFETY: WNOHANG on our own child.
        if unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) } == pid {
            let _ = status.set(st);
        }
    }
    status.get().copied()
}

impl Reaper {
    pub fn new(pid: libc::pid_t) -> Reaper {
        let pidfd = rustix::process::Pid::from_raw(pid)
            .and_then(|p| {
                rustix::process::pidfd_open(p, rustix::process::PidfdFlags::NONBLOCK).ok()
            })
            // SAFETY: we own the pidfd and nothing else registers it.
            .and_then(|fd| unsafe { tokio::io::unix::AsyncFd::register(fd) }.ok());
        Reaper {
            pid,
            pidfd,
            status: Default::default(),
        }
    }

    /// Whether the child has exited (reaping it if so), without waiting.
    pub fn exited(&self) -> bool {
        reap(self.pid, &self.status).is_some()
    }

    /// The raw wait status once the child has exited.
    pub async fn wait(&mut self) -> i32 {
        if let Some(st) = reap(self.pid, &self.status) {
            return st;
        }
        if let Some(fd) = &self.pidfd {
            while let Ok(mut g) = fd.readable().await {
                g.clear_ready();
                if let Some(st) = reap(self.pid, &self.status) {
                    return st;
                }
            }
        }
        let (pid, status) = (self.pid, self.status.clone());
        let waited = crate::task::spawn_blocking(move || {
            let mut st = 0;
            // SAFETY: blocking wait on our own child.
            if unsafe { libc::waitpid(pid, &mut st, 0) } == pid {
                let _ = status.set(st);
            }
        });
        let _ = waited.await;
        self.status.get().copied().unwrap_or(0)
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if reap(self.pid, &self.status).is_none() {
            // Never leave a zombie: finish the wait in the background.
            let pid = self.pid;
            std::thread::spawn(move || {
                let mut st = 0;
                // SAFETY: blocking wait on our own child, on a thread of its own.
                unsafe { libc::waitpid(pid, &mut st, 0) };
            });
        }
    }
}

/// The shell-style exit code of a raw wait status: the code, or 128+N for death by signal N.
pub fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        -1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_fd_env_names_the_started_fd() {
        // Two literals that must agree: the child dups the pipe to STARTED_FD, kern reads the env.
        let env = STARTED_FD_ENV.to_str().unwrap();
        assert_eq!(env, format!("KERN_STARTED_FD={STARTED_FD}"));
    }

    /// What a started child says of its own signal state: SigIgn, SigBlk and SigCgt of its
    /// /proc status, read by the shell it execs.
    fn child_signals() -> String {
        block_signals_on_this_thread();
        let mut launcher = Launcher::new().unwrap();
        let (_keep_r, keep_w) = pipe().unwrap();
        let args = ["-c", "grep -E '^Sig(Ign|Blk|Cgt)' /proc/self/status"].map(Into::into);
        let spawned = spawn(
            &mut launcher,
            &Spec {
                program: OsStr::new("/bin/sh"),
                args: &args,
                env: &[],
                keep_fd: keep_w.as_raw_fd(),
                stdin: None,
            },
        )
        .unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(spawned.stdout), &mut out).unwrap();
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(spawned.pid, &mut status, 0) };
        assert_eq!(exit_code(status), 0, "{out}");
        out
    }

    #[test]
    fn a_child_starts_with_sigpipe_at_its_default_and_nothing_blocked_either_way() {
        // The test harness ignores SIGPIPE, as Node does; our threads block every signal.
        let mask = |out: &str, field: &str| {
            let line = out.lines().find(|l| l.starts_with(field)).unwrap();
            u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
        };
        let sigpipe = 1u64 << (libc::SIGPIPE - 1);
        let tried_clone3 = CLONE3.load(Ordering::Relaxed);
        for clone3 in [tried_clone3, false] {
            CLONE3.store(clone3, Ordering::Relaxed);
            let out = std::thread::spawn(child_signals).join().unwrap();
            assert_eq!(mask(&out, "SigIgn:") & sigpipe, 0, "{out}");
            assert_eq!(mask(&out, "SigBlk:"), 0, "{out}");
        }
        CLONE3.store(tried_clone3, Ordering::Relaxed);
    }

    #[test]
    fn the_environment_replaces_what_it_adds_and_ends_in_null() {
        let ours: Vec<&CStr> = environment(&[c"KERN_STARTED_FD=3", c"PATH=/nowhere"])
            .iter()
            .take_while(|p| !p.is_null())
            // SAFETY: every non-null entry is a C string from environ or from the list above.
            .map(|&p| unsafe { CStr::from_ptr(p) })
            .collect();
        assert_eq!(
            ours.iter()
                .filter(|e| e.to_bytes().starts_with(b"PATH="))
                .count(),
            1
        );
        assert_eq!(
            ours[ours.len() - 2..],
            [c"KERN_STARTED_FD=3", c"PATH=/nowhere"]
        );
        assert_eq!(environment(&[]).last(), Some(&std::ptr::null()));
    }
}
