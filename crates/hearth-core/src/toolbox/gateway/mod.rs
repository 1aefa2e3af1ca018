//! The knowledge MCP gateway: one loopback MCP server (streamable HTTP) for the one runtime
//! process, which still keeps every request inside its own grant.
//!
//! How a run uses it (the runtime side):
//! 0. Start it with [`GatewayOptions::callers`] naming the runtime's process: connections held by
//!    any other process (the agent's own tools included) are refused, secret or not.
//! 1. At launch: `RuntimeConfig.mcp[GATEWAY_MCP_NAME] = gateway.mcp_entry_with_secret_file(dir)?`
//!    and `RuntimeConfig.plugins.push(gateway.plugin(dir)?)`, and before
//!    spawning, `preseed_plugin_dependencies(&root.join("config/opencode"))?` (else every new
//!    project instance waits ~70 s for an offline npm install; see
//!    [`plugin::preseed_plugin_dependencies`]).
//! 2. Before a run: `let token = gateway.grant(&request.request_id, scope)?`.
//! 3. When the run's native session is known and BEFORE its prompt is sent:
//!    `gateway.bind_session(&session_id, &request.request_id, &token)?`; when the run sees a
//!    subagent's session created under it: `gateway.bind_child(&request_id, &session_id, &child)`.
//! 4. When the run ends (done, error, cancel), or never starts: `gateway.request_ended(&request_id)`.
//!
//! [`GatewayRunHooks`] does 2–4 for the runtime's `RunHooks`.
//!
//! Each call carries a stamp with the session id (written by the plugin, with a key only the
//! runtime's process gets); the gateway maps the session to the running request, checks that
//! request's token, strips the stamp, then serves or refuses the call.

pub mod callers;
mod core;
pub mod bridge;
mod credentials;
pub mod custom;
pub mod fixture;
pub mod grants;
pub mod hooks;
pub mod knowledge_tools;
pub mod naming;
pub mod plugin;
pub mod record;
mod server;
pub mod sessions;
mod spawn;
pub mod truncate;

use crate::host::clock::{self, SharedClock};
use crate::opencode::config::PluginSource;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

pub use self::core::GatewayLimits;
pub use callers::AllowedCallers;
pub use custom::{CustomServerConfig, CustomServerStatus, ServerState, MAX_CUSTOM_SERVERS};
pub use grants::{CapabilityToken, GrantError, GrantScope, DEFAULT_GRANT_TTL};
pub use hooks::{GatewayRunHooks, RunGrant};
pub use knowledge_tools::{InMemoryKnowledge, KnowledgeAccess, KnowledgeDoc, KnowledgeHit, KnowledgeRefusal};
pub use naming::GATEWAY_MCP_NAME;
pub use plugin::{preseed_plugin_dependencies, PLUGIN_FILE_NAME, SESSION_ARG};
pub use record::ForwardedCall;
pub use server::{FORBIDDEN_SENTENCE, MCP_PATH, STAMP_KEY_PATH, UNAUTHORIZED_SENTENCE};
pub use sessions::{AuthError, UNBOUND_SESSION_WAIT};

use custom::CustomServer;

/// Random bytes in the per-gateway secret the runtime presents.
pub const GATEWAY_SECRET_BYTES: usize = 32;
/// File holding the secret, referenced from the runtime config as `{file:…}`.
pub const SECRET_FILE_NAME: &str = "hearth-gateway.secret";
/// How often [`Gateway::wait_until_settled`] looks at the servers.
pub const SETTLE_POLL: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("Hearth could not open its MCP gateway on 127.0.0.1: {0}")]
    Listen(std::io::Error),
    #[error("Hearth could not write the gateway's secret file: {0}")]
    SecretFile(std::io::Error),
    #[error("Hearth could not write the runtime plugin of its gateway: {0}")]
    PluginFile(std::io::Error),
}

pub struct GatewayOptions {
    pub knowledge: Option<Arc<dyn KnowledgeAccess>>,
    /// Runtime family served (custom servers are started only if assigned to it).
    pub runtime_family: String,
    pub limits: GatewayLimits,
    /// The processes served (the runtimes); by default Hearth's own process only.
    pub callers: AllowedCallers,
    /// What grants' expiry is measured on (the machine's clock; a manual one in tests).
    pub clock: SharedClock,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self { knowledge: None, runtime_family: "opencode".into(), limits: GatewayLimits::default(), callers: AllowedCallers::default(), clock: clock::system() }
    }
}

pub struct Gateway {
    core: Arc<core::Core>,
    http: tokio::sync::Mutex<Option<server::HttpServer>>,
    addr: std::net::SocketAddr,
    secret: String,
    runtime_family: String,
    statuses_off: Mutex<Vec<CustomServerStatus>>,
}

impl Gateway {
    pub async fn start(options: GatewayOptions) -> Result<Gateway, GatewayError> {
        let core = Arc::new(core::Core::new(options.knowledge, options.limits, options.clock));
        let secret = grants::random_text(GATEWAY_SECRET_BYTES);
        let http = server::serve(core.clone(), &secret, options.callers, core.stamp_key.clone()).await.map_err(GatewayError::Listen)?;
        Ok(Gateway { core, addr: http.addr, http: tokio::sync::Mutex::new(Some(http)), secret, runtime_family: options.runtime_family, statuses_off: Mutex::default() })
    }

    /// `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    /// The `Authorization` header value the runtime must send. A secret: never log it.
    pub fn authorization(&self) -> String {
        format!("Bearer {}", self.secret)
    }

    /// The runtime's `mcp` entry (under [`GATEWAY_MCP_NAME`]) with the secret inline.
    pub fn mcp_entry(&self) -> Value {
        json!({ "type": "remote", "url": self.url(), "headers": { "authorization": self.authorization() }, "oauth": false })
    }

    /// The `mcp` entry with the secret kept in a private file under `dir` (0600) and referenced
    /// as `{file:…}`, so it appears neither in the config text nor in the runtime's environment
    /// (which local MCP children inherit).
    pub fn mcp_entry_with_secret_file(&self, dir: &Path) -> Result<Value, GatewayError> {
        let path = self.write_secret_file(dir)?;
        Ok(json!({ "type": "remote", "url": self.url(), "headers": { "authorization": format!("Bearer {{file:{}}}", path.display()) }, "oauth": false }))
    }

    fn write_secret_file(&self, dir: &Path) -> Result<std::path::PathBuf, GatewayError> {
        std::fs::create_dir_all(dir).map_err(GatewayError::SecretFile)?;
        let path = dir.join(SECRET_FILE_NAME);
        write_private(&path, self.secret.as_bytes()).map_err(GatewayError::SecretFile)?;
        Ok(path)
    }

    /// The runtime plugin that stamps this gateway's calls, for `RuntimeConfig.plugins` (launch
    /// writes it); the secret file it reads is written into `dir`.
    pub fn plugin(&self, dir: &Path) -> Result<PluginSource, GatewayError> {
        let secret_file = self.write_secret_file(dir)?;
        let key_url = format!("http://{}{STAMP_KEY_PATH}", self.addr);
        let source = plugin::plugin_source(plugin::StampKeyFrom::Gateway { key_url: &key_url, secret_file: &secret_file });
        Ok(PluginSource { file_name: plugin::PLUGIN_FILE_NAME.into(), source })
    }

    /// The plugin for a runtime on another host: its stamp key comes from the guard (see
    /// [`Gateway::register_link`]), never from the gateway.
    pub fn remote_plugin(&self) -> PluginSource {
        PluginSource { file_name: plugin::PLUGIN_FILE_NAME.into(), source: plugin::plugin_source(plugin::StampKeyFrom::Guard) }
    }

    /// The runtime's `mcp` entry on another host: the gateway through the remote end of the link's
    /// reverse forward (`{env:…}` names its port, set at launch), the secret from `secret_file`
    /// there.
    pub fn remote_mcp_entry(&self, port_env: &str, secret_file: &str) -> Value {
        json!({ "type": "remote", "url": format!("http://127.0.0.1:{{env:{port_env}}}{MCP_PATH}"), "headers": { "authorization": format!("Bearer {{file:{secret_file}}}") }, "oauth": false })
    }

    /// The gateway's secret, for a runtime on another host (written into a private file there).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The stamp the plugin writes under [`SESSION_ARG`] for a call made in `session_id`. For a
    /// caller that speaks MCP to the gateway itself (tests, benchmarks); never log it.
    pub fn stamp(&self, session_id: &str) -> String {
        self.core.stamp(session_id)
    }

    /// A runtime on another host reaches the gateway through the ssh link whose local process is
    /// `link_pid`: its calls must be stamped with the key returned (given to that runtime at
    /// launch), and nothing arriving over the link may fetch the local runtimes' key.
    pub fn register_link(&self, link_pid: u32) -> String {
        let key = grants::random_text(core::STAMP_KEY_BYTES);
        self.core.links.write().unwrap().insert(link_pid, key.clone());
        key
    }

    /// The link is gone: its key opens nothing any more.
    pub fn forget_link(&self, link_pid: u32) {
        self.core.links.write().unwrap().remove(&link_pid);
    }

    /// The local loopback address the gateway listens on (for forwards from other hosts).
    pub fn local_port(&self) -> u16 {
        self.addr.port()
    }

    /// A credential for one session of an agent that reaches the gateway itself (ACP): its calls
    /// act for the request running on the session it is bound to ([`Gateway::bind_credential`]).
    pub fn issue_credential(&self) -> crate::runtime::SessionCredential {
        self.core.credentials.issue()
    }

    pub fn bind_credential(&self, credential_id: &str, session_id: &str) {
        self.core.credentials.bind(credential_id, session_id)
    }

    pub fn revoke_credential(&self, credential_id: &str) {
        self.core.credentials.revoke(credential_id)
    }

    /// Session credentials alive now (diagnostics, tests).
    pub fn live_credentials(&self) -> usize {
        self.core.credentials.count()
    }

    /// Issue the capability token for one request. Grant before the run, end with
    /// [`Gateway::request_ended`]. Refused when too many grants are alive.
    pub fn grant(&self, request_id: &str, scope: GrantScope) -> Result<CapabilityToken, GrantError> {
        let servers = scope.custom_servers.clone();
        let token = self.core.grants.grant(request_id, scope)?;
        self.core.freeze(request_id, &servers);
        Ok(token)
    }

    /// Grants alive now (diagnostics, tests).
    pub fn live_grants(&self) -> usize {
        self.core.grants.live_count()
    }

    /// Tie a native session to the request now running on it. `token` must be the one granted
    /// for `request_id`. Call it after the session exists and before the prompt is sent; a
    /// session serves one request at a time, so binding again moves it to the new request.
    pub fn bind_session(&self, session_id: &str, request_id: &str, token: &CapabilityToken) -> Result<(), AuthError> {
        self.core.sessions.bind(&self.core.grants, session_id, request_id, token)
    }

    /// `child` is a session the runtime created under `parent` (a `task` subagent) while
    /// `request_id` runs on `parent`: the child's calls run under that request's grant.
    pub fn bind_child(&self, request_id: &str, parent: &str, child: &str) -> Result<(), AuthError> {
        self.core.sessions.bind_child(&self.core.grants, request_id, parent, child)
    }

    /// The request ended (done, failed or cancelled): revoke its token and unbind its sessions.
    pub fn request_ended(&self, request_id: &str) {
        self.core.grants.revoke(request_id);
        self.core.sessions.unbind_request(request_id);
        self.core.forget(request_id);
    }

    /// Use these custom servers from now on: unchanged running servers keep running, others are
    /// stopped, new ones start in the background (see [`Gateway::custom_server_statuses`]).
    pub async fn set_custom_servers(&self, configs: Vec<CustomServerConfig>) {
        let (mut active, mut off) = (Vec::new(), Vec::new());
        for c in configs {
            let offered = c.enabled && c.assigned_runtimes.iter().any(|r| r == &self.runtime_family);
            if !offered {
                off.push(CustomServerStatus { id: c.id.clone(), name: c.name.clone(), prefix: String::new(), state: ServerState::Disabled });
            } else if active.len() >= MAX_CUSTOM_SERVERS {
                let message = format!("Hearth runs at most {MAX_CUSTOM_SERVERS} custom MCP servers; this one was not started.");
                off.push(CustomServerStatus { id: c.id.clone(), name: c.name.clone(), prefix: String::new(), state: ServerState::Failed { message } });
            } else {
                active.push(c);
            }
        }
        *self.statuses_off.lock().unwrap() = off;
        let old = self.core.servers.read().unwrap().clone();
        let (mut next, mut taken): (Vec<Arc<CustomServer>>, Vec<String>) = (Vec::new(), Vec::new());
        let mut to_start = Vec::new();
        for c in active {
            if let Some(same) = old.iter().find(|s| s.config == c && !matches!(s.status().state, ServerState::Failed { .. } | ServerState::Stopped)) {
                taken.push(same.prefix.clone());
                next.push(same.clone());
                continue;
            }
            let prefix = naming::server_prefix(&c.name, &taken);
            taken.push(prefix.clone());
            let server = CustomServer::new(c, prefix);
            to_start.push(server.clone());
            next.push(server);
        }
        let retired: Vec<_> = old.into_iter().filter(|o| !next.iter().any(|n| Arc::ptr_eq(n, o))).collect();
        *self.core.servers.write().unwrap() = next;
        for s in retired {
            s.shutdown().await;
        }
        let start_timeout = self.core.limits.start_timeout;
        for s in to_start {
            tokio::spawn(async move { s.start(start_timeout).await });
        }
    }

    /// Live state of every configured server, for the UI.
    pub fn custom_server_statuses(&self) -> Vec<CustomServerStatus> {
        let mut all: Vec<_> = self.core.servers.read().unwrap().iter().map(|s| s.status()).collect();
        all.extend(self.statuses_off.lock().unwrap().iter().cloned());
        all
    }

    /// Wait until no server is still starting (or `timeout`); returns the statuses.
    pub async fn wait_until_settled(&self, timeout: Duration) -> Vec<CustomServerStatus> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let statuses = self.custom_server_statuses();
            if !statuses.iter().any(|s| s.state == ServerState::Starting) || tokio::time::Instant::now() >= deadline {
                return statuses;
            }
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }

    /// Pid of a running custom server (diagnostics, tests).
    pub async fn custom_server_pid(&self, id: &str) -> Option<u32> {
        let server = self.core.servers.read().unwrap().iter().find(|s| s.config.id == id).cloned()?;
        server.pid().await
    }

    /// Whether custom server `id` announced a change of its tools that the gateway has not listed
    /// again: lets a caller wait for the announcement itself instead of for a guessed moment.
    pub fn custom_server_announced_tool_change(&self, id: &str) -> bool {
        self.core.servers.read().unwrap().iter().find(|s| s.config.id == id).is_some_and(|s| s.tool_change_announced())
    }

    /// The calls forwarded to custom servers, oldest first (bounded).
    pub fn recorded_calls(&self) -> Vec<ForwardedCall> {
        self.core.log.all()
    }

    /// Stop serving and stop every custom server (whole process groups).
    pub async fn dispose(&self) {
        if let Some(http) = self.http.lock().await.take() {
            http.stop().await;
        }
        let servers = std::mem::take(&mut *self.core.servers.write().unwrap());
        futures::future::join_all(servers.iter().map(|s| s.shutdown())).await;
        tracing::info!("MCP gateway stopped");
    }
}

/// Write `bytes` to `path`, readable and writable by the user only.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(bytes)
}
