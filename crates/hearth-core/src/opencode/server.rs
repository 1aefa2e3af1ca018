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
#[derive(Clone)]
pub(super) struct ServerInfo {
    pub pid: u32,
    pub url: String,
    pub version: String,
    pub started: Instant,
    /// Set for a runtime on another host.
    pub remote: Option<super::launch::RemoteServer>,
}

/// Where the runtime runs.
#[derive(Clone, Debug)]
pub enum Place {
    /// A child of Hearth on this machine.
    Local,
    /// On a host, over an ssh link (see `remote/`).
    Remote(crate::remote::launch::RemotePlace),
}

/// At most one live process, started lazily and again after it died.
pub(super) struct ServerSlot {
    config: Arc<RuntimeConfig>,
    host: RuntimeHost,
    root: PathBuf,
    place: Place,
    live: tokio::sync::Mutex<Option<Arc<Live>>>,
    /// The live process as status reads see it (they must not wait for a launch in progress).
    info: Mutex<Option<ServerInfo>>,
    launches: AtomicU32,
    recycles: AtomicU32,
    /// How the last process ended when nobody asked it to.
    last_exit: Mutex<Option<String>>,
    disposed: AtomicBool,
}

impl ServerSlot {
    pub fn new(config: Arc<RuntimeConfig>, root: PathBuf, host: RuntimeHost, place: Place) -> Self {
        Self {
            config,
            host,
            root,
            place,
            live: tokio::sync::Mutex::new(None),
            info: Mutex::new(None),
            launches: AtomicU32::new(0),
            recycles: AtomicU32::new(0),
            last_exit: Mutex::new(None),
            disposed: AtomicBool::new(false),
        }
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    pub fn place(&self) -> &Place {
        &self.place
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
        self.launch_into(&mut guard).await
    }

    /// Start a process into the (locked, empty) slot.
    async fn launch_into(&self, guard: &mut Option<Arc<Live>>) -> Result<Arc<Live>, RuntimeError> {
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
            remote: live.server.remote_info().cloned(),
        });
        *guard = Some(live.clone());
        Ok(live)
    }

    /// Replace the live process with a fresh one, if one runs and nothing uses it. The slot stays
    /// locked for the whole switch, so a call arriving meanwhile waits for the new process. `Ok(false)`
    /// when there was nothing to replace or something used it. `on_restart` runs once the old one
    /// is gone (the caller forgets what lived in it).
    pub async fn recycle(&self, on_restart: impl FnOnce()) -> Result<bool, RuntimeError> {
        if self.disposed.load(Ordering::SeqCst) {
            return Err(RuntimeError::Disposed);
        }
        let mut guard = self.live.lock().await;
        let Some(live) = guard.as_ref() else { return Ok(false) };
        // Every run, compaction and call holds the live process while it talks to it, and takes it
        // only through this lock: the slot's own reference alone means nobody uses it, nor can start to.
        if Arc::strong_count(live) > 1 || live.server.exited().is_some() {
            return Ok(false);
        }
        let old = guard.take().expect("checked above");
        old.hub.shutdown();
        old.server.stop().await;
        *self.info.lock().unwrap() = None;
        self.recycles.fetch_add(1, Ordering::SeqCst);
        tracing::info!(pid = old.server.pid, "runtime process replaced by a fresh one");
        on_restart();
        self.launch_into(&mut guard).await?;
        Ok(true)
    }

    /// Processes replaced by [`ServerSlot::recycle`] so far.
    pub fn recycles(&self) -> u32 {
        self.recycles.load(Ordering::SeqCst)
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
        let server = match &self.place {
            Place::Local => launch::launch(&spec).await?,
            Place::Remote(place) => crate::remote::launch::launch(place, &spec, &self.config).await?,
        };
        let base_url = match (&self.host.connect_via, &self.place) {
            (Some(via), Place::Local) => match server.base_url.trim_start_matches("http://").parse::<SocketAddr>() {
                Ok(addr) => format!("http://{}", via(addr)),
                Err(_) => server.base_url.clone(),
            },
            _ => server.base_url.clone(),
        };
        let client = Client::new(&base_url, &server.password);
        let checked = async {
            let Health { version, .. } = client.health().await.map_err(StartError::NoAnswer)?;
            if version != PINNED_VERSION {
                return Err(StartError::WrongVersion { found: version });
            }
            match &self.place {
                Place::Local => super::guard::seal(&client, server.pid, &server.password, &self.root.join("home")).await.map_err(StartError::NoAnswer)?,
                // The guard loads with the first instance there; the host's environment blocks are
                // the host's to see (the keeper starts the runtime as a local one is started).
                Place::Remote(place) => {
                    if let Some(home) = crate::remote::launch::remote_home(place, &self.root).await {
                        client.open_instance(&home).await.map_err(StartError::NoAnswer)?;
                    }
                }
            }
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
