//! The one task that reads the agent's connection and routes each frame: answers to their
//! requests, process output and exits to the process table, watch events to their callbacks,
//! port traffic to its relay. When the connection ends the machine is gone, and everything
//! waiting on it is told so.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use tokio::io::AsyncReadExt;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::watch;

use super::ports::{FromBox, Streams};
use super::procs::SharedTable;
use super::wire::{self, Frame, SharedConn};
use crate::output::notes::HeadNotes;

/// A watch's JS callback, handed each event as `{"type":…,"path":…}` JSON; weak, like ChunkFn.
pub type EventFn = crate::output::ResultFn;

/// Events that arrived before their watch was registered are held, up to this many.
const EARLY_EVENTS: usize = 4096;
/// kern's stderr kept for messages about a machine that did not start or died.
const STDERR_KEPT: usize = 64 * 1024;

#[derive(Default)]
pub struct WatchTable {
    fns: HashMap<u32, EventFn>,
    early: Vec<(u32, String)>,
}

pub type Watches = Arc<Mutex<WatchTable>>;

pub fn add_watch(w: &Watches, id: u32, f: EventFn) {
    let mut t = w.lock().unwrap_or_else(|p| p.into_inner());
    let early = std::mem::take(&mut t.early);
    for (wid, ev) in early {
        if wid == id {
            f.call(ev, ThreadsafeFunctionCallMode::NonBlocking);
        } else {
            t.early.push((wid, ev));
        }
    }
    t.fns.insert(id, f);
}

pub fn remove_watch(w: &Watches, id: u32) {
    let mut t = w.lock().unwrap_or_else(|p| p.into_inner());
    t.fns.remove(&id);
    t.early.retain(|(wid, _)| *wid != id);
}

pub struct Routes {
    pub rd: OwnedReadHalf,
    pub conn: SharedConn,
    pub table: SharedTable,
    pub streams: Streams,
    pub watches: Watches,
    pub alive: Arc<AtomicBool>,
    /// Set by close(): the connection's end is then no death.
    pub closing: Arc<AtomicBool>,
    pub stderr: KernStderr,
}

pub fn spawn(mut r: Routes) {
    crate::task::spawn(async move {
        let why = loop {
            match wire::read_frame(&mut r.rd).await {
                Ok(Some(f)) => route(&r, f),
                Ok(None) => break String::new(),
                Err(e) => break e.to_string(),
            }
        };
        r.alive.store(false, Ordering::Release);
        let kern = r.stderr.text().await;
        let why = match (why.is_empty(), kern.is_empty()) {
            (true, true) => "its agent closed the connection (the box ended)".to_string(),
            (true, false) => format!("the box ended: {kern}"),
            (false, _) => why,
        };
        let closing = r.closing.load(Ordering::Acquire);
        r.conn.fail_all(if closing { "" } else { &why });
        r.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .machine_gone((!closing).then_some(why.as_str()));
        let streams: Vec<_> = r
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for (_, s) in streams {
            let _ = s.send(FromBox::Closed);
        }
        r.watches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .fns
            .clear();
    });
}

fn route(r: &Routes, f: Frame) {
    let f = match r.conn.settle(f) {
        Ok(()) => return,
        Err(f) => f,
    };
    match f.str("t") {
        "out" => {
            let (Some(pid), Some(fd)) = (f.u32("pid"), f.u32("fd")) else {
                return;
            };
            let mut t = r.table.lock().unwrap_or_else(|p| p.into_inner());
            t.output(pid, fd as u8, f.data);
        }
        "exit" => {
            let Some(pid) = f.u32("pid") else { return };
            let code = f.head.get("code").and_then(|c| c.as_i64()).unwrap_or(-1) as i32;
            r.table
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .exit(pid, code);
        }
        "event" => {
            let Some(w) = f.u32("watch") else { return };
            let ev = serde_json::json!({"type": f.str("type"), "path": f.str("path")}).to_string();
            let mut t = r.watches.lock().unwrap_or_else(|p| p.into_inner());
            match t.fns.get(&w) {
                Some(cb) => {
                    cb.call(ev, ThreadsafeFunctionCallMode::NonBlocking);
                }
                None if t.early.len() < EARLY_EVENTS => t.early.push((w, ev)),
                None => {}
            }
        }
        kind @ ("data" | "eof" | "closed") => {
            let Some(s) = f.u32("stream") else { return };
            let mut streams = r.streams.lock().unwrap_or_else(|p| p.into_inner());
            let msg = match kind {
                "data" => FromBox::Data(f.data),
                "eof" => FromBox::Eof,
                _ => FromBox::Closed,
            };
            let closed = matches!(msg, FromBox::Closed);
            if let Some(tx) = streams.get(&s) {
                let _ = tx.send(msg);
            }
            if closed {
                streams.remove(&s);
            }
        }
        _ => {}
    }
}

/// kern's stderr for a machine's box: its leading notes go to JS as warnings (see output::notes),
/// the first bytes are kept for messages about a box that did not start or died.
pub struct KernStderr {
    kept: Arc<Mutex<Vec<u8>>>,
    done: watch::Receiver<bool>,
}

impl KernStderr {
    /// What kern said, once its stderr ended (or after a short wait), notes left out.
    pub async fn text(&self) -> String {
        let mut d = self.done.clone();
        let _ =
            tokio::time::timeout(std::time::Duration::from_millis(500), d.wait_for(|v| *v)).await;
        let k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        crate::lifecycle::fault::without_kern_notices(&k)
            .trim()
            .to_string()
    }
}

pub fn keep_kern_stderr(mut rd: tokio::net::unix::pipe::Receiver) -> KernStderr {
    let kept: Arc<Mutex<Vec<u8>>> = Default::default();
    let (tx, done) = watch::channel(false);
    let k = kept.clone();
    crate::task::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        let mut head = HeadNotes::new();
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    head.feed(&buf[..n]);
                    let mut k = k.lock().unwrap_or_else(|p| p.into_inner());
                    let room = STDERR_KEPT.saturating_sub(k.len());
                    k.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        tx.send_replace(true);
    });
    KernStderr { kept, done }
}

/// Reads and drops what the box writes to kern's stdout (its console): nothing of ours goes
/// there, but a full pipe would stall kern.
pub fn drain(mut rd: tokio::net::unix::pipe::Receiver) {
    crate::task::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = rd.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    });
}
