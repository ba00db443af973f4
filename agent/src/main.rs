//! kern-sandbox-agent: PID 1 of a kern-sandbox machine's box.
//!
//! `kern-sandbox-agent <socket>` connects to the host's unix socket and serves it (see [`proto`])
//! until the connection closes; then it kills every process group it started and exits, which
//! ends the box. It reaps every child, orphans included, and shrugs off the signals a shell in the
//! box could send it. With `--egress-sock S --egress-port N [--egress-ca C --egress-bundle B]` it
//! also relays the box's loopback port N to the host's egress proxy (see [`egress`]).
//!
//! `kern-sandbox-agent egress --sock S --port N [--ca C --bundle B] -- argv...` is the same relay
//! for a box whose workload is `argv` (one-shot calls, kernels): it starts the relay, then execs
//! `argv` in its own place.

mod conn;
mod egress;
mod error;
mod files;
mod metrics;
mod ports;
mod process;
mod proto;
mod pty;
mod snapshot;
mod thread;
mod users;
mod watch;
mod writer;
mod xattrs;

use std::os::unix::net::UnixStream;

extern "C" fn ignore_signal(_: libc::c_int) {}

/// Signal setup, before any thread exists (threads inherit the mask).
///
/// SIGTERM, SIGINT and SIGHUP get a do-nothing handler rather than SIG_IGN: a handled signal is
/// survived (a stray `kill -1` or `kill 1` in the box), and unlike SIG_IGN a handler is reset by
/// exec, so children start with the default. SIGCHLD is blocked in every thread and waited for by
/// the reaper; std's spawn clears the mask in the child.
fn setup_signals() {
    // SAFETY: sigaction/sigprocmask with structs initialized here; the handler is async-signal-safe
    // (it does nothing).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ignore_signal as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// What the agent inherited and must not hand on to the processes it starts: fds its parent
/// left open (everything the agent opens itself is CLOEXEC) and ignored signals (SIG_IGN
/// survives exec). SIGPIPE stays ignored in the agent (a closed socket must be an error, not
/// death); std resets it in every child.
fn scrub_inheritance() {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags on this process's fds.
    let marked = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } == 0;
    if !marked {
        let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        for fd in fds.into_iter().filter(|fd| *fd > 2) {
            // SAFETY: F_SETFD on an fd number; a stale one (the read_dir's own) just fails.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
    for sig in 1..=64 {
        if [libc::SIGKILL, libc::SIGSTOP, libc::SIGPIPE].contains(&sig) {
            continue;
        }
        // SAFETY: sigaction reads and writes the struct we own; libc-reserved signals fail with
        // EINVAL and are left alone.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
}

const USAGE: &str = "usage: kern-sandbox-agent <socket path> [--egress-sock S --egress-port N \
                     [--egress-ca C --egress-bundle B]]\n       \
                     kern-sandbox-agent egress --sock S --port N [--ca C --bundle B] -- argv...";

/// The machine agent's arguments: its socket, and the egress relay it runs, if any.
fn machine_args(
    mut args: impl Iterator<Item = std::ffi::OsString>,
) -> (std::ffi::OsString, Option<egress::Spec>) {
    let usage = |why: &str| -> ! {
        eprintln!("kern-sandbox-agent: {why}\n{USAGE}");
        std::process::exit(2)
    };
    let Some(socket) = args.next() else {
        usage("no socket path")
    };
    let mut spec = egress::Spec::default();
    let mut any = false;
    while let Some(flag) = args.next() {
        let flag = flag.to_string_lossy().into_owned();
        match spec.take_flag("--egress-", &flag, &mut args) {
            Ok(true) => any = true,
            Ok(false) => usage(&format!("unknown argument {flag}")),
            Err(e) => usage(&e),
        }
    }
    (socket, any.then_some(spec))
}

fn main() {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|a| a == "egress") {
        egress::relay_and_exec(args.skip(1));
    }
    let (socket, egress) = machine_args(args);
    // Before anything runs in the box: the port is bound and the bundle written by the time any
    // process could look for them.
    let relay = egress.map(|spec| match spec.prepare() {
        Ok(listener) => (listener, spec.sock),
        Err(e) => {
            eprintln!("kern-sandbox-agent: egress: {e}");
            std::process::exit(1);
        }
    });
    scrub_inheritance();
    setup_signals();
    // As PID 1 the agent inherits orphans anyway; elsewhere (the host tests) this makes it the
    // one that reaps them, the same as in a box.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if let Some((listener, sock)) = relay {
        thread::spawn_thread("egress", move || egress::serve(listener, &sock));
    }
    let stream = match UnixStream::connect(&socket) {
        Ok(stream) => stream,
        Err(e) => {
            eprintln!(
                "kern-sandbox-agent: connect {}: {e}",
                socket.to_string_lossy()
            );
            std::process::exit(1);
        }
    };
    grow_buffers(&stream);
    std::process::exit(conn::serve(stream));
}

/// A large send buffer: a file read or an output burst reaches the host in one or two writes
/// instead of a wake-up per 200 KiB. Best effort; the default works, only slower.
fn grow_buffers(stream: &UnixStream) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 4 << 20;
    for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // SAFETY: setsockopt on a socket we own, with a pointer to a live c_int and its size.
        unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
}
