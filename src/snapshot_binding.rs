//! The napi face of machine snapshots and forks (session/snapshots.rs does the work):
//! `NativeMachine.snapshot/fork`, `NativeSandbox.snapshots/deleteSnapshot`. lib/machine.js shapes
//! the results into MachineSnapshot objects.

use std::path::PathBuf;

use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::errors::Error;
use crate::machine_binding::NativeMachine;
use crate::options::js;
use crate::snapshots::{check_name, Meta};
use crate::{promise, NativeSandbox};

/// The most machines one fork() starts.
const MAX_FORKS: u32 = 64;

#[napi(object, object_from_js = false)]
pub struct NativeSnapshotInfo {
    pub id: String,
    pub name: Option<String>,
    pub image: String,
    /// Milliseconds since the epoch.
    pub created_at: f64,
    pub size_bytes: f64,
}

impl From<Meta> for NativeSnapshotInfo {
    fn from(m: Meta) -> Self {
        NativeSnapshotInfo {
            id: m.id,
            name: m.name,
            image: m.image,
            created_at: m.created_ms as f64,
            size_bytes: m.size_bytes as f64,
        }
    }
}

#[napi]
impl NativeMachine {
    /// Records the machine's root filesystem changes and a copy of its workspace in the store.
    #[napi(ts_return_type = "Promise<NativeSnapshotInfo>")]
    pub fn snapshot<'e>(
        &self,
        env: &'e Env,
        agent: String,
        #[napi(ts_arg_type = "string | null | undefined")] name: Option<Unknown<'e>>,
    ) -> napi::Result<PromiseRaw<'e, NativeSnapshotInfo>> {
        let name = match js::given(name)? {
            None => None,
            Some(v) => match js::string(&v)? {
                Some(s) => {
                    check_name(&s)?;
                    Some(s)
                }
                None => {
                    return Err(Error::InvalidOption(format!(
                        "name: a snapshot name must be a string, got {}",
                        js::show(&v)?
                    ))
                    .into())
                }
            },
        };
        let (s, m) = (self.session.clone(), self.inner.clone());
        promise(env, async move {
            let meta = s.snapshot_machine(&m, name, PathBuf::from(agent)).await?;
            Ok(NativeSnapshotInfo::from(meta))
        })
    }

    /// `count` new machines on copies of this one's root and workspace now.
    #[napi(ts_return_type = "Promise<NativeMachine[]>")]
    pub fn fork<'e>(
        &self,
        env: &'e Env,
        agent: String,
        #[napi(ts_arg_type = "number | null | undefined")] count: Option<Unknown<'e>>,
    ) -> napi::Result<PromiseRaw<'e, Vec<NativeMachine>>> {
        let count = match js::given(count)? {
            None => 1,
            Some(v) => match js::number(&v)? {
                Some(n) if n.fract() == 0.0 && (1.0..=f64::from(MAX_FORKS)).contains(&n) => {
                    n as u32
                }
                _ => {
                    return Err(Error::InvalidOption(format!(
                        "count: a whole number from 1 to {MAX_FORKS}, got {}",
                        js::show(&v)?
                    ))
                    .into())
                }
            },
        };
        let (s, m) = (self.session.clone(), self.inner.clone());
        let (timeout_s, max_output) = (self.timeout_s, self.max_output);
        promise(env, async move {
            let made = s.fork_machine(&m, count, PathBuf::from(agent)).await?;
            Ok(made
                .into_iter()
                .map(|inner| NativeMachine {
                    inner,
                    session: s.clone(),
                    timeout_s,
                    max_output,
                })
                .collect())
        })
    }
}

#[napi]
impl NativeSandbox {
    /// The store's snapshots, oldest first.
    #[napi(ts_return_type = "Promise<NativeSnapshotInfo[]>")]
    pub fn snapshots<'e>(
        &self,
        env: &'e Env,
    ) -> napi::Result<PromiseRaw<'e, Vec<NativeSnapshotInfo>>> {
        let s = self.inner.clone();
        promise(env, async move {
            crate::task::spawn_blocking(move || {
                let list = s.snapshot_store()?.list()?;
                Ok(list.into_iter().map(NativeSnapshotInfo::from).collect())
            })
            .await
            .map_err(|e| Error::sandbox(format!("snapshot list task failed: {e}")))?
        })
    }

    /// Removes a snapshot (ERR_SNAPSHOT_NOT_FOUND when there is none of that id).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn delete_snapshot<'e>(
        &self,
        env: &'e Env,
        id: String,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        let s = self.inner.clone();
        promise(env, async move {
            crate::task::spawn_blocking(move || s.snapshot_store()?.delete(&id))
                .await
                .map_err(|e| Error::sandbox(format!("snapshot delete task failed: {e}")))?
        })
    }
}
