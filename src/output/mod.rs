//! Capped, streamed capture of a box's stdout/stderr.
//!
//! One read loop per stream. The capture keeps at most `cap` bytes but keeps draining past it, so
//! a flooding box never blocks on a full pipe. Chunks go to the JS callback through an unref'd
//! ThreadsafeFunction with a window of bytes in flight; while the window is full, new output is
//! merged into one pending chunk. A callback that keeps up (even one that lags for a while) sees
//! every byte in order; one that falls far behind loses output past the pending bound instead of
//! growing host memory.

pub mod js_string;
pub mod notes;
pub mod trim;

use std::future::Future;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use js_string::Chunk;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;

/// napi's own queue bound; our byte window below keeps us well under it.
pub const QUEUE_DEPTH: usize = 1024;
const READ_SIZE: usize = 64 * 1024;
/// Bytes and chunks handed to JS but not yet consumed, per stream.
const WINDOW_BYTES: usize = 8 << 20;
const WINDOW_CHUNKS: usize = 256;
/// Bytes merged while the window is full, per stream; past this, output is dropped.
const PENDING_BYTES: usize = 8 << 20;
/// How long a finished call waits for JS to consume what it was handed.
const DELIVERY_WAIT: Duration = Duration::from_secs(10);

/// A JS chunk callback: not callee-handled (lib/calls.js wraps it so it never throws), weak
/// (never keeps Node alive), bounded.
pub type ChunkFn = ThreadsafeFunction<Chunk, (), Chunk, Status, false, true, QUEUE_DEPTH>;

/// A JS callback handed a JSON text (a kernel's rich result, a watch event) as it is produced;
/// weak and bounded, like ChunkFn.
pub type ResultFn = ThreadsafeFunction<String, (), String, Status, false, true, QUEUE_DEPTH>;

#[derive(Debug, Default)]
pub struct Captured {
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

/// Appends what fits under `cap`; reports whether anything was cut.
pub fn keep(out: &mut Vec<u8>, chunk: &[u8], cap: usize) -> bool {
    let room = cap.saturating_sub(out.len());
    if chunk.len() <= room {
        if out.capacity() - out.len() < chunk.len() {
            // Grow geometrically but never past the cap, so a capped stream holds at most `cap`.
            let want = (out.capacity() * 2)
                .max(out.len() + chunk.len())
                .max(READ_SIZE)
                .min(cap);
            out.reserve_exact(want - out.len());
        }
        out.extend_from_slice(chunk);
        false
    } else {
        out.extend_from_slice(&chunk[..room]);
        true
    }
}

/// The JS side of one stream: a byte window in flight plus one merged pending chunk.
pub struct Sink {
    f: ChunkFn,
    in_flight: Arc<AtomicUsize>,
    chunks: Arc<AtomicUsize>,
    freed: Arc<Notify>,
    pending: Vec<u8>,
}

impl Sink {
    pub fn new(f: ChunkFn) -> Sink {
        Sink {
            f,
            in_flight: Default::default(),
            chunks: Default::default(),
            freed: Default::default(),
            pending: Vec::new(),
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        if self.pending.len() + chunk.len() <= PENDING_BYTES {
            self.pending.extend_from_slice(chunk);
        }
        self.send();
    }

    /// Hands the pending bytes to JS if the window has room (or nothing is in flight).
    fn send(&mut self) {
        let flying = self.in_flight.load(Ordering::Acquire);
        let full = self.chunks.load(Ordering::Acquire) >= WINDOW_CHUNKS
            || (flying > 0 && flying + self.pending.len() > WINDOW_BYTES);
        if self.pending.is_empty() || full {
            return;
        }
        let data = std::mem::take(&mut self.pending);
        let len = data.len();
        self.in_flight.fetch_add(len, Ordering::AcqRel);
        self.chunks.fetch_add(1, Ordering::AcqRel);
        let (bytes, chunks, freed) = (
            self.in_flight.clone(),
            self.chunks.clone(),
            self.freed.clone(),
        );
        let status = self.f.call_with_return_value(
            Chunk(data),
            ThreadsafeFunctionCallMode::NonBlocking,
            move |_, _| {
                bytes.fetch_sub(len, Ordering::AcqRel);
                chunks.fetch_sub(1, Ordering::AcqRel);
                freed.notify_one();
                Ok(())
            },
        );
        if status != Status::Ok {
            // Closing: Node is shutting down and these bytes can no longer be delivered.
            self.in_flight.fetch_sub(len, Ordering::AcqRel);
            self.chunks.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Delivers what is pending and waits (bounded) until JS has consumed everything, so a
    /// result never resolves ahead of its own output.
    pub async fn finish(mut self) {
        let deadline = tokio::time::Instant::now() + DELIVERY_WAIT;
        loop {
            self.send();
            if self.pending.is_empty() && self.chunks.load(Ordering::Acquire) == 0 {
                return;
            }
            let freed = self.freed.notified();
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return;
            }
        }
    }
}

/// A read buffer lent from a small pool: a fresh zeroed 64 KiB per stream per call cost page
/// faults, a memset and an arena trim on every call (measured: ~8% of a busy worker's time).
struct ReadBuf(Box<[u8]>);

static READ_BUFS: std::sync::Mutex<Vec<Box<[u8]>>> = std::sync::Mutex::new(Vec::new());
/// At most this many idle buffers are kept (1 MiB).
const READ_BUFS_KEPT: usize = 16;

impl ReadBuf {
    fn lend() -> ReadBuf {
        let idle = READ_BUFS.lock().unwrap_or_else(|p| p.into_inner()).pop();
        ReadBuf(idle.unwrap_or_else(|| vec![0u8; READ_SIZE].into_boxed_slice()))
    }
}

impl Drop for ReadBuf {
    fn drop(&mut self) {
        let mut idle = READ_BUFS.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < READ_BUFS_KEPT {
            idle.push(std::mem::take(&mut self.0));
        }
    }
}

/// When a pump stops reading before EOF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// Every writer is known to be gone: read what the pipe holds now, then stop.
    Now,
    /// A writer may linger: keep reading for at most this long.
    Within(Duration),
}

/// Reads what the pipe holds now with plain non-blocking reads (tokio's readiness may not have
/// seen it yet); true at EOF.
pub fn read_now(r: &impl AsFd, buf: &mut [u8], take: &mut impl FnMut(&[u8])) -> bool {
    loop {
        match rustix::io::read(r, &mut *buf) {
            Ok(0) => return true,
            Ok(n) => take(&buf[..n]),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

/// Reads `r` to EOF (or until `stop` resolves; with `true`, after reading what the pipe holds
/// then), capturing up to `cap` bytes. With `kern_notes` (a box's stderr), kern's leading notes
/// are taken out first (see [`notes`]).
pub async fn pump<R: AsyncRead + AsFd + Unpin>(
    mut r: R,
    cap: usize,
    sink: Option<ChunkFn>,
    stop: impl Future<Output = bool>,
    kern_notes: bool,
) -> Captured {
    let mut buf = ReadBuf::lend();
    let buf = &mut buf.0[..];
    let mut got = Captured::default();
    let mut sink = sink.map(Sink::new);
    let mut total_read = 0usize;
    let mut head = kern_notes.then(notes::HeadNotes::new);
    tokio::pin!(stop);
    loop {
        let waiting = sink.as_ref().is_some_and(|s| !s.pending.is_empty());
        let freed = sink.as_ref().map(|s| s.freed.clone());
        let read = tokio::select! {
            r = r.read(buf) => r,
            _ = async { freed.expect("checked").notified().await }, if waiting => {
                if let Some(s) = sink.as_mut() {
                    s.send();
                }
                continue;
            }
            now = &mut stop => {
                if now {
                    read_now(&r, buf, &mut |b| {
                        total_read += b.len();
                        let chunk = match head.as_mut() {
                            Some(h) => h.feed(b),
                            None => std::borrow::Cow::Borrowed(b),
                        };
                        take_chunk(&mut got, sink.as_mut(), &chunk, cap);
                    });
                }
                break;
            }
        };
        let n = match read {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        total_read += n;
        let chunk = match head.as_mut() {
            Some(h) => h.feed(&buf[..n]),
            None => std::borrow::Cow::Borrowed(&buf[..n]),
        };
        take_chunk(&mut got, sink.as_mut(), &chunk, cap);
    }
    if let Some(rest) = head.as_mut().map(notes::HeadNotes::finish) {
        take_chunk(&mut got, sink.as_mut(), &rest, cap);
    }
    if let Some(s) = sink {
        s.finish().await;
    }
    trim::after_output(total_read);
    got
}

/// One chunk of the stream: to the JS callback and into the capped capture.
fn take_chunk(got: &mut Captured, sink: Option<&mut Sink>, chunk: &[u8], cap: usize) {
    if chunk.is_empty() {
        return;
    }
    if let Some(s) = sink {
        s.push(chunk);
    }
    got.truncated |= keep(&mut got.bytes, chunk, cap);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_caps_and_flags() {
        let mut out = Vec::new();
        assert!(!keep(&mut out, b"hello", 8));
        assert!(keep(&mut out, b"world", 8));
        assert_eq!(out, b"hellowor");
        assert!(keep(&mut out, b"more", 8));
        assert_eq!(out.len(), 8);
        assert!(out.capacity() <= 8 || out.capacity() == READ_SIZE.min(8));
    }

    /// A pipe whose write end a thread fills with `data`, then closes (or keeps open).
    fn piped(data: Vec<u8>, keep_open: bool) -> tokio::net::unix::pipe::Receiver {
        let (r, w) = rustix::pipe::pipe().unwrap();
        std::thread::spawn(move || {
            let mut rest = &data[..];
            while !rest.is_empty() {
                let n = rustix::io::write(&w, rest).unwrap();
                rest = &rest[n..];
            }
            if keep_open {
                std::thread::sleep(Duration::from_secs(5));
            }
        });
        tokio::net::unix::pipe::Receiver::from_owned_fd(r).unwrap()
    }

    #[tokio::test]
    async fn pump_drains_past_the_cap() {
        let data = vec![b'x'; 1 << 20];
        let got = pump(
            piped(data, false),
            1000,
            None,
            std::future::pending(),
            false,
        )
        .await;
        assert_eq!(got.bytes.len(), 1000);
        assert!(got.truncated);
        let got = pump(
            piped(b"abc".to_vec(), false),
            1000,
            None,
            std::future::pending(),
            false,
        )
        .await;
        assert_eq!(got.bytes, b"abc");
        assert!(!got.truncated);
    }

    #[tokio::test]
    async fn kern_notes_do_not_count_toward_the_cap() {
        let text = b"kern: warning: pump-test caps not enforced\nabc".to_vec();
        let got = pump(
            piped(text.clone(), false),
            3,
            None,
            std::future::pending(),
            true,
        )
        .await;
        assert_eq!(got.bytes, b"abc");
        assert!(!got.truncated);
        let got = pump(piped(text, false), 3, None, std::future::pending(), false).await;
        assert!(got.truncated);
    }

    #[tokio::test]
    async fn a_stop_that_drains_now_takes_what_the_pipe_holds_without_waiting_for_eof() {
        let r = piped(b"written before the stop".to_vec(), true);
        std::thread::sleep(Duration::from_millis(50));
        let got = pump(r, 1000, None, async { true }, false).await;
        assert_eq!(got.bytes, b"written before the stop");
    }
}
