//! The serving task: it owns the kernel's box (or machine process), takes cells off the queue in
//! call order, feeds each to the driver and settles its promise from the frames that come back.
//!
//! A cell ends with the driver's done frame, or tears the kernel down: its deadline, output past
//! `maxOutputBytes`, a protocol violation, the box's death, close(), or an abort the cell does not
//! stop for within a grace.

use std::collections::VecDeque;
use std::mem;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{oneshot, watch, Notify};
use tokio::time::Sleep;

use super::discover::find_driver;
use super::host::Host;
use super::language::{self, Driver};
use super::protocol::{self, FrameReader, ReadError};
use super::{rich, Cell, CellOptions, ResultFn, Shared};
use crate::errors::{Error, Result};
use crate::lifecycle::cancel::{Cancel, StopReason};
use crate::lifecycle::fault::{self, Ending, Fault};
use crate::lifecycle::outcome::Outcome;
use crate::lifecycle::spawn::Pipes;
use crate::output::notes::HeadNotes;
use crate::output::{read_now, Sink};

/// How long an interrupted cell gets to stop before the kernel is torn down instead.
const INTERRUPT_GRACE: Duration = Duration::from_secs(2);
/// How long a closing kernel gets to exit on its own (stdin at EOF) before it is killed.
const CLOSE_GRACE: Duration = Duration::from_millis(500);
/// kern's stderr kept for messages about a kernel that died.
const STDERR_KEPT: usize = 64 * 1024;
/// The exit code of a cell whose kernel was torn down under it, as in 0.1.23.
const TORN_DOWN: i32 = -1;
/// Frames kept for a cell `submit` wrote before the serving task took it up.
const EARLY_FRAMES: usize = 1024;
/// How long the serving task polls the pipe for a cell's frames before it sleeps on the reactor,
/// while cells answer within it. Going to sleep and being woken for the answer costs a short cell
/// as much as its interpreter's work does on a VM (an idle vCPU's wake-up, then tokio's own);
/// polling meanwhile costs at most this much CPU per cell, and yields the CPU at each turn.
const SPIN: Duration = Duration::from_micros(100);
/// While cells take longer than [`SPIN`], one in this many is still polled for, to notice when
/// they are quick again (a cell that was not polled for cannot tell how soon it was answered).
const PROBE_EVERY: u32 = 16;

type Frame = (u8, Vec<u8>);
type FrameResult = std::result::Result<Option<Frame>, ReadError>;

/// How a cell ended for the kernel, and the answer for its caller.
type Answer = (CellEnd, Result<Outcome>);

/// The box side, owned by the serving task.
pub(super) struct Server {
    boxed: Host,
    /// The box's stdin, for cells `submit` could not write at once.
    stdin: Option<pipe::Sender>,
    frames: FrameReader<pipe::Receiver>,
    kern_stderr: Arc<Mutex<Vec<u8>>>,
    /// Set once kern's stderr reached EOF.
    stderr_done: watch::Receiver<bool>,
    cap: usize,
    marker: String,
    count: u32,
    shared: Arc<Mutex<Shared>>,
    pub(super) wake: Arc<Notify>,
    pub(super) alive: Arc<AtomicBool>,
    /// Why the kernel stopped serving, set as it stops.
    pub(super) ended: Arc<Mutex<Option<String>>>,
    /// Frames that arrived before the serving task took up the cell `submit` had already sent.
    early: VecDeque<Frame>,
    /// Interrupts go as a frame first, SIGINT only after this (language::Driver::signal_after).
    signal_after: Option<Duration>,
    /// Asks the stderr reader to catch up with what the pipe holds (once, at ready).
    catch_up: Option<oneshot::Sender<oneshot::Sender<()>>>,
    /// The last cell polled for ended within [`SPIN`] of being taken up: the next one is too.
    quick: bool,
}

pub(super) enum CellEnd {
    /// The kernel keeps serving.
    Served,
    /// The kernel is gone; the reason is for later cells.
    Gone(String),
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

    /// Takes an output, result or error frame; false once the cell's output passed `cap`.
    fn take(&mut self, kind: u8, payload: Vec<u8>, cap: usize) -> bool {
        self.total += payload.len();
        if self.total > cap {
            return false;
        }
        match kind {
            protocol::STDOUT => {
                if let Some(s) = self.out_sink.as_mut() {
                    s.push(&payload);
                }
                self.stdout.extend_from_slice(&payload);
            }
            protocol::STDERR => {
                if let Some(s) = self.err_sink.as_mut() {
                    s.push(&payload);
                }
                self.stderr.extend_from_slice(&payload);
            }
            protocol::RESULT => {
                let text = String::from_utf8_lossy(&payload).into_owned();
                if let Some(f) = &self.on_result {
                    f.call(text.clone(), ThreadsafeFunctionCallMode::NonBlocking);
                }
                self.rich.push(text);
            }
            _ => self.rich.push(rich::error_line(&payload)),
        }
        true
    }
}

/// The cell being served: what it collected, and whether it was interrupted.
struct Running {
    t0: Instant,
    count: u32,
    timeout: Duration,
    cancel: Arc<Cancel>,
    collect: Collect,
    interrupted: bool,
}

impl Running {
    fn new(opts: CellOptions, count: u32) -> Running {
        Running {
            t0: Instant::now(),
            count,
            timeout: opts.timeout,
            cancel: opts.cancel,
            collect: Collect {
                stdout: Vec::new(),
                stderr: Vec::new(),
                rich: Vec::new(),
                total: 0,
                out_sink: opts.on_stdout.map(Sink::new),
                err_sink: opts.on_stderr.map(Sink::new),
                on_result: opts.on_result,
            },
            interrupted: false,
        }
    }

    /// The cell's outcome from what it collected (taken out of `self`).
    fn outcome(&mut self, exit_code: i32, fault: Option<Fault>) -> Outcome {
        Outcome {
            truncated: false,
            stdout: mem::take(&mut self.collect.stdout),
            stderr: mem::take(&mut self.collect.stderr),
            exit_code,
            duration: self.t0.elapsed(),
            fault,
            files: Vec::new(),
            rich: mem::take(&mut self.collect.rich),
            execution_count: Some(self.count),
        }
    }
}

/// A running cell's timers: its deadline, and once it is interrupted, the grace it gets to stop
/// and when a SIGINT follows an interrupt frame.
struct Timers<'a> {
    deadline: Pin<&'a mut Sleep>,
    grace: Pin<&'a mut Sleep>,
    again: Pin<&'a mut Sleep>,
}

/// What woke a running cell's loop.
enum Event {
    Frame(FrameResult),
    Deadline,
    Abort,
    /// An interrupt frame went unanswered: time for SIGINT.
    Again,
    /// The interrupted cell did not stop within its grace.
    Grace,
    Shutdown,
}

impl Server {
    /// The serving side of a started box; the stderr reader runs from here on.
    pub(super) fn new(
        boxed: Host,
        pipes: Pipes,
        cap: usize,
        marker: String,
        language: Driver,
        shared: Arc<Mutex<Shared>>,
    ) -> Server {
        let kern_stderr = Arc::new(Mutex::new(Vec::new()));
        let (stderr_tx, stderr_done) = watch::channel(false);
        let kept = kern_stderr.clone();
        let (catch_up, caught_up) = oneshot::channel();
        crate::task::spawn(async move {
            keep_stderr(pipes.stderr, kept, caught_up).await;
            let _ = stderr_tx.send(true);
        });
        Server {
            boxed,
            stdin: Some(pipes.stdin),
            frames: FrameReader::new(pipes.stdout, cap.max(1 << 20) + 1024),
            kern_stderr,
            stderr_done,
            cap,
            marker,
            count: 0,
            shared,
            wake: Default::default(),
            alive: Arc::new(AtomicBool::new(true)),
            ended: Default::default(),
            early: Default::default(),
            signal_after: language.signal_after(),
            catch_up: Some(catch_up),
            quick: true,
        }
    }

    /// Waits for the driver's ready frame; the box is torn down when it does not come.
    pub(super) async fn ready(
        &mut self,
        language: Driver,
        startup: Duration,
        stop: &Cancel,
    ) -> Result<()> {
        let ready = tokio::select! {
            r = tokio::time::timeout(startup, self.frames.next()) => Some(r),
            _ = stop.fired() => None,
        };
        let Some(ready) = ready else {
            self.boxed.tear_down().await;
            let why = "the sandbox was closed while the kernel was starting";
            return Err(Error::Closed(why.into()));
        };
        match ready {
            Ok(Ok(Some((protocol::READY, _)))) => {
                self.catch_up_stderr().await;
                Ok(())
            }
            Err(_) => {
                self.boxed.tear_down().await;
                let secs = startup.as_secs();
                Err(Error::sandbox(format!(
                    "the kernel did not start within {secs}s"
                )))
            }
            _ => Err(self.startup_failure(language).await),
        }
    }

    /// kern wrote its notes before it started the box, so they are in the stderr pipe by the
    /// time the driver is ready: they are read (and queued for JS) before the kernel is handed out.
    async fn catch_up_stderr(&mut self) {
        let (ack, acked) = oneshot::channel();
        if let Some(catch_up) = self.catch_up.take() {
            if catch_up.send(ack).is_ok() {
                let _ = tokio::time::timeout(Duration::from_secs(1), acked).await;
            }
        }
    }

    /// Serves cells until the kernel is closed or its box dies; then refuses what is queued.
    pub(super) async fn serve(&mut self, shutdown: &Cancel) {
        let why = loop {
            if let Some(cell) = self.next_cell() {
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
            if let Some(why) = self.idle(shutdown).await {
                break why;
            }
        };
        self.stop_serving(&why);
        self.refuse_queued(&why);
    }

    /// The next queued cell, unless the kernel is closed.
    fn next_cell(&self) -> Option<Cell> {
        let mut shared = self.lock();
        if shared.closed {
            None
        } else {
            shared.queue.pop_front()
        }
    }

    /// Waits between cells for a new one; why the kernel ends if it does meanwhile.
    async fn idle(&mut self, shutdown: &Cancel) -> Option<String> {
        let frame = tokio::select! {
            biased;
            _ = shutdown.fired() => return Some(self.close_gracefully().await),
            _ = self.wake.notified() => return None,
            frame = self.frames.next(), if self.early.len() < EARLY_FRAMES => frame,
        };
        // Frames of a cell `submit` wrote are kept for it; between cells nothing else should
        // arrive but a background thread's output, which no cell owns. EOF means the box died.
        match frame {
            Ok(Some(f)) => {
                if self.lock().pending > 0 {
                    self.early.push_back(f);
                }
                None
            }
            Ok(None) | Err(_) => {
                let why = self.death_message().await;
                self.boxed.tear_down().await;
                Some(why)
            }
        }
    }

    /// Closes the queue and answers every cell still in it with the kernel's end.
    fn refuse_queued(&self, why: &str) {
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

    /// Runs one cell: writes it (unless `submit` did), then answers what wakes it until it ends.
    async fn serve_cell(
        &mut self,
        frame: Vec<u8>,
        sent: bool,
        opts: CellOptions,
        shutdown: &Cancel,
    ) -> Answer {
        self.count += 1;
        let mut cell = Running::new(opts, self.count);
        if !sent && !self.write_cell(&frame).await {
            return self.unwritable().await;
        }
        drop(frame);
        let deadline = tokio::time::sleep(cell.timeout);
        let grace = tokio::time::sleep(Duration::MAX / 4);
        let again = tokio::time::sleep(Duration::MAX / 4);
        tokio::pin!(deadline, grace, again);
        let mut timers = Timers {
            deadline,
            grace,
            again,
        };
        let polled = self.quick || self.count.is_multiple_of(PROBE_EVERY);
        let spin_until = polled.then(|| cell.t0 + SPIN);
        loop {
            if let Some(until) = spin_until {
                self.spin(until);
            }
            let ended = match self.next_event(&cell, &mut timers, shutdown).await {
                Event::Frame(frame) => self.on_frame(&mut cell, frame).await,
                Event::Deadline => {
                    let secs = fault::fmt_secs(cell.timeout.as_secs_f64());
                    let why = format!(
                        "the cell exceeded the {secs}s time limit; the kernel was torn down"
                    );
                    Some(self.torn_down(&mut cell, "timeout", why).await)
                }
                Event::Abort => self.on_abort(&mut cell, &mut timers).await,
                Event::Again => {
                    self.interrupt();
                    // Past the grace: once is enough (a repeat could land as the cell ends).
                    let next = tokio::time::Instant::now() + INTERRUPT_GRACE;
                    timers.again.as_mut().reset(next);
                    None
                }
                Event::Grace => {
                    let why = "a cell was aborted and did not stop when interrupted";
                    Some(self.gone(&mut cell, why, Error::Aborted).await)
                }
                Event::Shutdown => {
                    let err = "the kernel was closed while the cell was running";
                    let err = Error::KernelGone(err.into());
                    Some(self.gone(&mut cell, "close() was called", err).await)
                }
            };
            if let Some(answer) = ended {
                if polled {
                    self.quick = cell.t0.elapsed() < SPIN;
                }
                return answer;
            }
        }
    }

    /// Polls the pipe until a frame is buffered or `until` (see [`SPIN`]); the frame is then
    /// taken by `next_event` without a sleep. A cancel or deadline waits at most this long. One
    /// kernel polls at a time: the poll holds a tokio worker, and the others must stay free for
    /// every other task (the other kernels then sleep on the reactor as before).
    fn spin(&mut self, until: Instant) {
        static POLLING: AtomicBool = AtomicBool::new(false);
        if POLLING.swap(true, Ordering::Acquire) {
            return;
        }
        while self.early.is_empty() && !self.frames.fill_now() && Instant::now() < until {
            std::thread::yield_now();
        }
        POLLING.store(false, Ordering::Release);
    }

    /// Writes a cell frame `submit` could not; false when the box's stdin is gone.
    async fn write_cell(&mut self, frame: &[u8]) -> bool {
        match self.stdin.as_mut() {
            Some(w) => w.write_all(frame).await.is_ok(),
            None => false,
        }
    }

    /// A cell that could not be written: the kernel is gone.
    async fn unwritable(&mut self) -> Answer {
        let why = self.death_message().await;
        self.boxed.tear_down().await;
        let err = Error::KernelGone(format!("the kernel is closed: {why}"));
        (CellEnd::Gone(why), Err(err))
    }

    /// Waits for whatever happens next to the running cell. (No handler runs in here: the
    /// futures that borrow `self` are dropped before the event is acted on.)
    async fn next_event(
        &mut self,
        cell: &Running,
        timers: &mut Timers<'_>,
        shutdown: &Cancel,
    ) -> Event {
        let interrupted = cell.interrupted;
        tokio::select! {
            frame = next_frame(&mut self.early, &mut self.frames) => Event::Frame(frame),
            _ = timers.deadline.as_mut(), if !interrupted => Event::Deadline,
            _ = cell.cancel.fired(), if !interrupted => Event::Abort,
            // Armed by an interrupt frame; fires for a cell still running (synchronous code).
            _ = timers.again.as_mut(), if interrupted => Event::Again,
            _ = timers.grace.as_mut(), if interrupted => Event::Grace,
            _ = shutdown.fired() => Event::Shutdown,
        }
    }

    /// Acts on a frame of the running cell; the answer once the cell has ended.
    async fn on_frame(&mut self, cell: &mut Running, frame: FrameResult) -> Option<Answer> {
        let (kind, payload) = match frame {
            Ok(Some(f)) => f,
            Ok(None) | Err(ReadError::Io) => return Some(self.died(cell).await),
            Err(ReadError::Oversize(n)) => {
                let why = format!(
                    "the kernel sent a {n}-byte frame, past the maxOutputBytes cap of {} bytes; \
                     the kernel was torn down",
                    self.cap
                );
                return Some(self.torn_down(cell, "killed", why).await);
            }
        };
        match kind {
            protocol::STDOUT | protocol::STDERR | protocol::RESULT | protocol::ERROR => {
                if cell.collect.take(kind, payload, self.cap) {
                    return None;
                }
                let why = format!(
                    "the cell's output passed the maxOutputBytes cap of {} bytes; \
                     the kernel was torn down",
                    self.cap
                );
                Some(self.torn_down(cell, "killed", why).await)
            }
            protocol::DONE => Some(self.done(cell, &payload).await),
            _ => {
                let why = format!(
                    "the kernel sent an unknown frame ({kind:#04x}); the kernel was torn down"
                );
                Some(self.torn_down(cell, "killed", why).await)
            }
        }
    }

    /// The driver's done frame: the cell ended and the kernel serves on.
    async fn done(&mut self, cell: &mut Running, payload: &[u8]) -> Answer {
        let rc = std::str::from_utf8(payload)
            .ok()
            .and_then(|s| s.parse::<i32>().ok());
        let Some(rc) = rc else {
            let why = "the kernel sent a done frame with no usable exit code; \
                       the kernel was torn down";
            return self.torn_down(cell, "killed", why.into()).await;
        };
        cell.collect.finish_streams().await;
        let answer = if cell.interrupted {
            Err(Error::Aborted)
        } else {
            Ok(cell.outcome(rc, None))
        };
        (CellEnd::Served, answer)
    }

    /// The box died under the cell.
    async fn died(&mut self, cell: &mut Running) -> Answer {
        let (fault, why) = self.died_in_cell().await;
        cell.collect.finish_streams().await;
        let answer = match fault {
            // An aborted call rejects, whatever ended the cell after.
            _ if cell.interrupted => Err(Error::Aborted),
            Some(f) => Ok(cell.outcome(TORN_DOWN, Some(f))),
            None => Err(Error::KernelGone(why.clone())),
        };
        (CellEnd::Gone(why), answer)
    }

    /// The cell's abort signal fired (or the sandbox closed under it). A closed sandbox ends the
    /// kernel; an abort interrupts the cell, as a frame where the driver takes one, else SIGINT.
    async fn on_abort(&mut self, cell: &mut Running, timers: &mut Timers<'_>) -> Option<Answer> {
        if cell.cancel.reason() == Some(StopReason::Closed) {
            let err = Error::Closed("the sandbox was closed while the cell was running".into());
            return Some(self.gone(cell, "the sandbox was closed", err).await);
        }
        cell.interrupted = true;
        let now = tokio::time::Instant::now();
        let frame = protocol::encode(protocol::INTERRUPT, b"");
        // A plain write on the non-blocking pipe (no wait on tokio's readiness), of at most
        // PIPE_BUF bytes: whole or not at all.
        let framed = self.signal_after.is_some()
            && self
                .stdin
                .as_ref()
                .is_some_and(|w| rustix::io::write(w, &frame) == Ok(frame.len()));
        if framed {
            timers.grace.as_mut().reset(now + INTERRUPT_GRACE);
            let again = now + self.signal_after.unwrap_or_default();
            timers.again.as_mut().reset(again);
        } else if !self.interrupt() {
            timers.grace.as_mut().reset(now);
        } else {
            timers.grace.as_mut().reset(now + INTERRUPT_GRACE);
        }
        None
    }

    /// Ends the kernel under the cell, which rejects with `err`; `why` is for later cells.
    async fn gone(&mut self, cell: &mut Running, why: &str, err: Error) -> Answer {
        self.boxed.tear_down().await;
        cell.collect.finish_streams().await;
        (CellEnd::Gone(why.into()), Err(err))
    }

    /// Ends the kernel under the cell, which resolves with a fault of `kind`.
    async fn torn_down(
        &mut self,
        cell: &mut Running,
        kind: &'static str,
        message: String,
    ) -> Answer {
        let survivors = self.boxed.tear_down().await;
        cell.collect.finish_streams().await;
        let mut msg = message.clone();
        if let Some(s) = survivors {
            msg.push_str("; ");
            msg.push_str(&s);
        }
        let fault = Some(Fault { kind, message: msg });
        (CellEnd::Gone(message), Ok(cell.outcome(TORN_DOWN, fault)))
    }

    /// The box died under a cell: a fault to report, or (never started) a startup error.
    async fn died_in_cell(&mut self) -> (Option<Fault>, String) {
        let (exit_code, classified, _) = self.ended().await;
        let fault = match classified {
            Some(f) if f.kind == "startup_failed" => return (None, f.message),
            Some(f) => f,
            None => Fault {
                kind: "killed",
                message: format!(
                    "the kernel process exited during the cell (exit code {exit_code}); \
                     the kernel is gone"
                ),
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

/// The next frame of the running cell: any that arrived early first.
async fn next_frame(
    early: &mut VecDeque<Frame>,
    frames: &mut FrameReader<pipe::Receiver>,
) -> FrameResult {
    match early.pop_front() {
        Some(f) => Ok(Some(f)),
        None => frames.next().await,
    }
}

/// Keeps the first bytes of kern's stderr (its own messages; the driver's go through frames) and
/// queues kern's leading notes for JS. Asked through `catch_up`, it reads what the pipe holds at
/// once and acknowledges.
async fn keep_stderr(
    mut r: pipe::Receiver,
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
