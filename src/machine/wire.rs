//! The host end of the agent's connection: frames (a JSON header and raw bytes, see
//! agent/src/proto.rs), requests answered by id, and one reader task that routes everything else
//! (process output, exits, watch events, port streams) to whoever registered for it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;

use crate::errors::{Error, Result};

/// A frame's payload may not exceed this; larger writes are split by the caller.
pub const MAX_PAYLOAD: usize = 64 << 20;
/// Headers are small JSON objects; anything past this is a broken peer.
const MAX_HEADER: usize = 1 << 20;

pub struct Frame {
    pub head: Value,
    pub data: Vec<u8>,
}

impl Frame {
    pub fn str(&self, key: &str) -> &str {
        self.head.get(key).and_then(Value::as_str).unwrap_or("")
    }

    pub fn u32(&self, key: &str) -> Option<u32> {
        self.head
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|v| u32::try_from(v).ok())
    }
}

/// A frame's lengths and header; the payload follows it on the wire as it is (not copied).
pub fn encode_head(head: &Value, payload_len: usize) -> Vec<u8> {
    let h = serde_json::to_vec(head).expect("a JSON value always serializes");
    let mut out = Vec::with_capacity(8 + h.len());
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    out.extend_from_slice(&(payload_len as u32).to_be_bytes());
    out.extend_from_slice(&h);
    out
}

/// The next frame, or None at a clean EOF between frames.
pub async fn read_frame(r: &mut OwnedReadHalf) -> std::io::Result<Option<Frame>> {
    let mut lens = [0u8; 8];
    match r.read_exact(&mut lens).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let hl = u32::from_be_bytes(lens[..4].try_into().expect("4 bytes")) as usize;
    let dl = u32::from_be_bytes(lens[4..].try_into().expect("4 bytes")) as usize;
    if hl > MAX_HEADER || dl > MAX_PAYLOAD {
        return Err(std::io::Error::other("the agent sent an oversized frame"));
    }
    let mut h = vec![0u8; hl];
    r.read_exact(&mut h).await?;
    let mut data = vec![0u8; dl];
    r.read_exact(&mut data).await?;
    let head = serde_json::from_slice(&h)
        .map_err(|e| std::io::Error::other(format!("the agent sent a bad header: {e}")))?;
    Ok(Some(Frame { head, data }))
}

/// The agent's answer to a request: its header and payload.
pub type Reply = Result<Frame>;

/// Requests in flight and the writing half; shared by every caller of one machine.
pub struct Conn {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    next_id: AtomicU32,
    pending: Mutex<HashMap<u32, oneshot::Sender<Reply>>>,
    gone: AtomicBool,
    why_gone: Mutex<String>,
}

impl Conn {
    pub fn new(writer: OwnedWriteHalf) -> Conn {
        Conn {
            writer: tokio::sync::Mutex::new(writer),
            next_id: AtomicU32::new(1),
            pending: Mutex::new(HashMap::new()),
            gone: AtomicBool::new(false),
            why_gone: Mutex::new(String::new()),
        }
    }

    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    pub fn gone_error(&self) -> Error {
        let why = self.why_gone.lock().unwrap_or_else(|p| p.into_inner());
        Error::MachineGone(if why.is_empty() {
            "the machine is closed".into()
        } else {
            format!("the machine is gone: {why}")
        })
    }

    /// Sends a request and waits for its answer; an `error` answer becomes the matching Error.
    pub async fn request(&self, t: &str, head: Value, data: &[u8]) -> Result<Frame> {
        let rx = self.send_request(t, head, data).await?;
        rx.await.unwrap_or_else(|_| Err(self.gone_error()))
    }

    /// Sends a request now and returns the wait for its answer: requests that must reach the
    /// agent in order while several are in flight (a snapshot's restore).
    pub async fn send_request(
        &self,
        t: &str,
        mut head: Value,
        data: &[u8],
    ) -> Result<oneshot::Receiver<Reply>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        head["t"] = json!(t);
        head["id"] = json!(id);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        if let Err(e) = self.send_raw(&head, data).await {
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            return Err(e);
        }
        Ok(rx)
    }

    /// Sends a frame that has no answer (port stream traffic).
    pub async fn send(&self, head: &Value, data: &[u8]) -> Result<()> {
        self.send_raw(head, data).await
    }

    async fn send_raw(&self, head: &Value, data: &[u8]) -> Result<()> {
        if self.is_gone() {
            return Err(self.gone_error());
        }
        let head = encode_head(head, data.len());
        // One lock for header and payload: frames never interleave.
        let mut w = self.writer.lock().await;
        let sent = match w.write_all(&head).await {
            Ok(()) if !data.is_empty() => w.write_all(data).await,
            other => other,
        };
        sent.map_err(|_| self.gone_error())
    }

    /// Settles the request a reply answers; false if the frame is not a reply.
    pub fn settle(&self, f: Frame) -> std::result::Result<(), Frame> {
        let reply = match f.str("t") {
            "ok" => Ok(()),
            "error" => Err(()),
            _ => return Err(f),
        };
        let Some(id) = f.u32("id") else {
            return Ok(());
        };
        let waiter = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        if let Some(tx) = waiter {
            let _ = tx.send(match reply {
                Ok(()) => Ok(f),
                Err(()) => Err(agent_error(f.str("code"), f.str("message"))),
            });
        }
        Ok(())
    }

    /// The connection ended: every request in flight and every later one fails with `why`.
    pub fn fail_all(&self, why: &str) {
        *self.why_gone.lock().unwrap_or_else(|p| p.into_inner()) = why.to_string();
        self.gone.store(true, Ordering::Release);
        let pending: Vec<_> = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for (_, tx) in pending {
            let _ = tx.send(Err(self.gone_error()));
        }
    }
}

/// The agent's error codes onto ours (the same names, where we have them).
pub fn agent_error(code: &str, message: &str) -> Error {
    let m = message.to_string();
    match code {
        "ERR_NOT_FOUND" => Error::NotFound(m),
        "ERR_NOT_A_DIRECTORY" => Error::NotADirectory(m),
        "ERR_IS_A_DIRECTORY" => Error::IsADirectory(m),
        "ERR_EXISTS" => Error::Exists(m),
        "ERR_PERMISSION_DENIED" => Error::PermissionDenied(m),
        "ERR_NO_SPACE" => Error::NoSpace(m),
        "ERR_TOO_LARGE" => Error::TooLarge(m),
        "ERR_INVALID_ARGUMENT" => Error::InvalidOption(m),
        "ERR_PROCESS_NOT_FOUND" => Error::ProcessNotFound(m),
        "ERR_PROCESS_EXITED" => Error::ProcessExited(m),
        "ERR_STDIN_CLOSED" => Error::StdinClosed(m),
        "ERR_CONNECTION_REFUSED" => Error::ConnectionRefused(m),
        _ => Error::Sandbox(m),
    }
}

/// Shared ownership of the connection for the tasks that use it.
pub type SharedConn = Arc<Conn>;
