//! The host's machine snapshot store: one directory (mode 0700) that outlives sessions.
//!
//! ```text
//! <store>/<id>/meta.json       {"id", "name", "image", "createdAt" (ms), "sizeBytes", "version"}
//! <store>/<id>/root.json       the root filesystem's changes against the image (diff::Changes)
//! <store>/<id>/root.data       the changed files' bytes, one after the other
//! <store>/<id>/workspace/      a copy of the machine's workspace
//! <store>/baselines/<key>.json the walk of a pristine box of an image (a cache)
//! <store>/.tmp-<rand>/         a snapshot or fork copy being made; renamed to <id> when complete
//! ```
//!
//! A snapshot is written under a temp name and renamed when whole, so a failed one leaves
//! nothing listed; its [`Draft`] removes the temp directory when dropped uncommitted.

pub mod copy;
pub mod diff;

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::errors::{Error, Result};

/// The store's size cap when the session sets none: 20 GiB over every snapshot.
pub const DEFAULT_MAX_BYTES: u64 = 20 << 30;
/// The longest snapshot name.
pub const MAX_NAME: usize = 64;
const ENV_DIR: &str = "KERN_SANDBOX_SNAPSHOT_DIR";
const TEMP_PREFIX: &str = ".tmp-";
const BASELINES: &str = "baselines";

/// A snapshot as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    pub id: String,
    pub name: Option<String>,
    pub image: String,
    /// Milliseconds since the epoch.
    pub created_ms: u64,
    pub size_bytes: u64,
}

impl Meta {
    fn to_json(&self) -> Value {
        json!({
            "version": 1, "id": self.id, "name": self.name, "image": self.image,
            "createdAt": self.created_ms, "sizeBytes": self.size_bytes,
        })
    }

    fn from_json(v: &Value) -> Option<Meta> {
        Some(Meta {
            id: v.get("id")?.as_str()?.to_string(),
            name: v.get("name").and_then(Value::as_str).map(str::to_string),
            image: v.get("image")?.as_str()?.to_string(),
            created_ms: v.get("createdAt")?.as_u64()?,
            size_bytes: v.get("sizeBytes")?.as_u64()?,
        })
    }
}

/// A snapshot name as given: 1 to 64 characters, no `/`, no NUL.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.chars().count() > MAX_NAME || name.contains(['/', '\0']) {
        return Err(Error::InvalidOption(format!(
            "name: a snapshot name is 1 to {MAX_NAME} characters with no '/' or NUL, got {:?}",
            name.chars().take(80).collect::<String>()
        )));
    }
    Ok(())
}

/// An id names a directory of the store: never a path, never a hidden entry.
fn is_id(s: &str) -> bool {
    s.starts_with("snap-")
        && s.len() <= 64
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

pub fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    if rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        b.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (t >> ((i % 16) * 8)) as u8);
    }
    b.iter().map(|v| format!("{v:02x}")).collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// FNV-1a: a stable file name for a baseline's key (std's hasher may change between releases).
fn fnv(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn make_private_dir(p: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(|e| Error::io(format!("cannot create {}", p.display()), e))
}

/// The store a session uses.
pub struct Store {
    root: PathBuf,
    max_bytes: u64,
}

impl Store {
    /// `dir`: the session's `snapshotDir`; else `$KERN_SANDBOX_SNAPSHOT_DIR`, else
    /// `$XDG_DATA_HOME/kern-sandbox/snapshots`, else `~/.local/share/kern-sandbox/snapshots`.
    pub fn open(dir: Option<&Path>, max_bytes: u64) -> Result<Store> {
        let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let root = match dir {
            Some(d) => d.to_path_buf(),
            None => match nonempty(ENV_DIR) {
                Some(d) => PathBuf::from(d),
                None => match nonempty("XDG_DATA_HOME") {
                    Some(x) => PathBuf::from(x).join("kern-sandbox/snapshots"),
                    None => match nonempty("HOME") {
                        Some(h) => PathBuf::from(h).join(".local/share/kern-sandbox/snapshots"),
                        None => {
                            return Err(Error::sandbox(
                                "no snapshot directory: set the snapshotDir option or \
                                 KERN_SANDBOX_SNAPSHOT_DIR (HOME is unset)",
                            ))
                        }
                    },
                },
            },
        };
        make_private_dir(&root)?;
        Ok(Store { root, max_bytes })
    }

    /// Every complete snapshot, oldest first. A damaged entry is left out.
    pub fn list(&self) -> Result<Vec<Meta>> {
        let rd = std::fs::read_dir(&self.root)
            .map_err(|e| Error::io(format!("cannot list {}", self.root.display()), e))?;
        let mut out: Vec<Meta> = rd
            .flatten()
            .filter(|e| e.file_name().to_str().is_some_and(is_id))
            .filter_map(|e| {
                let text = std::fs::read(e.path().join("meta.json")).ok()?;
                Meta::from_json(&serde_json::from_slice(&text).ok()?)
            })
            .collect();
        out.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        Ok(out)
    }

    /// A snapshot by id, else by name (the newest of that name).
    pub fn find(&self, key: &str) -> Result<(Meta, PathBuf)> {
        let all = self.list()?;
        let hit = all
            .iter()
            .find(|m| m.id == key)
            .or_else(|| all.iter().rev().find(|m| m.name.as_deref() == Some(key)));
        match hit {
            Some(m) => Ok((m.clone(), self.root.join(&m.id))),
            None => Err(Error::SnapshotNotFound(format!(
                "no snapshot with the id or name {:?} in {}",
                key.chars().take(80).collect::<String>(),
                self.root.display()
            ))),
        }
    }

    /// Removes a snapshot: renamed out of the list first, so a half-removed one is never listed.
    pub fn delete(&self, id: &str) -> Result<()> {
        if !is_id(id) || !self.root.join(id).join("meta.json").is_file() {
            return Err(Error::SnapshotNotFound(format!(
                "no snapshot {:?} in {}",
                id.chars().take(80).collect::<String>(),
                self.root.display()
            )));
        }
        let doomed = self.root.join(format!("{TEMP_PREFIX}rm-{}", random_hex(6)));
        std::fs::rename(self.root.join(id), &doomed)
            .map_err(|e| Error::io(format!("cannot remove the snapshot {id}"), e))?;
        std::fs::remove_dir_all(&doomed)
            .map_err(|e| Error::io(format!("cannot remove the snapshot {id}"), e))
    }

    /// A directory to build a snapshot (or a fork's copy) in, removed unless committed.
    pub fn draft(&self) -> Result<Draft> {
        let dir = self.root.join(format!("{TEMP_PREFIX}{}", random_hex(8)));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        Ok(Draft { dir, keep: false })
    }

    /// What the listed snapshots hold, in bytes.
    pub fn used_bytes(&self) -> Result<u64> {
        Ok(self.list()?.iter().map(|m| m.size_bytes).sum())
    }

    /// How many more bytes a new snapshot may hold.
    pub fn room(&self) -> Result<u64> {
        Ok(self.max_bytes.saturating_sub(self.used_bytes()?))
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Where the baseline walk for `key` is cached.
    pub fn baseline_path(&self, key: &str) -> Result<PathBuf> {
        let dir = self.root.join(BASELINES);
        make_private_dir(&dir)?;
        Ok(dir.join(format!("{}.json", fnv(key))))
    }

    /// Caches a baseline walk (written beside, then renamed: readers see all of it or none).
    pub fn save_baseline(&self, key: &str, walk: &[u8]) -> Result<()> {
        let path = self.baseline_path(key)?;
        let tmp = path.with_extension(format!("{}.partial", random_hex(4)));
        let r = std::fs::write(&tmp, walk).and_then(|()| std::fs::rename(&tmp, &path));
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r.map_err(|e| Error::io("cannot cache the image's baseline walk", e))
    }
}

/// A snapshot being written.
pub struct Draft {
    pub dir: PathBuf,
    keep: bool,
}

impl Draft {
    /// Writes meta.json and renames the draft into the list. Refused (nothing kept) when the
    /// store would pass its size cap.
    pub fn commit(
        mut self,
        store: &Store,
        name: Option<String>,
        image: String,
        size_bytes: u64,
    ) -> Result<Meta> {
        let room = store.room()?;
        if size_bytes > room {
            return Err(over_cap(store, size_bytes));
        }
        let meta = Meta {
            id: format!("snap-{}", random_hex(8)),
            name,
            image,
            created_ms: now_ms(),
            size_bytes,
        };
        std::fs::write(self.dir.join("meta.json"), meta.to_json().to_string())
            .map_err(|e| Error::io("cannot write the snapshot's meta.json", e))?;
        std::fs::rename(&self.dir, store.root.join(&meta.id))
            .map_err(|e| Error::io("cannot store the snapshot", e))?;
        self.keep = true;
        Ok(meta)
    }
}

/// The refusal of a snapshot that would pass the store's cap.
pub fn over_cap(store: &Store, size_bytes: u64) -> Error {
    Error::TooLarge(format!(
        "the snapshot ({size_bytes} bytes) would take the store at {} past its cap of {} bytes \
         (snapshotMaxBytes); delete snapshots or run `kern-sandbox snapshots gc`",
        store.root.display(),
        store.max_bytes
    ))
}

impl Drop for Draft {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_lists_find_and_delete_remove() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(Some(d.path()), 1000).unwrap();
        let draft = store.draft().unwrap();
        std::fs::write(draft.dir.join("root.data"), b"x").unwrap();
        let m = draft
            .commit(&store, Some("first".into()), "img".into(), 10)
            .unwrap();
        assert_eq!(store.list().unwrap(), vec![m.clone()]);
        assert_eq!(store.find("first").unwrap().0, m);
        assert_eq!(store.find(&m.id).unwrap().0, m);
        assert!(matches!(
            store.find("nope"),
            Err(Error::SnapshotNotFound(_))
        ));
        store.delete(&m.id).unwrap();
        assert!(store.list().unwrap().is_empty());
        assert!(matches!(
            store.delete(&m.id),
            Err(Error::SnapshotNotFound(_))
        ));
        assert!(matches!(
            store.delete("../x"),
            Err(Error::SnapshotNotFound(_))
        ));
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_draft_over_the_cap_or_dropped_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(Some(d.path()), 100).unwrap();
        let draft = store.draft().unwrap();
        assert!(matches!(
            draft.commit(&store, None, "img".into(), 101),
            Err(Error::TooLarge(_))
        ));
        drop(store.draft().unwrap());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("ok name").is_ok());
        assert!(check_name(&"x".repeat(64)).is_ok());
        for bad in ["", "a/b", "a\0b"] {
            assert!(check_name(bad).is_err());
        }
        assert!(check_name(&"x".repeat(65)).is_err());
    }
}
