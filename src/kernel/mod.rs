//! The warm kernel: one resident interpreter (Python, or node for JavaScript and TypeScript) in a
//! long-lived box, fed cells over a pipe.
//!
//! One task owns the box and serves cells strictly in the order they were queued, settling each
//! cell's promise itself; an idle kernel gets a new cell written at once from the JS thread, so
//! the interpreter starts while that task wakes up. A per-cell deadline, an output past
//! `maxOutputBytes`, a protocol violation or the box's death tears the kernel down; an abort
//! interrupts the cell (KeyboardInterrupt) and tears down only a cell that does not stop within
//! a grace.

pub mod host;
pub mod language;
pub mod protocol;
pub mod rich;

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, watch, Notify};

use crate::errors::{Error, Result};
use crate::lifecycle::cancel::{Cancel, StopReason};
use crate::lifecycle::fault::{self, Ending, Fault};
use crate::lifecycle::outcome::Outcome;
use crate::lifecycle::spawn::Pipes;
use crate::output::notes::HeadNotes;
use crate::output::{ChunkFn, Sink, QUEUE_DEPTH};
use host::Host;
use language::Driver;
use protocol::{FrameReader, ReadError};

/// A JS callback handed each result (as its JSON text) as it is produced; weak, like ChunkFn.
pub type ResultFn = ThreadsafeFunction<String, (), String, Status, false, true, QUEUE_DEPTH>;

/// How long an interrupted cell gets to stop before the kernel is torn down instead.
const INTERRUPT_GRACE: Duration = Duration::from_secs(2);
/// How long a closing kernel gets to exit on its own (stdin at EOF) before it is killed.
const CLOSE_GRACE: Duration = Duration::from_millis(500);
/// kern's stderr kept for messages about a kernel that died.
const STDERR_KEPT: usize = 64 * 1024;
/// The exit code of a cell whose kernel was torn down under it, as in 0.1.23.
const TORN_DOWN: i32 = -1;

pub struct CellOptions {
    pub timeout: Duration,
    pub on_stdout: Option<ChunkFn>,
    pub on_stderr: Option<ChunkFn>,
    pub on_result: Option<ResultFn>,
    pub cancel: Arc<Cancel>,
}

/// How a cell is answered: called once, from the serving task, with the cell's outcome.
pub type ReplyFn = Box<dyn FnOnce(Result<Outcome>) + Send>;

/// Answers a cell exactly once: a cell dropped unanswered (a panic in the serving task, a kernel
/// gone) still settles its promise.
struct Reply(Option<ReplyFn>);

impl Reply {
    fn send(mut self, r: Result<Outcome>) {
        if let Some(f) = self.0.take() {
            f(r);
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f(Err(Error::KernelGone(
                "the kernel stopped before answering this cell".into(),
            )));
        }
    }
}

struct Cell {
    /// The cell frame, ready to write.
    frame: Vec<u8>,
    /// Already written by `submit` (the kernel was idle).
    sent: bool,
    opts: CellOptions,
    reply: Reply,
}

/// What `submit` (on the JS thread) and the serving task share.
struct Shared {
    /// Cells submitted and not yet taken up, in call order.
    queue: std::collections::VecDeque<Cell>,
    /// Cells submitted and not yet answered.
    pending: usize,
    /// No more cells are taken.
    closed: bool,
    /// A second handle on the box's stdin, for writing a cell at once when the kernel is idle:
    /// the interpreter starts on it while the serving task is still waking up.
    stdin: Option<OwnedFd>,
}

/// What the rest of the binding holds of a kernel.
pub struct Kernel {
    shared: Arc<Mutex<Shared>>,
    /// Wakes the serving task for a queued cell.
    wake: Arc<Notify>,
    alive: Arc<AtomicBool>,
    /// Why the kernel stopped serving, for the SandboxError of later cells.
    ended: Arc<Mutex<Option<String>>>,
    shutdown: Arc<Cancel>,
    finished: watch::Receiver<bool>,
}

/// The box side, owned by the serving task.
struct Server {
    boxed: Host,
    /// The box's stdin, for cells `submit` could not write at once.
    stdin: Option<tokio::net::unix::pipe::Sender>,
    frames: FrameReader<tokio::net::unix::pipe::Receiver>,
    kern_stderr: Arc<Mutex<Vec<u8>>>,
    /// Set once kern's stderr reached EOF.
    stderr_done: watch::Receiver<bool>,
    cap: usize,
    marker: String,
    count: u32,
    shared: Arc<Mutex<Shared>>,
    wake: Arc<Notify>,
    alive: Arc<AtomicBool>,
    /// Why the kernel stopped serving, set as it stops.
    ended: Arc<Mutex<Option<String>>>,
    /// Frames that arrived before the serving task took up the cell `submit` had already sent.
    early: std::collections::VecDeque<(u8, Vec<u8>)>,
    /// Interrupts go as a frame first, SIGINT only after this (language::Driver::signal_after).
    signal_after: Option<Duration>,
}

enum CellEnd {
    /// The kernel keeps serving.
    Served,
    /// The kernel is gone; the reason is for later cells.
    Gone(String),
}

impl Kernel {
    /// Starts the box and waits for the driver's ready frame.
    pub async fn start(
        boxed: Host,
        pipes: Pipes,
        cap: usize,
        marker: String,
        language: Driver,
        startup: Duration,
        stop: &Cancel,
    ) -> Result<Arc<Kernel>> {
        let kern_stderr = Arc::new(Mutex::new(Vec::new()));
        let (stderr_tx, stderr_done) = watch::channel(false);
        let kept = kern_stderr.clone();
        let (catch_up, caught_up) = oneshot::channel();
        tokio::spawn(async move {
            keep_stderr(pipes.stderr, kept, caught_up).await;
            let _ = stderr_tx.send(true);
        });
        let shared = Arc::new(Mutex::new(Shared {
            queue: Default::default(),
            pending: 0,
            closed: false,
            stdin: Some(dup_fd(&pipes.stdin)?),
        }));
        let mut server = Server {
            boxed,
            stdin: Some(pipes.stdin),
            frames: FrameReader::new(pipes.stdout, cap.max(1 << 20) + 1024),
            kern_stderr,
            stderr_done,
            cap,
            marker,
            count: 0,
            shared: shared.clone(),
            wake: Default::default(),
            alive: Arc::new(AtomicBool::new(true)),
            ended: Default::default(),
            early: Default::default(),
            signal_after: language.signal_after(),
        };
        let ready = tokio::select! {
            r = tokio::time::timeout(startup, server.frames.next()) => r,
            _ = stop.fired() => {
                server.boxed.tear_down().await;
                return Err(Error::Closed("the sandbox was closed while the kernel was starting".into()));
            }
        };
        match ready {
            Ok(Ok(Some((protocol::READY, _)))) => {
                // kern wrote its notes before it started the box, so they are in the stderr pipe
                // now: they are read (and queued for JS) before the kernel is handed out.
                let (ack, acked) = oneshot::channel();
                if catch_up.send(ack).is_ok() {
                    let _ = tokio::time::timeout(Duration::from_secs(1), acked).await;
                }
            }
            other => {
                return Err(match other {
                    Err(_) => {
                        server.boxed.tear_down().await;
                        Error::sandbox(format!(
                            "the kernel did not start within {}s",
                            startup.as_secs()
                        ))
                    }
                    _ => server.startup_failure(language).await,
                });
            }
        }
        let (done_tx, done_rx) = watch::channel(false);
        let kernel = Arc::new(Kernel {
            shared,
            wake: server.wake.clone(),
            alive: server.alive.clone(),
            ended: server.ended.clone(),
            shutdown: Default::default(),
            finished: done_rx,
        });
        let shutdown = kernel.shutdown.clone();
        tokio::spawn(async move {
            server.serve(&shutdown).await;
            let _ = done_tx.send(true);
        });
        Ok(kernel)
    }

    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    fn closed_error(&self) -> Error {
        let why = self.ended.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Error::KernelGone(format!(
            "the kernel is closed{}",
            why.map(|w| format!(": {w}")).unwrap_or_default()
        ))
    }

    /// Queues a cell (synchronously, so cells run in call order); `reply` gets its outcome, or
    /// the SandboxError of a closed kernel. An idle kernel gets the cell at once, written from here.
    pub fn submit(&self, code: &str, opts: CellOptions, reply: ReplyFn) {
        let reply = Reply(Some(reply));
        let frame = protocol::encode(protocol::CELL, code.as_bytes());
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if shared.closed || !self.alive() {
            drop(shared);
            return reply.send(Err(self.closed_error()));
        }
        // A write of at most PIPE_BUF bytes to a pipe is all or nothing: it never leaves half a
        // frame for the serving task to finish.
        let sent = shared.pending == 0
            && frame.len() <= libc::PIPE_BUF
            && shared
                .stdin
                .as_ref()
                .is_some_and(|fd| rustix::io::write(fd, &frame) == Ok(frame.len()));
        shared.pending += 1;
        shared.queue.push_back(Cell {
            frame,
            sent,
            opts,
            reply,
        });
        drop(shared);
        // Also for a cell written here: its deadline runs from now, in the serving task.
        self.wake.notify_one();
    }

    /// Stops the kernel: a running cell is torn down, queued cells are refused. Returns once the
    /// box is gone. Idempotent.
    pub async fn close(&self) {
        self.stop();
        let mut done = self.finished.clone();
        let _ = done.wait_for(|d| *d).await;
    }

    /// Refuses new cells and tells the serving task to end the box.
    fn stop(&self) {
        {
            let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
            shared.closed = true;
            shared.stdin = None;
        }
        self.shutdown.fire(StopReason::Closed);
    }
}

/// A kernel nothing refers to any more (its JS object collected unclosed) ends its box: only the
/// session's close or Node's exit would otherwise.
impl Drop for Kernel {
    fn drop(&mut self) {
        self.stop();
    }
}

fn dup_fd(w: &tokio::net::unix::pipe::Sender) -> Result<OwnedFd> {
    use std::os::fd::AsFd;
    rustix::io::fcntl_dupfd_cloexec(w.as_fd(), 0)
        .map_err(|e| Error::io("could not duplicate the kernel's stdin", e.into()))
}

/// Keeps the first bytes of kern's stderr (its own messages; the driver's go through frames) and
/// queues kern's leading notes for JS. Asked through `catch_up`, it reads what the pipe holds at
/// once and acknowledges.
async fn keep_stderr(
    mut r: tokio::net::unix::pipe::Receiver,
    kept: Arc<Mutex<Vec<u8>>>,
    catch_up: oneshot::Receiver<oneshot::Sender<()>>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut head = HeadNotes::new();
    let mut take = |bytes: &[u8]| {
        head.feed(bytes);
        let mut k = kept.lock().unwrap_or_else(|p| p.into_inner());
        let room = STDERR_KEPT.saturating_sub(k.len());
        k.extend_from_slice(&bytes[..bytes.len().min(room)]);
    };
    let mut catch_up = Some(catch_up);
    loop {
        let got = tokio::select! {
            biased;
            ask = async { catch_up.as_mut().expect("checked").await }, if catch_up.is_some() => {
                Err(ask.ok())
            }
            read = r.read(&mut buf) => Ok(read),
        };
        match got {
            Err(ask) => {
                catch_up = None;
                if let Some(ack) = ask {
                    let eof = read_now(&r, &mut buf, &mut take);
                    let _ = ack.send(());
                    if eof {
                        return;
                    }
                }
            }
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(n)) => take(&buf[..n]),
        }
    }
}

/// Reads what the pipe holds now, with plain non-blocking reads (tokio's readiness may not have
/// seen it yet); true at EOF.
fn read_now(r: &impl std::os::fd::AsFd, buf: &mut [u8], take: &mut impl FnMut(&[u8])) -> bool {
    loop {
        match rustix::io::read(r, &mut *buf) {
            Ok(0) => return true,
            Ok(n) => take(&buf[..n]),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

/// A cell's output and results as they arrive.
struct Collect {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    rich: Vec<String>,
    total: usize,
    out_sink: Option<Sink>,
    err_sink: Option<Sink>,
    on_result: Option<ResultFn>,
}

impl Collect {
    async fn finish_streams(&mut self) {
        if let Some(s) = self.out_sink.take() {
            s.finish().await;
        }
        if let Some(s) = self.err_sink.take() {
            s.finish().await;
        }
    }
}

impl Server {
    async fn serve(&mut self, shutdown: &Cancel) {
        let why = loop {
            let next = {
                let mut shared = self.lock();
                if shared.closed {
                    None
                } else {
                    shared.queue.pop_front()
                }
            };
            if let Some(cell) = next {
                if cell.opts.cancel.reason().is_some() && !cell.sent {
                    self.lock().pending -= 1;
                    cell.reply.send(Err(Error::Aborted));
                    continue;
                }
                match self.run_cell(cell, shutdown).await {
                    CellEnd::Served => continue,
                    CellEnd::Gone(why) => break why,
                }
            }
            tokio::select! {
                biased;
                _ = shutdown.fired() => break self.close_gracefully().await,
                _ = self.wake.notified() => {}
                // Frames of a cell `submit` wrote are kept for it; between cells nothing else
                // should arrive but a background thread's output, which no cell owns. EOF means
                // the box died.
                frame = self.frames.next(), if self.early.len() < 1024 => match frame {
                    Ok(Some(f)) => {
                        if self.lock().pending > 0 {
                            self.early.push_back(f);
                        }
                    }
                    Ok(None) | Err(_) => {
                        let why = self.death_message().await;
                        self.boxed.tear_down().await;
                        break why;
                    }
                },
            }
        };
        self.stop_serving(&why);
        let refused: Vec<Cell> = {
            let mut shared = self.lock();
            shared.closed = true;
            shared.queue.drain(..).collect()
        };
        for cell in refused {
            cell.reply.send(Err(Error::KernelGone(format!(
                "the kernel is closed: {why}"
            ))));
        }
    }

    /// Marks the kernel dead (once; the first reason stays) and drops the JS thread's stdin.
    fn stop_serving(&self, why: &str) {
        self.ended
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| why.to_string());
        self.alive.store(false, Ordering::Release);
        self.lock().stdin = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn close_gracefully(&mut self) -> String {
        self.lock().stdin = None;
        // EOF on stdin ends the driver's read loop; the box then exits by itself.
        self.stdin = None;
        if self.boxed.exited_within(CLOSE_GRACE).await.is_none() {
            self.boxed.tear_down().await;
        } else {
            // kern is gone; make sure nothing of its group lingers.
            self.boxed.kill_lingering();
        }
        "close() was called".to_string()
    }

    async fn run_cell(&mut self, cell: Cell, shutdown: &Cancel) -> CellEnd {
        let Cell {
            frame,
            sent,
            opts,
            reply,
        } = cell;
        let (end, answer) = self.serve_cell(frame, sent, opts, shutdown).await;
        self.lock().pending -= 1;
        self.early.clear();
        if let CellEnd::Gone(why) = &end {
            // Before the answer: whoever sees a torn-down result sees a dead kernel.
            self.stop_serving(why);
        }
        reply.send(answer);
        end
    }

    async fn serve_cell(
        &mut self,
        frame: Vec<u8>,
        sent: bool,
        opts: CellOptions,
        shutdown: &Cancel,
    ) -> (CellEnd, Result<Outcome>) {
        let t0 = Instant::now();
        self.count += 1;
        let count = self.count;
        let mut c = Collect {
            stdout: Vec::new(),
            stderr: Vec::new(),
            rich: Vec::new(),
            total: 0,
            out_sink: opts.on_stdout.map(Sink::new),
            err_sink: opts.on_stderr.map(Sink::new),
            on_result: opts.on_result,
        };
        let written = sent
            || match self.stdin.as_mut() {
                Some(w) => w.write_all(&frame).await.is_ok(),
                None => false,
            };
        if !written {
            let why = self.death_message().await;
            self.boxed.tear_down().await;
            return (
                CellEnd::Gone(why.clone()),
                Err(Error::KernelGone(format!("the kernel is closed: {why}"))),
            );
        }
        drop(frame);
        let deadline = tokio::time::sleep(opts.timeout);
        tokio::pin!(deadline);
        let grace = tokio::time::sleep(Duration::MAX / 4);
        tokio::pin!(grace);
        let again = tokio::time::sleep(Duration::MAX / 4);
        tokio::pin!(again);
        let mut interrupted = false;
        let outcome = |c: Collect, exit_code: i32, fault: Option<Fault>| Outcome {
            truncated: false,
            stdout: c.stdout,
            stderr: c.stderr,
            exit_code,
            duration: t0.elapsed(),
            fault,
            files: Vec::new(),
            rich: c.rich,
            execution_count: Some(count),
        };
        loop {
            tokio::select! {
                frame = next_frame(&mut self.early, &mut self.frames) => {
                    let (kind, payload) = match frame {
                        Ok(Some(f)) => f,
                        Ok(None) | Err(ReadError::Io) => {
                            let (fault, why) = self.died_in_cell().await;
                            c.finish_streams().await;
                            return (CellEnd::Gone(why.clone()), match fault {
                                // An aborted call rejects, whatever ended the cell after.
                                _ if interrupted => Err(Error::Aborted),
                                Some(f) => Ok(outcome(c, TORN_DOWN, Some(f))),
                                None => Err(Error::KernelGone(why.clone())),
                            });
                        }
                        Err(ReadError::Oversize(n)) => {
                            return self.torn_down(c, outcome, "killed", format!(
                                "the kernel sent a {n}-byte frame, past the maxOutputBytes cap of {} bytes; the kernel was torn down", self.cap)).await;
                        }
                    };
                    match kind {
                        protocol::STDOUT | protocol::STDERR | protocol::RESULT | protocol::ERROR => {
                            c.total += payload.len();
                            if c.total > self.cap {
                                return self.torn_down(c, outcome, "killed", format!(
                                    "the cell's output passed the maxOutputBytes cap of {} bytes; the kernel was torn down", self.cap)).await;
                            }
                            match kind {
                                protocol::STDOUT => {
                                    if let Some(s) = c.out_sink.as_mut() { s.push(&payload); }
                                    c.stdout.extend_from_slice(&payload);
                                }
                                protocol::STDERR => {
                                    if let Some(s) = c.err_sink.as_mut() { s.push(&payload); }
                                    c.stderr.extend_from_slice(&payload);
                                }
                                protocol::RESULT => {
                                    let text = String::from_utf8_lossy(&payload).into_owned();
                                    if let Some(f) = &c.on_result {
                                        f.call(text.clone(), ThreadsafeFunctionCallMode::NonBlocking);
                                    }
                                    c.rich.push(text);
                                }
                                _ => c.rich.push(rich::error_line(&payload)),
                            }
                        }
                        protocol::DONE => {
                            let rc = std::str::from_utf8(&payload).ok().and_then(|s| s.parse::<i32>().ok());
                            let Some(rc) = rc else {
                                return self.torn_down(c, outcome, "killed",
                                    "the kernel sent a done frame with no usable exit code; the kernel was torn down".into()).await;
                            };
                            c.finish_streams().await;
                            return (CellEnd::Served, if interrupted {
                                Err(Error::Aborted)
                            } else {
                                Ok(outcome(c, rc, None))
                            });
                        }
                        _ => {
                            return self.torn_down(c, outcome, "killed",
                                format!("the kernel sent an unknown frame ({kind:#04x}); the kernel was torn down")).await;
                        }
                    }
                }
                _ = &mut deadline, if !interrupted => {
                    let secs = fault::fmt_secs(opts.timeout.as_secs_f64());
                    return self.torn_down(c, outcome, "timeout", format!(
                        "the cell exceeded the {secs}s time limit; the kernel was torn down")).await;
                }
                _ = opts.cancel.fired(), if !interrupted => {
                    if opts.cancel.reason() == Some(StopReason::Closed) {
                        self.boxed.tear_down().await;
                        c.finish_streams().await;
                        return (CellEnd::Gone("the sandbox was closed".into()), Err(Error::Closed("the sandbox was closed while the cell was running".into())));
                    }
                    interrupted = true;
                    let now = tokio::time::Instant::now();
                    let frame = protocol::encode(protocol::INTERRUPT, b"");
                    // A plain write on the non-blocking pipe (no wait on tokio's readiness), of at
                    // most PIPE_BUF bytes: whole or not at all.
                    let framed = self.signal_after.is_some()
                        && self.stdin.as_ref().is_some_and(|w| rustix::io::write(w, &frame) == Ok(frame.len()));
                    if framed {
                        grace.as_mut().reset(now + INTERRUPT_GRACE);
                        again.as_mut().reset(now + self.signal_after.unwrap_or_default());
                    } else if !self.interrupt() {
                        grace.as_mut().reset(now);
                    } else {
                        grace.as_mut().reset(now + INTERRUPT_GRACE);
                    }
                }
                // Armed by an interrupt frame; fires for a cell still running (synchronous code).
                _ = &mut again, if interrupted => {
                    self.interrupt();
                    // Past the grace: once is enough (a repeat could land as the cell ends).
                    again.as_mut().reset(tokio::time::Instant::now() + INTERRUPT_GRACE);
                }
                _ = &mut grace, if interrupted => {
                    self.boxed.tear_down().await;
                    c.finish_streams().await;
                    return (CellEnd::Gone("a cell was aborted and did not stop when interrupted".into()), Err(Error::Aborted));
                }
                _ = shutdown.fired() => {
                    self.boxed.tear_down().await;
                    c.finish_streams().await;
                    return (CellEnd::Gone("close() was called".into()), Err(Error::KernelGone("the kernel was closed while the cell was running".into())));
                }
            }
        }
    }

    async fn torn_down(
        &mut self,
        mut c: Collect,
        outcome: impl FnOnce(Collect, i32, Option<Fault>) -> Outcome,
        kind: &'static str,
        message: String,
    ) -> (CellEnd, Result<Outcome>) {
        let survivors = self.boxed.tear_down().await;
        c.finish_streams().await;
        let mut msg = message.clone();
        if let Some(s) = survivors {
            msg.push_str("; ");
            msg.push_str(&s);
        }
        let fault = Some(Fault { kind, message: msg });
        (CellEnd::Gone(message), Ok(outcome(c, TORN_DOWN, fault)))
    }

    /// The box died under a cell: a fault to report, or (never started) a startup error.
    async fn died_in_cell(&mut self) -> (Option<Fault>, String) {
        let (exit_code, classified, _) = self.ended().await;
        let fault = match classified {
            Some(f) if f.kind == "startup_failed" => return (None, f.message),
            Some(f) => f,
            None => Fault {
                kind: "killed",
                message: format!("the kernel process exited during the cell (exit code {exit_code}); the kernel is gone"),
            },
        };
        let why = fault.message.clone();
        (Some(fault), why)
    }

    /// Why the box ended before its driver was ready: kern's own error, as one-shot calls
    /// report a box that did not start. The JS launcher exits 127 when the image has no node.
    async fn startup_failure(&mut self, language: Driver) -> Error {
        let (exit_code, classified, stderr) = self.ended().await;
        let (text, no_node) = match classified {
            Some(f) if f.kind == "startup_failed" => (f.message, false),
            _ => (
                fault::without_kern_notices(&stderr).trim().to_string(),
                language == Driver::JavaScript && exit_code == language::EXIT_NO_INTERPRETER,
            ),
        };
        let why = if text.is_empty() {
            "the kernel box failed to start".to_string()
        } else {
            let text: String = text.chars().take(500).collect();
            format!("the kernel box failed to start: {text}")
        };
        if no_node {
            Error::NoNode(why)
        } else {
            Error::sandbox(why)
        }
    }

    /// How the box ended, once it has (it is torn down here, so nothing of it lingers): kern's
    /// exit code, what `fault::classify` makes of it, and kern's stderr.
    async fn ended(&mut self) -> (i32, Option<Fault>, Vec<u8>) {
        let exit = self.boxed.exited_within(Duration::from_millis(1000)).await;
        let started = self.boxed.started().await;
        self.boxed.tear_down().await;
        let stderr = self.kern_said().await;
        let exit_code = exit.unwrap_or(fault::EXIT_SIGKILL);
        let fault = fault::classify(&Ending {
            exit_code,
            timed_out: false,
            timeout_s: 0.0,
            started,
            stderr: &stderr,
            survivors: None,
        });
        (exit_code, fault, stderr)
    }

    /// kern's stderr once it has closed (kern exited), or what arrived within a short wait.
    async fn kern_said(&mut self) -> Vec<u8> {
        let _ = tokio::time::timeout(
            Duration::from_millis(500),
            self.stderr_done.wait_for(|done| *done),
        )
        .await;
        self.kern_stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    async fn death_message(&mut self) -> String {
        let exit = self.boxed.exited_within(Duration::from_millis(300)).await;
        match exit {
            Some(code) => format!("the kernel box exited (exit code {code})"),
            None => "the kernel box stopped answering".to_string(),
        }
    }

    /// Sends SIGINT to the driver's main thread (KeyboardInterrupt in the cell). False when the
    /// driver cannot be found.
    fn interrupt(&self) -> bool {
        match find_driver(self.boxed.root_pid(), &self.marker) {
            // SAFETY: a plain syscall; tgkill with tid == pid targets that process's main thread.
            Some(pid) => unsafe { libc::syscall(libc::SYS_tgkill, pid, pid, libc::SIGINT) == 0 },
            None => false,
        }
    }
}

/// The driver's host pid: a descendant of kern whose command line ends with our marker.
fn find_driver(kern_pid: i32, marker: &str) -> Option<i32> {
    let mut parent = std::collections::HashMap::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(ppid) = ppid {
            parent.insert(pid, ppid);
        }
    }
    let descends = |mut pid: i32| {
        for _ in 0..64 {
            match parent.get(&pid) {
                Some(&p) if p == kern_pid => return true,
                Some(&p) if p > 1 => pid = p,
                _ => return false,
            }
        }
        false
    };
    parent.keys().copied().find(|&pid| {
        descends(pid)
            && std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| is_driver_cmdline(&c, marker))
    })
}

/// kern's own processes (and the JavaScript driver's sh launcher) carry the marker too: only the
/// interpreter's whole command line is `python3 -c DRIVER [ipython:…] <marker>` or
/// `node --min-semi-space-size=8 -e DRIVER <marker>` (js/launch.sh).
fn is_driver_cmdline(cmdline: &[u8], marker: &str) -> bool {
    let args: Vec<&[u8]> = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(cmdline)
        .split(|b| *b == 0)
        .collect();
    let shape_ok = match args.as_slice() {
        [_, flag, _, _] => *flag == b"-c",
        [_, a, b, c, _] => {
            (*a == b"-c" && c.starts_with(b"ipython:"))
                || (*a == JS_HEAP_FLAG.as_bytes() && *b == b"-e")
        }
        _ => false,
    };
    shape_ok && args.last() == Some(&marker.as_bytes())
}

/// The one node option js/launch.sh gives the driver.
const JS_HEAP_FLAG: &str = "--min-semi-space-size=8";

/// The next frame of the running cell: any that arrived early first.
async fn next_frame(
    early: &mut std::collections::VecDeque<(u8, Vec<u8>)>,
    frames: &mut FrameReader<tokio::net::unix::pipe::Receiver>,
) -> std::result::Result<Option<(u8, Vec<u8>)>, ReadError> {
    match early.pop_front() {
        Some(f) => Ok(Some(f)),
        None => frames.next().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_is_told_from_kern_by_its_whole_command_line() {
        let m = "kern-kernel-00ff";
        assert!(is_driver_cmdline(
            b"python3\0-c\0import sys\0kern-kernel-00ff\0",
            m
        ));
        let kern = b"kern\0box\0jssbx-1\0--\0python3\0-c\0import sys\0kern-kernel-00ff\0";
        assert!(!is_driver_cmdline(kern, m));
        assert!(!is_driver_cmdline(b"python3\0-c\0x\0kern-kernel-0\0", m));
        assert!(!is_driver_cmdline(b"", m));
        assert!(is_driver_cmdline(
            b"python3\0-c\0import sys\0ipython:offline\0kern-kernel-00ff\0",
            m
        ));
        assert!(!is_driver_cmdline(
            b"python3\0-c\0import sys\0other\0kern-kernel-00ff\0",
            m
        ));
        assert!(is_driver_cmdline(
            b"node\0--min-semi-space-size=8\0-e\0driver\0kern-kernel-00ff\0",
            m
        ));
        assert!(!is_driver_cmdline(
            b"node\0--inspect\0-e\0driver\0kern-kernel-00ff\0",
            m
        ));
        assert!(
            language::JS_LAUNCH.contains(&format!("exec node {JS_HEAP_FLAG} -e \"$1\" \"$2\"")),
            "the launcher starts node as is_driver_cmdline expects"
        );
        let launcher = b"/bin/sh\0-c\0exec node\0kern-js-kernel\0driver\0kern-kernel-00ff\0";
        assert!(!is_driver_cmdline(launcher, m));
    }
}
