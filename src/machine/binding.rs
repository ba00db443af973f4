//! The napi face of a machine: `NativeMachine`, which lib/machine.js wraps. Options arrive as
//! plain objects and are checked here once, before anything reaches the agent.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::{Buffer, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use serde_json::{json, Value};

use super::{Machine, SpawnSpec, Stdin, Subscribers};
use crate::errors::{Error, Result};
use crate::kernel::ResultFn;
use crate::lifecycle::cancel::Cancel;
use crate::output::ChunkFn;
use crate::session::Session;
use crate::{options, promise, NativeKernel, NativeResult, NativeSandbox};

/// How one process runs (exec and spawn alike; each uses what applies to it).
#[napi(object)]
pub struct NativeProcessOptions {
    pub cwd: Option<String>,
    pub env: Option<HashMap<String, String>>,
    /// exec: written to stdin, then EOF.
    pub stdin: Option<Buffer>,
    /// spawn: stdin stays open for write()/end().
    pub open_stdin: Option<bool>,
    pub pty_cols: Option<u32>,
    pub pty_rows: Option<u32>,
    pub timeout_s: Option<f64>,
    pub call_id: Option<u32>,
    pub max_output_bytes: Option<f64>,
    pub user: Option<String>,
}

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

#[napi]
impl NativeSandbox {
    /// Starts a machine on this session; resolves once its agent answered.
    #[napi(ts_return_type = "Promise<NativeMachine>")]
    pub fn machine<'e>(
        &self,
        env: &'e Env,
        agent: String,
        image: Option<String>,
        timeout_s: Option<f64>,
    ) -> napi::Result<PromiseRaw<'e, NativeMachine>> {
        let timeout_s = timeout_s.map(options::check_timeout).transpose()?;
        let image = image.map(options::check_image).transpose()?;
        let s = self.inner.clone();
        promise(env, async move {
            let inner = s
                .open_machine(PathBuf::from(agent), image, timeout_s, None)
                .await?;
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
    inner: Arc<Machine>,
    session: Arc<Session>,
    timeout_s: f64,
    max_output: usize,
}

impl NativeMachine {
    fn spec(&self, argv: Vec<String>, o: &NativeProcessOptions, stdin: Stdin) -> Result<SpawnSpec> {
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
        let env = o.env.clone().unwrap_or_default();
        for (k, v) in &env {
            if k.is_empty() || k.contains(['=', '\0']) || v.contains('\0') {
                return Err(Error::InvalidOption(format!(
                    "env: {k:?} is not a valid variable (a name without '=' or NUL, a value without NUL)"
                )));
            }
        }
        if let Some(u) = &o.user {
            let ok = !u.is_empty()
                && u.len() <= 64
                && !u.starts_with('-')
                && u.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if !ok {
                return Err(Error::InvalidOption(format!(
                    "user: {u:?} is not a user name or uid"
                )));
            }
        }
        let pty = match (o.pty_cols, o.pty_rows) {
            (None, None) => None,
            (Some(c), Some(r)) => Some((term_size("cols", c)?, term_size("rows", r)?)),
            _ => return Err(Error::InvalidOption("pty needs both cols and rows".into())),
        };
        let cap = match o.max_output_bytes {
            None => self.max_output,
            Some(n) if n.is_finite() && n >= 1.0 => n as usize,
            Some(_) => {
                return Err(Error::InvalidOption(
                    "maxOutputBytes must be positive".into(),
                ))
            }
        };
        Ok(SpawnSpec {
            argv,
            cwd: o.cwd.as_deref().map(|c| self.inner.path(c)).transpose()?,
            env,
            stdin,
            pty,
            user: o.user.clone(),
            cap,
        })
    }

    fn timeout(&self, t: Option<f64>) -> Result<Option<f64>> {
        t.map(options::check_timeout).transpose()
    }
}

fn term_size(what: &str, n: u32) -> Result<u16> {
    match u16::try_from(n) {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(Error::InvalidOption(format!(
            "pty {what} must be a positive whole number up to 65535"
        ))),
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
        opts: NativeProcessOptions,
        on_stdout: Option<ChunkFn>,
        on_stderr: Option<ChunkFn>,
    ) -> napi::Result<PromiseRaw<'e, NativeResult>> {
        let stdin = match &opts.stdin {
            Some(b) => Stdin::Data(b.to_vec()),
            None => Stdin::Closed,
        };
        let spec = self.spec(argv, &opts, stdin)?;
        let timeout_s = self.timeout(opts.timeout_s)?.unwrap_or(self.timeout_s);
        let registered = opts.call_id.map(|id| self.session.register_call(id));
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
        opts: NativeProcessOptions,
        on_stdout: Option<ChunkFn>,
        on_stderr: Option<ChunkFn>,
        on_data: Option<ChunkFn>,
    ) -> napi::Result<PromiseRaw<'e, NativeSpawned>> {
        let stdin = if opts.open_stdin.unwrap_or(false) || opts.pty_cols.is_some() {
            Stdin::Open
        } else {
            Stdin::Closed
        };
        let spec = self.spec(argv, &opts, stdin)?;
        let timeout_s = self.timeout(opts.timeout_s)?;
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

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn kill<'e>(
        &self,
        env: &'e Env,
        pid: u32,
        signal: i32,
    ) -> napi::Result<PromiseRaw<'e, bool>> {
        if !(1..=64).contains(&signal) {
            return Err(Error::InvalidOption(format!("{signal} is not a signal number")).into());
        }
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
        cols: u32,
        rows: u32,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        let (cols, rows) = (term_size("cols", cols)?, term_size("rows", rows)?);
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
        max_bytes: Option<f64>,
    ) -> napi::Result<PromiseRaw<'e, Buffer>> {
        let path = self.inner.path(&path)?;
        let max = crate::nonnegative_bytes(max_bytes, "maxBytes")?;
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
        mode: Option<u32>,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        let path = self.inner.path(&path)?;
        if data.len() > super::wire::MAX_PAYLOAD {
            return Err(Error::TooLarge(
                "a machine file write is limited to 64 MiB per call".into(),
            )
            .into());
        }
        if mode.is_some_and(|m| m > 0o7777) {
            return Err(Error::InvalidOption(
                "mode must be permission bits (at most 0o7777)".into(),
            )
            .into());
        }
        let m = self.inner.clone();
        let data = data.to_vec();
        promise(env, async move {
            m.file_op("write_file", json!({"path": path, "mode": mode}), &data)
                .await?;
            Ok(())
        })
    }

    /// Entries as JSON text (lib/machine.js shapes them).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn list<'e>(
        &self,
        env: &'e Env,
        path: String,
        depth: u32,
    ) -> napi::Result<PromiseRaw<'e, String>> {
        let path = self.inner.path(&path)?;
        if depth == 0 {
            return Err(Error::InvalidOption("depth must be at least 1".into()).into());
        }
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
    pub fn mkdir<'e>(&self, env: &'e Env, path: String) -> napi::Result<PromiseRaw<'e, bool>> {
        let path = self.inner.path(&path)?;
        let m = self.inner.clone();
        promise(env, async move {
            let r = m.file_op("mkdir", json!({ "path": path }), &[]).await?;
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
    pub fn expose_port<'e>(&self, env: &'e Env, port: u32) -> napi::Result<PromiseRaw<'e, u32>> {
        let port = match u16::try_from(port) {
            Ok(p) if p > 0 => p,
            _ => {
                return Err(Error::InvalidOption(
                    "port must be a whole number from 1 to 65535".into(),
                )
                .into())
            }
        };
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
        timeout_s: Option<f64>,
        language: String,
        ipython: Option<bool>,
    ) -> napi::Result<PromiseRaw<'e, NativeKernel>> {
        let timeout_s = self.timeout(timeout_s)?;
        let language = crate::kernel::language::Language::parse(&language)?.kernel()?;
        let (marker, command) = self
            .session
            .kernel_command(language, ipython.unwrap_or(false))?;
        let start = super::kernel::KernelStart {
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
            let inner = super::kernel::start(&m, start, &stop).await?;
            s.adopt_kernel(&inner);
            Ok(NativeKernel {
                inner,
                timeout_s: cell_timeout,
                session: s,
            })
        })
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
