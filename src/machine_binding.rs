//! The napi face of a machine: `NativeMachine`, which lib/machine.js wraps. Options arrive as
//! plain objects and are checked once, by options.rs, before anything reaches the agent.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::{Buffer, PromiseRaw, Unknown};
use napi::Env;
use napi_derive::napi;
use serde_json::{json, Value};

use crate::egress::js::{event_sink, EgressEventFn};
use crate::errors::{Error, Result};
use crate::lifecycle::cancel::Cancel;
use crate::machine::options::{
    self, Call, MachineConfig, MachineOptions, ProcessConfig, ProcessOptions,
};
use crate::machine::{Machine, SpawnSpec, Subscribers};
use crate::output::{ChunkFn, ResultFn};
use crate::session::Session;
use crate::{promise, NativeKernel, NativeResult, NativeSandbox};

#[napi(object, object_from_js = false)]
pub struct NativeProcessInfo {
    pub pid: u32,
    pub argv: Vec<String>,
    pub cwd: String,
    pub pty: bool,
}

#[napi(object, object_from_js = false)]
pub struct NativeSpawned {
    pub pid: u32,
    /// The id of the callbacks given to spawn, for detach().
    pub sub: u32,
}

/// What a file write sets besides the data (writeFile's options past `mode`; lib/machine.js
/// checks them).
#[napi(object)]
#[derive(Default)]
pub struct FileAttrs {
    /// A user of the box (name or uid) to own the file and the parents the write creates.
    pub owner: Option<String>,
    /// `user.*` extended attributes to set.
    pub xattrs: Option<HashMap<String, String>>,
    /// Extended attributes with this prefix are removed first.
    pub clear_xattrs: Option<String>,
}

#[napi]
impl NativeSandbox {
    /// Starts a machine on this session and exposes the ports asked for; resolves once its agent
    /// answered and the ports are open. `on_request` hears its egress proxy (default: the
    /// session's `onRequest`).
    #[napi(ts_return_type = "Promise<NativeMachine>")]
    pub fn machine<'e>(
        &self,
        env: &'e Env,
        agent: String,
        opts: MachineOptions<'e>,
        on_request: Option<EgressEventFn>,
    ) -> napi::Result<PromiseRaw<'e, NativeMachine>> {
        let mut cfg = MachineConfig::from_options(opts)?;
        let lifetime = std::mem::take(&mut cfg.lifetime);
        let s = self.inner.clone();
        let events = on_request.map(event_sink);
        promise(env, async move {
            let inner = match cfg.from {
                Some(key) => {
                    let from = crate::session::snapshots::StartFrom {
                        agent: PathBuf::from(agent),
                        timeout_s: cfg.timeout_s,
                        network: cfg.network,
                        events,
                    };
                    s.machine_from(&key, from).await?
                }
                None => {
                    s.open_machine(
                        PathBuf::from(agent),
                        cfg.image,
                        cfg.timeout_s,
                        cfg.network,
                        events,
                    )
                    .await?
                }
            };
            for &port in &cfg.ports {
                if let Err(e) = inner.expose_port(port).await {
                    inner.close().await;
                    return Err(e);
                }
            }
            inner.set_lifetime(lifetime);
            Ok(NativeMachine {
                inner,
                timeout_s: s.cfg.timeout_s,
                max_output: s.cfg.max_output,
                session: s,
            })
        })
    }
}

#[napi]
pub struct NativeMachine {
    pub(crate) inner: Arc<Machine>,
    pub(crate) session: Arc<Session>,
    pub(crate) timeout_s: f64,
    pub(crate) max_output: usize,
}

impl NativeMachine {
    fn spec(&self, argv: Vec<String>, o: ProcessConfig) -> Result<SpawnSpec> {
        if argv.is_empty() || argv[0].is_empty() {
            return Err(Error::InvalidOption(
                "a command needs a program to run".into(),
            ));
        }
        if argv.iter().any(|a| a.contains('\0')) {
            return Err(Error::InvalidOption(
                "a command's strings may not contain NUL".into(),
            ));
        }
        Ok(SpawnSpec {
            argv,
            cwd: o.cwd.as_deref().map(|c| self.inner.path(c)).transpose()?,
            env: o.env,
            stdin: o.stdin,
            pty: o.pty,
            user: o.user,
            cap: o.max_output.unwrap_or(self.max_output),
        })
    }
}

#[napi]
impl NativeMachine {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name.clone()
    }

    #[napi(getter)]
    pub fn workdir(&self) -> String {
        self.inner.workdir.clone()
    }

    #[napi(getter)]
    pub fn alive(&self) -> bool {
        self.inner.alive()
    }

    #[napi(ts_return_type = "Promise<NativeResult>")]
    pub fn exec<'e>(
        &self,
        env: &'e Env,
        argv: Vec<String>,
        opts: ProcessOptions<'e>,
        on_stdout: Option<ChunkFn>,
        on_stderr: Option<ChunkFn>,
    ) -> napi::Result<PromiseRaw<'e, NativeResult>> {
        let cfg = ProcessConfig::from_options(opts, Call::Exec)?;
        let (timeout_s, call_id) = (cfg.timeout_s.unwrap_or(self.timeout_s), cfg.call_id);
        let spec = self.spec(argv, cfg)?;
        let registered = call_id.map(|id| self.session.register_call(id));
        let m = self.inner.clone();
        promise(env, async move {
            let cancel = registered
                .as_ref()
                .map(|c| c.cancel.clone())
                .unwrap_or_else(|| Arc::new(Cancel::default()));
            let r = m
                .exec(spec, (on_stdout, on_stderr), timeout_s, &cancel)
                .await;
            drop(registered);
            r.map(NativeResult::from)
        })
    }

    #[napi(ts_return_type = "Promise<NativeSpawned>")]
    pub fn spawn<'e>(
        &self,
        env: &'e Env,
        argv: Vec<String>,
        opts: ProcessOptions<'e>,
        on_stdout: Option<ChunkFn>,
        on_stderr: Option<ChunkFn>,
        on_data: Option<ChunkFn>,
    ) -> napi::Result<PromiseRaw<'e, NativeSpawned>> {
        let cfg = ProcessConfig::from_options(opts, Call::Spawn)?;
        let timeout_s = cfg.timeout_s;
        let spec = self.spec(argv, cfg)?;
        let m = self.inner.clone();
        promise(env, async move {
            let subs = Subscribers {
                stdout: on_stdout,
                stderr: on_stderr,
                data: on_data,
                raw: None,
            };
            let (p, sub) = m.spawn(spec, subs).await?;
            if let Some(t) = timeout_s {
                m.deadline(p.clone(), t);
            }
            Ok(NativeSpawned { pid: p.pid, sub })
        })
    }

    /// The exit code of a process, or null while it runs.
    #[napi]
    pub fn exit_code(&self, pid: u32) -> napi::Result<Option<i32>> {
        Ok(self.inner.process(pid)?.exit().map(|e| e.code))
    }

    #[napi(ts_return_type = "Promise<NativeResult>")]
    pub fn wait<'e>(&self, env: &'e Env, pid: u32) -> napi::Result<PromiseRaw<'e, NativeResult>> {
        let p = self.inner.process(pid)?;
        promise(env, async move {
            let exit = p.exited().await;
            p.result(&exit).map(NativeResult::from)
        })
    }

    /// Signals a process: `signal` is a name or number, SIGKILL when absent.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn kill<'e>(
        &self,
        env: &'e Env,
        pid: u32,
        #[napi(ts_arg_type = "string | number | undefined")] signal: Unknown<'e>,
    ) -> napi::Result<PromiseRaw<'e, bool>> {
        let signal = options::signal(signal)?;
        let m = self.inner.clone();
        promise(env, async move { m.signal(pid, signal).await })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn write<'e>(
        &self,
        env: &'e Env,
        pid: u32,
        data: Buffer,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        let m = self.inner.clone();
        let data = data.to_vec();
        promise(env, async move { m.write(pid, &data).await })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn close_stdin<'e>(&self, env: &'e Env, pid: u32) -> napi::Result<PromiseRaw<'e, ()>> {
        let m = self.inner.clone();
        promise(env, async move { m.close_stdin(pid).await })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn resize<'e>(
        &self,
        env: &'e Env,
        pid: u32,
        #[napi(ts_arg_type = "{ cols: number; rows: number } | null")] size: Option<Unknown<'e>>,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        let (cols, rows) = options::pty_size(size)?
            .ok_or_else(|| Error::InvalidOption("resize needs { cols, rows }".into()))?;
        let m = self.inner.clone();
        promise(env, async move { m.resize(pid, cols, rows).await })
    }

    /// Subscribes callbacks to a process's output from now on; returns the id detach() takes.
    #[napi]
    pub fn attach(
        &self,
        pid: u32,
        on_stdout: Option<ChunkFn>,
        on_stderr: Option<ChunkFn>,
        on_data: Option<ChunkFn>,
    ) -> napi::Result<u32> {
        let subs = Subscribers {
            stdout: on_stdout,
            stderr: on_stderr,
            data: on_data,
            raw: None,
        };
        Ok(self.inner.process(pid)?.subscribe(subs))
    }

    #[napi]
    pub fn detach(&self, pid: u32, sub: u32) {
        if let Ok(p) = self.inner.process(pid) {
            p.unsubscribe(sub);
        }
    }

    #[napi]
    pub fn processes(&self) -> Vec<NativeProcessInfo> {
        self.inner
            .running()
            .iter()
            .map(|p| NativeProcessInfo {
                pid: p.pid,
                argv: p.argv.clone(),
                cwd: p.cwd.clone(),
                pty: p.pty,
            })
            .collect()
    }

    #[napi(ts_return_type = "Promise<Buffer>")]
    pub fn read_file<'e>(
        &self,
        env: &'e Env,
        path: String,
        #[napi(ts_arg_type = "number | null")] max_bytes: Option<Unknown<'e>>,
    ) -> napi::Result<PromiseRaw<'e, Buffer>> {
        let max = options::max_bytes(max_bytes)?;
        let path = self.inner.path(&path)?;
        let m = self.inner.clone();
        promise(env, async move {
            let r = m
                .file_op("read", json!({"path": path, "max": max}), &[])
                .await?;
            Ok(Buffer::from(r.data))
        })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn write_file<'e>(
        &self,
        env: &'e Env,
        path: String,
        data: Buffer,
        #[napi(ts_arg_type = "number | null")] mode: Option<Unknown<'e>>,
        attrs: Option<FileAttrs>,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        let mode = options::file_mode(mode)?;
        let FileAttrs {
            owner,
            xattrs,
            clear_xattrs,
        } = attrs.unwrap_or_default();
        let path = self.inner.path(&path)?;
        if data.len() > crate::machine::wire::MAX_PAYLOAD {
            return Err(Error::TooLarge(
                "a machine file write is limited to 64 MiB per call".into(),
            )
            .into());
        }
        let m = self.inner.clone();
        let data = data.to_vec();
        promise(env, async move {
            let req = json!({
                "path": path,
                "mode": mode,
                "owner": owner,
                "xattrs": xattrs,
                "clear_xattrs": clear_xattrs,
            });
            m.file_op("write_file", req, &data).await?;
            Ok(())
        })
    }

    /// Entries as JSON text (lib/machine.js shapes them).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn list<'e>(
        &self,
        env: &'e Env,
        path: String,
        #[napi(ts_arg_type = "number | null")] depth: Option<Unknown<'e>>,
    ) -> napi::Result<PromiseRaw<'e, String>> {
        let depth = options::depth(depth)?;
        let path = self.inner.path(&path)?;
        self.json_op(
            env,
            "list",
            json!({"path": path, "depth": depth}),
            "entries",
        )
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn stat<'e>(&self, env: &'e Env, path: String) -> napi::Result<PromiseRaw<'e, String>> {
        let path = self.inner.path(&path)?;
        self.json_op(env, "stat", json!({ "path": path }), "entry")
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn remove<'e>(&self, env: &'e Env, path: String) -> napi::Result<PromiseRaw<'e, ()>> {
        let path = self.inner.path(&path)?;
        let m = self.inner.clone();
        promise(env, async move {
            m.file_op("remove", json!({ "path": path }), &[])
                .await
                .map(|_| ())
        })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn rename<'e>(
        &self,
        env: &'e Env,
        from: String,
        to: String,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        let (from, to) = (self.inner.path(&from)?, self.inner.path(&to)?);
        let m = self.inner.clone();
        promise(env, async move {
            m.file_op("rename", json!({"from": from, "to": to}), &[])
                .await
                .map(|_| ())
        })
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn mkdir<'e>(
        &self,
        env: &'e Env,
        path: String,
        owner: Option<String>,
    ) -> napi::Result<PromiseRaw<'e, bool>> {
        let path = self.inner.path(&path)?;
        let m = self.inner.clone();
        promise(env, async move {
            let r = m
                .file_op("mkdir", json!({ "path": path, "owner": owner }), &[])
                .await?;
            Ok(r.head
                .get("created")
                .and_then(Value::as_bool)
                .unwrap_or(false))
        })
    }

    /// Watches a directory; `on_event` gets each event as JSON text. Resolves to the watch's id.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn watch<'e>(
        &self,
        env: &'e Env,
        path: String,
        recursive: bool,
        on_event: ResultFn,
    ) -> napi::Result<PromiseRaw<'e, u32>> {
        let path = self.inner.path(&path)?;
        let m = self.inner.clone();
        promise(env, async move { m.watch(path, recursive, on_event).await })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn unwatch<'e>(&self, env: &'e Env, id: u32) -> napi::Result<PromiseRaw<'e, ()>> {
        let m = self.inner.clone();
        promise(env, async move { m.unwatch(id).await })
    }

    /// Resolves to the host port (on 127.0.0.1) that reaches `port` in the machine.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn expose_port<'e>(
        &self,
        env: &'e Env,
        #[napi(ts_arg_type = "number")] port: Unknown<'e>,
    ) -> napi::Result<PromiseRaw<'e, u32>> {
        let port = options::port(&port)?;
        let m = self.inner.clone();
        promise(env, async move { m.expose_port(port).await.map(u32::from) })
    }

    /// Metrics as JSON text (lib/machine.js shapes them).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn metrics<'e>(&self, env: &'e Env) -> napi::Result<PromiseRaw<'e, String>> {
        let m = self.inner.clone();
        promise(env, async move { Ok(m.metrics().await?.to_string()) })
    }

    /// Starts a warm kernel inside the machine; resolves once its interpreter is ready.
    #[napi(ts_return_type = "Promise<NativeKernel>")]
    pub fn kernel<'e>(
        &self,
        env: &'e Env,
        #[napi(ts_arg_type = "number | null")] timeout_s: Option<Unknown<'e>>,
        language: String,
        ipython: Option<bool>,
    ) -> napi::Result<PromiseRaw<'e, NativeKernel>> {
        let timeout_s = options::timeout(timeout_s)?;
        let language = crate::kernel::language::Language::parse(&language)?.kernel()?;
        let (marker, command) = self
            .session
            .kernel_command(language, ipython.unwrap_or(false))?;
        let start = crate::kernel::in_machine::KernelStart {
            command,
            marker,
            language,
            cap: self.max_output,
            startup: self.session.kernel_startup(timeout_s),
        };
        let (m, s) = (self.inner.clone(), self.session.clone());
        let cell_timeout = timeout_s.unwrap_or(self.timeout_s);
        promise(env, async move {
            let stop = Cancel::default();
            let inner = crate::kernel::in_machine::start(&m, start, &stop).await?;
            s.adopt_kernel(&inner);
            Ok(NativeKernel {
                inner,
                timeout_s: cell_timeout,
                session: s,
                machine_gate: Some(m.gate()),
            })
        })
    }

    /// Replaces the policy of the machine's egress proxy (`ERR_BAD_NETWORK_POLICY`: nothing
    /// changes; `ERR_NETWORK_FIXED`: the machine has no proxy).
    #[napi]
    pub fn update_network(
        &self,
        #[napi(ts_arg_type = "NetworkPolicy")] policy: Unknown,
    ) -> napi::Result<()> {
        let policy = options::policy(policy)?;
        Ok(self.inner.update_network(policy)?)
    }

    /// Freezes every process of the machine (see freeze.rs); idempotent.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn pause<'e>(&self, env: &'e Env) -> napi::Result<PromiseRaw<'e, ()>> {
        let m = self.inner.clone();
        promise(env, async move { m.pause().await })
    }

    /// Thaws it as it was; idempotent.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn resume<'e>(&self, env: &'e Env) -> napi::Result<PromiseRaw<'e, ()>> {
        let m = self.inner.clone();
        promise(env, async move { m.resume().await })
    }

    #[napi(getter)]
    pub fn paused(&self) -> bool {
        self.inner.paused()
    }

    /// The lifetime ends `seconds` from now (from the resume, on a paused machine).
    #[napi]
    pub fn set_timeout(&self, seconds: Unknown) -> napi::Result<()> {
        let n = crate::options::js::number(&seconds)?;
        let d = crate::machine::lifetime::seconds("seconds", n)?;
        // The first lifetime starts the machine's timer task: on napi's runtime.
        let m = &self.inner;
        Ok(napi::bindgen_prelude::within_runtime_if_available(|| {
            m.set_timeout(d)
        })?)
    }

    /// When the lifetime ends, in ms since the epoch; null without one, or while paused.
    #[napi(getter)]
    pub fn ends_at(&self) -> Option<f64> {
        self.inner.ends_at_ms()
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'e>(&self, env: &'e Env) -> napi::Result<PromiseRaw<'e, ()>> {
        let m = self.inner.clone();
        promise(env, async move {
            m.close().await;
            Ok(())
        })
    }
}

impl NativeMachine {
    /// A request whose answer's `key` goes to JS as JSON text.
    fn json_op<'e>(
        &self,
        env: &'e Env,
        t: &'static str,
        head: Value,
        key: &'static str,
    ) -> napi::Result<PromiseRaw<'e, String>> {
        let m = self.inner.clone();
        promise(env, async move {
            let r = m.file_op(t, head, &[]).await?;
            Ok(r.head.get(key).cloned().unwrap_or(Value::Null).to_string())
        })
    }
}
