//! Knowing that a box's workload has ended before kern has torn the box down.
//!
//! kern exits only after its teardown (unmounts, scratch and cgroup removal): 5 ms on a quiet
//! host, tens under load. The call's result is known earlier: the box's PID 1 is kern's direct
//! child (its `NSpid` ends in 1), and when a PID namespace's init exits the kernel kills every
//! other process of the namespace and waits for them before the init itself is reported dead. So
//! once a pidfd on that init says it exited, nothing in the box writes any more: its output is
//! whole in the pipes and its workspace writes are done. The exit status comes from the pidfd
//! after kern reaps the init (`PIDFD_GET_INFO` with `PIDFD_INFO_EXIT`, Linux 6.15+).
//!
//! Only a workload that exec'd (its command name is no longer kern's: kern's own setup failed
//! otherwise) and exited normally with a code under 128 is answered here; a signal death or a code
//! that reads as one (SIGSYS, an OOM kill, a shell's `exit 137`) is left to kern's own exit and
//! started byte, so faults are decided exactly as before. Anything this
//! watcher cannot tell for sure (an older kernel, a box gone before it was seen) leaves the call
//! on kern's exit, as without it.
//!
//! A box that exits non-zero is answered here only once kern is known to write nothing after such
//! an exit: kern prints a note on stderr after reaping a box that failed without a uid range (on a
//! host without newuidmap or a subuid allocation), and that note is part of the call's stderr as
//! 0.1.1 reports it. Until one failing call has been waited for to kern's exit and its stderr did
//! not end in a line of kern's, failing calls go by kern's exit ([`learn_from_failure`]).
//!
//! The box's mount namespace is held open from the host while its workload runs ([`MountHold`]).
//! The last process to leave a mount namespace unmounts its whole tree, RCU grace period included,
//! inside its own exit and before its parent (or a pidfd) hears of it: with the namespace held,
//! the init's exit is reported ~0.8 ms sooner (measured on kern's boxes: 1.65 -> 0.8 ms from a
//! ready box's `true` to its pidfd), and the unmounts happen when the hold is let go, after kern
//! has exited, off the call's path.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::unix::AsyncFd;

use crate::lifecycle::procfs;

/// How often kern's children are looked at until the box's init shows up and has exec'd.
const POLL: Duration = Duration::from_millis(1);
/// After this many looks, the look is made less often (a kern whose box init is not its child,
/// such as a runtime that starts it through a helper, is never matched).
const FAST_LOOKS: u32 = 200;
const SLOW_POLL: Duration = Duration::from_millis(20);
/// Past this many looks the watcher gives up and the call goes by kern's exit.
const MAX_LOOKS: u32 = FAST_LOOKS + 250;
/// How long kern may take to reap its exited init before the exit status is given up on.
const REAP_WAIT: Duration = Duration::from_millis(50);
/// How long the status is looked for without sleeping. kern reaps its init microseconds after the
/// pidfd turns readable, and a tokio timer sleeps a millisecond at the least: with a 200 us sleep
/// the status came 1.1-1.5 ms after the exit on most calls through a ready Python box.
const REAP_SPIN: Duration = Duration::from_micros(500);

/// What kern writes after a box's non-zero exit, as far as this process has seen (one kern per
/// host: its uid-range note depends on the host, not the box).
static AFTER_FAILURE: AtomicU8 = AtomicU8::new(UNSEEN);
const UNSEEN: u8 = 0;
/// A failing call's stderr ended in nothing of kern's.
const SILENT: u8 = 1;
/// A failing call's stderr ended in a line of kern's: failing calls keep waiting for kern's exit.
const NOTES: u8 = 2;

/// Learns from a call that exited with `code`, waited for to kern's exit, whether kern writes
/// after a failure.
pub fn learn_from_failure(code: i32, stderr: &[u8], truncated: bool) {
    match after_failure(code, stderr, truncated) {
        // NOTES is for good: one box that got a note is enough.
        Some(NOTES) => AFTER_FAILURE.store(NOTES, Ordering::Relaxed),
        Some(seen) => {
            let _ =
                AFTER_FAILURE.compare_exchange(UNSEEN, seen, Ordering::Relaxed, Ordering::Relaxed);
        }
        None => {}
    }
}

/// What a call tells of kern's writes after a failure: only a workload's own non-zero exit (not
/// kern's 125-127 for a box that did not start) with all of its stderr kept tells anything, and
/// only when the workload wrote some: kern's lines at the head of a stderr are taken out of it
/// (output::notes), so behind an empty one a note would not show. A last line with kern's words
/// anywhere in it counts as a note (a workload's line without a newline runs into kern's).
fn after_failure(code: i32, stderr: &[u8], truncated: bool) -> Option<u8> {
    if !(1..125).contains(&code) || truncated || stderr.is_empty() {
        return None;
    }
    let text = stderr.strip_suffix(b"\n").unwrap_or(stderr);
    let last = text.rsplit(|b| *b == b'\n').next().unwrap_or_default();
    let kerns = last.windows(6).any(|w| w == b"kern: ");
    Some(if kerns { NOTES } else { SILENT })
}

/// Whether a workload's exit with `code` can resolve its call before kern has exited.
fn answers_early(code: i32) -> bool {
    code == 0 || AFTER_FAILURE.load(Ordering::Relaxed) == SILENT
}

/// A box's mount namespace, held from the host (see the module doc). Letting go of it unmounts the
/// box's tree and waits out RCU grace periods (1 ms, at times 15), so it is closed on tokio's
/// blocking pool, never on a worker or Node's thread. (Holding the PID namespace as well gained
/// nothing measurable and made that close take 20-60 ms.)
pub struct MountHold(Option<OwnedFd>);

impl MountHold {
    /// The mount namespace of `pid` (none when it cannot be opened: the hold only saves time).
    fn of(pid: i32) -> MountHold {
        let ns = rustix::fs::open(
            format!("/proc/{pid}/ns/mnt"),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        );
        MountHold(ns.ok())
    }
}

impl Drop for MountHold {
    fn drop(&mut self) {
        let Some(fd) = self.0.take() else { return };
        // Outside the runtime (none of the drops today) it closes here.
        if tokio::runtime::Handle::try_current().is_ok() {
            crate::task::spawn_blocking(move || drop(fd));
        }
    }
}

/// `struct pidfd_info` up to `exit_code` (the kernel's first published size, 64 bytes).
#[repr(C)]
#[derive(Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    ids: [u32; 11],
    exit_code: i32,
}

const PIDFD_INFO_EXIT: u64 = 1 << 3;
/// `_IOWR(0xFF, 11, struct pidfd_info)` with the 64-byte struct.
const PIDFD_GET_INFO: libc::c_ulong = (3 << 30) | (64 << 16) | (0xFF << 8) | 11;

/// The wait status of the process behind `pidfd` once it has been reaped; `None` while it has
/// not, or where the kernel cannot tell.
fn exit_info(pidfd: &OwnedFd) -> Option<i32> {
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_EXIT,
        ..Default::default()
    };
    // SAFETY: PIDFD_GET_INFO reads and writes at most size_of::<PidfdInfo>() bytes (the size is
    // encoded in the request), and `info` is that large and lives across the call.
    let r = unsafe {
        libc::ioctl(
            pidfd.as_raw_fd(),
            PIDFD_GET_INFO,
            &mut info as *mut PidfdInfo,
        )
    };
    (r == 0 && info.mask & PIDFD_INFO_EXIT != 0).then_some(info.exit_code)
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(pid)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::NONBLOCK).ok()
}

/// Whether this kernel answers `PIDFD_GET_INFO` (asked once, on a pidfd of this process).
fn supported() -> bool {
    static ANSWER: OnceLock<bool> = OnceLock::new();
    *ANSWER.get_or_init(|| {
        let Some(fd) = pidfd_open(std::process::id() as i32) else {
            return false;
        };
        let mut info = PidfdInfo::default();
        // SAFETY: as in exit_info.
        unsafe { libc::ioctl(fd.as_raw_fd(), PIDFD_GET_INFO, &mut info as *mut PidfdInfo) == 0 }
    })
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// kern's child that is the init of a new PID namespace, if one is there now.
fn box_init(kern: i32) -> Option<i32> {
    procfs::children(kern).into_iter().find(|c| is_ns_init(*c))
}

/// SIGKILLs the init of kern's box, and so the whole box: kern then tears it down as after any
/// workload's death.
pub fn kill_box(kern: i32) {
    if let Some(init) = box_init(kern) {
        // SAFETY: plain syscall on kern's child we just looked at.
        unsafe { libc::kill(init, libc::SIGKILL) };
    }
}

/// Whether kern runs and would die of a SIGTERM now. kern catches the signal (to hand it to its
/// box) only once the box is forked and on record: before that, a signal to its group, as `kern
/// stop` sends, kills kern mid-setup, and nothing removes the box's scratch then (seen even after
/// the box's fork). An `-it` box's kern never catches it, but is past its setup once a child runs
/// a command of its own: the box's init that has exec'd, the stand-in's bwrap (the stand-in also
/// blocks the signal from then on), or kern under a wrapper script.
pub fn in_setup(kern: i32) -> bool {
    let Some(own) = comm(kern).filter(|_| procfs::running(kern)) else {
        return false;
    };
    !procfs::takes_signal(kern, libc::SIGTERM)
        && !procfs::children(kern)
            .into_iter()
            .any(|c| comm(c).is_some_and(|n| n != own))
}

fn is_ns_init(pid: i32) -> bool {
    procfs::status(pid).is_some_and(|s| {
        procfs::status_field(&s, "NSpid:").is_some_and(|ids| {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            ids.len() > 1 && ids.last() == Some(&"1")
        })
    })
}

fn comm(pid: i32) -> Option<String> {
    read(&format!("/proc/{pid}/comm")).map(|c| c.trim_end().to_string())
}

/// Resolves to the workload's exit code once the box's init has exec'd and exited normally, with
/// the box's mount namespace, still held; never resolves when that cannot be known (the caller then
/// goes by kern's exit).
pub async fn exited(kern: i32) -> (i32, MountHold) {
    match watch(kern).await {
        Some(got) => got,
        None => std::future::pending().await,
    }
}

/// A box's init that has exec'd, found ahead of its call: a ready box's waiter. [`exited`] looks
/// for the init only from a millisecond into the call, and a workload handed to a waiter can be
/// over by then, its init reaped by kern, and the call left to wait for kern's teardown.
pub struct Init {
    pidfd: OwnedFd,
    held: MountHold,
}

/// The init of kern's box, once it runs a command of its own (not kern's setup); None when there
/// is none or this kernel cannot report its exit.
pub fn find_init(kern: i32) -> Option<Init> {
    if !supported() {
        return None;
    }
    let kern_comm = comm(kern)?;
    let pid = box_init(kern)?;
    let pidfd = pidfd_open(pid)?;
    // The pid could have been reaped and reused between the look and the open.
    if !is_ns_init(pid) || comm(pid)? == kern_comm {
        return None;
    }
    let held = MountHold::of(pid);
    Some(Init { pidfd, held })
}

/// [`exited`] for an init found ahead ([`find_init`]).
pub async fn init_exited(init: Init) -> (i32, MountHold) {
    // SAFETY: the pidfd is ours alone and registered once.
    let pidfd = unsafe { AsyncFd::register(init.pidfd) }.ok();
    match pidfd {
        Some(fd) => match exit_code(&fd).await {
            Some(code) => (code, init.held),
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

async fn watch(kern: i32) -> Option<(i32, MountHold)> {
    // kern takes milliseconds to start a box: a call that is over sooner (a fake kern, a failed
    // start) never pays for a look.
    tokio::time::sleep(POLL).await;
    if !supported() {
        return None;
    }
    let kern_comm = comm(kern)?;
    // The init shows up a few ms into kern's start; it is kern's until it execs the workload.
    let mut looks = 0u32;
    let (pid, pidfd) = loop {
        looks += 1;
        if looks > MAX_LOOKS {
            return None;
        }
        if let Some(pid) = box_init(kern) {
            let fd = pidfd_open(pid)?;
            // The pid could have been reaped and reused between the look and the open.
            if !is_ns_init(pid) {
                return None;
            }
            break (pid, fd);
        }
        comm(kern)?; // kern is gone
        tokio::time::sleep(if looks < FAST_LOOKS { POLL } else { SLOW_POLL }).await;
    };
    // SAFETY: the pidfd is ours alone and registered once.
    let pidfd = unsafe { AsyncFd::register(pidfd) }.ok()?;
    // An exec is seen by the command name; an init that exits before it was seen to exec leaves
    // the call to kern (its setup may have failed). Once it has exec'd, it is in the box's own
    // namespaces.
    let held = loop {
        looks += 1;
        match comm(pid) {
            Some(c) if c != kern_comm => break MountHold::of(pid),
            Some(_) if looks <= MAX_LOOKS => {}
            _ => return None,
        }
        let poll = if looks < FAST_LOOKS { POLL } else { SLOW_POLL };
        if tokio::time::timeout(poll, pidfd.readable()).await.is_ok() {
            return None;
        }
    };
    Some((exit_code(&pidfd).await?, held))
}

/// The exit code of the init behind `pidfd` once it has exited normally with a code under 128.
async fn exit_code(pidfd: &AsyncFd<OwnedFd>) -> Option<i32> {
    let _ = pidfd.readable().await.ok()?;
    // Readable at exit; the status is there once kern has reaped it, microseconds later.
    let start = tokio::time::Instant::now();
    let status = loop {
        if let Some(s) = exit_info(pidfd.get_ref()) {
            break s;
        }
        let waited = start.elapsed();
        if waited >= REAP_WAIT {
            return None;
        }
        // A yield lets the worker's other tasks (and the I/O driver) run between looks.
        if waited < REAP_SPIN {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    };
    // A code of 128 and up reads as a signal death to the fault classifier, which weighs it with
    // kern's started byte (an OOM kill against an enforced cap): that byte comes with kern's exit.
    let code = libc::WEXITSTATUS(status);
    (libc::WIFEXITED(status) && code < 128 && answers_early(code)).then_some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_workloads_failure_with_all_its_stderr_tells_what_kern_writes_after_it() {
        let note = b"Traceback\nValueError: bad\nkern: note: this box ran with a single-uid map\n";
        assert_eq!(after_failure(1, note, false), Some(NOTES));
        assert_eq!(
            after_failure(1, b"Traceback\nValueError: bad\n", false),
            Some(SILENT)
        );
        assert_eq!(
            after_failure(3, b"", false),
            None,
            "a note would have been taken out"
        );
        assert_eq!(after_failure(1, b"e\n", false), Some(SILENT));
        assert_eq!(
            after_failure(1, b"no newline kern: note: x\n", false),
            Some(NOTES)
        );
        assert_eq!(
            after_failure(0, note, false),
            None,
            "a success tells nothing"
        );
        assert_eq!(after_failure(1, note, true), None, "its end was cut off");
        assert_eq!(
            after_failure(125, b"kern: sandbox setup failed: x\n", false),
            None
        );
        assert_eq!(after_failure(137, note, false), None);
    }

    #[test]
    fn the_info_struct_is_the_kernels_first_size() {
        assert_eq!(std::mem::size_of::<PidfdInfo>(), 64);
    }

    #[tokio::test]
    async fn a_child_that_is_no_namespace_init_is_not_taken_for_a_box() {
        let child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        assert_eq!(box_init(std::process::id() as i32), None);
        let got = tokio::time::timeout(Duration::from_millis(50), watch(std::process::id() as i32));
        assert!(got.await.is_err(), "still looking: no init below us");
        let mut child = child;
        child.wait().unwrap();
    }
}
