//! Capped, streamed capture of a box's stdout/stderr.
//!
//! One read loop per stream. The capture keeps at most `cap` bytes but keeps draining past it, so
//! a flooding box never blocks on a full pipe. Chunks go to the JS callback through a bounded,
//! unref'd ThreadsafeFunction queue: a callback that keeps up sees every chunk in order; one that
//! falls far behind loses chunks instead of growing host memory.

use std::future::Future;
use std::time::Duration;

use napi::bindgen_prelude::Buffer;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Chunks waiting for the JS thread, per stream. 512 × 64 KiB bounds the queue at 32 MiB.
pub const QUEUE_DEPTH: usize = 512;
const READ_SIZE: usize = 64 * 1024;

/// A JS chunk callback: not callee-handled (index.js wraps it so it never throws), weak (never
/// keeps Node alive), bounded.
pub type ChunkFn = ThreadsafeFunction<Buffer, (), Buffer, Status, false, true, QUEUE_DEPTH>;

#[derive(Debug, Default)]
pub struct Captured {
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

/// Appends what fits under `cap`; reports whether anything was cut.
fn keep(out: &mut Vec<u8>, chunk: &[u8], cap: usize) -> bool {
    let room = cap.saturating_sub(out.len());
    if chunk.len() <= room {
        if out.capacity() - out.len() < chunk.len() {
            // Grow geometrically but never past the cap, so a capped stream holds at most `cap`.
            let want = (out.capacity() * 2).max(out.len() + chunk.len()).max(READ_SIZE).min(cap);
            out.reserve_exact(want - out.len());
        }
        out.extend_from_slice(chunk);
        false
    } else {
        out.extend_from_slice(&chunk[..room]);
        true
    }
}

/// Reads `r` to EOF (or until `stop` resolves), capturing up to `cap` bytes.
pub async fn pump<R: AsyncRead + Unpin>(
    mut r: R,
    cap: usize,
    sink: Option<ChunkFn>,
    stop: impl Future<Output = ()>,
) -> Captured {
    let mut buf = vec![0u8; READ_SIZE];
    let mut got = Captured::default();
    tokio::pin!(stop);
    loop {
        let read = tokio::select! {
            r = r.read(&mut buf) => r,
            _ = &mut stop => break,
        };
        let n = match read {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let chunk = &buf[..n];
        if let Some(f) = &sink {
            // QueueFull drops the chunk: the documented best-effort contract.
            let _ = f.call(Buffer::from(chunk.to_vec()), ThreadsafeFunctionCallMode::NonBlocking);
        }
        got.truncated |= keep(&mut got.bytes, chunk, cap);
    }
    if let Some(f) = sink {
        flush(&f).await;
    }
    got
}

/// Waits until JS has run every chunk queued before this point, so a result never resolves ahead
/// of its own output. An empty Buffer is the marker; index.js ignores it.
async fn flush(f: &ChunkFn) {
    for _ in 0..2000 {
        match f.call_async(Buffer::from(Vec::new())).await {
            Err(e) if e.status == Status::QueueFull => {
                tokio::time::sleep(Duration::from_millis(5)).await
            }
            _ => return,
        }
    }
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

    #[tokio::test]
    async fn pump_drains_past_the_cap() {
        let data = vec![b'x'; 1 << 20];
        let got = pump(&data[..], 1000, None, std::future::pending()).await;
        assert_eq!(got.bytes.len(), 1000);
        assert!(got.truncated);
        let got = pump(&b"abc"[..], 1000, None, std::future::pending()).await;
        assert_eq!(got.bytes, b"abc");
        assert!(!got.truncated);
    }
}
