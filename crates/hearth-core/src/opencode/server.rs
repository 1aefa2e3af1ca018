//! The runtime process's life: started on first use, checked (health, pinned version, event stream),
//! started again on the next use after it died, stopped on dispose.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::client::{ApiError, Client, Health};
use super::config::{Authentication, ConfigError, RuntimeConfig};
use super::event_hub::{EventHub, HubError};
use super::launch::{self, LaunchError, LaunchSpec, Server};
use super::PINNED_VERSION;
use crate::runtime::{Cause, RuntimeError, RuntimeHost};

/// Why the runtime could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error("the runtime started but does not answer: {0}")]
    NoAnswer(ApiError),
    #[error("the runtime reports version {found}, but Hearth needs exactly {PINNED_VERSION}.")]
    WrongVersion { found: String },
    #[error(transparent)]
    EventStream(#[from] HubError),
}

impl From<StartError> for RuntimeError {
    fn from(e: StartError) -> Self {
        RuntimeError::Start(Cause::new(e))
    }
}

/// The running process and what talks to it.
pub(super) struct Live {
    pub server: Server,
    pub client: Client,
    pub hub: Arc<EventHub>,
    pub version: String,
}

/// What the status shows of the running process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ServerInfo {
    pub pid: u32,
    pub url: String,
    pub version: String,
    pub started: Instant,
}

/// At most one live process, started lazily and again after it died.
pub(super) struct ServerSlot {
    config: Arc<RuntimeConfig>,
    host: RuntimeHost,
    root: PathBuf,
    live: tokio::sync::Mutex<Option<Arc<Live>>>,
    /// The live process as status reads see it (they must not wait for a launch in progress).
    info: Mutex<Option<ServerInfo>>,
    launches: AtomicU32,
    /// How the last process ended when nobody asked it to.
    last_exit: Mutex<Option<String>>,
    disposed: AtomicBool,
}

impl ServerSlot {
    pub fn new(config: Arc<RuntimeConfig>, root: PathBuf, host: RuntimeHost) -> Self {
        Self {
            config,
            host,
            root,
            live: tokio::sync::Mutex::new(None),
            info: Mutex::new(None),
            launches: AtomicU32::new(0),
            last_exit: Mutex::new(None),
            disposed: AtomicBool::new(false),
        }
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    pub fn host(&self) -> &RuntimeHost {
        &self.host
    }

    pub fn is_disposed(&self) -> bool {
        self.disposed.load(Ordering::SeqCst)
    }

    pub fn launches(&self) -> u32 {
        self.launches.load(Ordering::SeqCst)
    }

    pub fn last_exit(&self) -> Option<String> {
        self.last_exit.lock().unwrap().clone()
    }

    pub fn info(&self) -> Option<ServerInfo> {
        if self.disposed.load(Ordering::SeqCst) {
            return None;
        }
        self.info.lock().unwrap().clone()
    }

    /// The live process, starting it if there is none or the last one died. `on_restart` runs
    /// when a dead process is replaced (the caller forgets what lived in it).
    pub async fn ensure_live(&self, on_restart: impl FnOnce()) -> Result<Arc<Live>, RuntimeError> {
        if self.disposed.load(Ordering::SeqCst) {
            return Err(RuntimeError::Disposed);
        }
        let mut guard = self.live.lock().await;
        if let Some(live) = guard.as_ref() {
            match live.server.exited() {
                None => return Ok(live.clone()),
                Some(status) => {
                    let tail = live.server.tail.text();
                    tracing::warn!(pid = live.server.pid, %status, %tail, "runtime process died; starting it again");
                    live.hub.shutdown();
                    *self.last_exit.lock().unwrap() = Some(status);
                    *self.info.lock().unwrap() = None;
                    *guard = None;
                    on_restart();
                }
            }
        }
        let live = Arc::new(self.start().await?);
        if self.disposed.load(Ordering::SeqCst) {
            // Disposed while it started: it must not outlive the dispose.
            live.hub.shutdown();
            live.server.stop().await;
            return Err(RuntimeError::Disposed);
        }
        *self.info.lock().unwrap() = Some(ServerInfo {
            pid: live.server.pid,
            url: live.server.base_url.clone(),
            version: live.version.clone(),
            started: live.server.started,
        });
        *guard = Some(live.clone());
        Ok(live)
    }

    /// The live process if there is one now (never starts it).
    pub async fn current(&self) -> Option<Arc<Live>> {
        self.live.lock().await.clone()
    }

    async fn start(&self) -> Result<Live, StartError> {
        self.config.validate()?;
        let secrets = self.root.join("secrets");
        let secret_files = self
            .config
            .profiles
            .iter()
            .filter_map(|p| match &p.authentication {
                Authentication::ApiKey(k) => Some((RuntimeConfig::key_file(&secrets, p), k.clone())),
                Authentication::None => None,
            })
            .collect();
        let spec = LaunchSpec {
            binary: self.config.binary.clone(),
            rg_dir: self.config.rg_dir.clone(),
            root: self.root.clone(),
            config: self.config.to_opencode_json(&secrets),
            plugins: self.config.plugins.clone(),
            secret_files,
            listen_timeout: launch::LISTEN_TIMEOUT,
            records_dir: self.host.records_dir.clone(),
        };
        self.launches.fetch_add(1, Ordering::SeqCst);
        let server = launch::launch(&spec).await?;
        let base_url = match &self.host.connect_via {
            Some(via) => match server.base_url.trim_start_matches("http://").parse::<SocketAddr>() {
                Ok(addr) => format!("http://{}", via(addr)),
                Err(_) => server.base_url.clone(),
            },
            None => server.base_url.clone(),
        };
        let client = Client::new(&base_url, &server.password);
        let checked = async {
            let Health { version, .. } = client.health().await.map_err(StartError::NoAnswer)?;
            if version != PINNED_VERSION {
                return Err(StartError::WrongVersion { found: version });
            }
            super::guard::seal(&client, server.pid, &server.password, &self.root.join("home")).await.map_err(StartError::NoAnswer)?;
            let hub = EventHub::start(client.clone()).await?;
            Ok((version, hub))
        };
        match checked.await {
            Ok((version, hub)) => Ok(Live { server, client, hub, version }),
            Err(e) => {
                server.stop().await;
                Err(e)
            }
        }
    }

    /// Stop the process for good: later calls fail with [`RuntimeError::Disposed`].
    pub async fn dispose(&self) {
        self.disposed.store(true, Ordering::SeqCst);
        let live = self.live.lock().await.take();
        if let Some(live) = live {
            live.hub.shutdown();
            live.server.stop().await;
            tracing::info!(pid = live.server.pid, "runtime stopped");
        }
        *self.info.lock().unwrap() = None;
    }
}
