//! Launching kern, owning its deadline, and tearing a box down so that nothing survives.
//!
//! kern is forked from a few dedicated threads that live as long as the process, or from the
//! process's main thread: the child gets `PR_SET_PDEATHSIG`, which fires when the *thread* that
//! forked it exits, so forking from a tokio worker or blocking-pool thread (retired when idle), or
//! from a worker_thread's JS thread, would kill a healthy box. The child runs in its own process
//! group so one `killpg` reaches kern and everything it did not move elsewhere.

use std::cell::RefCell;
use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::sync::{oneshot, watch};

use crate::errors::{Error, Result};
use crate::lifecycle::boxes;
use crate::lifecycle::cancel::{Cancel, StopReason};
use crate::lifecycle::fault::Started;
use crate::lifecycle::launch::{self, Reaper, Spawned};
use crate::lifecycle::workload;
use crate::output::{pump, Captured, ChunkFn, Drain};

// The teardown budgets add up to about 2 s, so a timed-out call resolves within 2.5 s of its
// deadline even when kern ignores signals (kern itself waits 10 s on a TERM-ignoring workload).
/// How long kern gets to exit after `kern stop`, and again after its box is killed.
const GRACE: Duration = Duration::from_millis(300);
/// After the kill, how long we wait for kern to be reaped before resolving regardless.
const REAP_BUDGET: Duration = Duration::from_millis(300);
/// After kern is reaped, how long its `kern stop` may take to clean up after it.
const STOP_FINISH: Duration = Duration::from_millis(200);
/// Each `kern ps` / second `kern stop` while confirming that nothing survived.
const CONFIRM_BUDGET: Duration = Duration::from_millis(200);
/// After a teardown, how long the pipes may stay open before we stop reading them.
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(300);
/// After kern exits, how long its pipes may stay open (held by a stray process) before we stop
/// reading them.
const DRAIN_BUDGET: Duration = Duration::from_millis(2000);
/// After a ready box was killed, how long its discard waits for kern to be reaped.
const DISCARD_REAP: Duration = Duration::from_secs(2);
/// After a call resolved on its workload's exit, how long kern's own teardown may take before the
/// box is torn down as a timed-out one is.
const TEARDOWN_BUDGET: Duration = Duration::from_secs(10);

pub struct Launch<'a> {
    pub kern: &'a Path,
    pub name: &'a str,
    pub args: Vec<OsString>,
    pub enforce_limits: bool,
    /// What watches the box through the call.
    pub watch: Watch<'a>,
    /// The napi env this call belongs to, for exit-time cleanup.
    pub env_id: usize,
}

pub struct BoxRun {
    pub exit_code: i32,
    pub started: Started,
    pub stdout: Captured,
    pub stderr: Captured,
    pub timed_out: bool,
    pub stopped: Option<StopReason>,
    pub survivors: Option<String>,
    pub duration: Duration,
    /// kern's teardown, still running when the workload's end resolved the call early; whoever
    /// owns the box's session waits for it before the session is gone.
    pub teardown: Option<tokio::task::JoinHandle<()>>,
}

struct SpawnRequest {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<&'static std::ffi::CStr>,
    keep_fd: OwnedFd,
    stdin: Option<OwnedFd>,
    /// Done on the spawner thread just before kern starts; kern does not start when it fails.
    before: Option<Before>,
    reply: oneshot::Sender<Result<Spawned>>,
}

/// Work that must be done before a box's kern starts (a call's helper files written), given to
/// the spawner thread with the start so the call needs no other thread for it.
pub type Before = Box<dyn FnOnce() -> Result<()> + Send>;

/// The forking threads' queue: started once, never exit (the queue lives in a static). More than
/// one thread: a vfork parent waits until its child has exec'd, so one thread made every
/// concurrent call queue behind each exec (measured with 64 parallel calls: 22% of 2 cores idle;
/// two threads, 10% idle and ~20% more calls/s). A request wakes one idle thread only (a channel's
/// receiver shared under a mutex woke the other thread too on every spawn, to wait on the lock).
struct Spawner {
    queue: std::sync::Mutex<std::collections::VecDeque<SpawnRequest>>,
    more: std::sync::Condvar,
}

impl Spawner {
    fn next(&self) -> SpawnRequest {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(req) = q.pop_front() {
                return req;
            }
            q = self.more.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn push(&self, req: SpawnRequest) {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(req);
        self.more.notify_one();
    }
}

fn spawner() -> &'static Spawner {
    static QUEUE: OnceLock<&'static Spawner> = OnceLock::new();
    QUEUE.get_or_init(|| {
        let q: &'static Spawner = Box::leak(Box::new(Spawner {
            queue: Default::default(),
            more: std::sync::Condvar::new(),
        }));
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
        for _ in 0..threads {
            std::thread::Builder::new()
                .name("kern-sandbox-spawner".into())
                .spawn(move || {
                    launch::block_signals_on_this_thread();
                    let mut launcher = launch::Launcher::new();
                    loop {
                        serve(&mut launcher, q.next());
                    }
                })
                .expect("spawn the kern-sandbox spawner thread");
        }
        q
    })
}

/// Does one start request: its `before`, then kern's start, answered on its channel. The calling
/// thread blocks every signal (see [`launch::spawn`]).
fn serve(launcher: &mut std::io::Result<launch::Launcher>, req: SpawnRequest) {
    if let Some(before) = req.before {
        if let Err(e) = crate::errors::guard(before) {
            let _ = req.reply.send(Err(e));
            return;
        }
    }
    let spec = launch::Spec {
        program: req.program.as_os_str(),
        args: &req.args,
        env: &req.env,
        keep_fd: req.keep_fd.as_raw_fd(),
        stdin: req.stdin.as_ref().map(|f| f.as_raw_fd()),
    };
    let spawned = match launcher.as_mut() {
        Ok(l) => launch::spawn(l, &spec),
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("cannot open /dev/null: {e}"),
        )),
    };
    let spawned = spawned.map_err(|e| {
        Error::sandbox(format!(
            "could not execute kern ({}): {e}",
            req.program.display()
        ))
    });
    let _ = req.reply.send(spawned);
    // Our copy of the started pipe's write end closes here, so EOF means kern.
}

/// Does a start request on the calling thread, the process's main thread: its signals are blocked
/// for the clone, as a spawner thread's always are.
fn serve_here(req: SpawnRequest) {
    thread_local! {
        static LAUNCHER: RefCell<Option<std::io::Result<launch::Launcher>>> =
            const { RefCell::new(None) };
    }
    LAUNCHER.with_borrow_mut(|l| {
        let launcher = l.get_or_insert_with(launch::Launcher::new);
        let mask = launch::SignalsBlocked::now();
        serve(launcher, req);
        drop(mask);
    });
}

/// Whether the calling thread is the process's main thread, which lives as long as the process.
fn on_main_thread() -> bool {
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    tid == std::process::id() as libc::c_long
}

/// Boxes [`start`]ed whose call (or life as a ready box) is not over. A start on the main thread,
/// with nothing of its own to do first, forks kern there when there are none: that spares the
/// hand-off to a spawner thread (tens of microseconds a call), and the event loop waits for one
/// exec at a time only, never for a burst of calls', which the spawner threads take in parallel.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// A box counted in [`IN_FLIGHT`] while it lives.
struct InFlight;

impl InFlight {
    /// Counts a box in; true when no other one is.
    fn enter() -> (InFlight, bool) {
        let others = IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        (InFlight, others == 0)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Hands kern's start to a spawner thread now (or does it on this thread, `here`), with the
/// started pipe's write end; the box's stdin is `stdin` (the read end of our pipe) or /dev/null.
/// The answer comes on the returned channel.
fn request_spawn(
    kern: &Path,
    args: &[OsString],
    enforce_limits: bool,
    started_w: OwnedFd,
    stdin: Option<OwnedFd>,
    before: Option<Before>,
    here: bool,
) -> oneshot::Receiver<Result<Spawned>> {
    let mut env = vec![launch::STARTED_FD_ENV];
    if !enforce_limits {
        env.push(c"KERN_NO_SCOPE=1");
    }
    let (reply, rx) = oneshot::channel();
    let req = SpawnRequest {
        program: kern.to_path_buf(),
        args: args.to_vec(),
        env,
        keep_fd: started_w,
        stdin,
        before,
        reply,
    };
    if here {
        serve_here(req);
    } else {
        spawner().push(req);
    }
    rx
}

/// Starts kern from a spawner thread (see [`request_spawn`]) and waits for it to have exec'd.
async fn spawn_kern_with(
    kern: &Path,
    args: &[OsString],
    enforce_limits: bool,
    started_w: OwnedFd,
    stdin: Option<OwnedFd>,
) -> Result<Spawned> {
    answer(request_spawn(
        kern,
        args,
        enforce_limits,
        started_w,
        stdin,
        None,
        false,
    ))
    .await
}

/// A spawner's answer to a kern start.
async fn answer(reply: oneshot::Receiver<Result<Spawned>>) -> Result<Spawned> {
    reply
        .await
        .unwrap_or_else(|_| Err(Error::sandbox("the spawner dropped kern's start")))
}

pub async fn run_box(l: Launch<'_>) -> Result<BoxRun> {
    let t0 = Instant::now();
    let booted = boot(l.kern, l.name, &l.args, l.enforce_limits, l.env_id, false).await?;
    Ok(supervise(booted, l.watch, t0).await)
}

/// What watches one call's box: its output caps and sinks, its deadline and its cancel.
pub struct Watch<'a> {
    pub cap: usize,
    pub timeout: Duration,
    pub on_stdout: Option<ChunkFn>,
    pub on_stderr: Option<ChunkFn>,
    pub cancel: &'a Cancel,
}

/// A box whose kern is running, before its call is watched: everything a teardown and a call's
/// supervision need. Never dropped while kern runs (see [`Booted::discard`]).
pub struct Booted {
    pub name: String,
    pub kern: PathBuf,
    pub pgid: i32,
    pub reaper: Reaper,
    _live: boxes::BoxGuard,
    pub stdout: pipe::Receiver,
    pub stderr: pipe::Receiver,
    started: OwnedFd,
    /// The box's stdin when it was started with a pipe there (a ready box's waiter reads it).
    pub stdin: Option<pipe::Sender>,
    /// The box's init, when it was found before the call (a ready box's waiter).
    pub init: Option<workload::Init>,
    _in_flight: InFlight,
}

/// Starts kern with `args` and tracks the box; its stdin is a pipe of ours (`with_stdin`) or
/// /dev/null.
pub async fn boot(
    kern: &Path,
    name: &str,
    args: &[OsString],
    enforce_limits: bool,
    env_id: usize,
    with_stdin: bool,
) -> Result<Booted> {
    start(kern, name, args, enforce_limits, env_id, with_stdin, None)?
        .booted()
        .await
}

/// A kern start handed to a spawner thread, before its answer: what [`Pending::booted`] needs to
/// track and wrap the box once kern has exec'd.
pub struct Pending {
    kern: PathBuf,
    name: String,
    env_id: usize,
    started: OwnedFd,
    stdin: Option<OwnedFd>,
    reply: oneshot::Receiver<Result<Spawned>>,
    in_flight: InFlight,
}

/// Hands kern's start (`args`) to a spawner thread now, without waiting: a caller on the JS
/// thread starts the box without a hop through a tokio worker first, and on the main thread with
/// no other box in flight and no `before` it forks kern itself (see [`IN_FLIGHT`]). Its stdin is a
/// pipe of ours (`with_stdin`) or /dev/null. `before` is done on the spawner thread first (see
/// [`Before`]).
pub fn start(
    kern: &Path,
    name: &str,
    args: &[OsString],
    enforce_limits: bool,
    env_id: usize,
    with_stdin: bool,
    before: Option<Before>,
) -> Result<Pending> {
    let flags = rustix::pipe::PipeFlags::CLOEXEC;
    let pipe_err = |e: rustix::io::Errno| Error::io("could not create a pipe for kern", e.into());
    let (started_r, started_w) = rustix::pipe::pipe_with(flags).map_err(pipe_err)?;
    let (stdin_r, stdin_w) = match with_stdin {
        true => rustix::pipe::pipe_with(flags)
            .map(|(r, w)| (Some(r), Some(w)))
            .map_err(pipe_err)?,
        false => (None, None),
    };
    let (in_flight, alone) = InFlight::enter();
    let here = alone && before.is_none() && on_main_thread();
    Ok(Pending {
        kern: kern.to_path_buf(),
        name: name.to_string(),
        env_id,
        started: started_r,
        stdin: stdin_w,
        reply: request_spawn(kern, args, enforce_limits, started_w, stdin_r, before, here),
        in_flight,
    })
}

impl Pending {
    /// Waits for kern to have exec'd, then tracks the box (reaped from here on, whatever fails
    /// next).
    pub async fn booted(self) -> Result<Booted> {
        let Pending {
            kern,
            name,
            env_id,
            started,
            stdin: stdin_w,
            reply,
            in_flight,
        } = self;
        let spawned = answer(reply).await?;
        let live = boxes::track(env_id, spawned.pid, &name, &kern);
        let reaper = Reaper::new(spawned.pid);
        let talk = |e| Error::io("could not talk to kern", e);
        let stdin = stdin_w.map(pipe::Sender::from_owned_fd).transpose();
        let stdout = pipe::Receiver::from_owned_fd(spawned.stdout);
        let stderr = pipe::Receiver::from_owned_fd(spawned.stderr);
        let mut booted = Booted {
            name,
            kern,
            pgid: spawned.pid,
            reaper,
            _live: live,
            stdout: stdout.map_err(talk)?,
            stderr: stderr.map_err(talk)?,
            started,
            stdin: None,
            init: None,
            _in_flight: in_flight,
        };
        match stdin {
            Ok(s) => booted.stdin = s,
            Err(e) => {
                booted.discard().await;
                return Err(talk(e));
            }
        }
        Ok(booted)
    }
}

impl Booted {
    /// Ends a box no call will use: EOF on its stdin first (a waiter then exits by itself), then
    /// a teardown if kern has not exited shortly.
    pub async fn discard(mut self) {
        self.stdin = None;
        if tokio::time::timeout(GRACE, self.reaper.wait())
            .await
            .is_err()
        {
            teardown(&self.kern, &self.name, self.pgid, &mut self.reaper).await;
            confirm_gone(&self.kern, &self.name, self.pgid).await;
            // Killed, but on a loaded host kern may not be reaped yet: a close() that returned
            // with it still a zombie would leave `kern ps` listing the box a moment longer.
            let _ = tokio::time::timeout(DISCARD_REAP, self.reaper.wait()).await;
        }
    }
}

/// Watches a booted box through its call: output, deadline (from now), cancel, teardown. `t0`
/// is when the call's own time started.
pub async fn supervise(b: Booted, l: Watch<'_>, t0: Instant) -> BoxRun {
    let Booted {
        name,
        kern,
        pgid,
        reaper: mut child,
        _live,
        stdout: mut out_pipe,
        stderr: mut err_pipe,
        started: started_r,
        stdin,
        init,
        _in_flight,
    } = b;
    drop(stdin);
    let (kern, name) = (kern.as_path(), name.as_str());

    // Output is read in this same task (no spawns: fewer thread hand-offs per call). While kern
    // runs the pipes are read to EOF; once it is gone they get a bounded moment, in case a stray
    // process still holds them.
    let (drain_tx, drain_rx) = watch::channel::<Option<Drain>>(None);
    let drained = |mut rx: watch::Receiver<Option<Drain>>| async move {
        let how = rx
            .wait_for(Option::is_some)
            .await
            .map(|v| v.unwrap_or(Drain::Now))
            .unwrap_or(Drain::Now);
        match how {
            Drain::Now => true,
            Drain::Within(budget) => {
                tokio::time::sleep(budget).await;
                false
            }
        }
    };
    // After an early result kern's teardown goes on, and kern writes its started byte (and may
    // write more) on the way: read ends of its pipes are held until it has exited, or such a write
    // would kill it with SIGPIPE halfway through its teardown (seen on every other early call).
    let held = [out_pipe.as_fd(), err_pipe.as_fd(), started_r.as_fd()]
        .map(|fd| fd.try_clone_to_owned().ok());
    let io = async {
        tokio::join!(
            pump(
                &mut out_pipe,
                l.cap,
                l.on_stdout,
                drained(drain_rx.clone()),
                false
            ),
            pump(
                &mut err_pipe,
                l.cap,
                l.on_stderr,
                drained(drain_rx.clone()),
                true
            ),
            read_started(started_r, async {
                drained(drain_rx).await;
            }),
        )
    };
    let life = async {
        let mut timed_out = false;
        let mut stop_reason = None;
        // Set when the workload's own exit ended the call (an early result); it carries the box's
        // mount namespace until kern has exited.
        let mut held_ns = None;
        let status = tokio::select! {
            s = child.wait() => Some(s),
            (code, ns) = async {
                match init {
                    Some(init) => workload::init_exited(init).await,
                    None => workload::exited(pgid).await,
                }
            } => { held_ns = Some(ns); Some(code << 8) }
            _ = tokio::time::sleep(l.timeout) => { timed_out = true; None }
            _ = l.cancel.fired() => { stop_reason = l.cancel.reason(); None }
        };
        let mut survivors = None;
        let status = match status {
            Some(s) => Some(s),
            None => {
                let reaped = teardown(kern, name, pgid, &mut child).await;
                // Not reaped yet: dropping the Reaper finishes the wait in the background.
                survivors = confirm_gone(kern, name, pgid).await;
                reaped
            }
        };
        let budget = if held_ns.is_some() {
            Drain::Now
        } else if timed_out || stop_reason.is_some() {
            Drain::Within(DRAIN_AFTER_KILL)
        } else {
            Drain::Within(DRAIN_BUDGET)
        };
        let _ = drain_tx.send(Some(budget));
        (status, timed_out, stop_reason, survivors, held_ns)
    };
    let ((status, timed_out, stop_reason, survivors, held_ns), (stdout, stderr, started)) =
        tokio::join!(life, io);
    let early = held_ns.is_some();
    let exit_code = match (status, timed_out || stop_reason.is_some()) {
        (Some(s), false) => launch::exit_code(s),
        (Some(s), true) => launch::exit_code(s).max(crate::lifecycle::fault::EXIT_SIGKILL),
        (None, _) => crate::lifecycle::fault::EXIT_SIGKILL,
    };
    if !early && status.is_some() && !timed_out && stop_reason.is_none() {
        workload::learn_from_failure(exit_code, &stderr.bytes, stderr.truncated);
    }
    // The workload exec'd and exited by itself: the box started (kern writes its started byte only
    // after its teardown, which now goes on without the call).
    let started = if early {
        Started::Yes { mem_cap: 0 }
    } else {
        started
    };
    let teardown = match held_ns {
        Some(ns) => Some(crate::task::spawn(finish_teardown(
            kern.to_path_buf(),
            name.to_string(),
            pgid,
            child,
            (_live, held, ns),
        ))),
        None => {
            // kern is gone (or its Reaper finishes the wait): the box's fds can close after the
            // result is sent.
            crate::task::drop_later((child, held, out_pipe, err_pipe));
            None
        }
    };
    BoxRun {
        exit_code,
        started,
        stdout,
        stderr,
        timed_out,
        stopped: stop_reason,
        survivors,
        duration: t0.elapsed(),
        teardown,
    }
}

/// kern's own teardown after a call resolved early: waited for (bounded), then forced, so the box
/// is tracked (and its pipes' read ends held) until kern is gone and nothing of it outlives the
/// session. The box's mount namespace is let go of last, so its unmounts run after kern's exit.
async fn finish_teardown(
    kern: PathBuf,
    name: String,
    pgid: i32,
    mut child: Reaper,
    live: (boxes::BoxGuard, [Option<OwnedFd>; 3], workload::MountHold),
) {
    if tokio::time::timeout(TEARDOWN_BUDGET, child.wait())
        .await
        .is_err()
    {
        teardown(&kern, &name, pgid, &mut child).await;
        confirm_gone(&kern, &name, pgid).await;
    }
    drop(live);
}

/// Reads kern's started signal (at most two bytes) until EOF.
pub async fn read_started(fd: OwnedFd, stop: impl std::future::Future<Output = ()>) -> Started {
    let Ok(mut rx) = pipe::Receiver::from_owned_fd(fd) else {
        return Started::Silent;
    };
    let mut got = Vec::with_capacity(2);
    let mut buf = [0u8; 8];
    tokio::pin!(stop);
    loop {
        tokio::select! {
            r = rx.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            },
            _ = &mut stop => break,
        }
        if got.len() >= 2 {
            break;
        }
    }
    Started::from_bytes(&got)
}

/// Ends a box early: `kern stop NAME` first (kern's own, graceful path); if kern has not exited
/// shortly, SIGKILL the box side of kern's process group so kern can reap it and exit by itself
/// (no orphans left to init); finally SIGKILL the whole group. Returns kern's exit status if it
/// was reaped within the budget.
async fn teardown(kern: &Path, name: &str, pgid: i32, child: &mut Reaper) -> Option<i32> {
    if let Some(status) = past_setup(pgid, child).await {
        return Some(status);
    }
    let stop = spawn_stop(kern, name);
    let mut reaped = tokio::time::timeout(GRACE, child.wait()).await.ok();
    if reaped.is_none() {
        boxes::kill_all_but_leader(pgid);
        workload::kill_box(pgid); // an `-it` box has a session of its own
        reaped = tokio::time::timeout(GRACE, child.wait()).await.ok();
    }
    boxes::kill_group(pgid);
    if reaped.is_none() {
        reaped = tokio::time::timeout(REAP_BUDGET, child.wait()).await.ok();
    }
    if let Some(mut stop) = stop {
        // A kern that exited by itself has cleaned up after its box. One that was killed has not:
        // its `kern stop` removes the box's scratch tree, registry entry and cgroup after it, and
        // ended first leaves them behind for good, one per aborted call. One still waiting on a
        // TERM-ignoring box while kern lives on is ended at once.
        let finished = reaped.is_some_and(|s| !libc::WIFEXITED(s))
            && matches!(
                tokio::time::timeout(STOP_FINISH, stop.wait()).await,
                Ok(Ok(_))
            );
        if !finished {
            end_helper(stop);
        }
    }
    reaped
}

/// Waits, bounded, until kern takes a SIGTERM without dying (or has exited: its status then),
/// since `kern stop` before that kills kern mid-setup ([`workload::in_setup`]) and, finding no
/// box init on record yet, waits out its whole stop grace.
async fn past_setup(pgid: i32, child: &mut Reaper) -> Option<i32> {
    let deadline = tokio::time::Instant::now() + boxes::SETUP_BUDGET;
    while workload::in_setup(pgid) && tokio::time::Instant::now() < deadline {
        if let Ok(status) = tokio::time::timeout(Duration::from_millis(1), child.wait()).await {
            return Some(status);
        }
    }
    None
}

/// Starts `kern stop NAME` as a child we can await.
fn spawn_stop(kern: &Path, name: &str) -> Option<Child> {
    Command::from(boxes::stop_command(kern, name)).spawn().ok()
}

/// Kills a helper `kern stop`/`kern ps` we no longer wait for, and reaps it in the background.
/// Never just drop it: tokio reaps dropped children from a SIGCHLD handler, which libuv replaces
/// as soon as the app uses child_process, and the helper would stay a zombie of Node forever.
/// `wait()` on a live child goes through a pidfd and does not depend on SIGCHLD.
fn end_helper(mut child: Child) {
    let _ = child.start_kill();
    crate::task::spawn(async move {
        let _ = child.wait().await;
    });
}

async fn stop_box(kern: &Path, name: &str, budget: Duration) {
    if let Some(mut s) = spawn_stop(kern, name) {
        if tokio::time::timeout(budget, s.wait()).await.is_err() {
            end_helper(s);
        }
    }
}

/// After a teardown: is anything of the box still alive? `None` when all is gone, else what
/// survived (after one more round of killing).
async fn confirm_gone(kern: &Path, name: &str, pgid: i32) -> Option<String> {
    let mut left = Vec::new();
    for _ in 0..5 {
        if !boxes::group_alive(pgid) {
            break;
        }
        boxes::kill_group(pgid);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if boxes::group_alive(pgid) {
        left.push(format!("processes in group {pgid} survived SIGKILL"));
    }
    match listed_by_kern(kern, name).await {
        Some(false) => {}
        Some(true) => {
            stop_box(kern, name, CONFIRM_BUDGET).await;
            match listed_by_kern(kern, name).await {
                Some(false) => {}
                Some(true) => left.push(format!("kern still lists box {name} after `kern stop`")),
                None => left.push(format!(
                    "could not confirm box {name} is gone: `kern ps` did not answer"
                )),
            }
        }
        None => left.push(format!(
            "could not confirm box {name} is gone: `kern ps` did not answer"
        )),
    }
    (!left.is_empty()).then(|| left.join("; "))
}

/// Whether `kern ps` lists the box; `None` when kern did not answer in time or failed.
async fn listed_by_kern(kern: &Path, name: &str) -> Option<bool> {
    let mut ps = Command::new(kern)
        .args(["ps", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut out = ps.stdout.take()?;
    let answer = async {
        let mut text = Vec::new();
        out.read_to_end(&mut text).await.ok()?;
        let status = ps.wait().await.ok()?;
        status.success().then_some(text)
    };
    match tokio::time::timeout(CONFIRM_BUDGET, answer).await {
        Ok(Some(text)) => Some(String::from_utf8_lossy(&text).contains(&format!("\"{name}\""))),
        Ok(None) => None,
        Err(_) => {
            end_helper(ps);
            None
        }
    }
}

/// A box that outlives one call (the warm kernel), tracked like any box so that it never
/// outlives Node.
pub struct Resident {
    pub pgid: i32,
    reaper: Reaper,
    /// kern's started channel; kern writes it as the box comes up and ends.
    started: Option<OwnedFd>,
    kern: PathBuf,
    name: String,
    _live: boxes::BoxGuard,
}

/// A resident box's pipes. Dropping `stdin` (every handle on it) is the box's EOF.
pub struct Pipes {
    pub stdin: pipe::Sender,
    pub stdout: pipe::Receiver,
    pub stderr: pipe::Receiver,
}

pub async fn start_resident(
    kern: &Path,
    name: &str,
    args: &[OsString],
    enforce_limits: bool,
    env_id: usize,
) -> Result<(Resident, Pipes)> {
    let flags = rustix::pipe::PipeFlags::CLOEXEC;
    let (started_r, started_w) = rustix::pipe::pipe_with(flags)
        .map_err(|e| Error::io("could not create a pipe for kern", e.into()))?;
    let (stdin_r, stdin_w) = rustix::pipe::pipe_with(flags)
        .map_err(|e| Error::io("could not create a pipe for kern", e.into()))?;
    let spawned = spawn_kern_with(kern, args, enforce_limits, started_w, Some(stdin_r)).await?;
    let live = boxes::track(env_id, spawned.pid, name, kern);
    let pipe_err = |e| Error::io("could not talk to kern", e);
    let resident = Resident {
        pgid: spawned.pid,
        reaper: Reaper::new(spawned.pid),
        started: Some(started_r),
        kern: kern.to_path_buf(),
        name: name.to_string(),
        _live: live,
    };
    let pipes = Pipes {
        stdin: pipe::Sender::from_owned_fd(stdin_w).map_err(pipe_err)?,
        stdout: pipe::Receiver::from_owned_fd(spawned.stdout).map_err(pipe_err)?,
        stderr: pipe::Receiver::from_owned_fd(spawned.stderr).map_err(pipe_err)?,
    };
    Ok((resident, pipes))
}

impl Resident {
    /// Ends the box as a timed-out call's is ended; what survived, if anything.
    pub async fn tear_down(&mut self) -> Option<String> {
        teardown(&self.kern, &self.name, self.pgid, &mut self.reaper).await;
        confirm_gone(&self.kern, &self.name, self.pgid).await
    }

    /// kern's exit status once it has exited by itself, waiting at most `budget`.
    pub async fn exited_within(&mut self, budget: Duration) -> Option<i32> {
        tokio::time::timeout(budget, self.reaper.wait())
            .await
            .ok()
            .map(launch::exit_code)
    }

    /// What kern's started channel said, read once (bounded: kern writes it as the box ends).
    pub async fn started(&mut self) -> Started {
        match self.started.take() {
            Some(fd) => read_started(fd, tokio::time::sleep(GRACE)).await,
            None => Started::Silent,
        }
    }
}
