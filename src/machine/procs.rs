//! The processes started in one machine, host side: each one's captured output (bounded), the
//! callbacks subscribed to it, and its exit. The agent streams every process's output and exit;
//! the reader task feeds them here, so `attach` and `wait` need no round trip.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::lifecycle::fault::Fault;
use crate::lifecycle::outcome::Outcome;
use crate::output::{keep, ChunkFn, Sink};

/// Output that arrives for a pid before its spawn answer was handled is held, up to this much.
const EARLY_BYTES: usize = 16 << 20;
/// Exited processes kept for a late `wait()`/`exitCode`, per machine.
const EXITED_KEPT: usize = 256;

/// How a process ended.
#[derive(Clone, Debug)]
pub struct Exit {
    pub code: i32,
    pub at: Instant,
    pub fault: Option<Fault>,
    /// The machine died under the process (not closed): why, for the calls still waiting.
    pub died: Option<String>,
}

/// Output as it arrives, for a host-side consumer (a kernel's relay): the fd and the bytes.
pub type Raw = (u8, Vec<u8>);

/// What one handle subscribes to a process's output with.
#[derive(Default)]
pub struct Subscribers {
    pub stdout: Option<ChunkFn>,
    pub stderr: Option<ChunkFn>,
    /// Both streams merged (a PTY has only one).
    pub data: Option<ChunkFn>,
    pub raw: Option<mpsc::UnboundedSender<Raw>>,
}

/// One handle's subscription.
pub struct Sub {
    pub id: u32,
    stdout: Option<Sink>,
    stderr: Option<Sink>,
    data: Option<Sink>,
    raw: Option<mpsc::UnboundedSender<Raw>>,
}

impl Sub {
    fn new(id: u32, s: Subscribers) -> Sub {
        Sub {
            id,
            stdout: s.stdout.map(Sink::new),
            stderr: s.stderr.map(Sink::new),
            data: s.data.map(Sink::new),
            raw: s.raw,
        }
    }

    fn push(&mut self, fd: u8, bytes: &[u8]) {
        if let Some(r) = &self.raw {
            let _ = r.send((fd, bytes.to_vec()));
        }
        let s = if fd == 2 {
            &mut self.stderr
        } else {
            &mut self.stdout
        };
        if let Some(s) = s {
            s.push(bytes);
        }
        if let Some(d) = &mut self.data {
            d.push(bytes);
        }
    }

    /// Delivers what is pending (bounded wait), so a result never resolves ahead of its output.
    pub async fn finish(self) {
        for s in [self.stdout, self.stderr, self.data].into_iter().flatten() {
            s.finish().await;
        }
    }
}

#[derive(Default)]
struct Output {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    truncated: bool,
    subs: Vec<Sub>,
    next_sub: u32,
}

pub struct Proc {
    pub pid: u32,
    pub argv: Vec<String>,
    pub cwd: String,
    pub pty: bool,
    /// Started by the binding itself (a kernel's driver): not listed by processes().
    pub internal: bool,
    cap: usize,
    started: Instant,
    out: Mutex<Output>,
    exit: watch::Sender<Option<Exit>>,
    /// Set once the subscribers of the exit have had their output delivered.
    delivered: watch::Sender<bool>,
    /// The deadline (seconds) that killed it, if one did.
    timeout: Mutex<Option<f64>>,
}

impl Proc {
    pub fn new(pid: u32, argv: Vec<String>, cwd: String, pty: bool, cap: usize) -> Proc {
        Proc {
            pid,
            argv,
            cwd,
            pty,
            internal: false,
            cap,
            started: Instant::now(),
            out: Mutex::new(Output::default()),
            exit: watch::channel(None).0,
            delivered: watch::channel(false).0,
            timeout: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Output> {
        self.out.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn subscribe(&self, subs: Subscribers) -> u32 {
        let mut o = self.lock();
        o.next_sub += 1;
        let id = o.next_sub;
        if self.exit.borrow().is_none() {
            o.subs.push(Sub::new(id, subs));
        }
        id
    }

    /// Drops a handle's callbacks; the process runs on.
    pub fn unsubscribe(&self, id: u32) {
        self.lock().subs.retain(|s| s.id != id);
    }

    fn feed(&self, fd: u8, bytes: &[u8]) {
        let mut o = self.lock();
        let o = &mut *o;
        let buf = if fd == 2 {
            &mut o.stderr
        } else {
            &mut o.stdout
        };
        o.truncated |= keep(buf, bytes, self.cap);
        for s in &mut o.subs {
            s.push(fd, bytes);
        }
    }

    /// Records the exit (once) and delivers the subscribers' pending output in the background.
    pub fn finish(self: &Arc<Self>, code: i32, fault: Option<Fault>, died: Option<String>) {
        let first = self.exit.send_if_modified(|e| {
            if e.is_some() {
                return false;
            }
            *e = Some(Exit {
                code,
                at: Instant::now(),
                fault,
                died,
            });
            true
        });
        if !first {
            return;
        }
        let subs = std::mem::take(&mut self.lock().subs);
        let me = self.clone();
        crate::task::spawn(async move {
            for s in subs {
                s.finish().await;
            }
            me.delivered.send_replace(true);
        });
    }

    pub fn exit(&self) -> Option<Exit> {
        self.exit.borrow().clone()
    }

    /// Waits for the exit, and for its output to have reached the callbacks.
    pub async fn exited(&self) -> Exit {
        let mut rx = self.exit.subscribe();
        let exit = rx
            .wait_for(Option::is_some)
            .await
            .map(|e| e.clone().expect("checked"))
            .unwrap_or_else(|_| Exit {
                code: -1,
                at: Instant::now(),
                fault: None,
                died: None,
            });
        let mut d = self.delivered.subscribe();
        let _ = d.wait_for(|v| *v).await;
        exit
    }

    /// The process's result once it exited; an error if the machine died under it.
    pub fn result(&self, exit: &Exit) -> crate::errors::Result<Outcome> {
        match &exit.died {
            Some(why) => Err(crate::errors::Error::MachineGone(format!(
                "the machine is gone: {why}"
            ))),
            None => Ok(self.outcome(exit)),
        }
    }

    /// The process's result so far (its exit must have been recorded).
    pub fn outcome(&self, exit: &Exit) -> Outcome {
        let o = self.lock();
        Outcome {
            stdout: o.stdout.clone(),
            stderr: o.stderr.clone(),
            exit_code: exit.code,
            duration: exit.at.saturating_duration_since(self.started),
            fault: exit.fault.clone(),
            files: Vec::new(),
            truncated: o.truncated,
            rich: Vec::new(),
            execution_count: None,
        }
    }
}

/// Every process of one machine by pid, and output that arrived ahead of its process.
#[derive(Default)]
pub struct Table {
    procs: HashMap<u32, Arc<Proc>>,
    early: HashMap<u32, Vec<Early>>,
    early_bytes: usize,
    /// Exited pids in exit order, to forget the oldest.
    exited: std::collections::VecDeque<u32>,
}

enum Early {
    Out(u8, Vec<u8>),
    Exit(i32),
}

pub type SharedTable = Arc<Mutex<Table>>;

impl Table {
    pub fn get(&self, pid: u32) -> Option<Arc<Proc>> {
        self.procs.get(&pid).cloned()
    }

    /// Adds a process and replays what arrived for it before.
    pub fn insert(&mut self, p: Arc<Proc>) {
        let early = self.early.remove(&p.pid).unwrap_or_default();
        self.procs.insert(p.pid, p.clone());
        for e in early {
            match e {
                Early::Out(fd, bytes) => {
                    self.early_bytes -= bytes.len();
                    p.feed(fd, &bytes);
                }
                Early::Exit(code) => self.exit(p.pid, code),
            }
        }
    }

    pub fn output(&mut self, pid: u32, fd: u8, bytes: Vec<u8>) {
        match self.procs.get(&pid) {
            Some(p) => p.feed(fd, &bytes),
            None if self.early_bytes + bytes.len() <= EARLY_BYTES => {
                self.early_bytes += bytes.len();
                self.early
                    .entry(pid)
                    .or_default()
                    .push(Early::Out(fd, bytes));
            }
            None => {}
        }
    }

    pub fn exit(&mut self, pid: u32, code: i32) {
        let Some(p) = self.procs.get(&pid).cloned() else {
            self.early.entry(pid).or_default().push(Early::Exit(code));
            return;
        };
        let fault = crate::lifecycle::fault::classify_process(code, p.timed_out());
        p.finish(code, fault, None);
        self.exited.push_back(pid);
        while self.exited.len() > EXITED_KEPT {
            if let Some(old) = self.exited.pop_front() {
                self.procs.remove(&old);
            }
        }
    }

    pub fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
        self.exited.retain(|p| *p != pid);
    }

    pub fn running(&self) -> Vec<Arc<Proc>> {
        let mut v: Vec<_> = self
            .procs
            .values()
            .filter(|p| p.exit().is_none())
            .cloned()
            .collect();
        v.sort_by_key(|p| p.pid);
        v
    }

    /// The machine is gone: every process still running ends with it. `died`: it was not
    /// closed but died, and why (exec and wait then reject with it).
    pub fn machine_gone(&mut self, died: Option<&str>) {
        for p in self.running() {
            let fault = Some(crate::lifecycle::fault::machine_gone());
            p.finish(-1, fault, died.map(str::to_string));
        }
        self.early.clear();
        self.early_bytes = 0;
    }
}

/// A deadline the process was given and overran: its exit then reads as a timeout.
impl Proc {
    pub fn mark_timed_out(&self, timeout_s: f64) {
        *self.timeout.lock().unwrap_or_else(|p| p.into_inner()) = Some(timeout_s);
    }

    fn timed_out(&self) -> Option<f64> {
        *self.timeout.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub fn secs(d: f64) -> Duration {
    Duration::from_secs_f64(d)
}
