//! kern-sandbox's native core. `lib/` on top holds the JS-shaped surface (error classes,
//! AbortSignal wiring, the adapters; `index.js` adds `withSandbox`); everything that touches
//! processes or files is here.

#![deny(clippy::all)]

mod egress;
mod egress_binding;
mod errors;
mod kernel;
mod lifecycle;
mod locate;
pub mod loopback;
mod machine;
// `NativeMachine`: machine/'s napi face, at the top beside this file's NativeSandbox (it uses
// the session and the kernels, which use machine/).
mod machine_binding;
mod options;
mod output;
mod session;
mod settle;
mod shape;
// Machine snapshots and forks: their napi face, beside machine_binding.
mod snapshot_binding;
mod snapshots;
mod task;
mod workspace;

pub use workspace::snapshot::{restore as restore_archive, snapshot as snapshot_archive};
pub use workspace::Workspace;
// For fuzz/: what the host decodes of a kernel box's bytes.
pub use kernel::protocol::{FrameReader, ReadError as FrameReadError, HEADER as FRAME_HEADER};
pub use kernel::rich::{error_line as error_result_line, lines as result_lines};

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use napi::bindgen_prelude::{Buffer, Either, PromiseRaw};
use napi::Env;
use napi_derive::napi;

use egress::js::{event_sink, EgressEventFn};
use errors::Error;
use kernel::{CellOptions, Kernel};
use lifecycle::outcome::Outcome;
use options::{Config, SandboxOptions};
use output::js_string::Text;
use output::{ChunkFn, ResultFn};
use session::{CallOptions, Session};
use workspace::track::FileInfo;

/// Per-call options that are plain data (callbacks travel as separate arguments).
#[napi(object)]
pub struct NativeCallOptions {
    /// Deadline for this call only.
    pub timeout_s: Option<f64>,
    /// An id from JS that `cancel(id)` can later name (AbortSignal wiring).
    pub call_id: Option<u32>,
}

#[napi(object)]
pub struct NativeFault {
    #[napi(js_name = "type")]
    pub kind: String,
    pub message: String,
}

/// Made by [`shape::result_object`] (the field names are in [`shape::RESULT_FIELDS`], in this
/// order); the derive gives it its TypeScript type only.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct NativeResult {
    #[napi(ts_type = "string")]
    pub stdout: Text,
    #[napi(ts_type = "string")]
    pub stderr: Text,
    pub exit_code: i32,
    pub duration_ms: f64,
    pub fault: Option<NativeFault>,
    pub files: Vec<FileInfo>,
    pub truncated: bool,
    /// Rich results and an uncaught error (Python or JavaScript), one JSON text each;
    /// lib/results.js parses them.
    pub rich: Vec<String>,
    pub execution_count: Option<u32>,
}

impl napi::bindgen_prelude::ToNapiValue for NativeResult {
    /// # Safety
    /// `env` is the live env a call's result is made in, on its JS thread.
    unsafe fn to_napi_value(
        env: napi::sys::napi_env,
        r: Self,
    ) -> napi::Result<napi::sys::napi_value> {
        use napi::bindgen_prelude::ToNapiValue as Js;
        // SAFETY: per this fn's contract, for each value and for the object made of them.
        unsafe {
            let values = [
                Js::to_napi_value(env, r.stdout)?,
                Js::to_napi_value(env, r.stderr)?,
                Js::to_napi_value(env, r.exit_code)?,
                Js::to_napi_value(env, r.duration_ms)?,
                shape::optional(env, r.fault)?,
                Js::to_napi_value(env, r.files)?,
                Js::to_napi_value(env, r.truncated)?,
                Js::to_napi_value(env, r.rich)?,
                shape::optional(env, r.execution_count)?,
            ];
            shape::result_object(env, values)
        }
    }
}

impl From<Outcome> for NativeResult {
    fn from(o: Outcome) -> Self {
        NativeResult {
            stdout: Text(o.stdout),
            stderr: Text(o.stderr),
            exit_code: o.exit_code,
            duration_ms: o.duration.as_millis() as f64,
            fault: o.fault.map(|f| NativeFault {
                kind: f.kind.to_string(),
                message: f.message,
            }),
            files: o.files,
            truncated: o.truncated,
            rich: o.rich,
            execution_count: o.execution_count,
        }
    }
}

/// One workspace entry, as `stat`/`listDir` report it.
#[napi(object, object_from_js = false)]
pub struct NativeEntry {
    /// Relative to the workspace root ("" is the root).
    pub path: String,
    pub name: String,
    /// "file", "dir", "symlink" or "other".
    #[napi(js_name = "type")]
    pub kind: String,
    pub size: f64,
    pub mode: u32,
    pub modified_ms: f64,
    pub symlink_target: Option<String>,
}

impl From<workspace::entries::Stat> for NativeEntry {
    fn from(s: workspace::entries::Stat) -> Self {
        NativeEntry {
            path: s.rel,
            name: s.name,
            kind: s.kind.as_str().to_string(),
            size: s.size as f64,
            mode: s.mode,
            modified_ms: s.mtime_ms,
            symlink_target: s.link,
        }
    }
}

/// A call's future, boxed: tokio's task machinery and napi's promise plumbing are then built once
/// per result type instead of once per call site (the .node was 0.4 MB larger; a call pays one
/// allocation).
type CallFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = errors::Result<T>> + Send>>;

/// Runs a call's future on tokio as a JS promise; errors map once (tagged), panics included.
fn promise<'e, T, F>(env: &'e Env, fut: F) -> napi::Result<PromiseRaw<'e, T>>
where
    T: 'static + Send + napi::bindgen_prelude::ToNapiValue,
    F: 'static + Send + std::future::Future<Output = errors::Result<T>>,
{
    spawn_call(env, Box::pin(fut))
}

fn spawn_call<'e, T>(env: &'e Env, fut: CallFuture<T>) -> napi::Result<PromiseRaw<'e, T>>
where
    T: 'static + Send + napi::bindgen_prelude::ToNapiValue,
{
    let promise = settle::spawn(
        env,
        Box::pin(async move {
            let value = errors::Guarded(fut).await?;
            Ok(settle::convert(value))
        }),
    )?;
    // The promise resolves to T's JS value, which the type parameter tells the bindings.
    Ok(PromiseRaw::new(env.raw(), promise))
}

/// Registers the exit-time cleanup once per napi env.
fn hook_env(env: &Env) -> usize {
    static HOOKED: OnceLock<Mutex<HashSet<usize>>> = OnceLock::new();
    let id = env.raw() as usize;
    let set = HOOKED.get_or_init(Default::default);
    let mut hooked = set.lock().unwrap_or_else(|p| p.into_inner());
    if hooked.insert(id) {
        let _ = env.add_env_cleanup_hook(id, |id| {
            lifecycle::cleanup::on_env_exit(id);
            if let Some(set) = HOOKED.get() {
                set.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            }
        });
    }
    id
}

/// Stops this env's running boxes and removes its session directories now. lib/native.js calls
/// it from `process.once('exit')`: `process.exit()` skips napi's env cleanup hooks.
#[napi]
pub fn cleanup_now(env: Env) {
    lifecycle::cleanup::on_env_exit(env.raw() as usize);
}

/// lib/native.js hands over, once per env, the function that makes a call's result object from
/// its values (`fields` names them, in the order of `make`'s parameters): see src/shape.rs.
#[napi]
pub fn shape_results(
    env: Env,
    fields: Vec<String>,
    make: napi::bindgen_prelude::Function<'_, napi::Unknown<'_>, napi::Unknown<'_>>,
) -> napi::Result<()> {
    shape::take_maker(env, fields, make)
}

/// Every error code the native side tags its errors with; lib/errors.js's table must cover them.
#[napi]
pub fn error_codes() -> Vec<&'static str> {
    Error::CODES.to_vec()
}

/// kern's notes about its boxes (the "caps are not enforced on this host" warning and kin), taken
/// out of the boxes' stderr since the last call: each distinct one once per process. lib/notes.js
/// reports them as `KernWarning`s when a call settles.
#[napi]
pub fn take_kern_notes() -> Vec<String> {
    output::notes::take()
}

/// The native half of `Sandbox`.
#[napi]
pub struct NativeSandbox {
    inner: Arc<Session>,
}

#[napi]
impl NativeSandbox {
    #[napi(constructor)]
    pub fn new(env: Env, opts: Option<SandboxOptions>) -> napi::Result<Self> {
        let cfg = errors::guard(|| Config::from_options(opts.unwrap_or_default()))?;
        let env_id = hook_env(&env);
        Ok(NativeSandbox {
            inner: Arc::new(Session::new(cfg, env_id)),
        })
    }

    /// The canonical host path of the open workspace, or null before open().
    #[napi(getter)]
    pub fn workspace_path(&self) -> Option<String> {
        self.inner
            .workspace_path()
            .map(|p| p.to_string_lossy().into_owned())
    }

    /// How many boxes started ahead (`prewarm`) are ready for a call right now.
    #[napi(getter)]
    pub fn ready_boxes(&self) -> u32 {
        self.inner.ready_boxes() as u32
    }

    /// Opens the session. `agent`: the agent binary, which a network policy's boxes need (their
    /// relay); `on_request` hears the session's egress proxy.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn open<'e>(
        &self,
        env: &'e Env,
        on_stdout: Option<ChunkFn>,
        on_stderr: Option<ChunkFn>,
        agent: Option<String>,
        on_request: Option<EgressEventFn>,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        let s = self.inner.clone();
        let sinks = CallOptions {
            on_stdout,
            on_stderr,
            ..Default::default()
        };
        let net = session::OpenNet {
            agent: agent.map(PathBuf::from),
            events: on_request.map(event_sink),
        };
        promise(env, async move { s.open(sinks, net).await })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'e>(&self, env: &'e Env) -> napi::Result<PromiseRaw<'e, ()>> {
        let s = self.inner.clone();
        promise(env, async move {
            s.close().await;
            Ok(())
        })
    }

    /// Sets up cancellation for one call before any async work starts, so an abort that
    /// arrives right after the call begins is never lost.
    fn call_options(
        &self,
        call: NativeCallOptions,
        on_stdout: Option<ChunkFn>,
        on_stderr: Option<ChunkFn>,
    ) -> napi::Result<CallOptions> {
        let timeout_s = call.timeout_s.map(options::check_timeout).transpose()?;
        Ok(CallOptions {
            timeout_s,
            on_stdout,
            on_stderr,
            call: call.call_id.map(|id| self.inner.register_call(id)),
        })
    }

    /// One box call as a promise, its per-call options set up first. `work` is called here, on
    /// the JS thread: what it does before its future's first await is done before this returns.
    fn box_call<'e, F, Fut>(
        &self,
        env: &'e Env,
        call: NativeCallOptions,
        sinks: (Option<ChunkFn>, Option<ChunkFn>),
        work: F,
    ) -> napi::Result<PromiseRaw<'e, NativeResult>>
    where
        F: FnOnce(Arc<Session>, CallOptions) -> Fut,
        Fut: 'static + Send + std::future::Future<Output = errors::Result<Outcome>>,
    {
        let opts = self.call_options(call, sinks.0, sinks.1)?;
        let work = work(self.inner.clone(), opts);
        promise(env, async move { work.await.map(NativeResult::from) })
    }

    #[napi(ts_return_type = "Promise<NativeResult>")]
    pub fn run<'e>(
        &self,
        env: &'e Env,
        command: Vec<String>,
        call: NativeCallOptions,
        on_stdout: Option<ChunkFn>,
        on_stderr: Option<ChunkFn>,
    ) -> napi::Result<PromiseRaw<'e, NativeResult>> {
        self.box_call(env, call, (on_stdout, on_stderr), |s, opts| {
            s.run(command, opts)
        })
    }

    #[napi(ts_return_type = "Promise<NativeResult>")]
    pub fn run_code<'e>(
        &self,
        env: &'e Env,
        code: String,
        language: String,
        call: NativeCallOptions,
        on_stdout: Option<ChunkFn>,
        on_stderr: Option<ChunkFn>,
    ) -> napi::Result<PromiseRaw<'e, NativeResult>> {
        let language = kernel::language::Language::parse(&language)?;
        self.box_call(env, call, (on_stdout, on_stderr), move |s, opts| {
            s.run_code(code, language, opts)
        })
    }

    /// Aborts the call registered under `call_id`, tearing its box down like a timeout.
    #[napi]
    pub fn cancel(&self, call_id: u32) {
        self.inner.abort(call_id);
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn write_file<'e>(
        &self,
        env: &'e Env,
        path: String,
        data: Either<Buffer, String>,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        let bytes = match data {
            Either::A(b) => b.to_vec(),
            Either::B(s) => s.into_bytes(),
        };
        let s = self.inner.clone();
        promise(env, async move { s.write_file(path, bytes).await })
    }

    #[napi(ts_return_type = "Promise<Buffer>")]
    pub fn read_file<'e>(
        &self,
        env: &'e Env,
        path: String,
        max_bytes: Option<f64>,
    ) -> napi::Result<PromiseRaw<'e, Buffer>> {
        let max = options::nonnegative_bytes(max_bytes, "maxBytes")?;
        let s = self.inner.clone();
        promise(env, async move {
            s.read_file(path, max).await.map(Buffer::from)
        })
    }

    #[napi(ts_return_type = "Promise<FileInfo[]>")]
    pub fn list_files<'e>(
        &self,
        env: &'e Env,
        subdir: Option<String>,
    ) -> napi::Result<PromiseRaw<'e, Vec<FileInfo>>> {
        let s = self.inner.clone();
        promise(env, async move {
            s.list_files(subdir.unwrap_or_default()).await
        })
    }

    /// The entry at a workspace-relative path (not followed if a symlink), or null.
    #[napi(ts_return_type = "Promise<NativeEntry | null>")]
    pub fn stat<'e>(
        &self,
        env: &'e Env,
        path: String,
    ) -> napi::Result<PromiseRaw<'e, Option<NativeEntry>>> {
        let s = self.inner.clone();
        promise(env, async move {
            Ok(s.stat(path).await?.map(NativeEntry::from))
        })
    }

    /// A directory's entries, `depth` levels down (1: its own), in name order.
    #[napi(ts_return_type = "Promise<NativeEntry[]>")]
    pub fn list_dir<'e>(
        &self,
        env: &'e Env,
        path: String,
        depth: u32,
    ) -> napi::Result<PromiseRaw<'e, Vec<NativeEntry>>> {
        let s = self.inner.clone();
        promise(env, async move {
            let v = s.list_dir(path, depth).await?;
            Ok(v.into_iter().map(NativeEntry::from).collect())
        })
    }

    /// Creates a directory and its parents; false when it already existed.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn make_dir<'e>(&self, env: &'e Env, path: String) -> napi::Result<PromiseRaw<'e, bool>> {
        let s = self.inner.clone();
        promise(env, async move { s.make_dir(path).await })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn rename<'e>(
        &self,
        env: &'e Env,
        from: String,
        to: String,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        let s = self.inner.clone();
        promise(env, async move { s.rename(from, to).await })
    }

    /// Removes a file, link or directory tree.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn remove<'e>(&self, env: &'e Env, path: String) -> napi::Result<PromiseRaw<'e, ()>> {
        let s = self.inner.clone();
        promise(env, async move { s.remove(path).await })
    }

    #[napi]
    pub fn snapshot(&self, dest: String, max_bytes: Option<f64>) -> napi::Result<()> {
        self.archive(Archive::Snapshot, dest, max_bytes)
    }

    #[napi]
    pub fn restore(&self, src: String, max_bytes: Option<f64>) -> napi::Result<()> {
        self.archive(Archive::Restore, src, max_bytes)
    }

    /// snapshot() off the event loop; `call_id` lets `cancel()` stop it.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn snapshot_async<'e>(
        &self,
        env: &'e Env,
        dest: String,
        max_bytes: Option<f64>,
        call_id: Option<u32>,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        self.archive_async(env, Archive::Snapshot, dest, max_bytes, call_id)
    }

    /// restore() off the event loop; `call_id` lets `cancel()` stop it.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn restore_async<'e>(
        &self,
        env: &'e Env,
        src: String,
        max_bytes: Option<f64>,
        call_id: Option<u32>,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        self.archive_async(env, Archive::Restore, src, max_bytes, call_id)
    }

    /// The synchronous snapshot/restore of 0.1.1: on the calling (JS) thread, never stopped.
    fn archive(&self, way: Archive, path: String, max_bytes: Option<f64>) -> napi::Result<()> {
        let (path, limit) = way.check(path, max_bytes)?;
        Ok(errors::guard(|| {
            way.run(&self.inner, &path, limit, &|| false)
        })?)
    }

    /// The promise twins: the same checks and work, on the blocking pool, cancellable.
    fn archive_async<'e>(
        &self,
        env: &'e Env,
        way: Archive,
        path: String,
        max_bytes: Option<f64>,
        call_id: Option<u32>,
    ) -> napi::Result<PromiseRaw<'e, ()>> {
        let (path, limit) = way.check(path, max_bytes)?;
        // Registered now, so an abort right after the call begins is never lost.
        let call = call_id.map(|id| self.inner.register_call(id));
        let s = self.inner.clone();
        promise(env, async move {
            s.archive_job(call, move |s, stop| way.run(s, &path, limit, stop))
                .await
        })
    }
}

/// Which way a checkpoint goes: what snapshot/restore and their promise twins share.
#[derive(Clone, Copy)]
enum Archive {
    Snapshot,
    Restore,
}

impl Archive {
    /// The archive's host path and the byte ceiling, checked before any work starts.
    fn check(self, path: String, max_bytes: Option<f64>) -> napi::Result<(PathBuf, u64)> {
        if path.is_empty() || path.contains('\0') {
            let what = match self {
                Archive::Snapshot => "snapshot needs a destination file path",
                Archive::Restore => "restore needs a source file path",
            };
            return Err(Error::sandbox(what).into());
        }
        let limit = options::nonnegative_bytes(max_bytes, "maxBytes")?
            .unwrap_or(workspace::snapshot::DEFAULT_LIMIT);
        Ok((PathBuf::from(path), limit))
    }

    fn run(
        self,
        s: &Session,
        path: &Path,
        limit: u64,
        stop: workspace::snapshot::Stop,
    ) -> errors::Result<()> {
        match self {
            Archive::Snapshot => s.snapshot(path, limit, stop),
            Archive::Restore => s.restore(path, limit, stop),
        }
    }
}

#[napi]
impl NativeSandbox {
    /// Starts a warm kernel on this session; resolves once its interpreter is ready. `ipython`:
    /// cells take IPython's shell escapes and magics (the E2B entry's Python contexts).
    #[napi(ts_return_type = "Promise<NativeKernel>")]
    pub fn kernel<'e>(
        &self,
        env: &'e Env,
        timeout_s: Option<f64>,
        language: String,
        image: Option<String>,
        ipython: Option<bool>,
    ) -> napi::Result<PromiseRaw<'e, NativeKernel>> {
        let timeout_s = timeout_s.map(options::check_timeout).transpose()?;
        let language = kernel::language::Language::parse(&language)?.kernel()?;
        let image = image.map(options::check_image).transpose()?;
        let s = self.inner.clone();
        promise(env, async move {
            let inner = s
                .open_kernel(language, image, timeout_s, ipython.unwrap_or(false))
                .await?;
            Ok(NativeKernel {
                inner,
                timeout_s: timeout_s.unwrap_or(s.cfg.timeout_s),
                session: s,
                machine_gate: None,
            })
        })
    }
}

/// The native half of `Kernel`.
#[napi]
pub struct NativeKernel {
    inner: Arc<Kernel>,
    timeout_s: f64,
    /// Cells register as the session's calls: `NativeSandbox.cancel` reaches them too.
    session: Arc<Session>,
    /// A kernel in a machine refuses cells while the machine is paused.
    machine_gate: Option<crate::machine::Gate>,
}

#[napi]
impl NativeKernel {
    /// False once the kernel was closed or torn down (timeout, cap, death, ignored interrupt).
    #[napi(getter)]
    pub fn alive(&self) -> bool {
        self.inner.alive()
    }

    /// Queues a cell now (cells run in call order) and resolves with its result. The serving
    /// task settles the promise itself, with no task of its own in between, through the env's
    /// one settling function (src/settle.rs; a napi-rs deferred made and released a threadsafe
    /// function and an env cleanup hook per cell).
    #[napi(ts_return_type = "Promise<NativeResult>")]
    pub fn run_code<'e>(
        &self,
        env: &'e Env,
        code: String,
        call: NativeCallOptions,
        on_stdout: Option<ChunkFn>,
        on_stderr: Option<ChunkFn>,
        on_result: Option<ResultFn>,
    ) -> napi::Result<PromiseRaw<'e, NativeResult>> {
        if code.contains('\0') {
            return Err(Error::sandbox("code must be a string with no NUL byte").into());
        }
        if let Some(g) = &self.machine_gate {
            g.check()?;
        }
        let timeout_s = match call.timeout_s {
            Some(t) => options::check_timeout(t)?,
            None => self.timeout_s,
        };
        let registered = call.call_id.map(|id| self.session.register_call(id));
        let cancel = registered
            .as_ref()
            .map(|c| c.cancel.clone())
            .unwrap_or_default();
        let (promise, settler) = settle::promise(env)?;
        let reply = Box::new(move |r: errors::Result<Outcome>| {
            drop(registered);
            settler.settle(match r {
                Ok(o) => Ok(settle::convert(NativeResult::from(o))),
                Err(e) => Err(e.into()),
            })
        });
        let opts = CellOptions {
            timeout: std::time::Duration::from_secs_f64(timeout_s),
            on_stdout,
            on_stderr,
            on_result,
            cancel,
        };
        self.inner.submit(&code, opts, reply);
        Ok(PromiseRaw::new(env.raw(), promise))
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'e>(&self, env: &'e Env) -> napi::Result<PromiseRaw<'e, ()>> {
        let k = self.inner.clone();
        promise(env, async move {
            k.close().await;
            Ok(())
        })
    }
}
