//! Oracles for what a kernel box writes back: the control channel's frames and the rich-result
//! lines. Both are the box's bytes, so every input must end cleanly, bounded, in bounded steps.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use kern_sandbox::{FrameReadError, FrameReader, FRAME_HEADER};
use tokio::io::{AsyncRead, ReadBuf};

use crate::measure;

/// Hands out the wire in reads of at most `step` bytes, as a pipe does under a slow writer.
struct Trickle<'a> {
    wire: &'a [u8],
    step: usize,
}

impl AsyncRead for Trickle<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self.wire.len().min(self.step).min(buf.remaining());
        buf.put_slice(&self.wire[..n]);
        self.wire = &self.wire[n..];
        Poll::Ready(Ok(()))
    }
}

/// Heap the decoder may hold for a frame bound of `max`: the buffer with one whole frame, the
/// frame handed out, and a read's worth of slack.
pub fn frame_heap_max(max: usize) -> usize {
    2 * (max + FRAME_HEADER) + (192 << 10)
}

/// Input: a byte choosing the frame bound, a byte choosing the read size, then the wire.
/// Every frame decoded must be the next bytes of the wire, whole; the decoder must end with EOF
/// (only an unfinished frame left) or an oversize refusal of exactly the header's length.
pub fn frames_case(data: &[u8]) {
    let [a, b, wire @ ..] = data else { return };
    let max = 16 + (*a as usize) * 257;
    let step = if *b == 0 { usize::MAX } else { *b as usize };
    let mut reader = FrameReader::new(Trickle { wire, step }, max);
    let mut cx = Context::from_waker(Waker::noop());
    let mut at = 0usize;
    let mut steps = 0usize;
    loop {
        steps += 1;
        assert!(
            steps <= wire.len() / FRAME_HEADER + 2,
            "more frames than the wire can hold"
        );
        let (got, peak) = measure(|| {
            let fut = std::pin::pin!(reader.next());
            match fut.poll(&mut cx) {
                Poll::Ready(r) => r,
                Poll::Pending => panic!("the decoder waited on a source that never blocks"),
            }
        });
        assert!(
            peak <= frame_heap_max(max),
            "decoding peaked at {peak} bytes of heap (bound {max})"
        );
        match got {
            Ok(Some((kind, payload))) => {
                assert!(
                    payload.len() <= max,
                    "a frame past the bound was handed out"
                );
                let rest = &wire[at..];
                assert!(rest.len() >= FRAME_HEADER + payload.len());
                assert_eq!(rest[0], kind);
                assert_eq!(
                    u32::from_le_bytes(rest[1..5].try_into().unwrap()) as usize,
                    payload.len()
                );
                assert_eq!(
                    &rest[FRAME_HEADER..FRAME_HEADER + payload.len()],
                    &payload[..]
                );
                at += FRAME_HEADER + payload.len();
            }
            Ok(None) => {
                let rest = &wire[at..];
                let whole = rest.len() >= FRAME_HEADER
                    && rest.len()
                        >= FRAME_HEADER
                            + u32::from_le_bytes(rest[1..5].try_into().unwrap()) as usize;
                assert!(!whole, "EOF reported with a whole frame unread");
                return;
            }
            Err(FrameReadError::Oversize(n)) => {
                let rest = &wire[at..];
                assert!(n > max);
                assert_eq!(
                    u32::from_le_bytes(rest[1..5].try_into().unwrap()) as usize,
                    n
                );
                return;
            }
            Err(FrameReadError::Io) => panic!("a read error from a source that has none"),
        }
    }
}

/// Input: a results file as the box may leave it. The lines handed to JS hold no newline and no
/// blank line, in file order, and take at most what lossy UTF-8 makes of the bytes (3x).
pub fn result_lines_case(data: &[u8]) {
    let (lines, peak) = measure(|| kern_sandbox::result_lines(data));
    let bytes: usize = lines.iter().map(String::len).sum();
    assert!(
        bytes <= 3 * data.len(),
        "{bytes} bytes of lines from {} bytes",
        data.len()
    );
    let bound = 4 * data.len() + 32 * (data.len() + 1) + 4096;
    assert!(peak <= bound, "splitting peaked at {peak} bytes of heap");
    for l in &lines {
        assert!(!l.contains('\n'));
        assert!(!l.trim_matches(|c: char| c.is_ascii_whitespace()).is_empty());
    }
    // Each line is a whole input line: the non-blank lines, in order.
    let expect = data
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .count();
    assert_eq!(lines.len(), expect);
    let err = kern_sandbox::error_result_line(data);
    assert!(err.starts_with("{\"error\":") && err.ends_with('}'));
}
