//! User-configured stdio MCP servers, started and spoken to by the gateway (rmcp client over the
//! child's stdio), re-exposed under a short prefix.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, JsonObject, Tool};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use tokio::io::AsyncReadExt;
use tokio::process::Child;

use super::naming::exposed_tool_name;
use super::spawn;
use super::truncate::truncate_with_notice;

/// Most custom servers the gateway runs.
pub const MAX_CUSTOM_SERVERS: usize = 16;
/// Most tools exposed per server (more are left out, and the status says so).
pub const MAX_TOOLS_PER_SERVER: usize = 64;
/// Time for a server to start and answer `initialize` and `tools/list`.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Time one tool call may take before it is stopped with an error.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// After a failed handshake, how long to wait for the process to exit and its stderr to end.
pub const EXIT_NOTICE_WAIT: Duration = Duration::from_millis(300);
/// Bytes at the start of a server's stdout checked for non-MCP output.
pub const STDOUT_PEEK_BYTES: usize = 4096;
/// Bytes of a server's standard error kept to explain a failure.
pub const STDERR_TAIL_BYTES: usize = 2048;

/// One server as the user configured it. `env` values are secrets: Debug shows only the keys, and
/// serialisation (to the UI) sends only the keys.
#[derive(Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomServerConfig {
    pub id: String,
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    #[serde(rename = "envKeys", serialize_with = "keys_only")]
    pub env: BTreeMap<String, String>,
    pub enabled: bool,
    /// Runtime families this server is offered to (e.g. `opencode`).
    pub assigned_runtimes: Vec<String>,
    /// Re-read the tool list when the server says it changed; otherwise the list is frozen.
    pub allow_dynamic_tools: bool,
}

fn keys_only<S: serde::Serializer>(env: &BTreeMap<String, String>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(env.keys())
}

impl fmt::Debug for CustomServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustomServerConfig")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env_keys", &self.env.keys().collect::<Vec<_>>())
            .field("enabled", &self.enabled)
            .field("assigned_runtimes", &self.assigned_runtimes)
            .field("allow_dynamic_tools", &self.allow_dynamic_tools)
            .finish()
    }
}

/// Why a custom server could not start or a call to it failed. The sentence is what the user (in
/// the Tools view) and the model (as the tool's error) read; `stderr` is the server's last output.
#[derive(Debug, thiserror::Error)]
pub enum CustomServerError {
    #[error("The command `{0}` was not found; check the server's command in its settings.")]
    CommandNotFound(String),
    #[error("The command `{0}` is not executable.")]
    NotExecutable(String),
    #[error("Hearth could not start `{command}`: {source}.")]
    Spawn { command: String, source: std::io::Error },
    #[error("The server's standard input and output could not be opened.")]
    NoStdio,
    #[error("The server does not speak MCP on its standard output: it wrote «{line}».{stderr}")]
    NotMcp { line: String, stderr: String },
    #[error("The server exited at once ({status}) before answering.{stderr}")]
    ExitedAtOnce { status: std::process::ExitStatus, stderr: String },
    #[error("The server did not speak MCP on its standard output ({detail}).{stderr}")]
    Handshake { detail: String, stderr: String },
    #[error("The server started but could not list its tools: {0}.")]
    ListTools(String),
    #[error("The server {0} is not running.")]
    NotRunning(String),
    #[error("The tool {tool} of {server} did not answer within {seconds} s; the call was stopped.")]
    CallTimedOut { tool: String, server: String, seconds: f32 },
    #[error("The tool {tool} of {server} failed: {detail}.")]
    CallFailed { tool: String, server: String, detail: String },
}

/// Live state of one server, for the UI.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum ServerState {
    /// Switched off, or not assigned to this runtime.
    Disabled,
    Starting,
    #[serde(rename_all = "camelCase")]
    Ready { tools: Vec<String>, note: Option<String> },
    #[serde(rename_all = "camelCase")]
    Failed { message: String },
    Stopped,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct CustomServerStatus {
    pub id: String,
    pub name: String,
    /// Tools reach the model as `hearth_<prefix>_<tool>`.
    pub prefix: String,
    pub state: ServerState,
}

/// Marks the tool list stale when the server announces a change.
#[derive(Clone, Default)]
struct Listener {
    stale: Arc<AtomicBool>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::SeqCst);
    }
}

struct Connection {
    service: RunningService<RoleClient, Listener>,
    child: Child,
}

/// A started (or failed) custom server.
pub struct CustomServer {
    pub config: CustomServerConfig,
    pub prefix: String,
    state: Mutex<ServerState>,
    tools: Mutex<Vec<Tool>>,
    peer: Mutex<Option<Peer<RoleClient>>>,
    connection: tokio::sync::Mutex<Option<Connection>>,
    listener: Listener,
    stderr: Arc<Mutex<String>>,
}

impl CustomServer {
    pub fn new(config: CustomServerConfig, prefix: String) -> Arc<Self> {
        Arc::new(Self {
            config,
            prefix,
            state: Mutex::new(ServerState::Starting),
            tools: Mutex::new(Vec::new()),
            peer: Mutex::new(None),
            connection: tokio::sync::Mutex::new(None),
            listener: Listener::default(),
            stderr: Arc::default(),
        })
    }

    pub fn status(&self) -> CustomServerStatus {
        CustomServerStatus { id: self.config.id.clone(), name: self.config.name.clone(), prefix: self.prefix.clone(), state: self.state.lock().unwrap().clone() }
    }

    /// Whether the server announced a new tool list not yet listed again (a server not allowed
    /// dynamic tools keeps announcing into the void: its list stays frozen).
    pub fn tool_change_announced(&self) -> bool {
        self.listener.stale.load(Ordering::SeqCst)
    }

    pub fn is_ready(&self) -> bool {
        matches!(*self.state.lock().unwrap(), ServerState::Ready { .. })
    }

    /// Upstream tools (original names), as last listed.
    pub fn tools(&self) -> Vec<Tool> {
        self.tools.lock().unwrap().clone()
    }

    /// (exposed name, upstream name) of every tool.
    pub fn tool_names(&self) -> Vec<(String, String)> {
        self.tools.lock().unwrap().iter().map(|t| (exposed_tool_name(&self.prefix, &t.name), t.name.to_string())).collect()
    }

    fn fail(&self, message: String) {
        tracing::warn!(server = %self.config.id, %message, "custom MCP server failed");
        *self.state.lock().unwrap() = ServerState::Failed { message };
    }

    /// Start the process, speak `initialize`, list the tools. The outcome is the server's state.
    pub async fn start(self: &Arc<Self>, start_timeout: Duration) {
        match tokio::time::timeout(start_timeout, self.connect()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                self.shutdown().await;
                self.fail(error.to_string());
            }
            Err(_) => {
                self.shutdown().await;
                self.fail(format!("The server did not finish starting within {} s.{}", start_timeout.as_secs(), self.stderr_note()));
            }
        }
    }

    fn stderr_note(&self) -> String {
        let tail = self.stderr.lock().unwrap().trim().to_string();
        if tail.is_empty() {
            String::new()
        } else {
            format!(" Its last output: {tail}")
        }
    }

    async fn connect(self: &Arc<Self>) -> Result<(), CustomServerError> {
        let c = &self.config;
        let cmd = spawn::server_command(&c.command, &c.args, c.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let mut child = spawn::spawn(cmd).await.map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CustomServerError::CommandNotFound(c.command.clone()),
            std::io::ErrorKind::PermissionDenied => CustomServerError::NotExecutable(c.command.clone()),
            _ => CustomServerError::Spawn { command: c.command.clone(), source: e },
        })?;
        let (Some(stdout), Some(stdin), Some(stderr)) = (child.stdout.take(), child.stdin.take(), child.stderr.take()) else {
            return Err(CustomServerError::NoStdio);
        };
        let mut stderr_done = tokio::spawn(keep_tail(stderr, self.stderr.clone()));
        let (stdout, garbage) = Tap::new(stdout);
        let handshake = async {
            tokio::select! {
                served = self.listener.clone().serve((stdout, stdin)) => served.map_err(|e| (false, e.to_string())),
                line = garbage.first() => Err((true, line)),
            }
        };
        let service = match handshake.await {
            Ok(s) => s,
            Err((spoke_garbage, detail)) => {
                // Give a dying process a moment, so the message can say it exited.
                let exited = tokio::time::timeout(EXIT_NOTICE_WAIT, child.wait()).await;
                // Its last words, if it is gone (its stderr then ends).
                let _ = tokio::time::timeout(EXIT_NOTICE_WAIT, &mut stderr_done).await;
                spawn::stop_group(&mut child).await;
                let stderr = self.stderr_note();
                return Err(match exited {
                    _ if spoke_garbage => CustomServerError::NotMcp { line: detail, stderr },
                    Ok(Ok(status)) => CustomServerError::ExitedAtOnce { status, stderr },
                    _ => CustomServerError::Handshake { detail, stderr },
                });
            }
        };
        let peer = service.peer().clone();
        *self.connection.lock().await = Some(Connection { service, child });
        *self.peer.lock().unwrap() = Some(peer.clone());
        self.list_tools(&peer).await?;
        Ok(())
    }

    async fn list_tools(&self, peer: &Peer<RoleClient>) -> Result<(), CustomServerError> {
        let mut tools = peer.list_all_tools().await.map_err(|e| CustomServerError::ListTools(e.to_string()))?;
        let total = tools.len();
        tools.truncate(MAX_TOOLS_PER_SERVER);
        let note = (total > MAX_TOOLS_PER_SERVER).then(|| format!("The server offers {total} tools; Hearth exposes the first {MAX_TOOLS_PER_SERVER}."));
        let names = tools.iter().map(|t| t.name.to_string()).collect();
        *self.tools.lock().unwrap() = tools;
        *self.state.lock().unwrap() = ServerState::Ready { tools: names, note };
        Ok(())
    }

    /// For servers allowed dynamic tools: re-list after the server announced a change.
    pub async fn refresh_if_stale(&self, timeout: Duration) {
        if !self.config.allow_dynamic_tools || !self.listener.stale.swap(false, Ordering::SeqCst) {
            return;
        }
        let peer = self.peer.lock().unwrap().clone();
        if let Some(peer) = peer {
            match tokio::time::timeout(timeout, self.list_tools(&peer)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(server = %self.config.id, error = %e, "tool list refresh failed"),
                Err(_) => tracing::warn!(server = %self.config.id, "tool list refresh timed out"),
            }
        }
    }

    /// Forward one call; the result is bounded to `max_bytes`, and the call to `timeout`.
    pub async fn call(&self, tool: &str, args: JsonObject, timeout: Duration, max_bytes: usize) -> Result<CallToolResult, CustomServerError> {
        let peer = self.peer.lock().unwrap().clone().ok_or_else(|| CustomServerError::NotRunning(self.config.name.clone()))?;
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        // Dropping the call future on timeout cancels the request at the server.
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => Err(CustomServerError::CallTimedOut { tool: tool.to_string(), server: self.config.name.clone(), seconds: timeout.as_secs_f32() }),
            Ok(Err(e)) => {
                if peer.is_transport_closed() {
                    self.fail(format!("The server stopped while Hearth was using it.{}", self.stderr_note()));
                }
                Err(CustomServerError::CallFailed { tool: tool.to_string(), server: self.config.name.clone(), detail: e.to_string() })
            }
            Ok(Ok(result)) => Ok(bound_result(result, max_bytes)),
        }
    }

    /// Stop the process group and forget the connection.
    pub async fn shutdown(&self) {
        self.peer.lock().unwrap().take();
        let conn = self.connection.lock().await.take();
        if let Some(Connection { service, mut child }) = conn {
            let _ = service.cancel().await;
            spawn::stop_group(&mut child).await;
        }
        let mut state = self.state.lock().unwrap();
        if !matches!(*state, ServerState::Failed { .. }) {
            *state = ServerState::Stopped;
        }
    }

    /// Pid of the running server (for tests and diagnostics).
    pub async fn pid(&self) -> Option<u32> {
        self.connection.lock().await.as_ref().and_then(|c| c.child.id())
    }
}

/// Watches the first bytes a server writes: a line that is not a JSON message means the server
/// does not speak MCP on stdout, and the handshake can fail at once instead of at its timeout.
struct Tap {
    inner: tokio::process::ChildStdout,
    line: Vec<u8>,
    looked: usize,
    garbage: Arc<GarbageSignal>,
}

#[derive(Default)]
struct GarbageSignal {
    line: Mutex<Option<String>>,
    notify: tokio::sync::Notify,
}

impl GarbageSignal {
    async fn first(&self) -> String {
        loop {
            let notified = self.notify.notified();
            if let Some(l) = self.line.lock().unwrap().clone() {
                return l;
            }
            notified.await;
        }
    }
}

impl Tap {
    fn new(inner: tokio::process::ChildStdout) -> (Self, Arc<GarbageSignal>) {
        let garbage = Arc::new(GarbageSignal::default());
        (Self { inner, line: Vec::new(), looked: 0, garbage: garbage.clone() }, garbage)
    }

    fn look(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.looked >= STDOUT_PEEK_BYTES {
                return;
            }
            self.looked += 1;
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            let line = String::from_utf8_lossy(&self.line).trim().to_string();
            self.line.clear();
            if !line.is_empty() && !line.starts_with('{') {
                let mut slot = self.garbage.line.lock().unwrap();
                if slot.is_none() {
                    *slot = Some(line.chars().take(200).collect());
                    self.garbage.notify.notify_waiters();
                }
            }
        }
    }
}

impl tokio::io::AsyncRead for Tap {
    fn poll_read(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if self.looked < STDOUT_PEEK_BYTES {
            let fresh = buf.filled()[before..].to_vec();
            self.look(&fresh);
        }
        poll
    }
}

async fn keep_tail(mut stderr: tokio::process::ChildStderr, tail: Arc<Mutex<String>>) {
    let mut buf = [0u8; 1024];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut t = tail.lock().unwrap();
        t.push_str(&String::from_utf8_lossy(&buf[..n]));
        if t.len() > STDERR_TAIL_BYTES {
            let mut cut = t.len() - STDERR_TAIL_BYTES;
            while !t.is_char_boundary(cut) {
                cut += 1;
            }
            t.drain(..cut);
        }
    }
}

/// Keep a result within `max_bytes` of text: long text is cut with a notice, large non-text
/// blocks are replaced by a notice, and structured content over the bound is dropped.
pub fn bound_result(mut result: CallToolResult, max_bytes: usize) -> CallToolResult {
    let mut left = max_bytes;
    let mut out = Vec::with_capacity(result.content.len());
    for block in result.content.drain(..) {
        match block {
            ContentBlock::Text(mut t) => {
                if t.text.len() > left {
                    t.text = truncate_with_notice(&t.text, left);
                    left = 0;
                } else {
                    left -= t.text.len();
                }
                out.push(ContentBlock::Text(t));
            }
            other => {
                let size = serde_json::to_string(&other).map_or(usize::MAX, |s| s.len());
                if size > left {
                    out.push(ContentBlock::text(format!("[Hearth left out a {size}-byte item of this result: the limit is {max_bytes} bytes.]")));
                    left = 0;
                } else {
                    left -= size;
                    out.push(other);
                }
            }
        }
    }
    result.content = out;
    if let Some(s) = &result.structured_content {
        if serde_json::to_string(s).map_or(true, |s| s.len() > max_bytes) {
            result.structured_content = None;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_stay_out_of_debug_and_serialisation() {
        let c = CustomServerConfig {
            id: "s1".into(),
            name: "S".into(),
            command: "x".into(),
            args: vec![],
            env: BTreeMap::from([("API_KEY".to_string(), "sk-very-secret".to_string())]),
            enabled: true,
            assigned_runtimes: vec!["opencode".into()],
            allow_dynamic_tools: false,
        };
        let shown = format!("{c:?} {}", serde_json::to_string(&c).unwrap());
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(shown.contains("API_KEY"));
    }

    #[test]
    fn results_are_bounded_with_a_notice() {
        let r = CallToolResult::success(vec![ContentBlock::text("a".repeat(1000)), ContentBlock::text("b".repeat(10))]);
        let out = bound_result(r, 100);
        let first = &out.content[0].as_text().unwrap().text;
        assert!(first.starts_with(&"a".repeat(100)) && first.contains("Hearth truncated this result: 100 of 1000 bytes"), "{first}");
        assert_eq!(out.content[1].as_text().unwrap().text, truncate_with_notice(&"b".repeat(10), 0));
        let small = bound_result(CallToolResult::success(vec![ContentBlock::text("ok")]), 100);
        assert_eq!(small.content[0].as_text().unwrap().text, "ok");
    }
}
