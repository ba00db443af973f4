//! Frames to the host: one writer thread behind a frame queue, and the replies requests are
//! answered with. Below the connection and every handler, which all write through it.

use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};

use serde_json::{json, Map, Value};

use crate::error::{self, Fail};
use crate::proto;
use crate::thread::spawn_thread;

/// Above this many queued bytes, output pumps, watch events and port readers wait (the host is
/// slow); answers to requests are queued regardless, so the request reader never waits.
const HIGH_WATER: usize = 4 << 20;

/// The successful result of a request: extra header fields and a payload.
#[derive(Default)]
pub struct Reply {
    pub fields: Map<String, Value>,
    pub payload: Vec<u8>,
}

impl Reply {
    /// A reply with the fields of `value` (a JSON object).
    pub fn with(value: Value) -> Reply {
        match value {
            Value::Object(fields) => Reply {
                fields,
                payload: Vec::new(),
            },
            _ => Reply::default(),
        }
    }
}

struct Queue {
    frames: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// Bytes queued or being written.
    bytes: usize,
    /// The socket failed: nothing more is written, nobody waits.
    dead: bool,
}

/// Every frame to the host goes through here, so frames are never interleaved.
pub struct Writer {
    queue: Mutex<Queue>,
    cv: Condvar,
}

impl Writer {
    /// Starts the writer thread on `stream`.
    pub fn start(stream: UnixStream) -> Arc<Writer> {
        let writer = Arc::new(Writer {
            queue: Mutex::new(Queue {
                frames: VecDeque::new(),
                bytes: 0,
                dead: false,
            }),
            cv: Condvar::new(),
        });
        let w = writer.clone();
        spawn_thread("writer", move || w.run(stream));
        writer
    }

    fn run(&self, mut stream: UnixStream) {
        loop {
            let (head, payload) = {
                let mut q = self.queue.lock().unwrap();
                while q.frames.is_empty() && !q.dead {
                    q = self.cv.wait(q).unwrap();
                }
                if q.dead {
                    return;
                }
                q.frames.pop_front().expect("checked non-empty")
            };
            let sent = stream
                .write_all(&head)
                .and_then(|()| stream.write_all(&payload));
            let mut q = self.queue.lock().unwrap();
            q.bytes -= head.len() + payload.len();
            if sent.is_err() {
                q.dead = true;
                q.frames.clear();
            }
            self.cv.notify_all();
        }
    }

    /// Queues a frame without waiting.
    pub fn push(&self, header: Value, payload: Vec<u8>) {
        self.push_encoded(proto::encode_head(&header, payload.len()), payload);
    }

    fn push_encoded(&self, head: Vec<u8>, payload: Vec<u8>) {
        let mut q = self.queue.lock().unwrap();
        if q.dead {
            return;
        }
        q.bytes += head.len() + payload.len();
        q.frames.push_back((head, payload));
        self.cv.notify_all();
    }

    /// Waits until the queue is below the high-water mark (or the connection is dead).
    pub fn wait_room(&self) {
        let mut q = self.queue.lock().unwrap();
        while q.bytes > HIGH_WATER && !q.dead {
            q = self.cv.wait(q).unwrap();
        }
    }

    /// Waits until everything queued was written (or the connection is dead).
    pub fn flush(&self) {
        let mut q = self.queue.lock().unwrap();
        while q.bytes > 0 && !q.dead {
            q = self.cv.wait(q).unwrap();
        }
    }

    /// Answers request `id` with `ok` or `error`.
    pub fn answer(&self, id: u32, result: Result<Reply, Fail>) {
        match result {
            Ok(reply) => {
                let mut header = reply.fields;
                header.insert("t".into(), "ok".into());
                header.insert("id".into(), id.into());
                let head = proto::encode_head(&Value::Object(header), reply.payload.len());
                if head.len() - 8 > proto::MAX_HEADER_OUT {
                    let size = head.len() - 8;
                    let fail = Fail::new(
                        error::TOO_LARGE,
                        format!("the answer is too large ({size} bytes of JSON): ask for less"),
                    );
                    return self.answer(id, Err(fail));
                }
                self.push_encoded(head, reply.payload);
            }
            Err(fail) => self.push(
                json!({"t": "error", "id": id, "code": fail.code, "message": fail.message}),
                Vec::new(),
            ),
        }
    }

    pub fn ok(&self, id: u32, fields: Value) {
        self.answer(id, Ok(Reply::with(fields)));
    }
}
