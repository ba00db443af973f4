//! Workspace checkpoints as plain `.tar.gz`: streamed out with the `tar` crate (GNU long names,
//! interoperable with `tar xzf`), streamed back in with every member vetted and written through
//! the same contained workspace I/O as `writeFile`.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use flate2::{bufread::GzDecoder, Compress, Compression, Crc, FlushCompress};

use crate::errors::{Error, Result};
use crate::workspace::{Entry, Workspace};

/// Default ceiling on the bytes a checkpoint carries: what `snapshot` archives (a sparse file the
/// box planted stops here, not after an hour) and what `restore` decompresses (a gzip bomb).
pub const DEFAULT_LIMIT: u64 = 4 << 30;
const IO_BUF: usize = 1 << 20;

/// Asked between the steps of an archive job: true once its caller gave up (an AbortSignal, or
/// close()). The job then ends with [`Error::Aborted`], cleaned up as after a refusal.
pub type Stop<'a> = &'a dyn Fn() -> bool;

/// Writes a gzip tar of the workspace to `dest` (through a temp file renamed into place),
/// refusing once the files' total size passes `limit`.
pub fn snapshot(ws: &Workspace, dest: &Path, limit: u64) -> Result<()> {
    snapshot_until(ws, dest, limit, &|| false)
}

/// [`snapshot`], giving up when `stop` says so.
pub fn snapshot_until(ws: &Workspace, dest: &Path, limit: u64, stop: Stop) -> Result<()> {
    let tmp = temp_beside(dest);
    let out = File::options()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| Error::io(format!("snapshot: cannot create {}", tmp.display()), e))?;
    let result = write_archive(ws, &out, &tmp, limit, stop).and_then(|()| {
        std::fs::rename(&tmp, dest)
            .map_err(|e| Error::io(format!("snapshot: cannot write {}", dest.display()), e))
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn temp_beside(dest: &Path) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dest.with_file_name(format!(".{name}.{}.partial", std::process::id()))
}

fn write_archive(
    ws: &Workspace,
    out: &File,
    out_path: &Path,
    limit: u64,
    stop: Stop,
) -> Result<()> {
    let own = out.metadata().map(|m| (m.dev(), m.ino())).ok();
    let mut total: u64 = 0;
    let gz = ChunkedGz::new(BufWriter::with_capacity(IO_BUF, out))
        .map_err(|e| Error::io("snapshot", e))?;
    let mut tar = tar::Builder::new(gz);
    let fail = |e: io::Error| {
        if e.get_ref().is_some_and(|i| i.is::<Stopped>()) {
            Error::Aborted
        } else {
            Error::io(format!("snapshot: cannot write {}", out_path.display()), e)
        }
    };
    ws.walk(&[], false, true, &mut |entry| match entry {
        _ if stop() => Err(Error::Aborted),
        Entry::Dir { rel, .. } => {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Directory);
            h.set_mode(0o755);
            h.set_size(0);
            tar.append_data(&mut h, format!("{rel}/"), io::empty())
                .map_err(fail)
        }
        Entry::File {
            rel,
            dir,
            name,
            stat,
        } => {
            if own == Some((stat.st_dev, stat.st_ino)) {
                return Ok(()); // the archive being written, when dest is inside the workspace
            }
            let file = match Workspace::open_in(dir, name) {
                Ok(f) => f,
                Err(_) => return Ok(()), // replaced by something else meanwhile: not a file now
            };
            let size = stat.st_size as u64;
            total = total.saturating_add(size);
            if total > limit {
                return Err(Error::TooLarge(format!(
                    "snapshot refused: the workspace holds more than {limit} bytes of files \
                     (at {rel:?}); pass a larger maxBytes to archive it"
                )));
            }
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(if stat.st_mode & 0o111 != 0 {
                0o755
            } else {
                0o644
            });
            h.set_mtime(stat.st_mtime.max(0) as u64);
            h.set_size(size);
            tar.append_data(
                &mut h,
                rel,
                Exact {
                    inner: file.take(size),
                    left: size,
                    stop,
                },
            )
            .map_err(fail)
        }
    })?;
    let gz = tar.into_inner().map_err(fail)?;
    let mut buf = gz.finish().map_err(fail)?;
    buf.flush().map_err(fail)
}

/// Compression unit: each chunk is deflated on its own and sync-flushed, so chunks can be
/// compressed in parallel and still concatenate into one ordinary gzip member (as pigz does).
const CHUNK: usize = 1 << 20;
/// zlib-rs's level 1 is a single-probe matcher with fixed Huffman codes; level 2 is zlib's fast
/// matcher. Measured on the benchmark's workspace (200 MiB, half random, half CSV): level 1's
/// archive is 1.08x 0.1.1's for 0.7x level 2's CPU, level 2's 1.00x, level 3's 0.99x for 1.5x
/// the CPU. Level 2 is the fastest within the 1.05x size target.
const LEVEL: u32 = 2;
/// More threads than this buy nothing: writing the archive and reading the files are serial.
const MAX_WORKERS: usize = 8;
/// Chunks handed to the compressors and not yet written, per worker: one being compressed and one
/// waiting, as reading a chunk takes a fraction of compressing it; a bound on memory (about
/// 2 x 1 MiB per chunk in flight: 8 MiB on 2 cores, 32 MiB at the 8-thread cap).
const IN_FLIGHT_PER_WORKER: usize = 2;

/// A gzip writer tuned for checkpoints: chunks compressed on every core while this thread goes on
/// reading the files, and chunks that do not compress (media, archives, random data) stored as
/// they are instead of being made larger at great cost. Output is a single standard gzip member.
struct ChunkedGz<W: Write> {
    out: W,
    /// The chunk being filled.
    filling: Vec<u8>,
    crc: Crc,
    pool: Compressors,
    /// Compressed chunks that came back ahead of their turn.
    early: std::collections::BTreeMap<u64, Vec<u8>>,
    sent: u64,
    written: u64,
    max_in_flight: u64,
}

/// The compression threads: numbered chunks in, compressed chunks out in any order. Dropping it
/// (an archive that failed half-way) lets the threads finish what they hold and joins them.
struct Compressors {
    work: Option<mpsc::SyncSender<(u64, Vec<u8>, bool)>>,
    done: mpsc::Receiver<(u64, io::Result<Vec<u8>>)>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Compressors {
    fn start(workers: usize, queue: usize) -> io::Result<Compressors> {
        let (work, todo) = mpsc::sync_channel::<(u64, Vec<u8>, bool)>(queue);
        let todo = std::sync::Arc::new(std::sync::Mutex::new(todo));
        let (done_tx, done) = mpsc::channel();
        let mut pool = Compressors {
            work: Some(work),
            done,
            threads: Vec::with_capacity(workers),
        };
        for _ in 0..workers {
            let (todo, done_tx) = (todo.clone(), done_tx.clone());
            let t = std::thread::Builder::new()
                .name("kern-snapshot-gz".into())
                .spawn(move || loop {
                    let next = todo.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((seq, chunk, last)) = next else { return };
                    // Every chunk taken is answered, or the writer would wait for it forever.
                    let out = std::panic::catch_unwind(|| deflate(&chunk, last))
                        .unwrap_or_else(|_| Err(io::Error::other("compression panicked")));
                    if done_tx.send((seq, out)).is_err() {
                        return;
                    }
                })?;
            pool.threads.push(t);
        }
        Ok(pool)
    }
}

impl Drop for Compressors {
    fn drop(&mut self) {
        self.work = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl<W: Write> ChunkedGz<W> {
    fn new(out: W) -> io::Result<Self> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::with_workers(out, cores.min(MAX_WORKERS))
    }

    fn with_workers(mut out: W, workers: usize) -> io::Result<Self> {
        // Header: no name, no mtime, no level flag (as zlib writes it for level 2), unknown OS.
        out.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff])?;
        let workers = workers.max(1);
        let max_in_flight = workers * IN_FLIGHT_PER_WORKER;
        Ok(ChunkedGz {
            out,
            filling: Vec::with_capacity(CHUNK),
            crc: Crc::new(),
            pool: Compressors::start(workers, max_in_flight)?,
            early: Default::default(),
            sent: 0,
            written: 0,
            max_in_flight: max_in_flight as u64,
        })
    }

    /// Hands a chunk to the compressors, first writing what is due while at the bound.
    fn send(&mut self, chunk: Vec<u8>, last: bool) -> io::Result<()> {
        self.crc.update(&chunk);
        while self.sent - self.written >= self.max_in_flight {
            self.write_next(true)?;
        }
        let gone = || io::Error::other("the compression threads stopped");
        let work = self.pool.work.as_ref().ok_or_else(gone)?;
        work.send((self.sent, chunk, last)).map_err(|_| gone())?;
        self.sent += 1;
        // Whatever is back goes out now, so the file grows while the workers compress.
        while self.write_next(false)? {}
        Ok(())
    }

    /// Writes the next chunk in order if it is back (or, with `wait`, once it is); false when
    /// there was none to write.
    fn write_next(&mut self, wait: bool) -> io::Result<bool> {
        loop {
            if let Some(c) = self.early.remove(&self.written) {
                self.out.write_all(&c)?;
                self.written += 1;
                return Ok(true);
            }
            if self.written == self.sent {
                return Ok(false);
            }
            let got = if wait {
                self.pool.done.recv().ok()
            } else {
                match self.pool.done.try_recv() {
                    Ok(g) => Some(g),
                    Err(mpsc::TryRecvError::Empty) => return Ok(false),
                    Err(mpsc::TryRecvError::Disconnected) => None,
                }
            };
            let (seq, c) = got.ok_or_else(|| io::Error::other("a compression thread died"))?;
            self.early.insert(seq, c?);
        }
    }

    fn finish(mut self) -> io::Result<W> {
        let tail = std::mem::take(&mut self.filling);
        self.send(tail, true)?; // possibly empty: it still carries the final block
        while self.write_next(true)? {}
        self.out.write_all(&self.crc.sum().to_le_bytes())?;
        self.out.write_all(&self.crc.amount().to_le_bytes())?;
        Ok(self.out)
    }
}

impl<W: Write> Write for ChunkedGz<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(CHUNK - self.filling.len());
        self.filling.extend_from_slice(&buf[..n]);
        if self.filling.len() == CHUNK {
            let full = std::mem::replace(&mut self.filling, Vec::with_capacity(CHUNK));
            self.send(full, false)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Raw deflate of one chunk: stored if a sample shows it does not compress, else [`LEVEL`].
fn deflate(chunk: &[u8], last: bool) -> io::Result<Vec<u8>> {
    let sample = &chunk[..chunk.len().min(32 << 10)];
    // The quick level-1 pass is enough to tell random bytes from text.
    let level =
        if !sample.is_empty() && raw_deflate(sample, 1, false)?.len() * 100 > sample.len() * 97 {
            0
        } else {
            LEVEL
        };
    raw_deflate(chunk, level, last)
}

fn raw_deflate(input: &[u8], level: u32, last: bool) -> io::Result<Vec<u8>> {
    let mut c = Compress::new(Compression::new(level), false);
    let mut out = Vec::with_capacity(input.len() + input.len() / 64 + 1024);
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    loop {
        let consumed = c.total_in() as usize;
        c.compress_vec(&input[consumed..], &mut out, flush)
            .map_err(io::Error::other)?;
        // Done once all input is in and the last call left spare room (nothing more to emit).
        if c.total_in() as usize == input.len() && out.len() < out.capacity() {
            return Ok(out);
        }
        out.reserve(64 << 10);
    }
}

/// Yields exactly `left` bytes: the file's own, then zeros if it shrank while being archived, so
/// the header's size always matches what follows it. Fails with [`Stopped`] once `stop` says so.
struct Exact<'s, R> {
    inner: R,
    left: u64,
    stop: Stop<'s>,
}

impl<R: Read> Read for Exact<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        if (self.stop)() {
            return Err(io::Error::other(Stopped));
        }
        let want = buf.len().min(self.left as usize);
        let mut n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            buf[..want].fill(0);
            n = want;
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// What a stopped snapshot unwinds with through the tar writer.
#[derive(Debug)]
struct Stopped;
impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped")
    }
}
impl std::error::Error for Stopped {}

/// Stops the stream once more than `limit` decompressed bytes have been read.
struct Ceiling<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R: Read> Read for Ceiling<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            return Err(io::Error::other(CeilingHit(self.limit)));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

#[derive(Debug)]
struct CeilingHit(u64);
impl std::fmt::Display for CeilingHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the snapshot decompresses to more than {} bytes (the restore ceiling)",
            self.0
        )
    }
}
impl std::error::Error for CeilingHit {}

fn malformed(e: io::Error) -> Error {
    match e.get_ref().and_then(|i| i.downcast_ref::<CeilingHit>()) {
        Some(hit) => Error::TooLarge(format!("restore refused: {hit}")),
        None => Error::sandbox(format!("malformed snapshot: {e}")),
    }
}

/// Opens `src` for reading only if it is a regular file, without blocking on a FIFO.
fn open_regular(src: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(src)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    rustix::fs::fcntl_setfl(&f, rustix::fs::OFlags::RDONLY)?;
    Ok(f)
}

/// A member path made safe: relative, no `..`, split into components. `None` for the root itself.
fn vet_path(raw: &[u8]) -> Result<Option<Vec<String>>> {
    let name = std::str::from_utf8(raw)
        .map_err(|_| Error::sandbox("unsafe path in snapshot: not valid UTF-8"))?;
    if name.starts_with('/') || name.contains('\0') || name.contains('\\') {
        return Err(Error::sandbox(format!("unsafe path in snapshot: {name:?}")));
    }
    let mut parts = Vec::new();
    for c in name.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err(Error::sandbox(format!("unsafe path in snapshot: {name:?}"))),
            c => parts.push(c.to_string()),
        }
    }
    Ok((!parts.is_empty()).then_some(parts))
}

/// Extracts `src` into the workspace. Members are vetted as they stream by: only regular files
/// and directories, no absolute path, no `..`; a refusal stops the restore with a SandboxError
/// (members before it stay restored; after a write error, a few after it may be too).
///
/// This thread decompresses and vets; [`LANES`] writer threads create and write the files, so
/// inflate and the kernel's file work overlap. At most [`BATCHES`] batches exist, which bounds
/// the memory in flight.
pub fn restore(ws: &Workspace, src: &Path, limit: u64) -> Result<()> {
    restore_until(ws, src, limit, &|| false)
}

/// [`restore`], giving up when `stop` says so (the members written so far stay, as after a
/// refusal).
pub fn restore_until(ws: &Workspace, src: &Path, limit: u64, stop: Stop) -> Result<()> {
    let file = open_regular(src)
        .map_err(|e| Error::io(format!("restore: cannot open {}", src.display()), e))?;
    // The earliest member a writer failed on: no writer goes past it, and its error is reported.
    let failed = AtomicU64::new(u64::MAX);
    std::thread::scope(|s| {
        let (give_back, back) = mpsc::channel();
        let mut sends = Vec::new();
        let mut writers = Vec::new();
        for _ in 0..LANES {
            let (send, batches) = mpsc::sync_channel(BATCHES);
            let give_back = GiveBack(give_back.clone());
            let failed = &failed;
            let writer = std::thread::Builder::new()
                .name("kern-restore".into())
                .spawn_scoped(s, move || write_members(ws, batches, &give_back, failed))
                .map_err(|e| Error::io("restore: cannot start a writer thread", e))?;
            sends.push(send);
            writers.push(writer);
        }
        let open = (0..LANES).map(|_| Batch::default()).collect();
        let mut feed = Feed {
            open,
            lane: 0,
            made: LANES,
            sends,
            back,
        };
        let read = read_members(file, limit, &mut feed, stop);
        feed.finish(); // what was read before a refusal is still written
        let mut first: Option<(u64, Error)> = None;
        for writer in writers {
            if let Err((at, e)) = writer
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
            {
                if first.as_ref().is_none_or(|(f, _)| at < *f) {
                    first = Some((at, e));
                }
            }
        }
        // Writers only get members before one the reader refused: theirs is the earlier error.
        first.map_or(read, |(_, e)| Err(e))
    })
}

/// Writer threads. Creates in two directories run in parallel (on ext4 without a journal, soon
/// after many deletes, each create can cost a millisecond), those in one directory serialize in
/// the kernel anyway: so a file goes to the lane of its parent, and members with the same path
/// keep their archive order.
const LANES: usize = 2;
/// Bytes of member data per batch (also the size of archive reads), and how many batches may exist.
const BATCH: usize = 256 << 10;
const BATCHES: usize = 6;

fn lane_of(dir: &[String]) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    dir.hash(&mut h);
    h.finish() as usize % LANES
}

/// One step for a writer, in archive order; `member` numbers members across lanes.
enum Op {
    Dir {
        member: u64,
        parts: Vec<String>,
    },
    File {
        member: u64,
        parent: Vec<String>,
        leaf: String,
        mode: u32,
    },
    /// The next `n` bytes of the batch's data continue the last file (possibly from a batch before).
    Data(usize),
}

impl Op {
    fn name_len(&self) -> usize {
        let len = |parts: &[String]| parts.iter().map(String::len).sum::<usize>();
        match self {
            Op::Dir { parts, .. } => len(parts),
            Op::File { parent, leaf, .. } => len(parent) + leaf.len(),
            Op::Data(_) => 0,
        }
    }
}

#[derive(Default)]
struct Batch {
    ops: Vec<Op>,
    /// BATCH bytes once a file needs them; `used` of them hold data.
    data: Vec<u8>,
    used: usize,
    /// Name bytes in `ops`: a run of long names also ends a batch, so it stays bounded.
    names: usize,
}

/// The reading side: fills a batch per lane, hands it over, takes back a written one.
struct Feed {
    open: Vec<Batch>,
    /// The lane of the file being read.
    lane: usize,
    made: usize,
    sends: Vec<mpsc::SyncSender<Batch>>,
    /// Written batches; None when a writer stopped.
    back: mpsc::Receiver<Option<Batch>>,
}

impl Feed {
    /// Queues `op` for `lane`; false once a writer has stopped.
    fn push(&mut self, lane: usize, op: Op) -> bool {
        self.lane = lane;
        let b = &mut self.open[lane];
        b.names += op.name_len();
        b.ops.push(op);
        b.names < BATCH || self.hand_over(lane)
    }

    /// Space for the current file's next bytes; None once a writer has stopped.
    fn room(&mut self) -> Option<&mut [u8]> {
        let lane = self.lane;
        if self.open[lane].used == BATCH && !self.hand_over(lane) {
            return None;
        }
        let b = &mut self.open[lane];
        if b.data.len() < BATCH {
            b.data.resize(BATCH, 0);
        }
        Some(&mut b.data[b.used..])
    }

    /// Records that `n` bytes were read into [`Feed::room`].
    fn filled(&mut self, n: usize) {
        let b = &mut self.open[self.lane];
        b.used += n;
        match b.ops.last_mut() {
            Some(Op::Data(k)) => *k += n,
            _ => b.ops.push(Op::Data(n)),
        }
    }

    fn hand_over(&mut self, lane: usize) -> bool {
        if self.sends[lane]
            .send(std::mem::take(&mut self.open[lane]))
            .is_err()
        {
            return false;
        }
        // Reuse a written batch (its buffer is already paged in) before making one.
        let next = match self.back.try_recv() {
            Ok(b) => b,
            Err(_) if self.made < BATCHES => {
                self.made += 1;
                Some(Batch::default())
            }
            Err(_) => self.back.recv().ok().flatten(),
        };
        match next {
            Some(b) => {
                self.open[lane] = b;
                true
            }
            None => false,
        }
    }

    fn finish(self) {
        for (send, batch) in self.sends.iter().zip(self.open) {
            if !batch.ops.is_empty() {
                let _ = send.send(batch);
            }
        }
    }
}

/// A writer's way back to the reader. Dropped, however the writer ends, it wakes a reader that
/// waits for a batch (which would otherwise wait forever).
struct GiveBack(mpsc::Sender<Option<Batch>>);

impl Drop for GiveBack {
    fn drop(&mut self) {
        let _ = self.0.send(None);
    }
}

/// Decompresses and vets the archive into `feed`. Ok(()) also when a writer stopped first: its
/// error is the one to report.
fn read_members(file: File, limit: u64, feed: &mut Feed, stop: Stop) -> Result<()> {
    let gz = GzDecoder::new(BufReader::with_capacity(BATCH, file));
    let mut archive = tar::Archive::new(Ceiling {
        inner: gz,
        left: limit,
        limit,
    });
    for (member, entry) in (0u64..).zip(archive.entries().map_err(malformed)?) {
        if stop() {
            return Err(Error::Aborted);
        }
        let mut entry = entry.map_err(malformed)?;
        let kind = entry.header().entry_type();
        if kind.is_pax_global_extensions() {
            continue;
        }
        // A directory carries no data; one that claims some is malformed (0.1.1 refuses it).
        if kind.is_dir() && entry.size() != 0 {
            return Err(Error::sandbox(format!(
                "malformed snapshot: directory member {:?} has a non-zero size",
                String::from_utf8_lossy(&entry.path_bytes()).trim_end_matches('/')
            )));
        }
        let Some(mut parts) = vet_path(&entry.path_bytes())? else {
            continue;
        };
        if kind.is_dir() {
            if !feed.push(lane_of(&parts), Op::Dir { member, parts }) {
                return Ok(());
            }
            continue;
        }
        if !(kind.is_file() || kind == tar::EntryType::Continuous) {
            return Err(Error::sandbox(format!(
                "unsafe member type in snapshot (only files and directories): {:?}",
                parts.join("/")
            )));
        }
        let leaf = parts.pop().unwrap_or_default();
        let mode = entry
            .header()
            .mode()
            .map_or(0o644, |m| if m & 0o111 != 0 { 0o755 } else { 0o644 });
        if !feed.push(
            lane_of(&parts),
            Op::File {
                member,
                parent: parts,
                leaf,
                mode,
            },
        ) {
            return Ok(());
        }
        loop {
            if stop() {
                return Err(Error::Aborted);
            }
            let Some(room) = feed.room() else {
                return Ok(());
            };
            match entry.read(room) {
                Ok(0) => break,
                Ok(n) => feed.filled(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(malformed(e)),
            }
        }
    }
    Ok(())
}

/// Applies one lane's batches to the workspace, through the same contained I/O as `writeFile`.
/// An error comes with the member it is about.
fn write_members(
    ws: &Workspace,
    batches: mpsc::Receiver<Batch>,
    give_back: &GiveBack,
    failed: &AtomicU64,
) -> std::result::Result<(), (u64, Error)> {
    let shown = |parent: &[String], leaf: &str| {
        if parent.is_empty() {
            leaf.to_string()
        } else {
            format!("{}/{leaf}", parent.join("/"))
        }
    };
    let fail = |member: u64, e: Error| {
        failed.fetch_min(member, Ordering::Relaxed);
        (member, e)
    };
    // The last parent directory opened, reused while files stay in it; the file being written.
    let mut parent: Option<(Vec<String>, OwnedFd)> = None;
    let mut out: Option<(File, String, u64)> = None;
    for mut batch in batches {
        let mut at = 0;
        for op in batch.ops.drain(..) {
            match op {
                Op::Dir { member, parts } => {
                    if member > failed.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    out = None;
                    ws.open_dir(&parts, true).map_err(|e| {
                        let what =
                            format!("restore: cannot create directory {:?}", parts.join("/"));
                        fail(member, Error::io(what, e))
                    })?;
                }
                Op::File {
                    member,
                    parent: dir,
                    leaf,
                    mode,
                } => {
                    if member > failed.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    drop(out.take()); // closed before the next is created, as a serial restore would
                    if parent.as_ref().is_none_or(|(p, _)| *p != dir) {
                        let fd = ws.open_dir(&dir, true).map_err(|e| {
                            let what = format!(
                                "restore: cannot create the parent of {:?}",
                                shown(&dir, &leaf)
                            );
                            fail(member, Error::io(what, e))
                        })?;
                        parent = Some((dir, fd));
                    }
                    let (dir, fd) = parent.as_ref().expect("parent set above");
                    let f = Workspace::create_in(fd.as_fd(), &leaf, mode).map_err(|e| {
                        fail(
                            member,
                            Error::io(format!("restore: cannot write {:?}", shown(dir, &leaf)), e),
                        )
                    })?;
                    out = Some((f, leaf, member));
                }
                Op::Data(n) => {
                    let (f, leaf, member) = out.as_mut().expect("data follows its file");
                    f.write_all(&batch.data[at..at + n]).map_err(|e| {
                        let dir = parent.as_ref().map_or(&[][..], |(p, _)| p.as_slice());
                        fail(
                            *member,
                            Error::io(format!("restore: cannot write {:?}", shown(dir, leaf)), e),
                        )
                    })?;
                    at += n;
                }
            }
        }
        batch.used = 0;
        batch.names = 0;
        let _ = give_back.0.send(Some(batch)); // the reader may be done
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::temp_workspace as ws;

    fn gz_tar(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        build(&mut b);
        let raw = b.into_inner().unwrap();
        let mut e = flate2::write::GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(&raw).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn chunked_gzip_is_one_standard_member() {
        // Compressible text, random bytes, and sizes around the chunk boundary.
        let mut data = Vec::new();
        for i in 0..(3 * CHUNK / 10) {
            data.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        let mut x: u64 = 0x9e3779b97f4a7c15;
        for _ in 0..(CHUNK + 12345) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            data.push(x as u8);
        }
        for _ in 0..3 {
            data.extend_from_within(..CHUNK / 2);
        }
        let lens = [
            0,
            1,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            4 * CHUNK + 17,
            data.len(),
        ];
        for workers in [1, 2, 3, 5] {
            for len in lens {
                let mut gz = ChunkedGz::with_workers(Vec::new(), workers).unwrap();
                gz.write_all(&data[..len]).unwrap();
                let out = gz.finish().unwrap();
                let mut back = Vec::new();
                GzDecoder::new(&out[..]).read_to_end(&mut back).unwrap();
                assert_eq!(back, &data[..len], "len {len}, {workers} workers");
            }
        }
    }

    #[test]
    fn round_trip_with_long_names_and_empty_dirs() {
        let (d, w) = ws();
        let long = format!("{}/{}", "d".repeat(120), "f".repeat(150));
        w.write_file(&long, b"deep").unwrap();
        w.write_file("top.txt", b"top").unwrap();
        std::fs::create_dir(d.path().join("empty")).unwrap();
        let out = tempfile::tempdir().unwrap();
        let snap = out.path().join("s.tar.gz");
        snapshot(&w, &snap, DEFAULT_LIMIT).unwrap();

        let (d2, w2) = ws();
        restore(&w2, &snap, DEFAULT_LIMIT).unwrap();
        assert_eq!(std::fs::read(d2.path().join(&long)).unwrap(), b"deep");
        assert_eq!(std::fs::read(d2.path().join("top.txt")).unwrap(), b"top");
        assert!(d2.path().join("empty").is_dir());
        drop(d);
    }

    #[test]
    fn restore_keeps_archive_order_across_batches_and_lanes() {
        let body = |i: usize, len: usize| {
            (0..len)
                .map(|j| (i * 31 + j * 7) as u8)
                .collect::<Vec<u8>>()
        };
        let sizes = [0, 1, BATCH - 1, BATCH, BATCH + 1, 3 * BATCH + 7];
        let mut want = Vec::new();
        let data = gz_tar(|b| {
            for i in 0..40 {
                let (name, len) = (format!("d{}/f{i}", i % 7), sizes[i % sizes.len()]);
                let mut h = tar::Header::new_gnu();
                h.set_size(len as u64);
                h.set_mode(0o644);
                b.append_data(&mut h, &name, &body(i, len)[..]).unwrap();
                want.push((name, body(i, len)));
            }
            // A later member with the same path wins, even when shorter.
            let mut h = tar::Header::new_gnu();
            h.set_size(3);
            h.set_mode(0o644);
            b.append_data(&mut h, "d5/f5", &b"new"[..]).unwrap();
        });
        let lanes: std::collections::HashSet<_> =
            (0..7).map(|i| lane_of(&[format!("d{i}")])).collect();
        assert_eq!(lanes.len(), LANES, "the directories cover every lane");
        want.retain(|(n, _)| n != "d5/f5");
        want.push(("d5/f5".into(), b"new".to_vec()));
        let (d, w) = ws();
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), &data).unwrap();
        restore(&w, f.path(), DEFAULT_LIMIT).unwrap();
        for (name, body) in want {
            assert!(
                std::fs::read(d.path().join(&name)).unwrap() == body,
                "{name}"
            );
        }
    }

    #[test]
    fn a_write_error_names_its_member_and_earlier_members_land() {
        let data = gz_tar(|b| {
            for name in ["a/1", "b/2", "link/x", "c/3"] {
                let mut h = tar::Header::new_gnu();
                h.set_size(1);
                h.set_mode(0o644);
                b.append_data(&mut h, name, &b"x"[..]).unwrap();
            }
        });
        let (d, w) = ws();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("link")).unwrap();
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), &data).unwrap();
        let err = restore(&w, f.path(), DEFAULT_LIMIT).unwrap_err();
        assert!(err.to_string().contains("\"link/x\""), "{err}");
        assert!(d.path().join("a/1").is_file() && d.path().join("b/2").is_file());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn snapshot_stops_at_its_ceiling() {
        let (d, w) = ws();
        std::fs::File::create(d.path().join("sparse"))
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let out = tempfile::tempdir().unwrap();
        let snap = out.path().join("s.tar.gz");
        let err = snapshot(&w, &snap, DEFAULT_LIMIT).unwrap_err();
        assert!(err.to_string().contains("more than"), "{err}");
        assert!(!snap.exists());
        assert_eq!(
            std::fs::read_dir(out.path()).unwrap().count(),
            0,
            "temp file removed"
        );
    }

    #[test]
    fn hostile_members_are_refused() {
        let cases: Vec<(&str, tar::EntryType)> = vec![
            ("../evil", tar::EntryType::Regular),
            ("a/../../evil", tar::EntryType::Regular),
            ("link", tar::EntryType::Symlink),
            ("hard", tar::EntryType::Link),
            ("dev", tar::EntryType::Char),
            ("fifo", tar::EntryType::Fifo),
        ];
        for (name, kind) in cases {
            let data = gz_tar(|b| {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(kind);
                h.set_size(0);
                h.set_mode(0o644);
                // set_path refuses `..`; write the raw name like a hostile tool would.
                h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
                h.set_cksum();
                b.append(&h, io::empty()).unwrap();
            });
            let (_d, w) = ws();
            let f = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(f.path(), &data).unwrap();
            assert!(restore(&w, f.path(), DEFAULT_LIMIT).is_err(), "{name}");
        }
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_ceiling() {
        let data = gz_tar(|b| {
            let mut h = tar::Header::new_gnu();
            h.set_size(8 << 20);
            h.set_mode(0o644);
            b.append_data(&mut h, "big", io::repeat(0).take(8 << 20))
                .unwrap();
        });
        let (_d, w) = ws();
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), &data).unwrap();
        let err = restore(&w, f.path(), 1 << 20).unwrap_err();
        assert!(err.to_string().contains("ceiling"), "{err}");
    }
}
