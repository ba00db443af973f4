//! Which workspace files a call created or modified: a walk before and after, compared by
//! mtime (ns), size and inode. The walks run on the blocking pool, never on the JS thread.

use std::collections::HashMap;

use napi_derive::napi;

use crate::errors::Result;
use crate::workspace::{Entry, Workspace};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    mtime_ns: i128,
    size: u64,
    ino: u64,
}

pub type Index = HashMap<String, Meta>;

/// A file and how a step touched it; `listFiles` reports every file as "created".
#[napi(object)]
#[derive(Debug, Clone, PartialEq)]
pub struct FileInfo {
    pub path: String,
    pub size: f64,
    pub change: String,
}

/// Regular files below `sub`, `.deps` excluded, keyed by workspace-relative path.
pub fn index(ws: &Workspace, sub: &[String]) -> Result<Index> {
    let mut out = Index::new();
    ws.walk(sub, true, false, &mut |e| {
        if let Entry::File { rel, stat, .. } = e {
            if is_code_cell(rel) {
                return Ok(()); // another call's temporary code file, not a user artifact
            }
            let mtime_ns = stat.st_mtime as i128 * 1_000_000_000 + stat.st_mtime_nsec as i128;
            out.insert(rel.to_string(), Meta { mtime_ns, size: stat.st_size as u64, ino: stat.st_ino });
        }
        Ok(())
    })?;
    Ok(out)
}

/// What `listFiles` reports: a subdirectory that does not exist (yet) lists as empty, as in 0.1.1.
/// `.cell-<8 hex>.<py|sh|js>` at the workspace root: where runCode puts code too long for argv.
pub fn is_code_cell(rel: &str) -> bool {
    let Some(rest) = rel.strip_prefix(".cell-") else { return false };
    let Some((tag, ext)) = rest.split_once('.') else { return false };
    tag.len() == 8 && tag.bytes().all(|b| b.is_ascii_hexdigit()) && matches!(ext, "py" | "sh" | "js")
}

pub fn list(ws: &Workspace, sub: &[String]) -> Result<Vec<FileInfo>> {
    if !sub.is_empty() {
        if let Err(e) = ws.open_dir(sub, false) {
            if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) {
                return Ok(Vec::new());
            }
        }
    }
    let mut files: Vec<FileInfo> = index(ws, sub)?
        .into_iter()
        .map(|(path, m)| FileInfo { path, size: m.size as f64, change: "created".into() })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

pub fn diff(before: &Index, after: &Index) -> Vec<FileInfo> {
    let mut files: Vec<FileInfo> = after
        .iter()
        .filter_map(|(path, m)| {
            let change = match before.get(path) {
                None => "created",
                Some(b) if b != m => "modified",
                Some(_) => return None,
            };
            Some(FileInfo { path: path.clone(), size: m.size as f64, change: change.into() })
        })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_cells_are_recognised() {
        assert!(is_code_cell(".cell-0a1b2c3d.py"));
        assert!(!is_code_cell("sub/.cell-0a1b2c3d.py"));
        assert!(!is_code_cell(".cell-xyz.py"));
        assert!(!is_code_cell(".cell-0a1b2c3d.txt"));
    }

    #[test]
    fn diff_sees_created_and_modified_but_not_deps() {
        let d = tempfile::tempdir().unwrap();
        let ws = Workspace::open(d.path()).unwrap();
        std::fs::write(d.path().join("same"), b"1").unwrap();
        std::fs::write(d.path().join("grow"), b"1").unwrap();
        let before = index(&ws, &[]).unwrap();
        std::fs::write(d.path().join("grow"), b"12").unwrap();
        std::fs::create_dir_all(d.path().join("sub/.deps")).unwrap();
        std::fs::write(d.path().join("sub/new"), b"abc").unwrap();
        std::fs::write(d.path().join("sub/.deps/pkg"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("link")).unwrap();
        let after = index(&ws, &[]).unwrap();
        let got: Vec<(String, String)> =
            diff(&before, &after).into_iter().map(|f| (f.path, f.change)).collect();
        assert_eq!(
            got,
            vec![("grow".into(), "modified".into()), ("sub/new".into(), "created".into())]
        );
    }
}
