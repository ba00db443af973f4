//! A sandbox session: its workspace, its private directory, and the calls that run boxes in it.

mod machines;
mod pip;
pub mod pool;
pub mod snapshots;

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::egress::attach::OwnedProxy;
use crate::egress::EventSink;
use crate::errors::{Error, Result};
use crate::kernel::language::{Driver, Language};
use crate::kernel::rich::{self, CellFiles};
use crate::kernel::Kernel;
use crate::lifecycle::argv::{self, BoxSpec};
use crate::lifecycle::cancel::{Call, Calls, Cancel, StopReason};
use crate::lifecycle::cleanup;
use crate::lifecycle::egress::EgressBox;
use crate::lifecycle::fault::{self, Ending};
use crate::lifecycle::outcome::Outcome;
use crate::lifecycle::spawn::{self, BoxRun, Launch, Watch};
use crate::options::Config;
use crate::output::ChunkFn;
use crate::workspace::entries::Stat;
use crate::workspace::snapshot::Stop;
use crate::workspace::track::{self, FileInfo, LiveIndex};
use crate::workspace::{self, Workspace};
use pool::{Pool, Request};

/// Shell code longer than this goes through a workspace file instead of argv: Linux holds one
/// argv string to 128 KiB, its NUL included.
const INLINE_CODE_MAX: usize = 100 * 1024;
const SETUP_MIN_TIMEOUT_S: f64 = 120.0;
/// How long after a call's box has ended its ready box's replacement starts.
const REFILL_AFTER: Duration = Duration::from_millis(3);
/// kern's own deadline for a kernel box: the kernel's close() or a cell's timeout ends it first.
const KERNEL_BACKSTOP_S: f64 = 24.0 * 3600.0;
/// A kernel gets at least this long to come up (interpreter start on a cold image cache).
const KERNEL_MIN_STARTUP_S: f64 = 30.0;
/// ...and at most this long, whatever the cells' deadline (e2b's contexts run with a day-long
/// one): a start that hangs must not hold a caller that long.
const KERNEL_MAX_STARTUP_S: f64 = 300.0;

/// An open session's resources.
pub struct Opened {
    pub ws: Workspace,
    /// `<tmp>/kern-sbx-<pid>-<rand>`, mode 0700: the env file, and the workspace when we own it.
    private: PathBuf,
    /// The env file every box of the session reads (written once, at open).
    env_file: PathBuf,
    /// Built by the first call that tracks files.
    files: Mutex<Option<LiveIndex>>,
    /// The one-shot Python runner's marshalled code, as a runner left it (`CellFiles::code`).
    runner_code: Mutex<Option<Arc<[u8]>>>,
    /// Boxes started ahead of calls (`prewarm` > 0).
    pool: Option<Arc<Pool>>,
    /// The session's boxes' egress files (its own proxy's, or `cfg.egress`'s), in `private`.
    egress: Option<EgressBox>,
    /// The session's egress proxy (`network` is a policy), closed with it.
    proxy: Option<OwnedProxy>,
    /// The session's `onRequest`: its proxy's, and a machine's unless it has its own.
    events: Option<EventSink>,
}

/// What open() needs for a network policy: the agent (the relay in one-shot and kernel boxes) and
/// the `onRequest` sink.
#[derive(Default)]
pub struct OpenNet {
    pub agent: Option<PathBuf>,
    pub events: Option<EventSink>,
}

/// What a box call is, for the ready boxes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    /// `setup`: a box of its own (full network), never a ready one.
    Setup,
    /// Any argv.
    Exec,
    /// `python3 <runner>`: a ready Python box runs it with the runner already loaded.
    Python,
}

/// What one call overrides, and how it reports.
#[derive(Default)]
pub struct CallOptions {
    pub timeout_s: Option<f64>,
    pub on_stdout: Option<ChunkFn>,
    pub on_stderr: Option<ChunkFn>,
    /// Registered up front when JS may abort the call; else the call registers itself.
    pub call: Option<Call>,
}

pub struct Session {
    pub cfg: Config,
    env_id: usize,
    state: Mutex<Option<Arc<Opened>>>,
    /// Serialises open/close against each other.
    lifecycle: tokio::sync::Mutex<()>,
    /// The calls in flight, so close() and AbortSignals can stop them.
    calls: Arc<Calls>,
    /// The session's warm kernels, closed with it.
    kernels: Mutex<Vec<Weak<Kernel>>>,
    /// The session's machines, closed with it. Held strongly: a machine whose JS object was
    /// collected without close() still has its box running, and close() must stop it.
    machines: Mutex<Vec<Arc<crate::machine::Machine>>>,
    /// Held shared by a background snapshot/restore: close() waits for them to stop before it
    /// removes a workspace they may still be writing.
    jobs: Arc<tokio::sync::RwLock<()>>,
}

/// A fresh box name; kern refuses a name in use.
fn box_name() -> String {
    format!("jssbx-{}", random_hex(6))
}

fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    if rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()).is_err() {
        // getrandom cannot fail on supported kernels; mix time and a counter if it ever does.
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let x = t.as_nanos() as u64 ^ N.fetch_add(0x9e37_79b9, Ordering::Relaxed);
        b.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (x >> ((i % 8) * 8)) as u8);
    }
    b.iter().map(|v| format!("{v:02x}")).collect()
}

impl Session {
    pub fn new(cfg: Config, env_id: usize) -> Session {
        Session {
            cfg,
            env_id,
            state: Mutex::new(None),
            lifecycle: tokio::sync::Mutex::new(()),
            calls: Default::default(),
            kernels: Mutex::new(Vec::new()),
            machines: Mutex::new(Vec::new()),
            jobs: Default::default(),
        }
    }

    fn opened(&self) -> Result<Arc<Opened>> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                Error::NotOpen(
                    "open the Sandbox first: `await sandbox.open()` (or use withSandbox()).".into(),
                )
            })
    }

    pub fn is_open(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    pub fn workspace_path(&self) -> Option<PathBuf> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|o| o.ws.path().to_path_buf())
    }

    /// Boxes started ahead that a call could take right now.
    pub fn ready_boxes(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|o| o.pool.as_ref())
            .map_or(0, |p| p.ready_count())
    }

    pub async fn open(self: &Arc<Self>, sinks: CallOptions, net: OpenNet) -> Result<()> {
        let _g = self.lifecycle.lock().await;
        if self.is_open() {
            return Ok(());
        }
        let me = self.clone();
        let opened = blocking(move || me.prepare(net)).await?;
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(opened));
        if let Some(setup) = self.cfg.setup.clone() {
            if let Err(e) = self.run_setup(&setup, sinks).await {
                self.shut().await;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Creates the private directory, resolves (or creates) the workspace and starts the egress
    /// proxy of a network policy (on the runtime this blocking thread belongs to).
    fn prepare(&self, net: OpenNet) -> Result<Opened> {
        let tmp = std::env::temp_dir();
        cleanup::reclaim_stale(&tmp);
        let private = tmp.join(format!(
            "{}{}-{}",
            cleanup::SESSION_PREFIX,
            std::process::id(),
            random_hex(6)
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .map_err(|e| Error::io(format!("cannot create {}", private.display()), e))?;
        cleanup::track_dir(self.env_id, &private);
        let ws = match &self.cfg.workspace {
            None => {
                let p = private.join("workspace");
                std::fs::DirBuilder::new()
                    .mode(0o755)
                    .create(&p)
                    .map_err(|e| Error::io(format!("cannot create {}", p.display()), e))?;
                Ok(p)
            }
            Some(w) => workspace::user_workspace(w),
        }
        .and_then(|p| Workspace::open(&p));
        // Invalid env is reported by each call, as in 0.1.1; then there is nothing to write.
        let env_file = private.join("env");
        let ws = ws.and_then(|w| match &self.cfg.env_file {
            Ok(body) => write_private(&env_file, body.as_bytes()).map(|()| w),
            Err(_) => Ok(w),
        });
        let started = ws.and_then(|w| match &self.cfg.policy {
            Some(policy) => {
                let agent = net.agent.clone().ok_or_else(|| {
                    Error::sandbox("a network policy needs the kern-sandbox-agent binary")
                })?;
                let dir = private.join("proxy");
                let started = OwnedProxy::start(&dir, policy.clone(), net.events.clone(), agent);
                let (proxy, attach) = tokio::runtime::Handle::current().block_on(started)?;
                Ok((w, Some(proxy), Some(attach)))
            }
            None => Ok((w, None, self.cfg.egress.clone())),
        });
        let ready = started.and_then(|(w, proxy, attach)| match attach {
            Some(a) => a
                .prepare(&private.join("egress"))
                .map(|e| (w, proxy, Some(e))),
            None => Ok((w, proxy, None)),
        });
        match ready {
            Ok((ws, proxy, egress)) => Ok(Opened {
                ws,
                private,
                env_file,
                egress,
                proxy,
                events: net.events,
                files: Mutex::new(None),
                runner_code: Mutex::new(None),
                pool: (self.cfg.prewarm > 0).then(|| {
                    let recipe = pool::Recipe {
                        kern: self.cfg.kern.clone(),
                        enforce_limits: self.cfg.enforce_limits,
                        env_id: self.env_id,
                    };
                    Pool::new(self.cfg.prewarm, recipe)
                }),
            }),
            Err(e) => {
                remove_private(&private);
                Err(e)
            }
        }
    }

    /// Closes the session: stops calls still running, removes what we own. Idempotent.
    pub async fn close(self: &Arc<Self>) {
        let _g = self.lifecycle.lock().await;
        self.shut().await;
    }

    async fn shut(&self) {
        crate::output::trim::release_freed_memory();
        let opened = self.state.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.calls.close_all();
        let kernels: Vec<Arc<Kernel>> =
            std::mem::take(&mut *self.kernels.lock().unwrap_or_else(|p| p.into_inner()))
                .iter()
                .filter_map(Weak::upgrade)
                .collect();
        for k in kernels {
            k.close().await;
        }
        self.close_machines().await;
        drop(self.jobs.write().await);
        if let Some(pool) = opened.as_ref().and_then(|o| o.pool.clone()) {
            pool.close().await;
            crate::output::trim::trim();
        }
        if let Some(proxy) = opened.as_ref().and_then(|o| o.proxy.as_ref()) {
            proxy.close().await;
        }
        if let Some(o) = opened {
            let _ = blocking(move || {
                remove_private(&o.private);
                Ok(())
            })
            .await;
        }
    }

    async fn run_setup(self: &Arc<Self>, setup: &str, sinks: CallOptions) -> Result<()> {
        let script = pip::setup_script(setup, &self.cfg.box_workspace);
        let opts = CallOptions {
            timeout_s: Some(self.cfg.timeout_s.max(SETUP_MIN_TIMEOUT_S)),
            ..sinks
        };
        let out = self
            .exec(vec!["sh".into(), "-c".into(), script], opts, Use::Setup)
            .await?;
        if out.exit_code == 0 && out.fault.is_none() {
            return Ok(());
        }
        let stderr = fault::without_kern_notices(&out.stderr);
        let text = if stderr.trim().is_empty() {
            String::from_utf8_lossy(&out.stdout).into_owned()
        } else {
            stderr
        };
        let text: String = text.trim().chars().take(400).collect();
        Err(Error::sandbox(format!(
            "setup failed (exit {}): {text}",
            out.exit_code
        )))
    }

    /// A `run()` call. Called on the JS thread: when nothing in the way needs waiting for (no
    /// ready boxes, the file index current in a few syscalls), its box is handed to a spawner
    /// thread before this returns, sparing the hop through a tokio worker before the start.
    pub fn run(
        self: &Arc<Self>,
        command: Vec<String>,
        mut opts: CallOptions,
    ) -> impl std::future::Future<Output = Result<Outcome>> + Send + 'static {
        let started = self.start_now(&command, &mut opts, None);
        let me = self.clone();
        async move {
            match started {
                Some(s) => me.finish_started(s, opts).await,
                None => me.exec(command, opts, Use::Exec).await,
            }
        }
    }

    /// [`Session::exec`]'s steps up to the box's start, done in place when each is a few
    /// syscalls; None (nothing done) when one of them is not, and the call takes the async path.
    /// `before` is done on the spawner thread just before kern starts.
    fn start_now(
        &self,
        command: &[String],
        opts: &mut CallOptions,
        before: Option<spawn::Before>,
    ) -> Option<StartedCall> {
        self.check_call(command).ok()?;
        let opened = self.opened().ok()?;
        if opened.pool.is_some() || crate::output::trim::pending() {
            return None;
        }
        let timeout_s = opts.timeout_s.unwrap_or(self.cfg.timeout_s);
        let call = opts
            .call
            .take()
            .unwrap_or_else(|| self.calls.register(None));
        // A stopped call, or a window that needs more than a few syscalls: the async path, with
        // the call as registered.
        let window = match call.cancel.reason() {
            Some(_) => Err(()),
            None if self.cfg.track_files => {
                FileWindow::open_now(&opened, call.id()).map(Some).ok_or(())
            }
            None => Ok(None),
        };
        let Ok(window) = window else {
            opts.call = Some(call);
            return None;
        };
        let t0 = std::time::Instant::now();
        let name = box_name();
        let args = self.box_args(&opened, &name, command, false, timeout_s);
        let pending = spawn::start(
            &self.cfg.kern,
            &name,
            &args,
            self.cfg.enforce_limits,
            self.env_id,
            false,
            before,
        );
        Some(StartedCall {
            opened,
            call,
            window,
            timeout_s,
            pending,
            t0,
        })
    }

    /// The rest of a call whose box [`Session::start_now`] started: as [`Session::exec`] goes on.
    async fn finish_started(&self, s: StartedCall, opts: CallOptions) -> Result<Outcome> {
        let StartedCall {
            opened: _opened,
            call,
            window,
            timeout_s,
            pending,
            t0,
        } = s;
        let watch = Watch {
            cap: self.cfg.max_output,
            timeout: Duration::from_secs_f64(timeout_s),
            on_stdout: opts.on_stdout,
            on_stderr: opts.on_stderr,
            cancel: &call.cancel,
        };
        let run = match pending {
            Ok(p) => match p.booted().await {
                Ok(b) => Ok(spawn::supervise(b, watch, t0).await),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let run = self.after_box(run).await;
        self.finish_call(run, window, timeout_s).await
    }

    /// `code` is the prepared cell (JSON, lib/jscell.js) for JavaScript, the source otherwise.
    /// Called on the JS thread, as [`Session::run`] is: a runner call's box is handed to a spawner
    /// thread before this returns when nothing in the way needs waiting for, its files written
    /// there just before kern starts.
    pub fn run_code(
        self: &Arc<Self>,
        code: String,
        language: Language,
        mut opts: CallOptions,
    ) -> impl std::future::Future<Output = Result<Outcome>> + Send + 'static {
        /// What runs the cell: a shell (the code stays a String, argv's), or a runner, maybe with
        /// its box already handed to a spawner.
        enum Cell {
            Shell(String),
            Runner(Driver, Arc<str>, Option<(StartedCall, RunnerHelpers)>),
        }
        let me = self.clone();
        let nul = code.contains('\0');
        let cell = match language.driver() {
            None => Cell::Shell(code),
            Some(d) => {
                let code: Arc<str> = code.into();
                let started = (!nul && code.len() <= INLINE_CODE_MAX)
                    .then(|| self.start_runner_now(&code, d, &mut opts))
                    .flatten();
                Cell::Runner(d, code, started)
            }
        };
        async move {
            if nul {
                return Err(Error::sandbox(
                    "command/code must be strings with no NUL byte",
                ));
            }
            match cell {
                Cell::Runner(_, _, Some((s, helpers))) => {
                    let result = me.finish_started(s, opts).await;
                    helpers.collect(result).await
                }
                Cell::Runner(d, code, None) => me.run_with_runner(code, d, opts).await,
                Cell::Shell(code) => me.run_shell(code, opts).await,
            }
        }
    }

    /// A shell cell, the one place one runs: bash where the image has it, else sh (see
    /// `shell_cell`); the code inline in argv, or, past what one argv string holds, from a
    /// workspace file removed afterwards.
    async fn run_shell(self: &Arc<Self>, code: String, opts: CallOptions) -> Result<Outcome> {
        if code.len() <= INLINE_CODE_MAX {
            return self.exec(shell_cell(true, code), opts, Use::Exec).await;
        }
        let opened = self.opened()?;
        let cell = format!(".cell-{}.sh", random_hex(4));
        let (o, c) = (opened.clone(), cell.clone());
        blocking(move || o.ws.write_file(&c, code.as_bytes())).await?;
        let file = format!("{}/{cell}", self.cfg.box_workspace);
        let result = self.exec(shell_cell(false, file), opts, Use::Exec).await;
        let (o, c) = (opened, cell);
        let _ = blocking(move || {
            o.ws.remove_file(&c);
            Ok(())
        })
        .await;
        result
    }

    /// [`Session::start_now`] for a runner call: its helper files are written on the spawner
    /// thread, just before kern starts (the workspace is not touched when the call goes the
    /// async way instead).
    fn start_runner_now(
        self: &Arc<Self>,
        code: &Arc<str>,
        language: Driver,
        opts: &mut CallOptions,
    ) -> Option<(StartedCall, RunnerHelpers)> {
        let helpers = RunnerHelpers::new(self.opened().ok()?, language);
        let command = self.runner_command(&helpers.files, language);
        let before: spawn::Before = Box::new({
            let (h, code) = (helpers.clone(), code.clone());
            move || h.write(&code)
        });
        let started = self.start_now(&command, opts, Some(before))?;
        Some((started, helpers))
    }

    /// The box command that runs a runner call's runner file.
    fn runner_command(&self, files: &CellFiles, language: Driver) -> Vec<String> {
        let interpreter = match language {
            Driver::Python => "python3",
            Driver::JavaScript => "node",
        };
        let runner = format!("{}/{}", self.cfg.box_workspace, files.runner);
        vec![interpreter.into(), runner]
    }

    /// Python or JavaScript through its rich-result runner: the cell and the runner go in as
    /// workspace files, the results come back in a third; all three are gone when the call ends,
    /// however it ends. (The way through tokio, when [`Session::start_runner_now`] could not.)
    async fn run_with_runner(
        self: &Arc<Self>,
        code: Arc<str>,
        language: Driver,
        opts: CallOptions,
    ) -> Result<Outcome> {
        let helpers = RunnerHelpers::new(self.opened()?, language);
        let h = helpers.clone();
        if let Err(e) = blocking(move || h.write(&code)).await {
            return helpers.collect(Err(e)).await;
        }
        let usage = match language {
            Driver::Python => Use::Python,
            Driver::JavaScript => Use::Exec,
        };
        let command = self.runner_command(&helpers.files, language);
        let result = self.exec(command, opts, usage).await;
        helpers.collect(result).await
    }

    /// Starts a warm kernel on this session's workspace, with the session's box settings; `image`
    /// (validated) replaces the session's image for this kernel only. `ipython` turns on
    /// IPython-style cells in a Python driver (shell escapes, magics, PIL saves shown), as E2B's
    /// kernels take them.
    pub async fn open_kernel(
        self: &Arc<Self>,
        language: Driver,
        image: Option<String>,
        timeout_s: Option<f64>,
        ipython: bool,
    ) -> Result<Arc<Kernel>> {
        self.check_env()?;
        let opened = self.opened()?;
        let name = box_name();
        let (marker, command) = self.kernel_command(language, ipython)?;
        let spec = self.box_spec(&opened, &name, &command, false, KERNEL_BACKSTOP_S);
        let args = argv::box_argv_with_image(&self.cfg, image, &spec);
        // Registered before the box starts, so a close() meanwhile stops the start too.
        let starting = self.calls.register(None);
        let (boxed, pipes) = spawn::start_resident(
            &self.cfg.kern,
            &name,
            &args,
            self.cfg.enforce_limits,
            self.env_id,
        )
        .await?;
        let kernel = Kernel::start(
            crate::kernel::host::Host::Box(boxed),
            pipes,
            self.cfg.max_output,
            marker,
            language,
            self.kernel_startup(timeout_s),
            &starting.cancel,
        )
        .await?;
        drop(starting);
        self.adopt_kernel(&kernel);
        // A close() that ran while the kernel started must not leave it behind.
        if !self.is_open() {
            kernel.close().await;
            return Err(Error::Closed(
                "the sandbox was closed while the kernel was starting".into(),
            ));
        }
        Ok(kernel)
    }

    /// A kernel driver's command, and the marker that ends it (how the host finds the driver to
    /// interrupt it).
    pub fn kernel_command(&self, language: Driver, ipython: bool) -> Result<(String, Vec<String>)> {
        let marker = format!("kern-kernel-{}", random_hex(8));
        let mut command = language.command(&marker);
        if ipython {
            if language != Driver::Python {
                return Err(Error::sandbox(
                    "IPython-style cells are for Python kernels only",
                ));
            }
            // The driver tells `%pip` without a network apart, to say so instead of hanging. The
            // marker stays last.
            let net = self.cfg.network
                || !self.cfg.egress_allow.is_empty()
                || self.cfg.egress.is_some()
                || self.cfg.policy.is_some();
            let mode = if net {
                "ipython:net"
            } else {
                "ipython:offline"
            };
            command.insert(command.len() - 1, mode.into());
        }
        Ok((marker, command))
    }

    /// A kernel gets at least KERNEL_MIN_STARTUP_S to come up, at most KERNEL_MAX_STARTUP_S.
    pub fn kernel_startup(&self, timeout_s: Option<f64>) -> Duration {
        let timeout = timeout_s.unwrap_or(self.cfg.timeout_s);
        Duration::from_secs_f64(timeout.clamp(KERNEL_MIN_STARTUP_S, KERNEL_MAX_STARTUP_S))
    }

    /// Registers a kernel to be closed with the session.
    pub fn adopt_kernel(&self, kernel: &Arc<Kernel>) {
        let mut ks = self.kernels.lock().unwrap_or_else(|p| p.into_inner());
        ks.retain(|k| k.strong_count() > 0);
        ks.push(Arc::downgrade(kernel));
    }

    /// One box call: checks first, then the box inside its file-change window, then the result.
    async fn exec(
        self: &Arc<Self>,
        command: Vec<String>,
        opts: CallOptions,
        usage: Use,
    ) -> Result<Outcome> {
        self.check_call(&command)?;
        let opened = self.opened()?;
        let timeout_s = opts.timeout_s.unwrap_or(self.cfg.timeout_s);
        let call = opts.call.unwrap_or_else(|| self.calls.register(None));
        if let Some(why) = call.cancel.reason() {
            return Err(stop_error(why));
        }
        crate::output::trim::release_freed_memory();
        let window = if self.cfg.track_files {
            Some(FileWindow::open(&opened, call.id()).await?)
        } else {
            None
        };
        let sinks = (opts.on_stdout, opts.on_stderr);
        let run = self
            .run_in_box(&opened, &command, usage, timeout_s, sinks, &call.cancel)
            .await;
        self.finish_call(run, window, timeout_s).await
    }

    /// A call's end once its box has: the file window closed, the result made.
    async fn finish_call(
        &self,
        run: Result<BoxRun>,
        window: Option<FileWindow>,
        timeout_s: f64,
    ) -> Result<Outcome> {
        let files = match window {
            Some(w) => w.close().await,
            None => Ok(Vec::new()),
        };
        let run = run?;
        if let Some(why) = run.stopped {
            return Err(stop_error(why));
        }
        Ok(outcome(run, timeout_s, files.unwrap_or_default()))
    }

    /// What fails a call before any box starts: a bad command, or an `env` option that was invalid.
    fn check_call(&self, command: &[String]) -> Result<()> {
        if command.is_empty() {
            return Err(Error::sandbox("run() needs a non-empty command array"));
        }
        if command.iter().any(|p| p.contains('\0')) {
            return Err(Error::sandbox(
                "command/code must be strings with no NUL byte",
            ));
        }
        self.check_env()
    }

    /// An invalid `env` option is reported by each call, as in 0.1.1.
    fn check_env(&self) -> Result<()> {
        match &self.cfg.env_file {
            Ok(_) => Ok(()),
            Err(e) => Err(Error::InvalidOption(e.clone())),
        }
    }

    /// The `kern box` argv of one of this session's boxes.
    fn box_args(
        &self,
        opened: &Opened,
        name: &str,
        command: &[String],
        setup: bool,
        timeout_s: f64,
    ) -> Vec<std::ffi::OsString> {
        argv::box_argv(
            &self.cfg,
            &self.box_spec(opened, name, command, setup, timeout_s),
        )
    }

    fn box_spec<'a>(
        &self,
        opened: &'a Opened,
        name: &'a str,
        command: &'a [String],
        setup: bool,
        timeout_s: f64,
    ) -> BoxSpec<'a> {
        BoxSpec {
            name,
            workspace: opened.ws.path(),
            deps_readonly: self.cfg.deps_readonly && !setup && opened.ws.has_deps_dir(),
            timeout_s,
            setup,
            env_file: Some(&opened.env_file),
            command,
            machine: None,
            egress: opened.egress.as_ref().filter(|_| !setup),
        }
    }

    /// Runs `command` in a fresh box of this session, until it ends, times out or is stopped: a
    /// ready box when one can take it, else one started now.
    async fn run_in_box(
        self: &Arc<Self>,
        opened: &Arc<Opened>,
        command: &[String],
        usage: Use,
        timeout_s: f64,
        (on_stdout, on_stderr): (Option<ChunkFn>, Option<ChunkFn>),
        cancel: &Cancel,
    ) -> Result<BoxRun> {
        let name = box_name();
        let setup = usage == Use::Setup;
        let args = self.box_args(opened, &name, command, setup, timeout_s);
        // `setup` never takes a ready box (its box has the network).
        let pool = opened.pool.as_ref().filter(|_| !setup);
        let ready = match pool {
            Some(pool) => {
                let req = match usage {
                    Use::Python => Request::Python {
                        runner: &command[1],
                    },
                    _ => Request::Exec(command),
                };
                pool.take(&pool::key(&args), timeout_s, &req).await
            }
            None => None,
        };
        let watch = Watch {
            cap: self.cfg.max_output,
            timeout: Duration::from_secs_f64(timeout_s),
            on_stdout,
            on_stderr,
            cancel,
        };
        let hit = ready.is_some();
        let run = match ready {
            Some(booted) => Ok(spawn::supervise(booted, watch, std::time::Instant::now()).await),
            None => {
                spawn::run_box(Launch {
                    kern: &self.cfg.kern,
                    name: &name,
                    args,
                    enforce_limits: self.cfg.enforce_limits,
                    watch,
                    env_id: self.env_id,
                })
                .await
            }
        };
        let run = self.after_box(run).await;
        // Refilled once the call is done: a box starting beside it would take CPU from it. A
        // call that found none while some were starting came faster than they start: more
        // starts would only compete with the next calls for the CPU. The starts wait a moment:
        // the call still reads and removes its files and hands its result to JS (strace: a kern
        // started right away began while a ready runCode's last ~2 ms were still to go).
        if let Some(pool) = pool {
            if hit || !pool.starting() {
                let (me, opened, pool) = (self.clone(), opened.clone(), pool.clone());
                crate::task::spawn(async move {
                    tokio::time::sleep(REFILL_AFTER).await;
                    me.refill(&opened, &pool);
                });
            }
        }
        run
    }

    /// A box's run, its teardown (when the call resolved before kern's exit) handed on.
    async fn after_box(&self, run: Result<BoxRun>) -> Result<BoxRun> {
        let mut r = run?;
        if let Some(t) = r.teardown.take() {
            self.outlive(t).await;
        }
        Ok(r)
    }

    /// Lets a box's teardown finish after its call has resolved; close() waits for it (as for a
    /// background snapshot). A close already under way waits for nothing new: the teardown is
    /// awaited here instead.
    async fn outlive(&self, teardown: tokio::task::JoinHandle<()>) {
        match self.jobs.clone().try_read_owned() {
            Ok(job) => {
                crate::task::spawn(async move {
                    let _ = teardown.await;
                    drop(job);
                });
            }
            Err(_) => {
                let _ = teardown.await;
            }
        }
    }

    /// Starts ready boxes, in the background, up to the pool's size.
    fn refill(&self, opened: &Opened, pool: &Arc<Pool>) {
        let (n, kind) = pool.reserve();
        if n == 0 {
            return;
        }
        let command = kind.command();
        let timeout_s = pool::box_timeout_s(self.cfg.timeout_s);
        let boots = (0..n)
            .map(|_| {
                let name = box_name();
                let args = self.box_args(opened, &name, &command, false, timeout_s);
                pool::Boot {
                    name,
                    args,
                    covers_s: timeout_s,
                }
            })
            .collect();
        pool.start(kind, boots);
    }

    /// Registers a call JS may abort under `js_id`, before any of its async work starts, so an
    /// abort that arrives right after the call begins is never lost.
    pub fn register_call(&self, js_id: u32) -> Call {
        self.calls.register(Some(js_id))
    }

    /// Aborts the call JS registered under `js_id`, tearing its box down like a timeout.
    pub fn abort(&self, js_id: u32) {
        self.calls.abort(js_id);
    }

    pub async fn write_file(&self, rel: String, data: Vec<u8>) -> Result<()> {
        let o = self.opened()?;
        blocking(move || o.ws.write_file(&rel, &data)).await
    }

    pub async fn read_file(&self, rel: String, max_bytes: Option<u64>) -> Result<Vec<u8>> {
        let o = self.opened()?;
        blocking(move || o.ws.read_file(&rel, max_bytes)).await
    }

    pub async fn list_files(&self, sub: String) -> Result<Vec<FileInfo>> {
        let o = self.opened()?;
        blocking(move || {
            let parts = crate::workspace::normalize_rel(&sub)?;
            track::list(&o.ws, &parts)
        })
        .await
    }

    /// The entry at a workspace-relative path, or None.
    pub async fn stat(&self, rel: String) -> Result<Option<Stat>> {
        let o = self.opened()?;
        blocking(move || o.ws.stat(&rel)).await
    }

    /// A directory's entries, `depth` levels down.
    pub async fn list_dir(&self, rel: String, depth: u32) -> Result<Vec<Stat>> {
        let o = self.opened()?;
        blocking(move || o.ws.list_dir(&rel, depth)).await
    }

    pub async fn make_dir(&self, rel: String) -> Result<bool> {
        let o = self.opened()?;
        blocking(move || o.ws.make_dir(&rel)).await
    }

    pub async fn rename(&self, from: String, to: String) -> Result<()> {
        let o = self.opened()?;
        blocking(move || o.ws.rename(&from, &to)).await
    }

    pub async fn remove(&self, rel: String) -> Result<()> {
        let o = self.opened()?;
        blocking(move || o.ws.remove(&rel)).await
    }

    pub fn snapshot(&self, dest: &Path, limit: u64, stop: Stop) -> Result<()> {
        crate::workspace::snapshot::snapshot_until(&self.opened()?.ws, dest, limit, stop)
    }

    pub fn restore(&self, src: &Path, limit: u64, stop: Stop) -> Result<()> {
        crate::workspace::snapshot::restore_until(&self.opened()?.ws, src, limit, stop)
    }

    /// Runs a snapshot or restore on the blocking pool. The caller's AbortSignal (`call`, when JS
    /// wired one) and close() stop it between steps; close() waits for that.
    pub async fn archive_job(
        self: &Arc<Self>,
        call: Option<Call>,
        job: impl FnOnce(&Session, Stop) -> Result<()> + Send + 'static,
    ) -> Result<()> {
        let _job = self.jobs.read().await;
        let call = call.unwrap_or_else(|| self.calls.register(None));
        let (me, cancel) = (self.clone(), call.cancel.clone());
        let r = blocking(move || job(&me, &|| cancel.reason().is_some())).await;
        match (r, call.cancel.reason()) {
            (Err(Error::Aborted), Some(why)) => Err(stop_error(why)),
            (r, _) => r,
        }
    }
}

impl Opened {
    fn live_index<T>(&self, f: impl FnOnce(&mut LiveIndex, &Workspace) -> T) -> T {
        let mut g = self.files.lock().unwrap_or_else(|p| p.into_inner());
        f(g.get_or_insert_with(LiveIndex::new), &self.ws)
    }

    /// Runs a step on the file index: in place when it is a few syscalls, else off the async
    /// worker (the first build, or a walk, can take many milliseconds).
    async fn track<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut LiveIndex, &Workspace) -> T + Send + 'static,
    ) -> Result<T> {
        let cheap = self
            .files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(LiveIndex::is_cheap);
        if cheap {
            return Ok(self.live_index(f));
        }
        let o = self.clone();
        inline_blocking(move || Ok(o.live_index(f))).await
    }
}

/// A call whose box [`Session::start_now`] handed to a spawner thread.
struct StartedCall {
    /// Held through the call, as [`Session::exec`] holds it.
    opened: Arc<Opened>,
    call: Call,
    window: Option<FileWindow>,
    timeout_s: f64,
    pending: Result<spawn::Pending>,
    t0: std::time::Instant,
}

/// One call's window on the workspace's file changes. Dropped before [`FileWindow::close`] (the
/// call failed or panicked), it stops collecting them.
struct FileWindow {
    opened: Arc<Opened>,
    call: u64,
}

impl FileWindow {
    /// Brings the file index up to date and starts collecting changes for `call`.
    async fn open(opened: &Arc<Opened>, call: u64) -> Result<FileWindow> {
        opened.track(move |live, ws| live.begin(ws, call)).await?;
        Ok(FileWindow {
            opened: opened.clone(),
            call,
        })
    }

    /// [`FileWindow::open`] in place on the JS thread, when that is a handful of syscalls (the
    /// index is built and watching, nothing queued, and no other call is using it); None, and
    /// nothing begun, otherwise.
    fn open_now(opened: &Arc<Opened>, call: u64) -> Option<FileWindow> {
        let mut g = match opened.files.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        let live = g.as_mut().filter(|l| l.is_quiet())?;
        live.begin(&opened.ws, call);
        Some(FileWindow {
            opened: opened.clone(),
            call,
        })
    }

    /// The files the call created or modified.
    async fn close(self) -> Result<Vec<FileInfo>> {
        let call = self.call;
        self.opened
            .track(move |live, ws| live.finish(ws, call))
            .await
    }
}

impl Drop for FileWindow {
    fn drop(&mut self) {
        if let Some(live) = self
            .opened
            .files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            live.abandon(self.call);
        }
    }
}

/// A finished box as the call's result, with its ending classified.
fn outcome(run: BoxRun, timeout_s: f64, files: Vec<FileInfo>) -> Outcome {
    let fault = fault::classify(&Ending {
        exit_code: run.exit_code,
        timed_out: run.timed_out,
        timeout_s,
        started: run.started,
        stderr: &run.stderr.bytes,
        survivors: run.survivors,
    });
    Outcome {
        truncated: run.stdout.truncated || run.stderr.truncated,
        stdout: run.stdout.bytes,
        stderr: run.stderr.bytes,
        exit_code: run.exit_code,
        duration: run.duration,
        fault,
        files,
        rich: Vec::new(),
        execution_count: None,
    }
}

/// The error a call that was stopped early rejects with.
fn stop_error(why: StopReason) -> Error {
    match why {
        StopReason::Aborted => Error::Aborted,
        StopReason::Closed => {
            Error::Closed("the sandbox was closed while the call was running".into())
        }
    }
}

/// A 0600 file, created fresh (never through an existing entry).
fn write_private(p: &Path, body: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(p)
        .map_err(|e| Error::io(format!("cannot write the env file {}", p.display()), e))?;
    f.write_all(body)
        .map_err(|e| Error::io("cannot write the env file", e))
}

/// The box command of a shell cell: bash where the image has it, sh where it does not, decided
/// in the box by one sh (no second box start). `$1` is the code (`inline`) or the file holding
/// it, so it is only ever an argument, never part of a command line.
fn shell_cell(inline: bool, code_or_file: String) -> Vec<String> {
    let script = if inline {
        r#"command -v bash >/dev/null 2>&1 && exec bash -c "$1"; exec sh -c "$1""#
    } else {
        r#"command -v bash >/dev/null 2>&1 && exec bash "$1"; exec sh "$1""#
    };
    vec![
        "sh".into(),
        "-c".into(),
        script.into(),
        "kern-sandbox-shell".into(),
        code_or_file,
    ]
}

/// A runner call's helper files (see [`CellFiles`]): written before its box starts, read and
/// removed when it ends.
#[derive(Clone)]
struct RunnerHelpers {
    opened: Arc<Opened>,
    files: Arc<CellFiles>,
    language: Driver,
    /// The runner's marshalled code the session held when the call began (Python).
    held: Option<Arc<[u8]>>,
}

impl RunnerHelpers {
    fn new(opened: Arc<Opened>, language: Driver) -> RunnerHelpers {
        let held = match language {
            Driver::Python => opened.runner_code.lock().ok().and_then(|c| c.clone()),
            Driver::JavaScript => None,
        };
        RunnerHelpers {
            opened,
            files: Arc::new(CellFiles::new(&random_hex(4), language)),
            language,
            held,
        }
    }

    /// Writes the cell and the runner (and what rides beside it); blocking.
    fn write(&self, code: &str) -> Result<()> {
        let (ws, f) = (&self.opened.ws, &self.files);
        ws.write_file(&f.cell, code.as_bytes())?;
        if let Some(cap) = &f.capture {
            ws.write_file(cap, rich::CAPTURE.as_bytes())?;
        }
        if let (Some(name), Some(bytes)) = (&f.code, &self.held) {
            ws.write_file(name, bytes)?;
        }
        ws.write_file(
            &f.runner,
            CellFiles::runner_source(self.language).as_bytes(),
        )
    }

    /// The call's outcome with the rich results its runner wrote, once the helper files are
    /// read and gone (whatever the call's end, an error included). Short filesystem work, done on
    /// the call's worker thread.
    async fn collect(self, result: Result<Outcome>) -> Result<Outcome> {
        let written = inline_blocking(move || {
            let (o, f) = (&self.opened, &self.files);
            let got = match result {
                Ok(_) => o.ws.read_file(&f.results, Some(rich::RESULTS_MAX)).ok(),
                Err(_) => None,
            };
            // The code a runner compiled itself (none was held, or another interpreter made it).
            if let (Ok(_), Some(name)) = (&result, &f.code) {
                match o.ws.read_file(name, Some(rich::CODE_MAX)) {
                    Ok(b) if !b.is_empty() && self.held.as_deref() != Some(&b[..]) => {
                        if let Ok(mut c) = o.runner_code.lock() {
                            *c = Some(b.into());
                        }
                    }
                    _ => {}
                }
            }
            remove_helpers(o, f);
            Ok((result, got))
        })
        .await;
        let (result, got) = written?;
        let mut out = result?;
        out.rich = got.map(|b| rich::lines(&b)).unwrap_or_default();
        Ok(out)
    }
}

fn remove_helpers(opened: &Opened, files: &CellFiles) {
    for f in files.all() {
        opened.ws.remove_file(f);
    }
}

fn remove_private(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    cleanup::untrack_dir(dir);
}

/// Runs short blocking filesystem work of a call in place on its worker thread (the other tasks
/// move elsewhere), sparing the two thread hand-offs of the blocking pool on every call.
async fn inline_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    if tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::MultiThread
    {
        tokio::task::block_in_place(|| crate::errors::guard(f))
    } else {
        blocking(f).await
    }
}

/// Runs blocking filesystem work on tokio's blocking pool; a panic there becomes a SandboxError.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match crate::task::spawn_blocking(move || crate::errors::guard(f)).await {
        Ok(r) => r,
        Err(e) => Err(Error::sandbox(format!("internal error: {e}"))),
    }
}
