//! Machine snapshots and forks on a session: a snapshot is the machine's root filesystem changes
//! against its image (the agent walks the box; the image's own walk, the baseline, is made once
//! per image in a throwaway box and cached in the store) plus a copy of its workspace. A machine
//! from a snapshot, and each fork, is a fresh box of the image with the changes written into it by
//! its agent, on a workspace copy of its own. Processes and memory are not part of it.

use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{random_hex, Session};
use crate::egress::EventSink;
use crate::errors::{Error, Result};
use crate::machine::options::Network;
use crate::machine::Machine;
use crate::snapshots::copy::{copy_tree, Copied};
use crate::snapshots::diff::{compare, parse_walk, Changes, Walked};
use crate::snapshots::{Meta, Store};
use crate::workspace::Workspace;

/// A fork's copy of a machine's changed files is held in memory up to this size, else on disk.
const MEMFD_MAX: u64 = 1 << 30;
/// `kern images --json` gets this long to answer (it reads a local cache).
const IMAGES_TIMEOUT: Duration = Duration::from_secs(15);

/// What starting a machine on a snapshot needs besides the snapshot.
pub struct StartFrom {
    pub agent: PathBuf,
    pub timeout_s: Option<f64>,
    pub network: Option<Network>,
    pub events: Option<EventSink>,
}

impl Session {
    pub fn snapshot_store(&self) -> Result<Store> {
        Store::open(
            self.cfg.snapshot_dir.as_deref(),
            self.cfg.snapshot_max_bytes,
        )
    }

    /// Records `m` in the store: refused as ERR_MACHINE_GONE once it is closed, as ERR_TOO_LARGE
    /// past the store's cap; a failure keeps nothing.
    pub async fn snapshot_machine(
        self: &Arc<Self>,
        m: &Arc<Machine>,
        name: Option<String>,
        agent: PathBuf,
    ) -> Result<Meta> {
        check_alive(m)?;
        let store = self.snapshot_store()?;
        let draft = store.draft()?;
        let room = store.room()?;
        let (size, _) = thawed(
            m,
            self.copy_machine(&store, m, &agent, &draft.dir, room, false),
        )
        .await?;
        let image = m.image.clone();
        crate::task::spawn_blocking(move || draft.commit(&store, name, image, size))
            .await
            .map_err(|e| Error::sandbox(format!("snapshot task failed: {e}")))?
    }

    /// `count` machines whose root and workspace start as copies of `m`'s now; a failure closes
    /// those already started and keeps nothing.
    pub async fn fork_machine(
        self: &Arc<Self>,
        m: &Arc<Machine>,
        count: u32,
        agent: PathBuf,
    ) -> Result<Vec<Arc<Machine>>> {
        check_alive(m)?;
        let store = self.snapshot_store()?;
        let draft = store.draft()?;
        // A fork's copy is gone once the forks run: it may use the whole cap, not just the room.
        let (_, data) = thawed(
            m,
            self.copy_machine(&store, m, &agent, &draft.dir, store.max_bytes(), true),
        )
        .await?;
        let dir = draft.dir.clone();
        let policy = m.own_policy();
        let starts: Vec<_> = (0..count)
            .map(|_| {
                let (s, dir, image) = (self.clone(), dir.clone(), m.image.clone());
                let data = data.clone();
                // A machine with a policy of its own gives each fork a proxy of its own with a
                // copy of the policy in force now; else the forks get the session's network.
                let from = StartFrom {
                    agent: agent.clone(),
                    timeout_s: None,
                    network: policy.clone().map(Network::Policy),
                    events: None,
                };
                crate::task::spawn(
                    async move { s.start_from_dir(&dir, image, from, Some(data)).await },
                )
            })
            .collect();
        let mut made = Vec::new();
        let mut failed = None;
        for s in starts {
            match s.await {
                Ok(Ok(m)) => made.push(m),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(e) => {
                    failed = failed.or(Some(Error::sandbox(format!("fork task failed: {e}"))))
                }
            }
        }
        drop(draft);
        if let Some(e) = failed {
            for m in made {
                m.close().await;
            }
            return Err(e);
        }
        Ok(made)
    }

    /// Starts a machine on the snapshot with this id or name (ERR_SNAPSHOT_NOT_FOUND).
    pub async fn machine_from(
        self: &Arc<Self>,
        key: &str,
        from: StartFrom,
    ) -> Result<Arc<Machine>> {
        let store = self.snapshot_store()?;
        let (meta, dir) = store.find(key)?;
        self.start_from_dir(&dir, meta.image, from, None).await
    }

    /// A fresh machine of `image` on a copy of `dir`'s workspace, with `dir`'s root changes
    /// written into it before it is handed over; their bytes from `data`, else `dir`'s root.data.
    async fn start_from_dir(
        self: &Arc<Self>,
        dir: &Path,
        image: String,
        from: StartFrom,
        data: Option<Arc<std::fs::File>>,
    ) -> Result<Arc<Machine>> {
        let data = match data {
            Some(d) => d,
            None => Arc::new(
                std::fs::File::open(dir.join("root.data"))
                    .map_err(|e| Error::io("cannot read the snapshot's root.data", e))?,
            ),
        };
        let text = tokio::fs::read(dir.join("root.json"))
            .await
            .map_err(|e| Error::io("cannot read the snapshot's root.json", e))?;
        let changes = serde_json::from_slice(&text)
            .map_err(|_| Error::sandbox("the snapshot's root.json is damaged"))
            .and_then(|v| Changes::from_json(&v))?;
        let ws = self.opened()?.private.join(format!("ws-{}", random_hex(6)));
        let (src, dst) = (dir.join("workspace"), ws.clone());
        let copied = crate::task::spawn_blocking(move || copy_workspace(&src, &dst, u64::MAX))
            .await
            .map_err(|e| Error::sandbox(format!("workspace copy task failed: {e}")))?;
        if let Err(e) = copied {
            let _ = std::fs::remove_dir_all(&ws);
            return Err(e);
        }
        let started = self
            .open_machine_on(
                from.agent,
                Some(image),
                from.timeout_s,
                from.network,
                from.events,
                Some(ws.clone()),
            )
            .await;
        let m = match started {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&ws);
                return Err(e);
            }
        };
        if let Err(e) = m.snap_apply(&changes, data).await {
            m.close().await;
            return Err(e);
        }
        Ok(m)
    }

    /// Writes `m`'s root changes and a copy of its workspace into `dir`; returns their size and
    /// the open file of the changed files' bytes. `transient` (a fork's copy): those bytes go to
    /// memory (a memfd) when they fit [`MEMFD_MAX`], sparing the disk a write it would throw away.
    async fn copy_machine(
        self: &Arc<Self>,
        store: &Store,
        m: &Arc<Machine>,
        agent: &Path,
        dir: &Path,
        limit: u64,
        transient: bool,
    ) -> Result<(u64, Arc<std::fs::File>)> {
        let base = self.baseline(store, agent, &m.image).await?;
        check_alive(m)?;
        let now = parse_walk(&m.snap_walk().await?)?;
        let mut changes = compare(&base, &now);
        let expected: u64 = changes.kept.iter().map(|k| k.size).sum();
        let out = if transient && expected <= MEMFD_MAX {
            let fd = rustix::fs::memfd_create("kern-sandbox-fork", rustix::fs::MemfdFlags::CLOEXEC)
                .map_err(|e| Error::io("cannot hold the fork's copy in memory", e.into()))?;
            std::fs::File::from(fd)
        } else {
            let path = dir.join("root.data");
            std::fs::File::options()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|e| Error::io("cannot write the snapshot's root.data", e))?
        };
        let out = Arc::new(out);
        let data = m.snap_read_into(&mut changes, out.clone(), limit).await?;
        let manifest = changes.to_json().to_string();
        tokio::fs::write(dir.join("root.json"), &manifest)
            .await
            .map_err(|e| Error::io("cannot write the snapshot's root.json", e))?;
        let (src, dst) = (m.host_workspace.clone(), dir.join("workspace"));
        let left = limit.saturating_sub(data + manifest.len() as u64);
        let copied = crate::task::spawn_blocking(move || copy_workspace(&src, &dst, left))
            .await
            .map_err(|e| Error::sandbox(format!("workspace copy task failed: {e}")))??;
        Ok((data + manifest.len() as u64 + copied.bytes, out))
    }

    /// The walk of a pristine box of `image`, from the store's cache or made now in a box of its
    /// own. Keyed by the image, what kern says of its current copy (re-loading it changes that),
    /// and what this session mounts (mount points are left out of walks).
    async fn baseline(
        self: &Arc<Self>,
        store: &Store,
        agent: &Path,
        image: &str,
    ) -> Result<Vec<Walked>> {
        let mut targets: Vec<&str> = self.cfg.mounts.iter().map(|m| m.target.as_str()).collect();
        targets.sort_unstable();
        let key = format!(
            "{image}\n{}\n{}\n{}",
            self.image_stamp(image).await,
            self.cfg.box_workspace,
            targets.join("\n")
        );
        let path = store.baseline_path(&key)?;
        if let Ok(bytes) = tokio::fs::read(&path).await {
            if let Ok(walk) = parse_walk(&bytes) {
                return Ok(walk);
            }
        }
        let pristine = self
            .open_machine(
                agent.to_path_buf(),
                Some(image.to_string()),
                None,
                Some(Network::Off),
                None,
            )
            .await?;
        let walk = pristine.snap_walk().await;
        pristine.close().await;
        let walk = walk?;
        let parsed = parse_walk(&walk)?;
        store.save_baseline(&key, &walk)?;
        Ok(parsed)
    }

    /// What `kern images --json` says of the image's cached copy (its pull time); "" where kern
    /// has no such listing (the test stand-in, whose images are the host's own directories).
    async fn image_stamp(&self, image: &str) -> String {
        let out = tokio::process::Command::new(&self.cfg.kern)
            .args(["images", "--json"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let Ok(Ok(out)) = tokio::time::timeout(IMAGES_TIMEOUT, out).await else {
            return String::new();
        };
        let tagged = if image.rsplit('/').next().is_some_and(|l| l.contains(':')) {
            image.to_string()
        } else {
            format!("{image}:latest")
        };
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .ok()
            .and_then(|v| {
                v.as_array()?
                    .iter()
                    .find(|e| {
                        let n = e.get("image").and_then(|n| n.as_str());
                        n == Some(image) || n == Some(tagged.as_str())
                    })
                    .map(|e| {
                        let pulled = e.get("pulled").cloned().unwrap_or_default();
                        let size = e.get("size_bytes").cloned().unwrap_or_default();
                        format!("{pulled}/{size}")
                    })
            })
            .unwrap_or_default()
    }
}

/// Runs `copy` with the machine running: a paused machine (whose agent could not answer) is
/// thawed for the copy and frozen again after it, as it was.
async fn thawed<T>(m: &Machine, copy: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    if !m.paused() {
        return copy.await;
    }
    m.resume().await?;
    let r = copy.await;
    let again = m.pause().await;
    let t = r?;
    again.map(|_| t)
}

fn check_alive(m: &Machine) -> Result<()> {
    if m.alive() {
        Ok(())
    } else {
        Err(Error::MachineGone("the machine is closed".into()))
    }
}

/// Copies the workspace at `src` into a new directory `dst` (mode as `src`'s), through the
/// workspace's contained I/O.
fn copy_workspace(src: &Path, dst: &Path, limit: u64) -> Result<Copied> {
    let ws = Workspace::open(src)?;
    let mode = std::fs::metadata(src)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o700);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dst)
        .map_err(|e| Error::io(format!("cannot create {}", dst.display()), e))?;
    let out = Workspace::open(dst)?;
    let copied = copy_tree(ws.root(), out.root().as_fd(), limit)?;
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(mode))
        .map_err(|e| Error::io(format!("cannot set the mode of {}", dst.display()), e))?;
    Ok(copied)
}
