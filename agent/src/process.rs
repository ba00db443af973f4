//! Processes the host starts: spawning (pipes or a pty), output pumps, stdin writers, the reaper,
//! and the `exit` frame that follows a process's last output.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::error::{self, Fail};
use crate::proto::{SpawnReq, StdinMode};
use crate::thread::spawn_thread;
use crate::writer::{Reply, Writer};
use crate::{files, pty, users};

/// How long output is still forwarded after the process was reaped, for a background grandchild
/// that holds the pipes open.
const DRAIN: Duration = Duration::from_millis(100);
/// Exited processes remembered (for `signal` → delivered:false, `write` → ERR_PROCESS_EXITED).
const KEEP_EXITED: usize = 1024;
const CHUNK: usize = 64 << 10;

#[derive(Clone, Copy)]
struct Status {
    code: i32,
    signal: Option<i32>,
}

#[derive(Default)]
struct PState {
    status: Option<Status>,
    /// Output pumps still reading.
    pumps: u32,
    /// The `exit` frame was queued: no more `out` for this pid.
    exit_sent: bool,
}

enum StdinOp {
    /// Bytes to write; answered (if it has an id) once written.
    Write(Option<u32>, Vec<u8>),
    /// Close the pipe (a pty gets ^D instead).
    Close(Option<u32>),
}

/// One process the host started.
pub struct Proc {
    pid: i32,
    argv: Vec<String>,
    cwd: String,
    pty: bool,
    /// The pty master, for `resize`; closed once the process has exited.
    master: Mutex<Option<OwnedFd>>,
    state: Mutex<PState>,
    cv: Condvar,
    /// The stdin writer's queue; `None` once stdin is closed (or never was open).
    stdin: Mutex<Option<mpsc::Sender<StdinOp>>>,
}

impl Proc {
    fn exited(&self) -> bool {
        self.state.lock().unwrap().status.is_some()
    }
}

#[derive(Default)]
struct Inner {
    procs: HashMap<i32, Arc<Proc>>,
    exited: VecDeque<Arc<Proc>>,
}

/// The processes this agent started. Its lock is held across fork+exec, so the reaper never
/// reaps a child before it is in the table.
#[derive(Default)]
pub struct Table {
    inner: Mutex<Inner>,
}

impl Table {
    fn get(&self, pid: i32) -> Result<Arc<Proc>, Fail> {
        let inner = self.inner.lock().unwrap();
        inner.procs.get(&pid).cloned().ok_or_else(|| {
            Fail::new(
                error::PROCESS_NOT_FOUND,
                format!("no process {pid} was started here"),
            )
        })
    }

    fn running(&self, pid: i32) -> Result<Arc<Proc>, Fail> {
        let proc = self.get(pid)?;
        if proc.exited() {
            return Err(Fail::new(
                error::PROCESS_EXITED,
                format!("process {pid} has exited"),
            ));
        }
        Ok(proc)
    }

    /// Queues `data` for the process's stdin; the writer thread answers once it is written.
    pub fn write(&self, id: u32, pid: i32, data: Vec<u8>) -> Result<(), Fail> {
        let proc = self.running(pid)?;
        let stdin = proc.stdin.lock().unwrap();
        match stdin
            .as_ref()
            .map(|tx| tx.send(StdinOp::Write(Some(id), data)))
        {
            Some(Ok(())) => Ok(()),
            _ => Err(Fail::new(
                error::STDIN_CLOSED,
                format!("the stdin of process {pid} is closed"),
            )),
        }
    }

    pub fn close_stdin(&self, writer: &Writer, id: u32, pid: i32) -> Result<(), Fail> {
        let proc = self.get(pid)?;
        if proc.exited() {
            // Its input is over either way: a program that read what it needed and exited
            // before the close arrived is not an error, as a second close is not.
            writer.ok(id, json!({}));
            return Ok(());
        }
        let mut stdin = proc.stdin.lock().unwrap();
        // A pty keeps its input open: ^D is what ends a terminal's input.
        let sender = if proc.pty {
            stdin.clone()
        } else {
            stdin.take()
        };
        match sender.map(|tx| tx.send(StdinOp::Close(Some(id)))) {
            Some(Ok(())) => {}
            _ => writer.ok(id, json!({})),
        }
        Ok(())
    }

    pub fn signal(&self, pid: i32, signal: i32) -> Result<Reply, Fail> {
        // The table lock keeps the reaper (and so pid reuse) out while the group is signalled.
        let inner = self.inner.lock().unwrap();
        let proc = inner.procs.get(&pid).ok_or_else(|| {
            Fail::new(
                error::PROCESS_NOT_FOUND,
                format!("no process {pid} was started here"),
            )
        })?;
        if proc.exited() {
            return Ok(Reply::with(json!({"delivered": false})));
        }
        // SAFETY: kill has no memory effects; -pid is the process group the child made with setsid.
        let rc = unsafe { libc::kill(-pid, signal) };
        let err = io::Error::last_os_error();
        match (rc, err.raw_os_error()) {
            (0, _) => Ok(Reply::with(json!({"delivered": true}))),
            (_, Some(libc::ESRCH)) => Ok(Reply::with(json!({"delivered": false}))),
            (_, Some(libc::EINVAL)) => {
                Err(Fail::invalid(format!("{signal} is not a signal number")))
            }
            _ => Err(Fail::io(
                &err,
                &format!("signal {signal} to process group {pid}"),
            )),
        }
    }

    pub fn resize(&self, pid: i32, cols: u16, rows: u16) -> Result<Reply, Fail> {
        if cols == 0 || rows == 0 {
            return Err(Fail::invalid("cols and rows must be positive"));
        }
        let proc = self.get(pid)?;
        if !proc.pty {
            return Err(Fail::invalid(format!("process {pid} has no terminal")));
        }
        let master = proc.master.lock().unwrap();
        let master = master
            .as_ref()
            .ok_or_else(|| Fail::new(error::PROCESS_EXITED, format!("process {pid} has exited")))?;
        pty::set_size(master, cols, rows).map_err(|e| Fail::io(&e, "resize"))?;
        Ok(Reply::default())
    }

    pub fn ps(&self) -> Reply {
        let inner = self.inner.lock().unwrap();
        let mut procs: Vec<&Arc<Proc>> = inner.procs.values().filter(|p| !p.exited()).collect();
        procs.sort_by_key(|p| p.pid);
        let list: Vec<Value> = procs
            .iter()
            .map(|p| {
                let argv: Vec<&str> = p.argv.iter().map(|a| shorten(a)).collect();
                json!({"pid": p.pid, "argv": argv, "cwd": p.cwd, "pty": p.pty})
            })
            .collect();
        Reply::with(json!({ "procs": list }))
    }

    /// SIGKILLs the process group of every process still running.
    pub fn kill_all(&self) {
        let inner = self.inner.lock().unwrap();
        for proc in inner.procs.values().filter(|p| !p.exited()) {
            // SAFETY: kill has no memory effects; the table lock keeps the pid from being reaped
            // and reused meanwhile.
            unsafe { libc::kill(-proc.pid, libc::SIGKILL) };
        }
    }

    /// Reaps every child that has ended (orphans included) and records the status of ours.
    fn reap_all(&self) {
        let mut inner = self.inner.lock().unwrap();
        loop {
            let mut raw = 0;
            // SAFETY: waitpid writes only the status int we own.
            let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            let Some(proc) = inner.procs.get(&pid).cloned() else {
                continue;
            };
            let status = if libc::WIFSIGNALED(raw) {
                let sig = libc::WTERMSIG(raw);
                Status {
                    code: 128 + sig,
                    signal: Some(sig),
                }
            } else {
                Status {
                    code: libc::WEXITSTATUS(raw),
                    signal: None,
                }
            };
            proc.state.lock().unwrap().status = Some(status);
            proc.cv.notify_all();
            inner.exited.push_back(proc);
            while inner.exited.len() > KEEP_EXITED {
                let old = inner.exited.pop_front().expect("longer than the limit");
                if inner
                    .procs
                    .get(&old.pid)
                    .is_some_and(|p| Arc::ptr_eq(p, &old))
                {
                    inner.procs.remove(&old.pid);
                }
            }
        }
    }
}

/// The longest argv string `ps` lists whole: a few processes started with a large inline script
/// (`python3 -c ...`) must not push the answer over the header limit.
const PS_ARG_MAX: usize = 4096;

/// `arg`, cut at [`PS_ARG_MAX`] bytes (on a character boundary).
fn shorten(arg: &str) -> &str {
    if arg.len() <= PS_ARG_MAX {
        return arg;
    }
    let mut end = PS_ARG_MAX;
    while !arg.is_char_boundary(end) {
        end -= 1;
    }
    &arg[..end]
}

/// Starts the reaper thread. SIGCHLD is blocked in every thread (see main), so it is waited for
/// here; the timeout is a safety net, not the mechanism.
pub fn start_reaper(table: Arc<Table>) {
    spawn_thread("reaper", move || loop {
        // SAFETY: the sigset is initialized by sigemptyset before use; sigtimedwait only reads it
        // and the timespec.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            let timeout = libc::timespec {
                tv_sec: 1,
                tv_nsec: 0,
            };
            libc::sigtimedwait(&set, std::ptr::null_mut(), &timeout);
        }
        table.reap_all();
    });
}

/// The fds the parent keeps from a spawn.
struct Ends {
    stdin: Option<File>,
    outputs: Vec<(u8, File)>,
    master: Option<OwnedFd>,
}

/// Starts a process for request `id` and answers it once the child has exec'd (or failed); its
/// output and exit frames follow the answer.
/// A relative `cwd` is taken from `base`, the agent's working directory.
pub fn spawn(
    procs: &Table,
    writer: &Arc<Writer>,
    base: &Path,
    id: u32,
    req: SpawnReq,
    payload: Vec<u8>,
) -> Result<(), Fail> {
    let Some(program) = req.argv.first() else {
        return Err(Fail::invalid("argv must not be empty"));
    };
    let cwd = match req.cwd.as_deref() {
        Some(dir) => files::absolute(base, dir)?,
        None => base.to_path_buf(),
    };
    match std::fs::metadata(&cwd) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(Fail::new(
                error::NOT_A_DIRECTORY,
                format!("cwd {}: not a directory", cwd.display()),
            ))
        }
        Err(e) => return Err(Fail::io(&e, &format!("cwd {}", cwd.display()))),
    }
    let user = req.user.as_deref().map(users::lookup).transpose()?;
    let mut cmd = Command::new(program);
    cmd.args(&req.argv[1..]).current_dir(&cwd);
    if req.pty.is_some() && !req.env.contains_key("TERM") {
        cmd.env("TERM", "xterm-256color");
    }
    if let Some(user) = &user {
        cmd.env("HOME", &user.home)
            .env("USER", &user.name)
            .env("LOGNAME", &user.name);
    }
    cmd.envs(&req.env);
    let mut ends = attach_stdio(&mut cmd, &req)?;
    let is_pty = req.pty.is_some();
    let ids = user.map(|u| (u.uid, u.gid, u.groups));
    // SAFETY: the closure runs in the forked child before exec and only makes async-signal-safe
    // system calls (setsid, ioctl, setgroups, setgid, setuid) on data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || child_setup(is_pty, ids.as_ref()));
    }
    let proc = {
        let mut inner = procs.inner.lock().unwrap();
        let child = cmd.spawn().map_err(|e| Fail::io(&e, program))?;
        let pid = child.id() as i32;
        let proc = Arc::new(Proc {
            pid,
            argv: req.argv.clone(),
            cwd: cwd.to_string_lossy().into_owned(),
            pty: ends.master.is_some(),
            master: Mutex::new(ends.master.take()),
            state: Mutex::new(PState::default()),
            cv: Condvar::new(),
            stdin: Mutex::new(None),
        });
        inner.procs.insert(pid, proc.clone());
        proc
    };
    // The parent's copies of the child's ends (pipe write sides, the pty slave) close here.
    drop(cmd);
    writer.ok(id, json!({"pid": proc.pid}));
    start_threads(&proc, writer, ends, req.stdin, payload);
    Ok(())
}

/// Wires stdin/stdout/stderr into `cmd`: a pty slave for all three, or pipes and /dev/null.
fn attach_stdio(cmd: &mut Command, req: &SpawnReq) -> Result<Ends, Fail> {
    if let Some(size) = req.pty {
        if size.cols == 0 || size.rows == 0 {
            return Err(Fail::invalid("pty cols and rows must be positive"));
        }
        let (master, slave) =
            pty::open(size.cols, size.rows).map_err(|e| Fail::io(&e, "open a pty: /dev/ptmx"))?;
        let dup = |fd: &OwnedFd| fd.try_clone().map_err(|e| Fail::io(&e, "dup the pty"));
        cmd.stdin(Stdio::from(dup(&slave)?))
            .stdout(Stdio::from(dup(&slave)?))
            .stderr(Stdio::from(slave));
        let input = (req.stdin != StdinMode::None)
            .then(|| dup(&master))
            .transpose()?;
        let output = File::from(dup(&master)?);
        return Ok(Ends {
            stdin: input.map(File::from),
            outputs: vec![(1, output)],
            master: Some(master),
        });
    }
    let (stdin, input) = match req.stdin {
        StdinMode::None => (Stdio::null(), None),
        _ => {
            let (r, w) = pipe()?;
            (Stdio::from(r), Some(w))
        }
    };
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    cmd.stdin(stdin)
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::from(err_w));
    Ok(Ends {
        stdin: input,
        outputs: vec![(1, out_r), (2, err_r)],
        master: None,
    })
}

/// A CLOEXEC pipe: (read end, write end).
fn pipe() -> Result<(File, File), Fail> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(Fail::io(&io::Error::last_os_error(), "pipe"));
    }
    // SAFETY: both fds were just created and are owned by nothing else.
    unsafe {
        use std::os::fd::FromRawFd;
        Ok((File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])))
    }
}

/// In the child between fork and exec: its own session (so the host signals the whole group),
/// the pty as controlling terminal, and the requested user where the box can map it.
fn child_setup(pty: bool, ids: Option<&(u32, u32, Vec<u32>)>) -> io::Result<()> {
    // SAFETY: plain system calls on this (child) process; the group list is a live slice.
    unsafe {
        if libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
        if pty && libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some((uid, gid, groups)) = ids {
            // A box without a uid range cannot map the user: it stays root with the user's
            // HOME/USER/LOGNAME, so these failures are not fatal.
            libc::setgroups(groups.len() as _, groups.as_ptr());
            libc::setgid(*gid);
            libc::setuid(*uid);
        }
    }
    Ok(())
}

fn start_threads(
    proc: &Arc<Proc>,
    writer: &Arc<Writer>,
    ends: Ends,
    mode: StdinMode,
    data: Vec<u8>,
) {
    proc.state.lock().unwrap().pumps = ends.outputs.len() as u32;
    for (fd, file) in ends.outputs {
        let (p, w) = (proc.clone(), writer.clone());
        spawn_thread("pump", move || pump(file, fd, &p, &w));
    }
    if let Some(file) = ends.stdin {
        let (tx, rx) = mpsc::channel();
        if mode == StdinMode::Data {
            // Sent before anything else can be queued; the sender is then dropped (stdin is
            // closed for `write`).
            let _ = tx.send(StdinOp::Write(None, data));
            let _ = tx.send(StdinOp::Close(None));
        } else {
            *proc.stdin.lock().unwrap() = Some(tx);
        }
        let (p, w) = (proc.clone(), writer.clone());
        spawn_thread("stdin", move || feed_stdin(file, rx, &p, &w));
    }
    let (p, w) = (proc.clone(), writer.clone());
    spawn_thread("exit", move || send_exit(&p, &w));
}

/// Forwards one output fd as `out` frames until EOF or the process's `exit` was sent.
fn pump(mut src: File, fd: u8, proc: &Proc, writer: &Writer) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // EIO: a pty whose slave side is closed everywhere.
            Err(_) => break,
        };
        // Wait for room without holding the state lock, then queue under it, so `exit` (queued
        // under the same lock) can never overtake this chunk.
        writer.wait_room();
        let state = proc.state.lock().unwrap();
        if state.exit_sent {
            return;
        }
        writer.push(
            json!({"t": "out", "pid": proc.pid, "fd": fd}),
            buf[..n].to_vec(),
        );
    }
    proc.state.lock().unwrap().pumps -= 1;
    proc.cv.notify_all();
}

/// Writes queued stdin data in order, answering each write once done.
fn feed_stdin(mut dst: File, rx: mpsc::Receiver<StdinOp>, proc: &Proc, writer: &Writer) {
    for op in rx {
        match op {
            StdinOp::Write(id, data) => {
                let result = dst
                    .write_all(&data)
                    .map(|()| Reply::default())
                    .map_err(|_| {
                        if proc.exited() {
                            Fail::new(
                                error::PROCESS_EXITED,
                                format!("process {} has exited", proc.pid),
                            )
                        } else {
                            Fail::new(
                                error::STDIN_CLOSED,
                                format!("process {} closed its stdin", proc.pid),
                            )
                        }
                    });
                if let Some(id) = id {
                    writer.answer(id, result);
                }
            }
            StdinOp::Close(id) if proc.pty => {
                let _ = dst.write_all(&[0x04]);
                if let Some(id) = id {
                    writer.ok(id, json!({}));
                }
            }
            StdinOp::Close(id) => {
                drop(dst);
                if let Some(id) = id {
                    writer.ok(id, json!({}));
                }
                return;
            }
        }
    }
}

/// Waits for the reap, drains output for at most [`DRAIN`], then queues `exit`.
fn send_exit(proc: &Proc, writer: &Writer) {
    let mut state = proc.state.lock().unwrap();
    while state.status.is_none() {
        state = proc.cv.wait(state).unwrap();
    }
    let deadline = Instant::now() + DRAIN;
    while state.pumps > 0 {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        state = proc.cv.wait_timeout(state, deadline - now).unwrap().0;
    }
    state.exit_sent = true;
    let status = state.status.expect("waited for it");
    writer.push(
        json!({"t": "exit", "pid": proc.pid, "code": status.code, "signal": status.signal}),
        Vec::new(),
    );
    drop(state);
    // Ends the stdin writer once its queue is done, and frees the pty: exited processes are
    // remembered for a while, their fds are not.
    proc.stdin.lock().unwrap().take();
    proc.master.lock().unwrap().take();
}
