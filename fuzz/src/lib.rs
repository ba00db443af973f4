//! The jail fixture the fuzz targets share.
//!
//! One temp parent per fuzzing process:
//!
//! ```text
//! <parent>/jail/      the workspace, reset before every input, with a planted symlink tree
//! <parent>/outside/   what the planted links point at; must never change
//! <parent>/sibling/   an empty sibling; must stay empty
//! <parent>/input/     where the restore targets put the archive
//! ```
//!
//! After every input the fixture checks that nothing outside the jail changed, that the jail holds
//! only what was planted plus regular files and directories (each with a single link), and the
//! targets check every byte read and every directory opened. A counting allocator measures the
//! peak heap of each call so "bounded memory" is an assertion, not a hope.

pub mod kernel;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------
// Peak-heap accounting.

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes straight to `System` with the caller's arguments; the counting
// around it touches only atomics and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            if new >= l.size() {
                let now = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + (new - l.size());
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns its result with the heap growth (bytes) it peaked at.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let r = f();
    (r, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

// ---------------------------------------------------------------------------------------------
// The fixture.

pub const OUTSIDE_MARK: &[u8] = b"OUTSIDE";
pub const JAIL_FILE: &[u8] = b"JAIL-FILE\n";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    File {
        len: u64,
        nlink: u64,
        content: Option<Vec<u8>>,
    },
    Symlink(PathBuf),
    Fifo,
    Other(u32),
}

pub type Tree = BTreeMap<PathBuf, Node>;

/// Lists `root` recursively without following any symlink. File contents are kept when small.
pub fn tree(root: &Path) -> Tree {
    let mut out = Tree::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for ent in rd.flatten() {
            let r = rel.join(ent.file_name());
            let p = root.join(&r);
            let Ok(m) = fs::symlink_metadata(&p) else {
                continue;
            };
            let ft = m.file_type();
            let node = if ft.is_symlink() {
                Node::Symlink(fs::read_link(&p).unwrap_or_default())
            } else if ft.is_dir() {
                stack.push(r.clone());
                Node::Dir
            } else if ft.is_file() {
                let content = (m.len() <= 4096).then(|| fs::read(&p).unwrap_or_default());
                Node::File {
                    len: m.len(),
                    nlink: m.nlink(),
                    content,
                }
            } else if ft.is_fifo() {
                Node::Fifo
            } else {
                Node::Other(m.mode())
            };
            out.insert(r, node);
        }
    }
    out
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub struct Fixture {
    pub parent: PathBuf,
    pub jail: PathBuf,
    pub outside: PathBuf,
    pub sibling: PathBuf,
    pub input: PathBuf,
    outside_before: Tree,
    /// What `plant` puts in the jail: symlinks, FIFOs and the seed files, by relative path.
    planted: Tree,
}

static FIXTURE: OnceLock<Fixture> = OnceLock::new();

extern "C" fn remove_parent() {
    if let Some(f) = FIXTURE.get() {
        let _ = fs::remove_dir_all(&f.parent);
    }
}

/// The process-wide fixture, made on first use and removed at exit.
pub fn fixture() -> &'static Fixture {
    FIXTURE.get_or_init(|| {
        // tmpfs when there is one: resetting the jail on ext4 costs ~10 ms, on tmpfs ~0.5 ms.
        let tmp = std::env::var_os("KERN_FUZZ_TMP")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let shm = Path::new("/dev/shm");
                if shm.is_dir() {
                    shm.to_path_buf()
                } else {
                    std::env::temp_dir()
                }
            });
        // A crashed run never reaches atexit: reclaim the parents of dead fuzzing processes.
        for ent in fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name
                .strip_prefix("kern-fuzz-")
                .and_then(|p| p.parse::<u32>().ok())
            {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = fs::remove_dir_all(ent.path());
                }
            }
        }
        let base = tmp.join(format!("kern-fuzz-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(&base).unwrap();
        let parent = fs::canonicalize(&base).unwrap();
        let (jail, outside) = (parent.join("jail"), parent.join("outside"));
        let (sibling, input) = (parent.join("sibling"), parent.join("input"));
        for d in [&outside, &sibling, &input] {
            fs::create_dir(d).unwrap();
        }
        fs::create_dir(outside.join("sub")).unwrap();
        fs::write(outside.join("secret"), b"OUTSIDE-SECRET\n").unwrap();
        fs::write(outside.join("sub/deep"), b"OUTSIDE-DEEP\n").unwrap();
        let mut f = Fixture {
            outside_before: tree(&outside),
            planted: Tree::new(),
            parent,
            jail,
            outside,
            sibling,
            input,
        };
        f.plant();
        f.planted = tree(&f.jail);
        // SAFETY: registers a plain `extern "C" fn()` that only removes our scratch tree.
        unsafe { libc::atexit(remove_parent) };
        f
    })
}

fn mkfifo(p: &Path) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    assert_eq!(
        // SAFETY: `c` is a NUL-terminated path alive for the call.
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {}",
        p.display()
    );
}

impl Fixture {
    /// Plants the jail's hostile tree. Link names double as words in the fuzz dictionaries.
    fn plant(&self) {
        let j = &self.jail;
        let o = &self.outside;
        fs::create_dir(j).unwrap();
        fs::create_dir_all(j.join("d/e")).unwrap();
        fs::write(j.join("f"), JAIL_FILE).unwrap();
        fs::write(j.join("d/x"), JAIL_FILE).unwrap();
        let links: &[(&str, PathBuf)] = &[
            ("out", "../outside".into()),
            ("abs", o.clone()),
            ("root", "/".into()),
            ("up", "..".into()),
            ("dot", ".".into()),
            ("chain1", "chain2".into()),
            ("chain2", "out".into()),
            ("secret", o.join("secret")),
            ("relsecret", "../outside/secret".into()),
            ("dangling", o.join("created")),
            ("reldangling", "../outside/created2".into()),
            ("loop", "loop".into()),
            ("magic", "/proc/self/cwd".into()),
            ("d/back", "../../outside".into()),
            ("d/e/up3", "../../..".into()),
            ("d/e/sub", o.join("sub")),
            ("d/e/deep", "../../../outside/sub/deep".into()),
        ];
        for (name, target) in links {
            symlink(target, j.join(name)).unwrap();
        }
        mkfifo(&j.join("fifo"));
        mkfifo(&j.join("d/fifo"));
        if std::env::var_os("KERN_FUZZ_SPARSE").is_none_or(|v| v != "0") {
            // A box can make a huge sparse file in no time: reading it must not allocate its size
            // (it aborted Node once), and snapshot must stop at its ceiling, not read 1 TiB.
            let big = fs::File::create(j.join("big")).unwrap();
            big.set_len(1 << 40).unwrap();
        }
    }

    /// A fresh jail for the next input.
    pub fn reset(&self) {
        fs::remove_dir_all(&self.jail).unwrap();
        self.plant();
    }

    /// Whether `path` (absolute, canonical) is the jail or beneath it.
    pub fn in_jail(&self, path: &Path) -> bool {
        path.starts_with(&self.jail)
    }

    /// Asserts that the directory fd `fd` is the jail or a directory beneath it.
    pub fn assert_fd_in_jail(&self, fd: std::os::fd::BorrowedFd<'_>, what: &str) {
        use std::os::fd::AsRawFd;
        let p = fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        assert!(
            self.in_jail(&p),
            "{what}: opened a directory outside the jail: {}",
            p.display()
        );
    }

    /// With `KERN_FUZZ_SELFTEST=1`, escapes on purpose (through the planted `out` link, as a buggy
    /// resolver would) so a run can prove `check` catches an escape: smoke.sh expects a crash.
    pub fn selftest_escape(&self) {
        if std::env::var_os("KERN_FUZZ_SELFTEST").is_some_and(|v| v == "1") {
            fs::write(self.jail.join("out/selftest-escape"), b"x").unwrap();
        }
    }

    /// Asserts the invariants after an input: nothing outside the jail changed, and the jail
    /// holds only what was planted plus single-link regular files and directories.
    pub fn check(&self, input_names: &[&str]) {
        assert_eq!(
            names(&self.parent),
            ["input", "jail", "outside", "sibling"],
            "a new entry appeared next to the jail"
        );
        assert!(
            names(&self.sibling).is_empty(),
            "something was written into a sibling of the jail"
        );
        assert_eq!(
            names(&self.input),
            input_names,
            "the input directory changed"
        );
        let now = tree(&self.outside);
        assert!(
            now == self.outside_before,
            "the outside directory changed:\nbefore {:?}\nafter  {:?}",
            self.outside_before,
            now
        );
        for (rel, node) in tree(&self.jail) {
            match (&node, self.planted.get(&rel)) {
                (Node::Dir, _) => {}
                (Node::File { nlink, .. }, _) => {
                    assert_eq!(
                        *nlink, 1,
                        "jail file {rel:?} has {nlink} links (a hard link was made)"
                    )
                }
                (n, Some(p)) if n == p => {}
                (n, _) => {
                    panic!("restore/write left a non-regular entry in the jail: {rel:?} = {n:?}")
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The cases.

/// The restore (and snapshot) ceiling the fuzzers use: small, so a bomb is cheap and memory stays
/// bounded.
pub const RESTORE_LIMIT: u64 = 1 << 20;
/// Heap a single restore may peak at, with RESTORE_LIMIT: two 1 MiB I/O buffers plus a long
/// name (itself under the ceiling) plus slack.
pub const RESTORE_HEAP_MAX: usize = 4 << 20;

/// Restores `gz` (the bytes of a .tar.gz) into a fresh jail and checks the invariants.
pub fn restore_case(gz: &[u8]) {
    let fx = fixture();
    fx.reset();
    let src = fx.input.join("in.tar.gz");
    fs::write(&src, gz).unwrap();
    let ws = kern_sandbox::Workspace::open(&fx.jail).unwrap();
    let (_result, peak) = measure(|| kern_sandbox::restore_archive(&ws, &src, RESTORE_LIMIT));
    drop(ws);
    assert!(
        peak <= RESTORE_HEAP_MAX,
        "restore peaked at {peak} bytes of heap"
    );
    fx.selftest_escape();
    fx.check(&["in.tar.gz"]);
}

/// Heap one path op may peak at: the jail's files are tiny, so anything big is the op's own doing.
pub const PATH_HEAP_MAX: usize = 1 << 20;

/// Runs the path ops in `data` against a fresh jail and checks the invariants.
pub fn paths_case(data: &[u8]) {
    let fx = fixture();
    fx.reset();
    let fallback = std::env::var_os("KERN_SANDBOX_NO_OPENAT2").is_some_and(|v| v == "1");
    let ws = kern_sandbox::Workspace::open(&fx.jail).unwrap();
    for line in data.split(|&b| b == b'\n').take(16) {
        let Some((&op, path)) = line.split_first() else {
            continue;
        };
        let path = String::from_utf8_lossy(path);
        let op = match op {
            b'w' | b'r' | b'm' | b'o' | b'c' | b's' => op,
            n => b"wrmocs"[n as usize % 6],
        };
        let (_, peak) = measure(|| match op {
            b'w' => {
                let _ = ws.write_file(&path, b"FUZZ-DATA\n");
            }
            b'r' | b'm' => {
                let max = (op == b'm').then_some(4);
                if let Ok(bytes) = ws.read_file(&path, max) {
                    assert!(
                        !bytes.windows(OUTSIDE_MARK.len()).any(|w| w == OUTSIDE_MARK),
                        "read_file({path:?}) returned content from outside the jail"
                    );
                    assert!(
                        max.is_none_or(|m| bytes.len() as u64 <= m),
                        "read past maxBytes"
                    );
                }
            }
            b's' => {
                // The walk behind snapshot/listFiles/files: nothing from outside may be archived.
                let dest = fx.input.join("snap.tar.gz");
                if kern_sandbox::snapshot_archive(&ws, &dest, RESTORE_LIMIT).is_ok() {
                    // Member contents only: names are the fuzzer's own and may spell the mark.
                    let gz = flate2::read::GzDecoder::new(fs::File::open(&dest).unwrap());
                    let mut archive = tar::Archive::new(gz);
                    for entry in archive.entries().unwrap() {
                        let mut entry = entry.unwrap();
                        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
                        let mut data = Vec::new();
                        std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
                        assert!(
                            !data.windows(OUTSIDE_MARK.len()).any(|w| w == OUTSIDE_MARK),
                            "snapshot archived content from outside the jail as {name:?}"
                        );
                    }
                }
                let _ = fs::remove_file(&dest);
            }
            _ => {
                // open_dir takes components its callers made with normalize_rel (plain names,
                // `..` applied). openat2 resolves any string safely, so give it the raw split;
                // the openat fallback is documented to need plain names, so drop `..` there.
                let parts: Vec<String> = path
                    .split('/')
                    .filter(|c| !c.is_empty())
                    .filter(|c| !(fallback && *c == ".."))
                    .map(str::to_owned)
                    .collect();
                if let Ok(fd) = ws.open_dir(&parts, op == b'c') {
                    use std::os::fd::AsFd;
                    fx.assert_fd_in_jail(fd.as_fd(), &format!("open_dir({parts:?})"));
                }
            }
        });
        // snapshot streams through 1 MiB buffers; the other ops have only tiny files to hold.
        let budget = if op == b's' {
            RESTORE_HEAP_MAX
        } else {
            PATH_HEAP_MAX
        };
        assert!(
            peak <= budget,
            "op {:?} on {path:?} peaked at {peak} bytes of heap",
            op as char
        );
    }
    drop(ws);
    fx.selftest_escape();
    fx.check(&[]);
}
