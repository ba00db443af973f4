//! File requests, resolved in the box's own mount namespace (this process lives in it, so a
//! symlink can only lead somewhere inside the box).

use std::collections::BTreeMap;
use std::fs::{self, DirBuilder, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::fchown;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::{self, Fail};
use crate::proto::{Request, MAX_PAYLOAD};
use crate::users::{self, Names, User};
use crate::writer::Reply;
use crate::xattrs;

/// A `list` answer stops being useful (and its header becomes huge) beyond this.
const MAX_ENTRIES: usize = 200_000;

/// `path` if absolute, else under `cwd`.
pub fn absolute(cwd: &Path, path: &str) -> Result<PathBuf, Fail> {
    if path.is_empty() {
        return Err(Fail::invalid("path must not be empty"));
    }
    Ok(cwd.join(path))
}

/// Runs one file request.
pub fn handle(cwd: &Path, req: Request, payload: Vec<u8>) -> Result<Reply, Fail> {
    match req {
        Request::Read { path, max } => read(&absolute(cwd, &path)?, max),
        Request::WriteFile {
            path,
            mode,
            owner,
            xattrs,
            clear_xattrs,
        } => {
            let attrs = Attrs::new(xattrs.unwrap_or_default(), clear_xattrs)?;
            let owner = owner.as_deref().map(users::lookup).transpose()?;
            write_file(
                &absolute(cwd, &path)?,
                mode,
                owner.as_ref(),
                &attrs,
                &payload,
            )
        }
        Request::List { path, depth } => list(&absolute(cwd, &path)?, depth),
        Request::Stat { path } => stat(&absolute(cwd, &path)?),
        Request::Remove { path } => remove(&absolute(cwd, &path)?),
        Request::Rename { from, to } => rename(&absolute(cwd, &from)?, &absolute(cwd, &to)?),
        Request::Mkdir { path, owner } => {
            let owner = owner.as_deref().map(users::lookup).transpose()?;
            mkdir(&absolute(cwd, &path)?, owner.as_ref())
        }
        Request::SnapWalk => crate::snapshot::walk(),
        Request::SnapRead { items } => crate::snapshot::read(items),
        Request::SnapApply { ops } => crate::snapshot::apply(ops, &payload),
        other => Err(Fail::invalid(format!("not a file request: {other:?}"))),
    }
}

fn io_fail(path: &Path) -> impl Fn(io::Error) -> Fail + '_ {
    move |e| Fail::io(&e, &path.to_string_lossy())
}

fn too_large(path: &Path, limit: u64) -> Fail {
    Fail::new(
        error::TOO_LARGE,
        format!("{}: larger than {limit} bytes", path.display()),
    )
}

fn read(path: &Path, max: Option<u64>) -> Result<Reply, Fail> {
    // O_NONBLOCK: a FIFO without a writer must not hang the file worker.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io_fail(path))?;
    let meta = file.metadata().map_err(io_fail(path))?;
    if meta.is_dir() {
        return Err(Fail::new(
            error::IS_A_DIRECTORY,
            format!("{}: is a directory", path.display()),
        ));
    }
    let limit = max.unwrap_or(u64::MAX).min(MAX_PAYLOAD as u64);
    if meta.is_file() && meta.len() > limit {
        return Err(too_large(path, limit));
    }
    let data = read_up_to(file, limit + 1).map_err(io_fail(path))?;
    if data.len() as u64 > limit {
        return Err(too_large(path, limit));
    }
    Ok(Reply {
        payload: data,
        ..Reply::default()
    })
}

/// Reads until EOF, `limit` bytes, or (for a non-blocking device or FIFO) nothing more for now.
fn read_up_to(file: File, limit: u64) -> io::Result<Vec<u8>> {
    let mut data = Vec::new();
    let mut src = file.take(limit);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match src.read(&mut buf) {
            Ok(0) => return Ok(data),
            Ok(n) => data.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(data),
            Err(e) => return Err(e),
        }
    }
}

/// What a write does to the file's extended attributes.
struct Attrs {
    set: BTreeMap<String, String>,
    clear: Option<String>,
}

impl Attrs {
    fn new(set: BTreeMap<String, String>, clear: Option<String>) -> Result<Attrs, Fail> {
        for name in set.keys().chain(clear.iter()) {
            if !xattrs::valid_name(name) {
                return Err(Fail::invalid(format!(
                    "extended attribute {name:?}: only names in the user. namespace"
                )));
            }
        }
        Ok(Attrs { set, clear })
    }

    fn any(&self) -> bool {
        !self.set.is_empty() || self.clear.is_some()
    }
}

/// The directories above `path` that do not exist yet, outermost first.
fn missing_ancestors(path: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .take_while(|a| !a.as_os_str().is_empty() && fs::symlink_metadata(a).is_err())
        .map(Path::to_path_buf)
        .collect();
    out.reverse();
    out
}

/// Gives `dirs` (made by this request) to `owner`.
fn chown_all(dirs: &[PathBuf], owner: &User) -> Result<(), Fail> {
    for d in dirs {
        std::os::unix::fs::chown(d, Some(owner.uid), Some(owner.gid)).map_err(io_fail(d))?;
    }
    Ok(())
}

fn create_parents(path: &Path) -> Result<(), Fail> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(|e| match e.raw_os_error() {
                // Something that is not a directory is in the way.
                Some(libc::EEXIST) => Fail::new(
                    error::NOT_A_DIRECTORY,
                    format!("{}: not a directory", parent.display()),
                ),
                _ => Fail::io(&e, &parent.to_string_lossy()),
            }),
        _ => Ok(()),
    }
}

fn write_file(
    path: &Path,
    mode: Option<u32>,
    owner: Option<&User>,
    attrs: &Attrs,
    data: &[u8],
) -> Result<Reply, Fail> {
    let made = owner.map(|_| missing_ancestors(path)).unwrap_or_default();
    let existed = owner.is_some() && fs::symlink_metadata(path).is_ok();
    create_parents(path)?;
    if let Some(owner) = owner {
        chown_all(&made, owner)?;
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode.unwrap_or(0o644))
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io_fail(path))?;
    if let Some(mode) = mode {
        // Also for an existing file, and past the umask for a new one.
        file.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(io_fail(path))?;
    }
    if let Some(owner) = owner.filter(|_| !existed) {
        // A file this write made is the owner's, as if the owner had written it.
        fchown(&file, Some(owner.uid), Some(owner.gid)).map_err(io_fail(path))?;
    }
    if attrs.any() {
        xattrs::replace(&file, attrs.clear.as_deref(), &attrs.set).map_err(io_fail(path))?;
    }
    file.write_all(data).map_err(io_fail(path))?;
    Ok(Reply::default())
}

fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_symlink() {
        "symlink"
    } else if t.is_dir() {
        "dir"
    } else if t.is_file() {
        "file"
    } else {
        "other"
    }
}

/// The protocol's Entry for `path`, described by its lstat `meta`.
fn entry(path: &Path, meta: &Metadata, names: &Names) -> Value {
    let name = path
        .file_name()
        .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy());
    let target = meta
        .file_type()
        .is_symlink()
        .then(|| fs::read_link(path).ok())
        .flatten()
        .map(|t| t.to_string_lossy().into_owned());
    let mtime = meta.mtime() as f64 * 1000.0 + meta.mtime_nsec() as f64 / 1e6;
    let attrs = xattrs::user_attrs(path);
    let mut e = json!({
        "name": name,
        "path": path,
        "type": kind(meta),
        "size": meta.len(),
        "mode": meta.mode(),
        "mtime": mtime,
        "symlinkTarget": target,
        "uid": meta.uid(),
        "gid": meta.gid(),
        "owner": names.user(meta.uid()),
        "group": names.group(meta.gid()),
    });
    if !attrs.is_empty() {
        e["xattrs"] = json!(attrs);
    }
    e
}

fn list(path: &Path, depth: u32) -> Result<Reply, Fail> {
    if depth == 0 {
        return Err(Fail::invalid("depth must be at least 1"));
    }
    let meta = fs::metadata(path).map_err(io_fail(path))?;
    if !meta.is_dir() {
        return Err(Fail::new(
            error::NOT_A_DIRECTORY,
            format!("{}: not a directory", path.display()),
        ));
    }
    let names = Names::load();
    let mut entries = Vec::new();
    walk(path, depth, &names, &mut entries).map_err(|e| match e {
        Walk::Io(e) => Fail::io(&e, &path.to_string_lossy()),
        Walk::TooMany => Fail::new(
            error::TOO_LARGE,
            format!("{}: more than {MAX_ENTRIES} entries", path.display()),
        ),
    })?;
    Ok(Reply::with(json!({ "entries": entries })))
}

enum Walk {
    Io(io::Error),
    TooMany,
}

/// Lists `dir`, then descends into its subdirectories (never through a symlink). Unreadable
/// subdirectories are listed but not descended.
fn walk(dir: &Path, depth: u32, names: &Names, out: &mut Vec<Value>) -> Result<(), Walk> {
    let mut children: Vec<(PathBuf, Metadata)> = Vec::new();
    for item in fs::read_dir(dir).map_err(Walk::Io)? {
        let Ok(item) = item else { continue };
        let path = item.path();
        if let Ok(meta) = fs::symlink_metadata(&path) {
            children.push((path, meta));
        }
    }
    children.sort_by(|a, b| a.0.cmp(&b.0));
    if out.len() + children.len() > MAX_ENTRIES {
        return Err(Walk::TooMany);
    }
    out.extend(children.iter().map(|(path, meta)| entry(path, meta, names)));
    if depth > 1 {
        for (path, meta) in &children {
            if meta.is_dir() {
                match walk(path, depth - 1, names, out) {
                    Err(Walk::TooMany) => return Err(Walk::TooMany),
                    Err(Walk::Io(_)) | Ok(()) => {}
                }
            }
        }
    }
    Ok(())
}

fn stat(path: &Path) -> Result<Reply, Fail> {
    let meta = fs::symlink_metadata(path).map_err(io_fail(path))?;
    Ok(Reply::with(
        json!({ "entry": entry(path, &meta, &Names::load()) }),
    ))
}

fn remove(path: &Path) -> Result<Reply, Fail> {
    let meta = fs::symlink_metadata(path).map_err(io_fail(path))?;
    // remove_dir_all does not follow symlinks inside the tree.
    let removed = if meta.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    removed.map_err(io_fail(path))?;
    Ok(Reply::default())
}

fn rename(from: &Path, to: &Path) -> Result<Reply, Fail> {
    fs::symlink_metadata(from).map_err(io_fail(from))?;
    create_parents(to)?;
    fs::rename(from, to).map_err(io_fail(to))?;
    Ok(Reply::default())
}

fn mkdir(path: &Path, owner: Option<&User>) -> Result<Reply, Fail> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => return Ok(Reply::with(json!({"created": false}))),
        Ok(_) => {
            return Err(Fail::new(
                error::EXISTS,
                format!("{}: exists and is not a directory", path.display()),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(Fail::io(&e, &path.to_string_lossy())),
    }
    let mut made = owner.map(|_| missing_ancestors(path)).unwrap_or_default();
    DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(path)
        .map_err(io_fail(path))?;
    if let Some(owner) = owner {
        made.push(path.to_path_buf());
        chown_all(&made, owner)?;
    }
    Ok(Reply::with(json!({"created": true})))
}
