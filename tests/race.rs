//! Races: the box keeps swapping directories (and a file) in the workspace for symlinks that point
//! outside it, while the host writes, reads, restores and snapshots through them. Nothing may land
//! outside, and no read or snapshot may return outside content, whichever way each swap falls.
//!
//! Three variants, each in its own process because the openat2/fallback choice is made once per
//! process:
//! - `race_openat2`: the normal path (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS).
//! - `race_fallback_forced`: `KERN_SANDBOX_NO_OPENAT2=1`, and a seccomp filter that makes openat2
//!   fail with EPERM on the host thread, so any openat2 the fallback still made would show up as
//!   zero successful operations.
//! - `race_fallback_enosys`: no env, but openat2 returns ENOSYS (what a pre-5.6 kernel says), so
//!   the binding must detect that and fall back by itself.
//!
//! The two fallback variants re-run this test binary with a filter on the ignored `race_child`.
//! `KERN_RACE_SECS` sets how long each race runs (default 3 s).

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kern_sandbox::{restore_archive, snapshot_archive, Workspace};

const OUTSIDE: &[u8] = b"OUTSIDE-SECRET\n";
const INSIDE: &[u8] = b"JAIL\n";

fn race_secs() -> f64 {
    std::env::var("KERN_RACE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0)
}

/// Lists `root` recursively without following symlinks: relative path -> file content, or a tag.
fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for ent in fs::read_dir(root.join(&rel)).unwrap().flatten() {
            let r = rel.join(ent.file_name());
            let p = root.join(&r);
            let m = fs::symlink_metadata(&p).unwrap();
            let v = if m.file_type().is_symlink() {
                format!("symlink -> {}", fs::read_link(&p).unwrap().display()).into_bytes()
            } else if m.is_dir() {
                stack.push(r.clone());
                b"dir".to_vec()
            } else {
                fs::read(&p).unwrap()
            };
            out.insert(r, v);
        }
    }
    out
}

fn gz_tar(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, name, *data).unwrap();
    }
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&b.into_inner().unwrap()).unwrap();
    e.finish().unwrap()
}

fn exchange(dir: &std::os::fd::OwnedFd, a: &str, b: &str) {
    let _ = rustix::fs::renameat_with(dir, a, dir, b, rustix::fs::RenameFlags::EXCHANGE);
}

#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    refused: AtomicU64,
}

impl Counts {
    fn add<T, E>(&self, r: &Result<T, E>) {
        let c = if r.is_ok() { &self.ok } else { &self.refused };
        c.fetch_add(1, Ordering::Relaxed);
    }
    fn get(&self) -> (u64, u64) {
        (
            self.ok.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }
}

/// The race itself: panics if anything landed outside or was read from outside, or if the race
/// was not live (the host never met both the real directories and the links).
fn race(label: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let parent = fs::canonicalize(tmp.path()).unwrap();
    let (jail, outside) = (parent.join("jail"), parent.join("outside"));
    fs::create_dir_all(outside.join("sub")).unwrap();
    fs::write(outside.join("secret"), OUTSIDE).unwrap();
    fs::write(outside.join("f"), OUTSIDE).unwrap();
    fs::write(outside.join("sub/f"), OUTSIDE).unwrap();
    // Real directories the host uses, and the symlinks the box swaps them with.
    for d in ["d", "d2", "d3", "L"] {
        fs::create_dir_all(jail.join(d)).unwrap();
        fs::write(jail.join(d).join("f"), INSIDE).unwrap();
    }
    fs::write(jail.join("L/leaf"), INSIDE).unwrap();
    symlink(&outside, jail.join("s")).unwrap(); // absolute, to outside
    symlink("../outside", jail.join("r")).unwrap(); // relative, to outside
    symlink("..", jail.join("u")).unwrap(); // to the jail's parent
    symlink(outside.join("secret"), jail.join("L/lnk")).unwrap(); // a file link, to outside
    let archive_d = parent.join("d.tar.gz");
    fs::write(
        &archive_d,
        gz_tar(&[("d/rx", b"R\n"), ("d/rsub/ry", b"R\n")]),
    )
    .unwrap();
    let archive_mixed = parent.join("mixed.tar.gz");
    fs::write(
        &archive_mixed,
        gz_tar(&[("d2/rz", b"R\n"), ("d3/rz", b"R\n"), ("L/leaf", b"R\n")]),
    )
    .unwrap();
    // snapshot() walks the tree while it changes: its archive must never hold outside content.
    let snap = parent.join("snap.tar.gz");
    fs::write(&snap, b"").unwrap();
    let outside_before = tree(&outside);
    let parent_names = |p: &Path| {
        let mut v: Vec<_> = fs::read_dir(p)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        v.sort();
        v
    };
    let parent_before = parent_names(&parent);

    // The "box": two threads swapping as fast as they can.
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let mut racers = Vec::new();
    for pairs in [
        vec![("d", "s"), ("d2", "r"), ("d3", "u")],
        vec![("L/leaf", "L/lnk")],
    ] {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        let jfd = rustix::fs::open(
            &jail,
            rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        racers.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for (a, b) in &pairs {
                    exchange(&jfd, a, b);
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }

    // The host.
    let ws = Workspace::open(&jail).unwrap();
    let (writes, reads, restores) = (Counts::default(), Counts::default(), Counts::default());
    let deadline = Instant::now() + Duration::from_secs_f64(race_secs());
    let (mut i, mut snapshots) = (0u64, 0u64);
    while Instant::now() < deadline {
        i += 1;
        for dir in ["d", "d2", "d3"] {
            writes.add(&ws.write_file(&format!("{dir}/w{}", i % 8), b"HOST\n"));
            writes.add(&ws.write_file(&format!("{dir}/new{}/x", i % 4), b"HOST\n"));
            let r = ws.read_file(&format!("{dir}/f"), None);
            if let Ok(b) = &r {
                assert_eq!(b, INSIDE, "{label}: read {dir}/f returned outside content");
            }
            reads.add(&r);
        }
        writes.add(&ws.write_file("L/leaf", INSIDE));
        let r = ws.read_file("L/leaf", Some(64));
        if let Ok(b) = &r {
            assert!(
                b == INSIDE || b == b"R\n",
                "{label}: read L/leaf returned {:?}",
                String::from_utf8_lossy(b)
            );
        }
        reads.add(&r);
        if i % 4 == 0 {
            restores.add(&restore_archive(&ws, &archive_d, 1 << 20));
            restores.add(&restore_archive(&ws, &archive_mixed, 1 << 20));
        }
        if i % 16 == 0 {
            snapshot_archive(&ws, &snap, 64 << 20).unwrap();
            let mut raw = Vec::new();
            flate2::read::GzDecoder::new(fs::File::open(&snap).unwrap())
                .read_to_end(&mut raw)
                .unwrap();
            assert!(
                !raw.windows(OUTSIDE.len()).any(|w| w == OUTSIDE),
                "{label}: snapshot archived outside content"
            );
            snapshots += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in racers {
        r.join().unwrap();
    }

    assert_eq!(
        tree(&outside),
        outside_before,
        "{label}: the outside directory changed"
    );
    assert_eq!(
        parent_names(&parent),
        parent_before,
        "{label}: something landed next to the jail"
    );
    let (w, r, s) = (writes.get(), reads.get(), restores.get());
    eprintln!(
        "{label}: {} swaps; writes ok/refused {w:?}, reads {r:?}, restores {s:?}, {snapshots} snapshots",
        swaps.load(Ordering::Relaxed)
    );
    // The race must have been live: the host met both the real directories and the links.
    assert!(
        w.0 > 0 && w.1 > 0,
        "{label}: writes never met both states: {w:?}"
    );
    assert!(
        r.0 > 0 && r.1 > 0,
        "{label}: reads never met both states: {r:?}"
    );
    assert!(s.0 + s.1 > 0, "{label}: no restore ran");
}

#[test]
fn race_openat2() {
    let have_openat2 = rustix::fs::openat2(
        rustix::fs::CWD,
        ".",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
        rustix::fs::ResolveFlags::BENEATH,
    )
    .is_ok();
    if !have_openat2 {
        eprintln!(
            "race_openat2: this kernel has no openat2; the binding uses its fallback here too"
        );
    }
    assert!(
        std::env::var_os("KERN_SANDBOX_NO_OPENAT2").is_none(),
        "unset KERN_SANDBOX_NO_OPENAT2"
    );
    race("openat2");
}

/// Makes openat2 fail with `errno` on the calling thread (and threads it starts later).
fn deny_openat2(errno: i32) {
    // A classic-BPF seccomp program: if nr == openat2 return ERRNO(errno), else allow.
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const RET_ERRNO: u32 = 0x0005_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    let f = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let mut prog = [
        f(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        f(JEQ_K, 0, 1, libc::SYS_openat2 as u32),
        f(RET_K, 0, 0, RET_ERRNO | errno as u32),
        f(RET_K, 0, 0, RET_ALLOW),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: plain prctl calls; `fprog` and the program it points at outlive the call (the
    // kernel copies the filter).
    unsafe {
        assert_eq!(
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
            0,
            "PR_SET_NO_NEW_PRIVS"
        );
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &fprog as *const _
            ),
            0,
            "PR_SET_SECCOMP: {}",
            std::io::Error::last_os_error()
        );
    }
    // Prove the filter bites.
    let r = rustix::fs::openat2(
        rustix::fs::CWD,
        ".",
        rustix::fs::OFlags::RDONLY,
        rustix::fs::Mode::empty(),
        rustix::fs::ResolveFlags::empty(),
    );
    assert_eq!(
        r.err().map(|e| e.raw_os_error()),
        Some(errno),
        "the seccomp filter is not in force"
    );
}

/// Runs in a child process started by the fallback tests below.
#[test]
#[ignore = "run by race_fallback_forced / race_fallback_enosys in a child process"]
fn race_child() {
    match std::env::var("KERN_RACE_CHILD").as_deref() {
        // Forced: the env switch alone must keep the binding off openat2 (EPERM would fail it).
        Ok("forced") => {
            assert_eq!(std::env::var("KERN_SANDBOX_NO_OPENAT2").as_deref(), Ok("1"));
            deny_openat2(libc::EPERM);
            race("fallback (forced by env)");
        }
        // Detected: an old kernel's ENOSYS must switch the binding to the fallback by itself.
        Ok("enosys") => {
            assert!(std::env::var_os("KERN_SANDBOX_NO_OPENAT2").is_none());
            deny_openat2(libc::ENOSYS);
            race("fallback (openat2 -> ENOSYS)");
        }
        // Run directly (e.g. `--include-ignored`): nothing to do, the parents run it properly.
        _ => eprintln!("race_child: runs only as a child of race_fallback_*; skipped"),
    }
}

fn run_child(mode: &str, extra_env: &[(&str, &str)]) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = std::process::Command::new(exe);
    cmd.args([
        "race_child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("KERN_RACE_CHILD", mode)
    .env_remove("KERN_SANDBOX_NO_OPENAT2");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "{}",
        text.lines()
            .filter(|l| l.contains("fallback"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(out.status.success(), "the {mode} child failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the {mode} child ran no test:\n{text}"
    );
}

#[test]
fn race_fallback_forced() {
    run_child("forced", &[("KERN_SANDBOX_NO_OPENAT2", "1")]);
}

#[test]
fn race_fallback_enosys() {
    run_child("enosys", &[]);
}
