//! Capped, streamed capture of a box's stdout/stderr.
//!
//! One read loop per stream. The capture keeps at most `cap` bytes but keeps draining past it, so
//! a flooding box never blocks on a full pipe. Chunks go to the JS callback through an unref'd
//! ThreadsafeFunction with a window of bytes in flight; while the window is full, new output is
//! merged into one pending chunk. A callback that keeps up (even one that lags for a while) sees
//! every byte in order; one that falls far behind loses output past the pending bound instead of
//! growing host memory.

use std::ffi::{c_char, c_void};
use std::future::Future;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use napi::bindgen_prelude::{Buffer, ToNapiValue};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{check_status, sys, Status};
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

/// A JS chunk callback: not callee-handled (index.js wraps it so it never throws), weak (never
/// keeps Node alive), bounded.
pub type ChunkFn = ThreadsafeFunction<Buffer, (), Buffer, Status, false, true, QUEUE_DEPTH>;

/// Set when a call read a lot of output; the next call (or close) hands the freed memory back.
static BIG_OUTPUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
const BIG: usize = 1 << 20;

/// Returns freed capture buffers to the OS. glibc keeps freed memory in its arenas, so after a few
/// concurrent floods RSS would otherwise stay at its peak (measured: 520 MiB peak, 360 MiB after).
pub fn release_freed_memory() {
    if BIG_OUTPUT.swap(false, Ordering::AcqRel) {
        trim();
    }
}

fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and trims glibc's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The chunks streamed to JS are freed only when V8 collects their Buffers, after the call. A few
/// delayed trims catch that memory too; one timer at a time, on tokio (never keeps Node alive).
fn schedule_trims() {
    static RUNNING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if RUNNING.swap(true, Ordering::AcqRel) {
        return;
    }
    tokio::spawn(async {
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            trim();
        }
        RUNNING.store(false, Ordering::Release);
    });
}

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
            Buffer::from(data),
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

/// Reads `r` to EOF (or until `stop` resolves), capturing up to `cap` bytes.
pub async fn pump<R: AsyncRead + Unpin>(
    mut r: R,
    cap: usize,
    sink: Option<ChunkFn>,
    stop: impl Future<Output = ()>,
) -> Captured {
    let mut buf = ReadBuf::lend();
    let buf = &mut buf.0[..];
    let mut got = Captured::default();
    let mut sink = sink.map(Sink::new);
    let mut total_read = 0usize;
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
            _ = &mut stop => break,
        };
        let n = match read {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let chunk = &buf[..n];
        total_read += n;
        if let Some(s) = sink.as_mut() {
            s.push(chunk);
        }
        got.truncated |= keep(&mut got.bytes, chunk, cap);
    }
    if let Some(s) = sink {
        s.finish().await;
    }
    // Floods past the cap still passed through (and were freed from) our buffers.
    if total_read >= BIG {
        BIG_OUTPUT.store(true, Ordering::Release);
        schedule_trims();
    }
    got
}

/// A capture on its way to JS as a string. Large ASCII output becomes an external V8 string over
/// the capture itself, so the result does not hold a second copy of up to `maxOutputBytes`; the
/// rest is copied, invalid UTF-8 replaced (U+FFFD) as before.
pub struct Text(pub Vec<u8>);

/// Below this, copying is cheaper than an external string and its finalizer.
const EXTERNAL_MIN: usize = 64 * 1024;
/// V8's `String::kMaxLength` (64-bit). Past it V8 fails without saying whether it kept the buffer,
/// so such output takes the copying path (which fails as before).
const EXTERNAL_MAX: usize = (1 << 29) - 24;

type CreateExternalLatin1 = unsafe extern "C" fn(
    sys::napi_env,
    *mut c_char,
    isize,
    sys::napi_finalize,
    *mut c_void,
    *mut sys::napi_value,
    *mut bool,
) -> sys::napi_status;

/// `node_api_create_external_string_latin1` exists from Node 18.18 / 20.4 only, so it is looked up
/// at run time: napi-rs's `napi10` feature would call it unconditionally (ThreadsafeFunction too)
/// and break older Node.
fn create_external_latin1() -> Option<CreateExternalLatin1> {
    static FOUND: OnceLock<Option<CreateExternalLatin1>> = OnceLock::new();
    *FOUND.get_or_init(|| {
        // SAFETY: dlsym only reads the process's symbol tables.
        let sym = unsafe {
            libc::dlsym(
                libc::RTLD_DEFAULT,
                c"node_api_create_external_string_latin1".as_ptr(),
            )
        };
        // SAFETY: Node exports the function with this signature (js_native_api.h).
        (!sym.is_null())
            .then(|| unsafe { std::mem::transmute::<*mut c_void, CreateExternalLatin1>(sym) })
    })
}

/// Finalizer of an external string: frees the capture (`hint` carries its capacity).
unsafe extern "C" fn free_capture(_env: sys::napi_env, data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `data` and `hint` are the pointer and capacity of the Vec leaked in `external`.
    release(unsafe { Vec::from_raw_parts(data.cast::<u8>(), 0, hint as usize) });
}

/// Frees a capture and hands its pages back to the OS now: glibc would keep a big freed block in
/// its arena (its mmap threshold grows with use), and V8 collects these strings at any time, long
/// after the trims scheduled by the call.
fn release(buf: Vec<u8>) {
    let cap = buf.capacity();
    if cap >= BIG {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let start = (buf.as_ptr() as usize).next_multiple_of(page);
        let end = (buf.as_ptr() as usize + cap) & !(page - 1);
        if end > start {
            // SAFETY: whole pages inside our own allocation, which is not read again before the
            // free; DONTNEED only makes them read back as zeros.
            unsafe { libc::madvise(start as *mut c_void, end - start, libc::MADV_DONTNEED) };
        }
    }
    drop(buf);
}

/// Hands `bytes` to V8 without copying; on failure they come back for the copying path.
unsafe fn external(
    env: sys::napi_env,
    create: CreateExternalLatin1,
    bytes: Vec<u8>,
) -> Result<sys::napi_value, Vec<u8>> {
    let mut bytes = ManuallyDrop::new(bytes);
    let (data, len, cap) = (bytes.as_mut_ptr(), bytes.len(), bytes.capacity());
    let mut out = std::ptr::null_mut();
    let mut copied = false;
    // On napi_ok the finalizer owns the buffer, also when Node copied it (then it already ran).
    let status = unsafe {
        create(
            env,
            data.cast(),
            len as isize,
            Some(free_capture),
            cap as *mut c_void,
            &mut out,
            &mut copied,
        )
    };
    if status == sys::Status::napi_ok {
        Ok(out)
    } else {
        Err(ManuallyDrop::into_inner(bytes))
    }
}

impl ToNapiValue for Text {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let mut bytes = val.0;
        let mut out = std::ptr::null_mut();
        if !bytes.is_ascii() {
            let text = String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            check_status!(
                unsafe {
                    sys::napi_create_string_utf8(
                        env,
                        text.as_ptr().cast(),
                        text.len() as isize,
                        &mut out,
                    )
                },
                "Failed to create a {} byte string",
                text.len()
            )?;
            release(text.into_bytes());
            return Ok(out);
        }
        if (EXTERNAL_MIN..=EXTERNAL_MAX).contains(&bytes.len()) {
            if let Some(create) = create_external_latin1() {
                match unsafe { external(env, create, bytes) } {
                    Ok(v) => return Ok(v),
                    Err(b) => bytes = b,
                }
            }
        }
        // ASCII is Latin-1: V8 copies it without decoding.
        check_status!(
            unsafe {
                sys::napi_create_string_latin1(
                    env,
                    bytes.as_ptr().cast(),
                    bytes.len() as isize,
                    &mut out,
                )
            },
            "Failed to create a {} byte string",
            bytes.len()
        )?;
        release(bytes);
        Ok(out)
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
