//! A machine's side of snapshots: its agent walks the box's root filesystem, reads the files a
//! snapshot keeps, and writes a snapshot's changes into a fresh box (agent/src/snapshot.rs does
//! the box's half; paths are only ever resolved there).

use std::sync::Arc;

use serde_json::{json, Value};
use std::io::Write;
use std::os::unix::fs::FileExt;

use super::Machine;
use crate::errors::{Error, Result};
use crate::snapshots::diff::{Changes, Kept};

/// File bytes moved per request, each way: large enough that the socket stays busy, well under
/// the 64 MiB frame limit.
const BATCH_BYTES: u64 = 16 << 20;
/// Entries per request: even with every path and link target at PATH_MAX (4 KiB) their JSON stays
/// under the agent's 16 MiB header limit.
const BATCH_ITEMS: usize = 1024;

impl Machine {
    /// The agent's walk of the box's root filesystem (agent/src/snapshot.rs `walk`), as sent.
    pub async fn snap_walk(&self) -> Result<Vec<u8>> {
        Ok(self.request("snap_walk", json!({}), &[]).await?.data)
    }

    /// Reads every kept file of `changes` into `out` (one after the other), setting each one's
    /// offset and size to what was read; a file gone since the walk is dropped from `changes`.
    /// Two requests are in flight at a time, so the agent reads while the host writes. Returns
    /// the bytes written.
    pub async fn snap_read_into(
        self: &Arc<Self>,
        changes: &mut Changes,
        out: Arc<std::fs::File>,
        limit: u64,
    ) -> Result<u64> {
        // The previous batch's write to root.data, done off the runtime while the next is read.
        let mut writing: Option<tokio::task::JoinHandle<std::io::Result<()>>> = None;
        // Pieces: (index in kept, offset in the file, length).
        let mut batches: Vec<Vec<(usize, u64, u64)>> = vec![Vec::new()];
        let mut in_batch = 0u64;
        for (i, k) in changes.kept.iter().enumerate() {
            if k.kind != 'f' {
                continue;
            }
            let mut off = 0;
            loop {
                let len = (k.size - off).min(BATCH_BYTES);
                let cur = batches.last_mut().expect("one batch at least");
                if in_batch + len > BATCH_BYTES || cur.len() >= BATCH_ITEMS {
                    batches.push(Vec::new());
                    in_batch = 0;
                }
                batches
                    .last_mut()
                    .expect("one batch at least")
                    .push((i, off, len));
                in_batch += len;
                off += len;
                if off >= k.size {
                    break;
                }
            }
        }
        let request = |batch: &[(usize, u64, u64)]| {
            let items: Vec<Value> = batch
                .iter()
                .map(|(i, off, len)| json!([changes.kept[*i].path, off, len]))
                .collect();
            let me = self.clone();
            crate::task::spawn(async move {
                me.request("snap_read", json!({ "items": items }), &[])
                    .await
            })
        };
        let mut written = 0u64;
        let mut got_size = vec![0u64; changes.kept.len()];
        let mut vanished = vec![false; changes.kept.len()];
        let mut started = vec![0u64; changes.kept.len()];
        let mut pending = batches.first().map(|b| request(b));
        for (n, batch) in batches.iter().enumerate() {
            let Some(now) = pending.take() else { break };
            pending = batches.get(n + 1).map(|b| request(b));
            let reply = now
                .await
                .map_err(|e| Error::sandbox(format!("snapshot read task failed: {e}")))??;
            let got: Vec<i64> = reply
                .head
                .get("got")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default();
            if got.len() != batch.len() {
                return Err(Error::sandbox(
                    "the machine's agent answered a snapshot read badly",
                ));
            }
            let mut at = 0usize;
            let mut keep_spans = Vec::new();
            for ((i, off, _), g) in batch.iter().zip(got) {
                if g < 0 {
                    vanished[*i] = true;
                    continue;
                }
                let g = g as usize;
                if at + g > reply.data.len() {
                    return Err(Error::sandbox(
                        "the machine's agent sent a short snapshot read",
                    ));
                }
                let span = (at, g);
                at += g;
                // A file that shrank since the walk ends where its bytes ended.
                if *off != got_size[*i] {
                    continue;
                }
                if *off == 0 {
                    started[*i] = written;
                }
                written += g as u64;
                if written > limit {
                    return Err(Error::TooLarge(format!(
                        "the snapshot is over its size limit of {limit} bytes (snapshotMaxBytes)"
                    )));
                }
                got_size[*i] += g as u64;
                keep_spans.push(span);
            }
            if let Some(w) = writing.take() {
                finish_write(w).await?;
            }
            let (out, data) = (out.clone(), reply.data);
            writing = Some(crate::task::spawn_blocking(move || {
                let mut out: &std::fs::File = &out;
                keep_spans
                    .iter()
                    .try_for_each(|(at, len)| out.write_all(&data[*at..*at + *len]))
            }));
        }
        if let Some(w) = writing.take() {
            finish_write(w).await?;
        }
        let mut keep = Vec::with_capacity(changes.kept.len());
        for (i, mut k) in std::mem::take(&mut changes.kept).into_iter().enumerate() {
            if k.kind == 'f' {
                if vanished[i] {
                    continue;
                }
                k.offset = started[i];
                k.size = got_size[i];
            }
            keep.push(k);
        }
        changes.kept = keep;
        Ok(written)
    }

    /// Writes a snapshot's root changes into this (fresh) machine: removals, then directories,
    /// files and symlinks in order, then the directories' mtimes (last, as writing into a
    /// directory moves its mtime). Two requests in flight, as for reads.
    /// `src` holds the files' bytes at the offsets `changes` gives (read with pread, so several
    /// machines may restore from one open file at once).
    pub async fn snap_apply(
        self: &Arc<Self>,
        changes: &Changes,
        src: Arc<std::fs::File>,
    ) -> Result<()> {
        let mut batches = Batches::default();
        for p in &changes.deleted {
            batches.push(json!({"op": "rm", "path": p}), 0);
        }
        let mut spans: Vec<Vec<(u64, u64)>> = Vec::new();
        for k in &changes.kept {
            match k.kind {
                'd' => {
                    batches.push(
                        json!({"op": "dir", "path": k.path, "mode": k.mode, "uid": k.uid, "gid": k.gid}),
                        0,
                    );
                }
                'l' => {
                    batches.push(
                        json!({"op": "link", "path": k.path, "target": k.link.clone().unwrap_or_default(),
                               "uid": k.uid, "gid": k.gid, "mtime": [k.mtime.0, k.mtime.1]}),
                        0,
                    );
                }
                _ => {
                    let mut off = 0;
                    loop {
                        let len = (k.size - off).min(BATCH_BYTES);
                        let n = batches.push(file_op(k, off, len), len);
                        if spans.len() <= n {
                            spans.resize(n + 1, Vec::new());
                        }
                        spans[n].push((k.offset + off, len));
                        off += len;
                        if off >= k.size {
                            break;
                        }
                    }
                }
            }
        }
        for k in changes.kept.iter().rev().filter(|k| k.kind == 'd') {
            batches.push(
                json!({"op": "times", "path": k.path, "mtime": [k.mtime.0, k.mtime.1]}),
                0,
            );
        }
        spans.resize(batches.ops.len(), Vec::new());
        // Two requests in flight: the next is sent (in order: each request's ops follow the
        // previous one's) while the agent still applies the one before.
        let mut in_flight: Option<tokio::sync::oneshot::Receiver<super::wire::Reply>> = None;
        for (ops, spans) in batches.ops.into_iter().zip(spans) {
            let src = src.clone();
            let payload = crate::task::spawn_blocking(move || {
                let total: u64 = spans.iter().map(|s| s.1).sum();
                let mut payload = vec![0u8; total as usize];
                let mut at = 0usize;
                for (off, len) in spans {
                    src.read_exact_at(&mut payload[at..at + len as usize], off)?;
                    at += len as usize;
                }
                Ok::<_, std::io::Error>(payload)
            })
            .await
            .map_err(|e| Error::sandbox(format!("snapshot restore task failed: {e}")))?
            .map_err(|e| Error::io("cannot read the snapshot's root.data", e))?;
            self.check_alive()?;
            let next = self
                .conn
                .send_request("snap_apply", json!({ "ops": ops }), &payload)
                .await?;
            if let Some(prev) = in_flight.replace(next) {
                self.answer(prev).await?;
            }
        }
        if let Some(last) = in_flight {
            self.answer(last).await?;
        }
        Ok(())
    }
}

impl Machine {
    async fn answer(&self, rx: tokio::sync::oneshot::Receiver<super::wire::Reply>) -> Result<()> {
        rx.await.unwrap_or_else(|_| Err(self.conn.gone_error()))?;
        Ok(())
    }
}

async fn finish_write(w: tokio::task::JoinHandle<std::io::Result<()>>) -> Result<()> {
    w.await
        .map_err(|e| Error::sandbox(format!("snapshot write task failed: {e}")))?
        .map_err(|e| Error::io("cannot write the snapshot's root.data", e))
}

fn file_op(k: &Kept, off: u64, len: u64) -> Value {
    json!({"op": "file", "path": k.path, "off": off, "len": len, "mode": k.mode, "uid": k.uid,
           "gid": k.gid, "mtime": [k.mtime.0, k.mtime.1], "last": off + len >= k.size})
}

/// `snap_apply` requests being composed: each at most [`BATCH_BYTES`] of file bytes and
/// [`BATCH_ITEMS`] ops.
#[derive(Default)]
struct Batches {
    ops: Vec<Vec<Value>>,
    bytes: u64,
}

impl Batches {
    /// Adds an op carrying `len` payload bytes; returns the index of the batch it went to.
    fn push(&mut self, op: Value, len: u64) -> usize {
        let full = self
            .ops
            .last()
            .is_none_or(|b| b.len() >= BATCH_ITEMS || self.bytes + len > BATCH_BYTES);
        if full {
            self.ops.push(Vec::new());
            self.bytes = 0;
        }
        self.bytes += len;
        self.ops.last_mut().expect("pushed above").push(op);
        self.ops.len() - 1
    }
}
