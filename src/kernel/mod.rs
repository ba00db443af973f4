//! The warm kernel: one resident interpreter (Python, or node for JavaScript and TypeScript) in a
//! long-lived box, fed cells over a pipe.
//!
//! One task owns the box and serves cells strictly in the order they were queued, settling each
//! cell's promise itself; an idle kernel gets a new cell written at once from the JS thread, so
//! the interpreter starts while that task wakes up. A per-cell deadline, an output past
//! `maxOutputBytes`, a protocol violation or the box's death tears the kernel down; an abort
//! interrupts the cell (KeyboardInterrupt) and tears down only a cell that does not stop within
//! a grace.
//!
//! Here is the handle the binding holds ([`Kernel`]); the serving task is `serve`, finding the
//! driver among the host's processes (to interrupt it) is `discover`, and where the driver runs (a
//! box of its own, or a process in a machine, started by `in_machine`) is `host`.

mod discover;
pub mod host;
pub mod in_machine;
pub mod language;
pub mod protocol;
pub mod rich;
mod serve;

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Notify};

use crate::errors::{Error, Result};
use crate::lifecycle::cancel::{Cancel, StopReason};
use crate::lifecycle::outcome::Outcome;
use crate::lifecycle::spawn::Pipes;
use crate::output::{ChunkFn, ResultFn};
use host::Host;
use language::Driver;
use serve::Server;

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
        let shared = Arc::new(Mutex::new(Shared {
            queue: Default::default(),
            pending: 0,
            closed: false,
            stdin: Some(dup_fd(&pipes.stdin)?),
        }));
        let mut server = Server::new(boxed, pipes, cap, marker, language, shared.clone());
        server.ready(language, startup, stop).await?;
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
        crate::task::spawn(async move {
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
    /// the SandboxError of a closed kernel. An idle kernel gets the cell at once, written from
    /// here.
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
