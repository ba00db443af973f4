//! The box side of egress: a TCP listener on the box's loopback whose connections are relayed, byte
//! for byte, to the host's egress proxy, a unix socket bound into the box. Programs in the box reach
//! it through `HTTP_PROXY`/`HTTPS_PROXY` (the host sets them); the box itself has no other route.
//!
//! Two ways in:
//! * `kern-sandbox-agent egress --sock S --port N [--ca C --bundle B] -- argv...` (one-shot and
//!   kernel boxes): binds the listener and writes the CA bundle first, so the workload never races
//!   them, forks the relay (its own session, stdio on /dev/null, signals that a shell sends by
//!   habit ignored), then execs `argv` in place: the workload keeps PID 1, its exit code and its
//!   signals exactly as without egress. The relay dies with the box's pid namespace.
//! * a machine's agent given `--egress-*` flags runs the same relay on a thread of its own.
//!
//! The relay is one thread around `poll`: at most [`MAX_CONNS`] connections (more wait in the
//! listen backlog), each with two fixed [`BUF`] buffers, so its memory is bounded whatever the box
//! or the proxy do.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// Connections relayed at once; later ones wait in the listen backlog until one ends.
const MAX_CONNS: usize = 256;
/// Bytes buffered per direction per connection.
const BUF: usize = 64 << 10;

/// The image's own CA bundle, the first of these that exists (Debian/Ubuntu/Alpine, Fedora/RHEL,
/// openSUSE, Alpine's and OpenSSL's default file).
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/ssl/cert.pem",
    "/usr/lib/ssl/cert.pem",
];

/// What the relay needs: the proxy's socket, the loopback port, and optionally the proxy's CA
/// certificate and where the combined bundle goes.
#[derive(Debug, Default, PartialEq)]
pub struct Spec {
    pub sock: PathBuf,
    pub port: u16,
    pub ca: Option<PathBuf>,
    pub bundle: Option<PathBuf>,
}

impl Spec {
    /// Takes one `--sock`/`--port`/`--ca`/`--bundle` flag (with `prefix`, e.g. `--egress-`) and
    /// its value from `args`; false when `flag` is not one of them.
    pub fn take_flag(
        &mut self,
        prefix: &str,
        flag: &str,
        args: &mut impl Iterator<Item = OsString>,
    ) -> Result<bool, String> {
        let Some(name) = flag.strip_prefix(prefix) else {
            return Ok(false);
        };
        if !["sock", "port", "ca", "bundle"].contains(&name) {
            return Ok(false);
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match name {
            "sock" => self.sock = value.into(),
            "port" => {
                self.port = value
                    .to_str()
                    .and_then(|v| v.parse().ok())
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("{flag}: a port 1-65535"))?
            }
            "ca" => self.ca = Some(value.into()),
            _ => self.bundle = Some(value.into()),
        }
        Ok(true)
    }

    fn check(&self) -> Result<(), String> {
        if self.sock.as_os_str().is_empty() || self.port == 0 {
            return Err("egress needs a socket and a port".into());
        }
        if self.ca.is_some() != self.bundle.is_some() {
            return Err("egress takes a CA and a bundle path together".into());
        }
        Ok(())
    }

    /// Binds the listener and writes the bundle: everything a workload could race.
    pub fn prepare(&self) -> Result<TcpListener, String> {
        self.check()?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, self.port))
            .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {e}", self.port))?;
        if let (Some(ca), Some(bundle)) = (&self.ca, &self.bundle) {
            write_bundle(ca, bundle)?;
        }
        Ok(listener)
    }
}

/// The image's CA bundle followed by the proxy's CA, in a file created fresh (never through
/// something already at that path).
pub fn write_bundle(ca: &Path, bundle: &Path) -> Result<(), String> {
    let ours = std::fs::read(ca).map_err(|e| format!("cannot read {}: {e}", ca.display()))?;
    let mut body = SYSTEM_BUNDLES
        .iter()
        .find_map(|p| std::fs::read(p).ok())
        .unwrap_or_default();
    if !body.is_empty() && !body.ends_with(b"\n") {
        body.push(b'\n');
    }
    body.extend_from_slice(&ours);
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(bundle)
        .and_then(|mut f| f.write_all(&body))
        .map_err(|e| format!("cannot write the CA bundle {}: {e}", bundle.display()))
}

/// `kern-sandbox-agent egress ... -- argv`: never returns.
pub fn relay_and_exec(args: impl Iterator<Item = OsString>) -> ! {
    let fail = |msg: String| -> ! {
        eprintln!("kern-sandbox-agent: egress: {msg}");
        std::process::exit(125)
    };
    let mut args = args;
    let mut spec = Spec::default();
    let mut argv = Vec::new();
    while let Some(a) = args.next() {
        if a == "--" {
            argv.extend(args.by_ref());
            break;
        }
        match a.to_str() {
            Some(flag) => match spec.take_flag("--", flag, &mut args) {
                Ok(true) => {}
                Ok(false) => fail(format!("unknown flag {flag}")),
                Err(e) => fail(e),
            },
            None => fail("unknown flag".into()),
        }
    }
    if argv.is_empty() {
        fail("no command after --".into());
    }
    let listener = spec.prepare().unwrap_or_else(|e| fail(e));
    let me = std::process::id() as libc::pid_t;
    // SAFETY: fork in a process that has no other thread yet; the child only calls
    // async-signal-safe functions until it runs the relay, which needs no lock held by a thread
    // that did not survive the fork (there was none).
    match unsafe { libc::fork() } {
        -1 => fail(format!("fork: {}", io::Error::last_os_error())),
        0 => {
            detach(listener.as_raw_fd(), me);
            serve(listener, &spec.sock)
        }
        _ => {}
    }
    drop(listener);
    let err = std::process::Command::new(&argv[0]).args(&argv[1..]).exec();
    let name = argv[0].to_string_lossy();
    eprintln!("kern-sandbox-agent: cannot start '{name}' in box: {err}");
    let code = if err.kind() == io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    std::process::exit(code)
}

/// The forked relay lets go of the workload: its own session (a kill of the workload's group
/// misses it), stdio on /dev/null (it must not hold the box's output pipes open), no other
/// inherited fd, and the signals a shell sends around by habit ignored. It still ends with the
/// workload: SIGKILL when its parent (the workload, after the exec) exits, as the end of the
/// box's pid namespace would do anyway.
fn detach(keep: RawFd, parent: libc::pid_t) {
    // SAFETY: plain syscalls on fds, pids and signal numbers; nothing here allocates.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != parent {
            libc::_exit(0);
        }
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
        for fd in 3..1024 {
            if fd != keep {
                libc::close(fd);
            }
        }
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
}

/// One direction of a connection: what was read and not yet written.
struct Pipe {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The source reached EOF.
    eof: bool,
    /// The destination's write half was shut (after the last byte went out).
    shut: bool,
}

impl Pipe {
    fn new() -> Pipe {
        Pipe {
            buf: vec![0; BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            shut: false,
        }
    }

    fn wants_read(&self) -> bool {
        !self.eof && self.end < self.buf.len()
    }

    fn has_data(&self) -> bool {
        self.start < self.end
    }

    /// Moves what it can without blocking; Err ends the connection.
    fn pump(&mut self, from: RawFd, to: RawFd) -> io::Result<()> {
        if self.wants_read() {
            match read_fd(from, &mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(e),
            }
        }
        while self.has_data() {
            match send_fd(to, &self.buf[self.start..self.end]) {
                Ok(n) => self.start += n,
                Err(e) if would_block(&e) => break,
                Err(e) => return Err(e),
            }
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.eof && !self.has_data() && !self.shut {
            self.shut = true;
            // SAFETY: shutdown on a socket fd this connection owns.
            unsafe { libc::shutdown(to, libc::SHUT_WR) };
        }
        Ok(())
    }
}

struct Conn {
    tcp: TcpStream,
    unix: UnixStream,
    /// Box program to proxy.
    up: Pipe,
    /// Proxy to box program.
    down: Pipe,
}

impl Conn {
    fn open(tcp: TcpStream, sock: &Path) -> io::Result<Conn> {
        tcp.set_nonblocking(true)?;
        let _ = tcp.set_nodelay(true);
        let unix = UnixStream::connect(sock)?;
        unix.set_nonblocking(true)?;
        Ok(Conn {
            tcp,
            unix,
            up: Pipe::new(),
            down: Pipe::new(),
        })
    }

    fn done(&self) -> bool {
        self.up.shut && self.down.shut
    }

    /// Poll interest of the TCP side, then of the unix side.
    fn events(&self) -> (i16, i16) {
        let side = |read: &Pipe, write: &Pipe| {
            let mut ev = 0;
            if read.wants_read() {
                ev |= libc::POLLIN;
            }
            if write.has_data() {
                ev |= libc::POLLOUT;
            }
            ev
        };
        (side(&self.up, &self.down), side(&self.down, &self.up))
    }

    fn pump(&mut self) -> io::Result<()> {
        let (t, u) = (self.tcp.as_raw_fd(), self.unix.as_raw_fd());
        self.up.pump(t, u)?;
        self.down.pump(u, t)
    }
}

/// Relays every connection the listener accepts to the proxy socket, for as long as the process
/// lives.
pub fn serve(listener: TcpListener, sock: &Path) -> ! {
    if let Err(e) = listener.set_nonblocking(true) {
        eprintln!("kern-sandbox-agent: egress: {e}");
        std::process::exit(1);
    }
    let mut conns: Vec<Conn> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    loop {
        fds.clear();
        let room = conns.len() < MAX_CONNS;
        fds.push(pollfd(
            listener.as_raw_fd(),
            if room { libc::POLLIN } else { 0 },
        ));
        // A side with nothing to do is left out (fd -1): poll reports a hangup whatever the
        // interest, and a side that can neither read nor write would wake the loop for nothing.
        for c in &conns {
            let (t, u) = c.events();
            fds.push(pollfd(if t == 0 { -1 } else { c.tcp.as_raw_fd() }, t));
            fds.push(pollfd(if u == 0 { -1 } else { c.unix.as_raw_fd() }, u));
        }
        // SAFETY: `fds` is a live, initialised vector of exactly `fds.len()` pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            continue; // EINTR
        }
        let mut i = 0;
        conns.retain_mut(|c| {
            let (t, u) = (fds[1 + 2 * i].revents, fds[2 + 2 * i].revents);
            i += 1;
            if t == 0 && u == 0 {
                return true;
            }
            c.pump().is_ok() && !c.done()
        });
        if room && fds[0].revents != 0 {
            accept_some(&listener, sock, &mut conns);
        }
    }
}

/// Accepts what is waiting, up to the connection cap. A connection the proxy cannot take (it is
/// gone) is closed at once: the program sees its connection end, not a hang.
fn accept_some(listener: &TcpListener, sock: &Path, conns: &mut Vec<Conn>) {
    while conns.len() < MAX_CONNS {
        match listener.accept() {
            Ok((tcp, _)) => {
                if let Ok(mut c) = Conn::open(tcp, sock) {
                    // Data that arrived with the connection is moved now.
                    if c.pump().is_ok() && !c.done() {
                        conns.push(c);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

fn pollfd(fd: RawFd, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

fn read_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live, writable slice of `buf.len()` bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// A send that never raises SIGPIPE (the forked relay keeps the default disposition).
fn send_fd(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live slice of `buf.len()` bytes.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
