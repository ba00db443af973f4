//! What a machine's root filesystem changed against its image: the agent's walks (agent/src/
//! snapshot.rs) of a pristine box of the image (the baseline) and of the machine, compared here.
//! The result, [`Changes`], is a snapshot's `root.json`; the bytes of its files are `root.data`.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use crate::errors::{Error, Result};

/// One entry of a walk.
#[derive(Debug, Clone, PartialEq)]
pub struct Walked {
    pub path: String,
    /// `f`, `d` or `l`.
    pub kind: char,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub ino: u64,
    pub link: Option<String>,
}

/// One walk entry as the agent sends it (agent/src/snapshot.rs `entry`).
type RawEntry = (
    String,
    String,
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

/// Parses the agent's `snap_walk` payload (typed, not through `Value`: a root has ~50,000
/// entries).
pub fn parse_walk(payload: &[u8]) -> Result<Vec<Walked>> {
    let bad = || Error::sandbox("the machine's agent sent a malformed filesystem walk");
    let entries: Vec<RawEntry> = serde_json::from_slice(payload).map_err(|_| bad())?;
    entries
        .into_iter()
        .map(
            |(path, kind, mode, uid, gid, size, ms, mns, cs, cns, ino, link)| {
                let kind = kind
                    .chars()
                    .next()
                    .filter(|k| matches!(k, 'f' | 'd' | 'l'))
                    .ok_or_else(bad)?;
                Ok(Walked {
                    path,
                    kind,
                    mode,
                    uid,
                    gid,
                    size,
                    mtime: (ms, mns),
                    ctime: (cs, cns),
                    ino,
                    link,
                })
            },
        )
        .collect()
}

/// An entry a snapshot keeps: its attributes and, for a file, where its bytes are in `root.data`.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    pub path: String,
    pub kind: char,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub mtime: (i64, i64),
    pub link: Option<String>,
    /// Offset of the file's bytes in `root.data`.
    pub offset: u64,
}

/// A snapshot's root changes: paths gone since the image (a removed tree is one path), then new
/// or changed entries, parents before children.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Changes {
    pub deleted: Vec<String>,
    pub kept: Vec<Kept>,
}

/// Compares a machine's walk with its image's: an entry is kept when it is new, or its type,
/// mode, owner, size, mtime, ctime, inode or link target differ.
pub fn compare(base: &[Walked], now: &[Walked]) -> Changes {
    let before: HashMap<&str, &Walked> = base.iter().map(|w| (w.path.as_str(), w)).collect();
    let present: HashSet<&str> = now.iter().map(|w| w.path.as_str()).collect();
    let kept = now
        .iter()
        .filter(|w| before.get(w.path.as_str()) != Some(w))
        .map(|w| Kept {
            path: w.path.clone(),
            kind: w.kind,
            mode: w.mode,
            uid: w.uid,
            gid: w.gid,
            size: if w.kind == 'f' { w.size } else { 0 },
            mtime: w.mtime,
            link: w.link.clone(),
            offset: 0,
        })
        .collect();
    let gone: HashSet<&str> = base
        .iter()
        .map(|w| w.path.as_str())
        .filter(|p| !present.contains(p))
        .collect();
    // Only the top of a removed tree: removing it removes the rest.
    let mut deleted: Vec<String> = gone
        .iter()
        .filter(|p| !parent(p).is_some_and(|d| gone.contains(d)))
        .map(|p| p.to_string())
        .collect();
    deleted.sort();
    Changes { deleted, kept }
}

fn parent(p: &str) -> Option<&str> {
    let i = p.rfind('/')?;
    (i > 0).then(|| &p[..i])
}

impl Changes {
    pub fn to_json(&self) -> Value {
        let kept: Vec<Value> = self
            .kept
            .iter()
            .map(|k| {
                json!({
                    "p": k.path, "t": k.kind.to_string(), "m": k.mode, "u": k.uid, "g": k.gid,
                    "s": k.size, "mt": [k.mtime.0, k.mtime.1], "l": k.link, "o": k.offset,
                })
            })
            .collect();
        json!({ "version": 1, "deleted": self.deleted, "kept": kept })
    }

    pub fn from_json(v: &Value) -> Result<Changes> {
        let bad = || Error::sandbox("the snapshot's root.json is damaged");
        if v.get("version").and_then(Value::as_u64) != Some(1) {
            return Err(bad());
        }
        let deleted = v
            .get("deleted")
            .and_then(Value::as_array)
            .ok_or_else(bad)?
            .iter()
            .map(|p| p.as_str().map(str::to_string).ok_or_else(bad))
            .collect::<Result<_>>()?;
        let kept = v
            .get("kept")
            .and_then(Value::as_array)
            .ok_or_else(bad)?
            .iter()
            .map(|k| {
                let u = |key: &str| k.get(key).and_then(Value::as_u64).ok_or_else(bad);
                let mt = k.get("mt").and_then(Value::as_array).ok_or_else(bad)?;
                let t = |i: usize| mt.get(i).and_then(Value::as_i64).ok_or_else(bad);
                Ok(Kept {
                    path: k
                        .get("p")
                        .and_then(Value::as_str)
                        .filter(|p| p.starts_with('/') && !p.contains('\0'))
                        .ok_or_else(bad)?
                        .to_string(),
                    kind: k
                        .get("t")
                        .and_then(Value::as_str)
                        .and_then(|t| t.chars().next())
                        .filter(|t| matches!(t, 'f' | 'd' | 'l'))
                        .ok_or_else(bad)?,
                    mode: u("m")? as u32,
                    uid: u("u")? as u32,
                    gid: u("g")? as u32,
                    size: u("s")?,
                    mtime: (t(0)?, t(1)?),
                    link: k.get("l").and_then(Value::as_str).map(str::to_string),
                    offset: u("o")?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Changes { deleted, kept })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(path: &str, kind: char, size: u64, mtime: i64) -> Walked {
        Walked {
            path: path.into(),
            kind,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size,
            mtime: (mtime, 0),
            ctime: (mtime, 0),
            ino: 1,
            link: None,
        }
    }

    #[test]
    fn new_changed_and_removed_entries_are_found() {
        let base = vec![
            w("/etc", 'd', 0, 1),
            w("/etc/a", 'f', 3, 1),
            w("/etc/b", 'f', 3, 1),
            w("/usr", 'd', 0, 1),
            w("/usr/lib", 'd', 0, 1),
            w("/usr/lib/x", 'f', 1, 1),
        ];
        let mut link = w("/opt/l", 'l', 0, 5);
        link.link = Some("/etc/a".into());
        let now = vec![
            w("/etc", 'd', 0, 2),
            w("/etc/a", 'f', 3, 1),
            w("/etc/b", 'f', 4, 2),
            w("/opt", 'd', 0, 5),
            w("/opt/x", 'f', 9, 5),
            link.clone(),
        ];
        let c = compare(&base, &now);
        assert_eq!(c.deleted, vec!["/usr".to_string()]);
        let paths: Vec<&str> = c.kept.iter().map(|k| k.path.as_str()).collect();
        assert_eq!(paths, ["/etc", "/etc/b", "/opt", "/opt/x", "/opt/l"]);
        assert_eq!(c.kept[4].link.as_deref(), Some("/etc/a"));
        assert_eq!(c.kept.iter().map(|k| k.size).sum::<u64>(), 13);
        let back = Changes::from_json(&c.to_json()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn a_changed_mode_owner_or_ctime_alone_is_kept() {
        let base = vec![w("/f", 'f', 1, 1), w("/g", 'f', 1, 1), w("/h", 'f', 1, 1)];
        let mut now = base.clone();
        now[0].mode = 0o600;
        now[1].uid = 1000;
        now[2].ctime = (9, 0);
        assert_eq!(compare(&base, &now).kept.len(), 3);
        assert!(compare(&base, &base).kept.is_empty());
    }

    #[test]
    fn a_bad_walk_or_manifest_is_an_error() {
        assert!(parse_walk(b"{}").is_err());
        assert!(parse_walk(br#"[["/a","x",0,0,0,0,0,0,0,0,0,null]]"#).is_err());
        assert!(parse_walk(br#"[["/a","f",420,0,0,3,1,2,3,4,5]]"#).is_err());
        let ok = br#"[["/a","f",420,0,0,3,1,2,3,4,5,null]]"#;
        assert_eq!(parse_walk(ok).unwrap()[0].size, 3);
        let v = json!({"version": 1, "deleted": [], "kept": [{"p": "rel", "t": "f", "m": 0,
            "u": 0, "g": 0, "s": 0, "mt": [0, 0], "l": null, "o": 0}]});
        assert!(Changes::from_json(&v).is_err());
    }
}
