//! The kernel driver's wire format: a kind byte, a little-endian u32 length, the payload.
//! The box writes the frames we read, so a frame past the bound is refused before it is buffered.

use std::os::fd::AsFd;

use tokio::io::{AsyncRead, AsyncReadExt};

pub const HEADER: usize = 5;

/// Host to box: a cell's source.
pub const CELL: u8 = b'c';
/// Host to box, JavaScript only: stop the running cell (empty payload).
pub const INTERRUPT: u8 = b'i';
/// Box to host.
pub const READY: u8 = b'R';
pub const STDOUT: u8 = b'o';
pub const STDERR: u8 = b'e';
pub const RESULT: u8 = b'r';
pub const ERROR: u8 = b'x';
pub const DONE: u8 = b'd';

pub fn encode(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER + payload.len());
    v.push(kind);
    v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    /// A frame announced more than the bound.
    Oversize(usize),
    Io,
}

/// Reads frames; cancel-safe (bytes read are kept across a dropped `next()`).
pub struct FrameReader<R> {
    src: R,
    buf: Vec<u8>,
    start: usize,
    max: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(src: R, max: usize) -> Self {
        FrameReader {
            src,
            buf: Vec::with_capacity(64 * 1024),
            start: 0,
            max,
        }
    }

    fn parse(&mut self) -> Result<Option<(u8, Vec<u8>)>, ReadError> {
        let have = &self.buf[self.start..];
        if have.len() < HEADER {
            return Ok(None);
        }
        let len = u32::from_le_bytes([have[1], have[2], have[3], have[4]]) as usize;
        if len > self.max {
            return Err(ReadError::Oversize(len));
        }
        if have.len() < HEADER + len {
            // Exact: the buffer holds at most one frame's bytes plus one read, never double.
            self.buf.reserve_exact(HEADER + len - have.len());
            return Ok(None);
        }
        let frame = (have[0], have[HEADER..HEADER + len].to_vec());
        self.start += HEADER + len;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        Ok(Some(frame))
    }

    /// Room for the next read, past the frames already taken.
    fn make_room(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if self.buf.capacity() - self.buf.len() < 16 * 1024 {
            self.buf.reserve_exact(64 * 1024);
        }
    }

    /// The next frame, or `None` at EOF.
    pub async fn next(&mut self) -> Result<Option<(u8, Vec<u8>)>, ReadError> {
        loop {
            if let Some(f) = self.parse()? {
                return Ok(Some(f));
            }
            self.make_room();
            match self.src.read_buf(&mut self.buf).await {
                Ok(0) => return Ok(None),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Err(ReadError::Io),
            }
        }
    }
}

impl<R: AsyncRead + AsFd + Unpin> FrameReader<R> {
    /// Reads what the source holds right now, with plain non-blocking reads of its fd (not
    /// through tokio, whose readiness is only refreshed when a worker polls the reactor). True
    /// once `next` can answer without waiting: a whole frame (or an oversize header) is buffered,
    /// or the source is at EOF or failed; false when it is empty for now. What was read stays
    /// buffered for `next`.
    pub fn fill_now(&mut self) -> bool {
        loop {
            let have = &self.buf[self.start..];
            if have.len() >= HEADER {
                let len = u32::from_le_bytes([have[1], have[2], have[3], have[4]]) as usize;
                if len > self.max || have.len() >= HEADER + len {
                    return true;
                }
            }
            self.make_room();
            match rustix::io::read(
                self.src.as_fd(),
                rustix::buffer::spare_capacity(&mut self.buf),
            ) {
                Ok(0) => return true,
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => return false,
                Err(_) => return true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn frames_round_trip_across_split_reads() {
        let mut wire = encode(STDOUT, b"hello");
        wire.extend(encode(DONE, b"0"));
        wire.extend(encode(RESULT, &[]));
        let got = block_on(async {
            // A reader that hands out one byte at a time.
            let (mut a, b) = tokio::io::duplex(1);
            crate::task::spawn(async move {
                use tokio::io::AsyncWriteExt;
                a.write_all(&wire).await.unwrap();
            });
            let mut r = FrameReader::new(b, 1024);
            let mut out = Vec::new();
            while let Some(f) = r.next().await.unwrap() {
                out.push(f);
            }
            out
        });
        assert_eq!(
            got,
            [
                (STDOUT, b"hello".to_vec()),
                (DONE, b"0".to_vec()),
                (RESULT, vec![])
            ]
        );
    }

    #[test]
    fn an_oversize_frame_is_refused_before_its_body() {
        let wire = [STDOUT, 0xff, 0xff, 0xff, 0x7f];
        let got = block_on(async { FrameReader::new(&wire[..], 1 << 20).next().await });
        assert_eq!(got, Err(ReadError::Oversize(0x7fff_ffff)));
    }

    #[test]
    fn fill_now_says_when_a_whole_frame_waits_without_taking_it() {
        let got = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap()
            .block_on(async {
                let (tx, rx) = tokio::net::unix::pipe::pipe().unwrap();
                let mut r = FrameReader::new(rx, 1024);
                let wire = encode(STDOUT, b"hello");
                let mut seen = vec![r.fill_now()];
                assert_eq!(rustix::io::write(&tx, &wire[..3]), Ok(3));
                seen.push(r.fill_now());
                assert_eq!(rustix::io::write(&tx, &wire[3..]), Ok(wire.len() - 3));
                seen.push(r.fill_now());
                let frame = r.next().await.unwrap();
                drop(tx);
                seen.push(r.fill_now());
                (seen, frame, r.next().await.unwrap())
            });
        assert_eq!(
            got.0,
            [false, false, true, true],
            "empty, half a frame, a frame, EOF"
        );
        assert_eq!(got.1, Some((STDOUT, b"hello".to_vec())));
        assert_eq!(got.2, None);
    }

    #[test]
    fn eof_inside_a_frame_is_eof() {
        let wire = [STDOUT, 9, 0, 0, 0, b'a'];
        let got = block_on(async { FrameReader::new(&wire[..], 1 << 20).next().await });
        assert_eq!(got, Ok(None));
    }
}
