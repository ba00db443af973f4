//! Opening a machine on a session: the box is one of the session's, on its workspace and options,
//! with its root writable and our agent as PID 1.

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{box_name, random_hex, Opened, Session, KERNEL_BACKSTOP_S, KERNEL_MAX_STARTUP_S};
use crate::egress::attach::OwnedProxy;
use crate::egress::EventSink;
use crate::errors::{Error, Result};
use crate::lifecycle::argv::{self, MachineBox};
use crate::lifecycle::egress::{check_bind_source, EgressAttach};
use crate::machine::options::Network;
use crate::machine::{self, Launch, Machine, AGENT_IN_BOX, CTL_IN_BOX};
use crate::options::Config;

/// A machine gets at least this long to come up (an image unpacked for the first time).
const MACHINE_MIN_STARTUP_S: f64 = 30.0;

impl Session {
    /// `network`: the machine's own setting, `None` for the session's. A policy (its own, or a
    /// copy of the session's) is served by a proxy of the machine's own, which `events` hears
    /// (`None`: the session's `onRequest`) and which closes with the machine.
    pub async fn open_machine(
        self: &Arc<Self>,
        agent: PathBuf,
        image: Option<String>,
        timeout_s: Option<f64>,
        network: Option<Network>,
        events: Option<EventSink>,
    ) -> Result<Arc<Machine>> {
        self.open_machine_on(agent, image, timeout_s, network, events, None)
            .await
    }

    /// [`Session::open_machine`], on a workspace of the machine's own (`own_ws`, bound at the
    /// session's boxWorkspace and removed when the machine closes) instead of the session's.
    pub(super) async fn open_machine_on(
        self: &Arc<Self>,
        agent: PathBuf,
        image: Option<String>,
        timeout_s: Option<f64>,
        network: Option<Network>,
        events: Option<EventSink>,
        own_ws: Option<PathBuf>,
    ) -> Result<Arc<Machine>> {
        self.check_env()?;
        check_bind_source(&agent, "the machine agent")?;
        if !agent.is_file() {
            return Err(Error::sandbox(format!(
                "the machine agent is missing at {} (a broken install? reinstall kern-sandbox)",
                agent.display()
            )));
        }
        let opened = self.opened()?;
        let name = box_name();
        let id = random_hex(6);
        // What the machine's box gets: an attach (a proxy's, the test hook's) or kern's network
        // flags, as a session's `network` would set them.
        let (policy, attach, cfg) = match network {
            None => match &self.cfg.policy {
                Some(p) => (Some(p.clone()), None, None),
                None => (None, self.cfg.egress.clone(), None),
            },
            Some(Network::Policy(p)) => (Some(p), None, None),
            Some(Network::Off) => (None, None, Some(false)),
            Some(Network::Host) => (None, None, Some(true)),
        };
        let cfg = match cfg {
            Some(on) => Config {
                network: on,
                egress_allow: Vec::new(),
                ..self.cfg.clone()
            },
            None => self.cfg.clone(),
        };
        let (proxy, attach) = match policy {
            Some(p) => {
                let dir = opened.private.join(format!("proxy-{id}"));
                let events = events.or_else(|| opened.events.clone());
                let (proxy, a) = OwnedProxy::start(&dir, p, events, agent.clone()).await?;
                (Some(proxy), Some(a))
            }
            None => (None, attach),
        };
        match self
            .start_machine(
                &opened, name, &id, agent, image, timeout_s, attach, &cfg, own_ws,
            )
            .await
        {
            Ok(m) => {
                if let Some(p) = proxy {
                    m.keep_egress(p);
                }
                self.adopt_machine(m).await
            }
            Err(e) => {
                if let Some(p) = proxy {
                    p.close().await;
                }
                Err(e)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn start_machine(
        self: &Arc<Self>,
        opened: &Opened,
        name: String,
        id: &str,
        agent: PathBuf,
        image: Option<String>,
        timeout_s: Option<f64>,
        attach: Option<EgressAttach>,
        cfg: &Config,
        own_ws: Option<PathBuf>,
    ) -> Result<Arc<Machine>> {
        let ctl = opened.private.join(format!("machine-{id}"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&ctl)
            .map_err(|e| Error::io(format!("cannot create {}", ctl.display()), e))?;
        check_bind_source(&ctl, "the machine's control directory")?;
        // In the control directory, which is removed with the machine; only `sock` of it is the
        // agent's business, but the box sees the whole directory, read-only.
        let egress = match attach {
            Some(a) => match a.prepare(&ctl.join("egress")) {
                Ok(e) => Some(e),
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&ctl);
                    return Err(e);
                }
            },
            None => None,
        };
        let listener = tokio::net::UnixListener::bind(machine::socket_path(&ctl))
            .map_err(|e| Error::io("cannot listen for the machine's agent", e))?;
        let socket_in_box = format!("{CTL_IN_BOX}/sock");
        let command = [AGENT_IN_BOX.to_string(), socket_in_box];
        let mut spec = self.box_spec(opened, &name, &command, false, KERNEL_BACKSTOP_S);
        spec.machine = Some(MachineBox {
            agent: &agent,
            agent_at: AGENT_IN_BOX,
            ctl: &ctl,
            ctl_at: CTL_IN_BOX,
        });
        spec.egress = egress.as_ref();
        if let Some(ws) = &own_ws {
            spec.workspace = ws;
            spec.deps_readonly = self.cfg.deps_readonly
                && ws
                    .join(crate::workspace::DEPS_DIR)
                    .symlink_metadata()
                    .is_ok_and(|m| m.is_dir());
        }
        let host_workspace = spec.workspace.to_path_buf();
        let image_ref = image.clone().unwrap_or_else(|| cfg.image.clone());
        let args = argv::box_argv_with_image(cfg, image, &spec);
        let startup = timeout_s
            .unwrap_or(self.cfg.timeout_s)
            .clamp(MACHINE_MIN_STARTUP_S, KERNEL_MAX_STARTUP_S);
        // Registered before the box starts, so a close() meanwhile stops the start too.
        let starting = self.calls.register(None);
        let started = Machine::start(
            Launch {
                kern: self.cfg.kern.clone(),
                name,
                args,
                enforce_limits: self.cfg.enforce_limits,
                env_id: self.env_id,
                listener,
                ctl_dir: ctl.clone(),
                workdir: self.cfg.box_workspace.clone(),
                startup: Duration::from_secs_f64(startup),
                image: image_ref,
                host_workspace,
                own_workspace: own_ws.is_some(),
            },
            &starting.cancel,
        )
        .await;
        drop(starting);
        if started.is_err() {
            let _ = std::fs::remove_dir_all(&ctl);
            if let Some(ws) = &own_ws {
                let _ = std::fs::remove_dir_all(ws);
            }
        }
        started
    }

    /// Registers a started machine to be closed with the session.
    async fn adopt_machine(&self, m: Arc<Machine>) -> Result<Arc<Machine>> {
        {
            let mut ms = self.machines.lock().unwrap_or_else(|p| p.into_inner());
            ms.retain(|m| !m.is_closing());
            ms.push(m.clone());
        }
        // A close() that ran while the machine started must not leave it behind.
        if !self.is_open() {
            m.close().await;
            return Err(Error::Closed(
                "the sandbox was closed while the machine was starting".into(),
            ));
        }
        Ok(m)
    }

    /// Closes the session's machines (its close() does).
    pub(super) async fn close_machines(&self) {
        let ms: Vec<Arc<Machine>> =
            std::mem::take(&mut *self.machines.lock().unwrap_or_else(|p| p.into_inner()));
        for m in ms {
            m.close().await;
        }
    }
}
