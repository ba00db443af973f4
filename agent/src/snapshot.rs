//! Machine snapshots, the box side: `snap_walk` lists the root filesystem (every mount point but
//! `/` left out, so /proc, /dev, the workspace, the control dir and binds are not walked),
//! `snap_read` reads pieces of files, `snap_apply` writes a snapshot's changes back. Paths are
//! resolved here, in the box's own mount namespace; the host compares the walk with the image's
//! and decides what to copy.

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::error::Fail;
use crate::proto::{SnapOp as Op, MAX_PAYLOAD};
use crate::writer::Reply;

/// Where the host puts the agent and its control socket: never part of a snapshot.
const OWN_DIR: &str = "/.kern-sandbox";

/// The mount points of this namespace but `/`, from /proc/self/mountinfo (octal escapes undone).
fn mount_points() -> HashSet<PathBuf> {
    let text = fs::read("/proc/self/mountinfo").unwrap_or_default();
    let mut out = HashSet::new();
    for line in text.split(|b| *b == b'\n') {
        if let Some(field) = line.split(|b| *b == b' ').nth(4) {
            let p = PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(field)));
            if p != Path::new("/") {
                out.insert(p);
            }
        }
    }
    out
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

/// One walked entry, serialized as a JSON array: path, type (`f`, `d`, `l`), mode, uid, gid,
/// size, mtime (s, ns), ctime (s, ns), inode, link target (`l` only, else null). A tuple, not a
/// `Value`: a root has ~50,000 entries.
type Entry = (
    String,
    &'static str,
    u32,
    u32,
    u32,
    u64,
    i64,
    i64,
    i64,
    i64,
    u64,
    Option<String>,
);

fn entry(path: String, meta: &fs::Metadata) -> Option<Entry> {
    let ft = meta.file_type();
    let (kind, link) = if ft.is_file() {
        ("f", None)
    } else if ft.is_dir() {
        ("d", None)
    } else if ft.is_symlink() {
        let t = fs::read_link(&path).ok()?;
        ("l", Some(t.to_string_lossy().into_owned()))
    } else {
        // Devices, FIFOs and sockets are not kept (a box cannot make most of them anyway).
        return None;
    };
    Some((
        path,
        kind,
        meta.mode() & 0o7777,
        meta.uid(),
        meta.gid(),
        if ft.is_file() { meta.size() } else { 0 },
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
        meta.ino(),
        link,
    ))
}

/// `snap_walk`: every file, directory and symlink of the root filesystem, parents before their
/// entries, as a JSON array in the payload; `skipped` in the answer counts directories that could
/// not be read and paths that are not UTF-8 (the host could not name them back).
pub fn walk() -> Result<Reply, Fail> {
    let mounts = mount_points();
    let mut entries: Vec<Entry> = Vec::new();
    let mut skipped = 0u64;
    let mut stack = vec![PathBuf::from("/")];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = fs::read_dir(&dir) else {
            skipped += 1;
            continue;
        };
        let mut children: Vec<_> = rd.flatten().collect();
        children.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for e in children {
            let p = e.path();
            let Some(text) = p.to_str() else {
                skipped += 1;
                continue;
            };
            if mounts.contains(&p) || p == Path::new(OWN_DIR) {
                continue;
            }
            // DirEntry::metadata is an fstatat on the open directory: no path walk per entry.
            let Ok(meta) = e.metadata() else {
                continue; // gone meanwhile
            };
            let is_dir = meta.is_dir();
            if let Some(entry) = entry(text.to_string(), &meta) {
                entries.push(entry);
            }
            if is_dir {
                subdirs.push(p);
            }
        }
        // Popped from the end: directories are entered in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    let payload = serde_json::to_vec(&entries)
        .map_err(|e| Fail::invalid(format!("cannot encode the walk: {e}")))?;
    if payload.len() > MAX_PAYLOAD {
        return Err(Fail::new(
            crate::error::TOO_LARGE,
            "the root filesystem has too many entries to snapshot",
        ));
    }
    Ok(Reply {
        fields: json!({ "skipped": skipped })
            .as_object()
            .cloned()
            .unwrap_or_default(),
        payload,
    })
}

/// `snap_read`: `items` are `[path, offset, length]`; the payload is their bytes one after the
/// other, `got` how many each gave (fewer when the file shrank; -1 when it is gone or not a
/// regular file any more).
pub fn read(items: Vec<(String, u64, u64)>) -> Result<Reply, Fail> {
    let total: u64 = items.iter().map(|i| i.2).sum();
    if total > MAX_PAYLOAD as u64 {
        return Err(Fail::invalid("snap_read asks for more than one payload"));
    }
    let mut data = Vec::with_capacity(total as usize);
    let mut got = Vec::with_capacity(items.len());
    for (path, off, len) in items {
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .and_then(|f| {
                if f.metadata()?.is_file() {
                    Ok(f)
                } else {
                    Err(io::Error::from_raw_os_error(libc::EINVAL))
                }
            });
        let Ok(mut f) = opened else {
            got.push(-1i64);
            continue;
        };
        let start = data.len();
        let read = f
            .seek(SeekFrom::Start(off))
            .and_then(|_| f.take(len).read_to_end(&mut data));
        match read {
            Ok(n) => got.push(n as i64),
            Err(_) => {
                data.truncate(start);
                got.push(-1);
            }
        }
    }
    Ok(Reply {
        fields: json!({ "got": got })
            .as_object()
            .cloned()
            .unwrap_or_default(),
        payload: data,
    })
}

/// `snap_apply`: runs `ops` in order, their file bytes taken from `payload` in order.
pub fn apply(ops: Vec<Op>, payload: &[u8]) -> Result<Reply, Fail> {
    let mut at = 0usize;
    for op in ops {
        apply_one(op, payload, &mut at)?;
    }
    Ok(Reply::default())
}

fn fail(path: &str) -> impl Fn(io::Error) -> Fail + '_ {
    move |e| Fail::io(&e, path)
}

fn apply_one(op: Op, payload: &[u8], at: &mut usize) -> Result<(), Fail> {
    match op {
        Op::Rm { path } => remove_any(Path::new(&path)).map_err(fail(&path)),
        Op::Dir {
            path,
            mode,
            uid,
            gid,
        } => {
            let p = Path::new(&path);
            match fs::symlink_metadata(p) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    remove_any(p).map_err(fail(&path))?;
                    fs::create_dir(p).map_err(fail(&path))?;
                }
                Err(_) => fs::create_dir_all(p).map_err(fail(&path))?,
            }
            owner(p, uid, gid, false).map_err(fail(&path))?;
            fs::set_permissions(p, fs::Permissions::from_mode(mode)).map_err(fail(&path))
        }
        Op::File {
            path,
            off,
            len,
            mode,
            uid,
            gid,
            mtime,
            last,
        } => {
            let p = Path::new(&path);
            let end = at
                .checked_add(len as usize)
                .filter(|e| *e <= payload.len())
                .ok_or_else(|| Fail::invalid("snap_apply: the payload is shorter than its ops"))?;
            let bytes = &payload[*at..end];
            *at = end;
            let open = |fresh: bool| {
                OpenOptions::new()
                    .write(true)
                    .create(fresh)
                    .truncate(fresh)
                    .custom_flags(libc::O_NOFOLLOW)
                    .mode(0o600)
                    .open(p)
            };
            let f = if off == 0 {
                // A directory or symlink in the way (EISDIR, ELOOP) goes, then the open again.
                match open(true) {
                    Ok(f) => f,
                    Err(_) => {
                        remove_any(p).map_err(fail(&path))?;
                        open(true).map_err(fail(&path))?
                    }
                }
            } else {
                open(false).map_err(fail(&path))?
            };
            f.write_all_at(bytes, off).map_err(fail(&path))?;
            if last {
                // Through the open file, no path lookups; chown before chmod: a chown clears
                // set-id bits.
                unmapped_ok(std::os::unix::fs::fchown(&f, Some(uid), Some(gid)))
                    .map_err(fail(&path))?;
                f.set_permissions(fs::Permissions::from_mode(mode))
                    .map_err(fail(&path))?;
                set_file_mtime(&f, mtime).map_err(fail(&path))?;
            }
            Ok(())
        }
        Op::Link {
            path,
            target,
            uid,
            gid,
            mtime,
        } => {
            let p = Path::new(&path);
            if fs::symlink_metadata(p).is_ok() {
                remove_any(p).map_err(fail(&path))?;
            }
            std::os::unix::fs::symlink(&target, p).map_err(fail(&path))?;
            owner(p, uid, gid, true).map_err(fail(&path))?;
            set_mtime(p, mtime, true).map_err(fail(&path))
        }
        Op::Times { path, mtime } => set_mtime(Path::new(&path), mtime, false).map_err(fail(&path)),
    }
}

fn remove_any(p: &Path) -> io::Result<()> {
    let r = match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(p),
        Ok(_) => fs::remove_file(p),
        Err(e) => Err(e),
    };
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Sets the owner; an id this box's user namespace does not map (EINVAL) leaves it as it is,
/// as unpacking a tar as a user does.
fn owner(p: &Path, uid: u32, gid: u32, link: bool) -> io::Result<()> {
    unmapped_ok(if link {
        std::os::unix::fs::lchown(p, Some(uid), Some(gid))
    } else {
        std::os::unix::fs::chown(p, Some(uid), Some(gid))
    })
}

fn unmapped_ok(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EPERM)) => Ok(()),
        other => other,
    }
}

/// Sets an open file's mtime (its atime left alone).
fn set_file_mtime(f: &fs::File, mtime: (i64, i64)) -> io::Result<()> {
    let times = timespecs(mtime);
    // SAFETY: an open fd and a two-element timespec array that outlives the call.
    if unsafe { libc::futimens(f.as_raw_fd(), times.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// utimensat's pair: atime untouched, mtime as given.
fn timespecs((s, ns): (i64, i64)) -> [libc::timespec; 2] {
    [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: s as _,
            tv_nsec: ns as _,
        },
    ]
}

fn set_mtime(p: &Path, mtime: (i64, i64), link: bool) -> io::Result<()> {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let times = timespecs(mtime);
    let flags = if link { libc::AT_SYMLINK_NOFOLLOW } else { 0 };
    // SAFETY: a NUL-terminated path and a two-element timespec array that outlive the call.
    let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(br"/a\040b\134c"), b"/a b\\c".to_vec());
        assert_eq!(unescape(br"/plain"), b"/plain".to_vec());
        assert_eq!(unescape(br"/x\04"), br"/x\04".to_vec());
    }

    #[test]
    fn apply_writes_files_links_and_removes() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().to_str().unwrap();
        let file = format!("{base}/sub/f");
        let link = format!("{base}/sub/l");
        let ops = vec![
            Op::Dir {
                path: format!("{base}/sub"),
                mode: 0o750,
                uid: u32::MAX - 1,
                gid: u32::MAX - 1,
            },
            Op::File {
                path: file.clone(),
                off: 0,
                len: 3,
                mode: 0o640,
                uid: 0,
                gid: 0,
                mtime: (1000, 5),
                last: false,
            },
            Op::File {
                path: file.clone(),
                off: 3,
                len: 2,
                mode: 0o640,
                uid: 0,
                gid: 0,
                mtime: (1000, 5),
                last: true,
            },
            Op::Link {
                path: link.clone(),
                target: "f".into(),
                uid: 0,
                gid: 0,
                mtime: (2000, 0),
            },
        ];
        apply(ops, b"hello").unwrap();
        assert_eq!(fs::read(&file).unwrap(), b"hello");
        let m = fs::metadata(&file).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o640);
        assert_eq!(m.mtime(), 1000);
        assert_eq!(fs::read_link(&link).unwrap(), Path::new("f"));
        assert_eq!(
            fs::metadata(format!("{base}/sub")).unwrap().mode() & 0o7777,
            0o750
        );
        let r = read(vec![(file.clone(), 1, 3), (format!("{base}/none"), 0, 9)]).unwrap();
        assert_eq!(r.payload, b"ell");
        assert_eq!(r.fields["got"], json!([3, -1]));
        apply(
            vec![Op::Rm {
                path: format!("{base}/sub"),
            }],
            b"",
        )
        .unwrap();
        assert!(!Path::new(&file).exists());
    }

    #[test]
    fn apply_refuses_a_short_payload() {
        let d = tempfile::tempdir().unwrap();
        let op = Op::File {
            path: d.path().join("f").to_string_lossy().into_owned(),
            off: 0,
            len: 10,
            mode: 0o644,
            uid: 0,
            gid: 0,
            mtime: (0, 0),
            last: true,
        };
        assert!(apply(vec![op], b"abc").is_err());
    }
}
