//! kern's own notes about a box: its "caps are not enforced on this host" warning and their kin.
//!
//! kern writes them to its stderr before it starts the workload, so they lead the box's stderr.
//! They are kern speaking about the host, not the workload's output: they are taken out of the
//! captured stderr (and what streams to `onStderr`, and what counts toward the output cap) and
//! queued for JS, which reports each distinct one once per process as a `KernWarning`.
//!
//! kern's started channel only speaks when the box has ended, so where kern's lines stop and the
//! workload's begin is read from the stream itself: the leading complete lines that are kern
//! notes. A workload that prints note-like lines first can only move its own lines from its
//! stderr to a warning, and only a bounded number, each once per process.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Mutex;

/// A line kern wrote about itself rather than the workload's output.
pub fn is_kern_notice(line: &str) -> bool {
    let l = line.trim_start();
    l.starts_with("kern: warning:")
        || l.starts_with("kern: note:")
        || (l.starts_with("kern: ") && l.contains("not enforced"))
        || l.starts_with("kern: security-profile=")
}

/// At most this many notes are taken from the head of one stream; kern has a handful.
const HEAD_NOTES_MAX: usize = 8;
/// A line longer than this is not one of kern's notes (its longest is under 1 KiB).
const NOTE_LINE_MAX: usize = 4096;
/// Distinct notes queued for JS per process; past this, new ones are dropped, so a workload
/// printing note-like lines cannot grow the host's memory or its warnings without bound.
const SEEN_MAX: usize = 64;

/// Splits kern's leading notes off one box's stderr, as it is read.
#[derive(Default)]
pub struct HeadNotes {
    /// The head is over: every byte from here on is the workload's.
    done: bool,
    /// The start of a line that may still turn out to be a note.
    held: Vec<u8>,
    /// The notes taken from this stream.
    taken: usize,
}

impl HeadNotes {
    pub fn new() -> HeadNotes {
        HeadNotes::default()
    }

    /// The part of `chunk` that is the workload's; the notes it completes are queued for JS.
    pub fn feed<'a>(&mut self, chunk: &'a [u8]) -> Cow<'a, [u8]> {
        if self.done {
            return Cow::Borrowed(chunk);
        }
        self.held.extend_from_slice(chunk);
        let mut at = 0;
        loop {
            let rest = &self.held[at..];
            match rest.iter().position(|b| *b == b'\n') {
                Some(nl) => match note(&rest[..nl]) {
                    Some(line) if self.taken < HEAD_NOTES_MAX => {
                        self.taken += 1;
                        report(line);
                        at += nl + 1;
                    }
                    _ => break,
                },
                None if may_become_note(rest) => {
                    self.held.drain(..at);
                    return Cow::Owned(Vec::new());
                }
                None => break,
            }
        }
        self.done = true;
        let mut out = std::mem::take(&mut self.held);
        out.drain(..at);
        Cow::Owned(out)
    }

    /// At the end of the stream: a line left unfinished is the workload's (kern ends its lines).
    pub fn finish(&mut self) -> Vec<u8> {
        self.done = true;
        std::mem::take(&mut self.held)
    }
}

/// One complete line (without its newline) as a note, if it is one: UTF-8, printable, short.
fn note(line: &[u8]) -> Option<String> {
    let line = std::str::from_utf8(line).ok()?;
    let line = line.strip_suffix('\r').unwrap_or(line).trim();
    let printable = !line.chars().any(|c| c.is_control() && c != '\t');
    (printable && line.len() <= NOTE_LINE_MAX && is_kern_notice(line)).then(|| line.to_string())
}

/// Whether an unfinished line could still become a note.
fn may_become_note(start: &[u8]) -> bool {
    let t = start.trim_ascii_start();
    start.len() < NOTE_LINE_MAX && (t.starts_with(b"kern: ") || b"kern: ".starts_with(t))
}

struct Queue {
    seen: HashSet<String>,
    pending: Vec<String>,
}

static QUEUE: Mutex<Option<Queue>> = Mutex::new(None);

/// Queues a note for JS unless this process already has.
fn report(line: String) {
    let mut q = QUEUE.lock().unwrap_or_else(|p| p.into_inner());
    let q = q.get_or_insert_with(|| Queue {
        seen: HashSet::new(),
        pending: Vec::new(),
    });
    if q.seen.len() < SEEN_MAX && !q.seen.contains(&line) {
        q.seen.insert(line.clone());
        q.pending.push(line);
    }
}

/// The notes queued since the last call, each once per process, for JS to report.
pub fn take() -> Vec<String> {
    QUEUE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_mut()
        .map(|q| std::mem::take(&mut q.pending))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WARN: &str = "kern: warning: --memory is not enforced on this host - the kernel doesn't \
                        delegate the cgroup v2 `memory` controller. This line prints once.";

    /// Feeds `pieces` and returns the workload's bytes.
    fn split(pieces: &[&[u8]]) -> Vec<u8> {
        let mut h = HeadNotes::new();
        let mut out = Vec::new();
        for p in pieces {
            out.extend_from_slice(&h.feed(p));
        }
        out.extend(h.finish());
        out
    }

    #[test]
    fn leading_notes_leave_the_stream_whole_or_split_anywhere() {
        let text = format!("{WARN}\nkern: note: single-uid map\nTraceback\nkern: warning: later\n");
        let want = b"Traceback\nkern: warning: later\n".to_vec();
        let bytes = text.as_bytes();
        assert_eq!(split(&[bytes]), want);
        for cut in 1..bytes.len() {
            assert_eq!(split(&[&bytes[..cut], &bytes[cut..]]), want, "cut at {cut}");
        }
        // As kern writes it: the prefix, the subject, the rest.
        let (a, b) = WARN.split_at(15);
        let (b, c) = b.split_at(11);
        assert_eq!(
            split(&[a.as_bytes(), b.as_bytes(), c.as_bytes(), b"\nout\n"]),
            b"out\n"
        );
    }

    #[test]
    fn the_workload_s_bytes_are_untouched() {
        for text in [
            &b"plain\n"[..],
            b"",
            b"kern is a word\nkern: warning: x\n",
            b"ker",
            b"kern: warning: no newline at the end",
            b"  kern: not a note\n",
            b"kern: warning: \x1b[31mred\x1b[0m\n",
            b"kern: warning: \xff\n",
        ] {
            assert_eq!(split(&[text]), text, "{}", String::from_utf8_lossy(text));
        }
        let long = format!("kern: warning: {}\n", "x".repeat(NOTE_LINE_MAX));
        assert_eq!(split(&[long.as_bytes()]), long.as_bytes());
    }

    #[test]
    fn a_bounded_number_of_notes_per_stream() {
        let many: String = (0..HEAD_NOTES_MAX + 3)
            .map(|i| format!("kern: note: bound-test {i}\n"))
            .collect();
        let out = split(&[many.as_bytes()]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            (HEAD_NOTES_MAX..HEAD_NOTES_MAX + 3)
                .map(|i| format!("kern: note: bound-test {i}\n"))
                .collect::<String>()
        );
    }

    #[test]
    fn each_note_is_queued_once_per_process() {
        let line = "kern: warning: queue-test not enforced";
        split(&[format!("{line}\n{line}\n").as_bytes()]);
        split(&[format!("{line}\r\nout\n").as_bytes()]);
        let taken = take();
        assert_eq!(taken.iter().filter(|l| *l == line).count(), 1);
        split(&[format!("{line}\n").as_bytes()]);
        assert!(!take().iter().any(|l| l == line));
    }

    #[test]
    fn notices_are_kern_s_own_lines() {
        assert!(is_kern_notice(WARN));
        assert!(is_kern_notice("kern: note: single-uid map"));
        assert!(is_kern_notice(
            "kern: --memory not enforced - no cgroup memory cap took effect"
        ));
        assert!(is_kern_notice(
            "kern: security-profile=untrusted: seccomp=allowlist"
        ));
        assert!(!is_kern_notice("error: image: not found"));
        assert!(!is_kern_notice("kern: sandbox setup failed: x"));
        assert!(!is_kern_notice("kernel: warning: x"));
    }
}
