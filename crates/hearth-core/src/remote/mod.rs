//! Projects on other hosts, over the system's OpenSSH. A project there is (host, folder); one
//! runtime per (host, runtime configuration) serves every project on that host, as the local
//! registry does here, with the host in the key. The parts: `ssh.rs` (one connection: a control
//! master Hearth owns, commands, uploads, forwards), `stage.rs` (the pinned runtime staged once per
//! version on the host, by hash), `supervisor.rs` (the keeper script that runs the runtime there
//! and stops it when the link drops), `launch.rs` (a runtime's start on a host, behind the same
//! `Server` the local launch gives), `model_proxy.rs` (model requests made from this machine, so
//! API keys stay here) and this file: the connection to each host, kept and made again after a
//! drop, with its forwards and its keys.

pub mod launch;
pub mod model_proxy;
pub mod spec;
pub mod ssh;
pub mod stage;
pub mod supervisor;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use model_proxy::ModelProxy;
use ssh::{shell_quote, Link, SshError, SshOptions};
use stage::{HostFacts, StageError, Staged};

use crate::toolbox::gateway::Gateway;

/// The environment variables a remote runtime finds its forwarded ports in.
pub const GATEWAY_PORT_ENV: &str = "HEARTH_GATEWAY_PORT";
pub const MODEL_PORT_ENV: &str = "HEARTH_MODEL_PORT";
/// Entries listed per folder in the remote folder browser.
pub const MAX_LISTED_ENTRIES: usize = 2000;

/// Why a host could not serve a project.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoteError {
    #[error(transparent)]
    Ssh(#[from] SshError),
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error("The folder {path} does not exist on {host}.")]
    NoFolder { host: String, path: String },
    #[error("{path} on {host} must be an absolute path (starting with /).")]
    Relative { host: String, path: String },
    #[error("Hearth could not open a port for {host}'s runtime here: {detail}")]
    Local { host: String, detail: String },
    #[error("The runtime could not be started on {host}: {detail}")]
    Launch { host: String, detail: String },
}

/// One connected host: the link, what the host is, and the link's forwards and keys.
pub struct Connection {
    pub link: Link,
    pub facts: HostFacts,
    /// Ports on the host's loopback forwarded to this machine's gateway and model proxy.
    pub gateway_port: u16,
    pub model_port: u16,
    /// The gateway stamp key and the model proxy token of this link (handed to its runtime).
    pub stamp_key: String,
    pub model_token: String,
    staged: tokio::sync::OnceCell<Staged>,
    pub since: Instant,
}

impl Connection {
    /// The runtime staged on the host (once per connection, checked by hash).
    pub async fn staged(&self, version: &str, opencode: &std::path::Path, rg: Option<&std::path::Path>) -> Result<&Staged, StageError> {
        self.staged.get_or_try_init(|| stage::stage(&self.link, &self.facts, version, opencode, rg)).await
    }
}

/// What the window shows of a host.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum HostState {
    /// Connected now.
    #[serde(rename_all = "camelCase")]
    Connected { seconds: u64 },
    /// Not connected: never tried, or closed after use.
    Idle,
    /// The last attempt failed, with the sentence why.
    #[serde(rename_all = "camelCase")]
    Unreachable { reason: String },
}

/// One entry of a remote folder.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RemoteEntry {
    pub name: String,
    pub folder: bool,
}

/// A remote folder's listing: its resolved path and its entries.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RemoteListing {
    pub host: String,
    pub path: String,
    pub entries: Vec<RemoteEntry>,
}

/// Every host Hearth talks to, with the one connection each.
pub struct Remote {
    options: SshOptions,
    gateway: Arc<Gateway>,
    proxy: ModelProxy,
    hosts: tokio::sync::Mutex<HashMap<String, Arc<Connection>>>,
    failures: Mutex<HashMap<String, String>>,
}

impl Remote {
    pub async fn start(options: SshOptions, gateway: Arc<Gateway>) -> Result<Arc<Self>, RemoteError> {
        let proxy = ModelProxy::start().await.map_err(|e| RemoteError::Local { host: "any host".into(), detail: e.to_string() })?;
        Ok(Arc::new(Self { options, gateway, proxy, hosts: Default::default(), failures: Default::default() }))
    }

    /// How this Remote runs ssh (a self-test reaches a host the same way, over links of its own).
    pub fn options(&self) -> &SshOptions {
        &self.options
    }

    pub fn proxy(&self) -> &ModelProxy {
        &self.proxy
    }

    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// The connection to `host`, made (again) if there is none or it dropped.
    pub async fn connect(self: &Arc<Self>, host: &str) -> Result<Arc<Connection>, RemoteError> {
        let mut hosts = self.hosts.lock().await;
        if let Some(c) = hosts.get(host).filter(|c| c.link.is_alive()) {
            return Ok(c.clone());
        }
        if let Some(dead) = hosts.remove(host) {
            self.forget(&dead);
        }
        let connected = self.open(host).await;
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        match connected {
            Ok(c) => {
                failures.remove(host);
                let c = Arc::new(c);
                hosts.insert(host.to_string(), c.clone());
                let (me, watched) = (Arc::downgrade(self), c.clone());
                tokio::spawn(async move {
                    watched.link.closed().await;
                    tracing::warn!(host = watched.link.host(), "ssh link dropped");
                    if let Some(me) = me.upgrade() {
                        me.forget(&watched);
                    }
                });
                Ok(c)
            }
            Err(e) => {
                failures.insert(host.to_string(), e.to_string());
                Err(e)
            }
        }
    }

    async fn open(&self, host: &str) -> Result<Connection, RemoteError> {
        let link = Link::connect(host, &self.options).await?;
        let opened = async {
            let facts = stage::probe(&link).await?;
            let local_err = |e: SshError| RemoteError::from(e);
            let gateway_port = link.forward_remote(self.gateway.local_port()).await.map_err(local_err)?;
            let model_port = link.forward_remote(self.proxy.port()).await.map_err(local_err)?;
            Ok::<_, RemoteError>((facts, gateway_port, model_port))
        };
        let (facts, gateway_port, model_port) = match opened.await {
            Ok(v) => v,
            Err(e) => {
                link.close().await;
                return Err(e);
            }
        };
        let pid = link.master_pid();
        let stamp_key = self.gateway.register_link(pid);
        let model_token = self.proxy.issue_token(pid);
        Ok(Connection { link, facts, gateway_port, model_port, stamp_key, model_token, staged: Default::default(), since: Instant::now() })
    }

    fn forget(&self, c: &Connection) {
        self.gateway.forget_link(c.link.master_pid());
        self.proxy.revoke_token(&c.model_token);
    }

    /// The link processes alive now (the gateway serves them for their hosts' runtimes).
    pub fn link_pids(&self) -> Vec<u32> {
        match self.hosts.try_lock() {
            Ok(hosts) => hosts.values().filter(|c| c.link.is_alive()).map(|c| c.link.master_pid()).collect(),
            Err(_) => vec![],
        }
    }

    /// What the window shows of `host`.
    pub async fn state(&self, host: &str) -> HostState {
        if let Some(c) = self.hosts.lock().await.get(host).filter(|c| c.link.is_alive()) {
            return HostState::Connected { seconds: c.since.elapsed().as_secs() };
        }
        match self.failures.lock().unwrap_or_else(|p| p.into_inner()).get(host) {
            Some(reason) => HostState::Unreachable { reason: reason.clone() },
            None => HostState::Idle,
        }
    }

    /// `path` on `host`, resolved (`cd` and `pwd -P` there), with its entries: the remote folder
    /// browser, and the check a remote project's folder gets when it is added.
    pub async fn list_folder(self: &Arc<Self>, host: &str, path: &str) -> Result<RemoteListing, RemoteError> {
        let c = self.connect(host).await?;
        let path = if path.trim().is_empty() { c.facts.home.clone() } else { path.trim().to_string() };
        if !path.starts_with('/') {
            return Err(RemoteError::Relative { host: host.into(), path });
        }
        let script = format!("cd -- {} 2>/dev/null || exit 3; pwd -P; ls -1Ap", shell_quote(&path));
        let out = match c.link.run("a folder listing", &format!("sh -c {}", shell_quote(&script)), None, ssh::COMMAND_TIMEOUT).await {
            Err(SshError::Remote { ref status, .. }) if status.ends_with(": 3") => return Err(RemoteError::NoFolder { host: host.into(), path }),
            other => other?,
        };
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = text.lines();
        let resolved = lines.next().unwrap_or(&path).to_string();
        let entries = lines
            .filter(|l| !l.is_empty())
            .take(MAX_LISTED_ENTRIES)
            .map(|l| match l.strip_suffix('/') {
                Some(dir) => RemoteEntry { name: dir.into(), folder: true },
                None => RemoteEntry { name: l.into(), folder: false },
            })
            .collect();
        Ok(RemoteListing { host: host.into(), path: resolved, entries })
    }

    /// Close every link (Hearth is closing): each host's keeper stops its runtime.
    pub async fn shutdown(&self) {
        let all: Vec<Arc<Connection>> = self.hosts.lock().await.drain().map(|(_, c)| c).collect();
        for c in all {
            self.forget(&c);
            c.link.close().await;
        }
        self.proxy.shutdown();
    }

    /// The local ssh process of the link to `host`, if it is connected (tests sever it).
    pub async fn link_pid(&self, host: &str) -> Option<u32> {
        let c = self.hosts.lock().await.get(host).cloned()?;
        Some(c.link.master_pid())
    }
}
