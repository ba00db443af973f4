//! Handing memory freed after big outputs back to the OS.
//!
//! glibc keeps freed memory in its arenas, so after a few concurrent floods RSS would otherwise
//! stay at its peak (measured: 520 MiB peak, 360 MiB after). A call that read a lot marks it;
//! the next call (or close) and a few delayed timers trim the arenas.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set when a call read a lot of output; the next call (or close) hands the freed memory back.
static BIG_OUTPUT: AtomicBool = AtomicBool::new(false);
/// What counts as a lot: a call's total read, or one buffer.
const BIG: usize = 1 << 20;

/// Returns freed capture buffers to the OS, if a call read a lot since the last time.
pub fn release_freed_memory() {
    if BIG_OUTPUT.swap(false, Ordering::AcqRel) {
        trim();
    }
}

/// Whether the next call will trim (a call read a lot since the last trim).
pub fn pending() -> bool {
    BIG_OUTPUT.load(Ordering::Acquire)
}

/// A call read `total` bytes of output: past [`BIG`], the memory that held them is trimmed later
/// (floods past the cap still passed through, and were freed from, our buffers).
pub fn after_output(total: usize) {
    if total >= BIG {
        BIG_OUTPUT.store(true, Ordering::Release);
        schedule_trims();
    }
}

/// Returns freed memory to the OS now (after a session's ready boxes are stopped: their starts
/// allocated on several threads, whose arenas would keep it).
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and trims glibc's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The chunks streamed to JS are freed only when V8 collects their Buffers, after the call. A few
/// delayed trims catch that memory too; one timer at a time, on tokio (never keeps Node alive).
fn schedule_trims() {
    static RUNNING: AtomicBool = AtomicBool::new(false);
    if RUNNING.swap(true, Ordering::AcqRel) {
        return;
    }
    crate::task::spawn(async {
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            trim();
        }
        RUNNING.store(false, Ordering::Release);
    });
}

/// What a streamed chunk must span for its pages to be handed back as it is freed: smaller ones
/// (a line of output) are not worth the system call.
const STREAMED_RETURNED: usize = 32 * 1024;

/// Frees a chunk streamed to JS, handing its whole pages back to the OS when it is big enough.
pub fn free_streamed(buf: Vec<u8>) {
    release_pages(buf.as_ptr(), buf.capacity(), STREAMED_RETURNED);
    drop(buf);
}

/// Frees a buffer and hands its pages back to the OS now: glibc would keep a big freed block in
/// its arena (its mmap threshold grows with use), and V8 collects strings made from captures at
/// any time, long after the trims scheduled by the call.
pub fn free_now(buf: Vec<u8>) {
    release_pages(buf.as_ptr(), buf.capacity(), BIG);
    drop(buf);
}

/// Hands the whole pages inside an allocation of `cap` bytes at `ptr` back to the OS when it spans
/// `at_least` bytes; the allocation is freed next and must not be read before.
fn release_pages(ptr: *const u8, cap: usize, at_least: usize) {
    if cap >= at_least {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let start = (ptr as usize).next_multiple_of(page);
        let end = (ptr as usize + cap) & !(page - 1);
        if end > start {
            // SAFETY: whole pages inside our own allocation, which is not read again before the
            // free; DONTNEED only makes them read back as zeros.
            unsafe { libc::madvise(start as *mut c_void, end - start, libc::MADV_DONTNEED) };
        }
    }
}
