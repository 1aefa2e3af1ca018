//! The protocol over an agent's stdio, through the official SDK (`agent-client-protocol`, v1).
//!
//! Hearth reads the agent's stdout itself and hands the SDK only the lines that are JSON: an agent
//! that prints a banner or a log line on stdout loses nothing, and the line lands in the output
//! tail the failure sentence quotes. The SDK's dispatch loop handles each incoming message in order;
//! Hearth's handlers only route (a session update or permission request goes to the run listening
//! on its session), so every update sent before a prompt's response is routed before that
//! response is seen.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, Implementation, InitializeRequest, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SessionNotification, SessionUpdate,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, Client, JsonRpcNotification, JsonRpcRequest, Lines};
use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::process::AgentPipes;
use crate::host::output_tail::OutputTail;

/// Longest protocol line read from an agent (a replayed history or an image can be large).
pub const MAX_PROTOCOL_LINE_BYTES: usize = 32 * 1024 * 1024;
/// Stdout lines that are not JSON are kept in the tail up to this length each.
const NOISE_LINE_BYTES: usize = 2 * 1024;

/// Why the protocol with an agent failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConnectError {
    #[error("the agent did not answer `{method}` within {} s", .after.as_secs())]
    Timeout { method: String, after: Duration },
    #[error("the agent speaks ACP protocol version {found}, but Hearth speaks version {}", super::PROTOCOL_VERSION)]
    WrongProtocol { found: String },
    #[error("the agent refused `{method}`: {message}")]
    Refused { method: String, message: String },
    #[error("the agent closed its connection during `{method}`")]
    Closed { method: String },
}

/// What the agent said of itself in `initialize`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentInfo {
    pub name: String,
    pub version: String,
    /// It can continue a session after a restart (`session/load`).
    pub load_session: bool,
    /// It accepts image content blocks in prompts.
    pub images: bool,
    /// It connects to MCP servers over HTTP itself (the gateway is handed to it that way).
    pub mcp_http: bool,
}

/// A permission request the agent is waiting on, with the way to answer it.
pub struct PendingPermission {
    pub request: RequestPermissionRequest,
    answer: Option<agent_client_protocol::v1::Responder<RequestPermissionResponse>>,
}

impl PendingPermission {
    /// Answer the agent; `None` cancels the request (the tool call is not run).
    pub fn answer(mut self, option_id: Option<String>) {
        let outcome = match option_id {
            Some(id) => RequestPermissionOutcome::Selected(agent_client_protocol::v1::schema::SelectedPermissionOutcome::new(id)),
            None => RequestPermissionOutcome::Cancelled,
        };
        if let Some(responder) = self.answer.take() {
            if let Err(e) = responder.respond(RequestPermissionResponse::new(outcome)) {
                tracing::debug!(error = %e, "a permission answer could not be sent (the agent is gone)");
            }
        }
    }
}

impl Drop for PendingPermission {
    /// Nobody answered (the run ended first): the agent must not wait for ever.
    fn drop(&mut self) {
        if let Some(responder) = self.answer.take() {
            let _ = responder.respond(RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled));
        }
    }
}

/// What reaches the run listening on a session.
pub enum SessionEvent {
    Update(Box<SessionUpdate>),
    Permission(Box<PendingPermission>),
}

/// Session id → the run listening on it. A message for a session nobody listens to (a history the
/// agent replays while a session loads) is dropped; a permission request there is cancelled.
#[derive(Default)]
struct Routes(Mutex<HashMap<String, mpsc::UnboundedSender<SessionEvent>>>);

impl Routes {
    fn deliver(&self, session: &str, event: SessionEvent) {
        let routes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = routes.get(session) {
            // A closed receiver drops the event, which cancels a permission request.
            let _ = tx.send(event);
        }
    }
}

/// One open protocol connection to an agent process.
pub struct Connection {
    cx: ConnectionTo<Agent>,
    routes: Arc<Routes>,
    pub info: AgentInfo,
    stop: CancellationToken,
}

/// A run's subscription to its session's events; unsubscribes when dropped.
pub struct Subscription {
    pub events: mpsc::UnboundedReceiver<SessionEvent>,
    routes: Arc<Routes>,
    session: String,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.routes.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.session);
    }
}

impl Connection {
    /// Speak the protocol over `pipes`: start the SDK's connection and `initialize` within
    /// `initialize_timeout`. Stdout lines that are not JSON go to `tail`.
    pub async fn open(pipes: AgentPipes, tail: Arc<OutputTail>, initialize_timeout: Duration) -> Result<Self, ConnectError> {
        let routes = Arc::new(Routes::default());
        let stop = CancellationToken::new();
        let (ready_tx, ready_rx) = oneshot::channel();
        let transport = Lines::new(line_sink(pipes.stdin), protocol_lines(pipes.stdout, tail));
        let (to_updates, to_permissions) = (routes.clone(), routes.clone());
        let until = stop.clone();
        tokio::spawn(async move {
            let served = Client
                .v1()
                .name("hearth")
                .on_receive_notification(
                    async move |n: SessionNotification, _cx| {
                        to_updates.deliver(&n.session_id.0, SessionEvent::Update(Box::new(n.update)));
                        Ok(())
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .on_receive_request(
                    async move |request: RequestPermissionRequest, responder, _cx| {
                        let session = request.session_id.0.to_string();
                        to_permissions.deliver(&session, SessionEvent::Permission(Box::new(PendingPermission { request, answer: Some(responder) })));
                        Ok(())
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                    let _ = ready_tx.send(cx.clone());
                    tokio::select! {
                        _ = until.cancelled() => {}
                        _ = cx.incoming_closed() => {}
                    }
                    Ok(())
                })
                .await;
            if let Err(e) = served {
                tracing::debug!(error = %e, "agent connection ended");
            }
        });
        let cx = ready_rx.await.map_err(|_| ConnectError::Closed { method: "initialize".into() })?;
        let request = InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(ClientCapabilities::new())
            .client_info(Implementation::new("hearth", env!("CARGO_PKG_VERSION")));
        let answer = match call(&cx, request, initialize_timeout).await {
            Ok(a) => a,
            Err(e) => {
                stop.cancel();
                return Err(e);
            }
        };
        if answer.protocol_version != ProtocolVersion::V1 {
            stop.cancel();
            let found = serde_json::to_string(&answer.protocol_version).unwrap_or_else(|_| "unknown".into());
            return Err(ConnectError::WrongProtocol { found });
        }
        let caps = &answer.agent_capabilities;
        let agent = answer.agent_info.as_ref();
        let info = AgentInfo {
            name: agent.map(|a| a.title.clone().unwrap_or_else(|| a.name.clone())).unwrap_or_default(),
            version: agent.map(|a| a.version.clone()).unwrap_or_default(),
            load_session: caps.load_session,
            images: caps.prompt_capabilities.image,
            mcp_http: caps.mcp_capabilities.http,
        };
        tracing::info!(agent = %info.name, version = %info.version, load_session = info.load_session, images = info.images, mcp_http = info.mcp_http, "agent initialized");
        Ok(Self { cx, routes, info, stop })
    }

    /// Send `request` and wait at most `timeout` for its answer.
    pub async fn call<R: JsonRpcRequest>(&self, request: R, timeout: Duration) -> Result<R::Response, ConnectError>
    where
        R::Response: Send + 'static,
    {
        call(&self.cx, request, timeout).await
    }

    /// Send `request` and wait for its answer with no bound (a prompt runs as long as the model
    /// does; the run bounds it by its own rules).
    pub async fn call_unbounded<R: JsonRpcRequest>(&self, request: R) -> Result<R::Response, ConnectError>
    where
        R::Response: Send + 'static,
    {
        let method = method_name(&request);
        self.cx.send_request(request).block_task().await.map_err(|e| refused(method, e))
    }

    pub fn notify<N: JsonRpcNotification>(&self, notification: N) {
        if let Err(e) = self.cx.send_notification(notification) {
            tracing::debug!(error = %e, "a notification to the agent could not be sent");
        }
    }

    /// Listen to `session`'s updates and permission requests (one listener per session).
    pub fn subscribe(&self, session: &str) -> Subscription {
        let (tx, events) = mpsc::unbounded_channel();
        self.routes.0.lock().unwrap_or_else(|p| p.into_inner()).insert(session.to_string(), tx);
        Subscription { events, routes: self.routes.clone(), session: session.to_string() }
    }

    /// End the connection (the process is stopped by its owner).
    pub fn close(&self) {
        self.stop.cancel();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn method_name<R: JsonRpcRequest>(request: &R) -> String {
    request.method().to_string()
}

fn refused(method: String, e: agent_client_protocol::Error) -> ConnectError {
    if agent_client_protocol::is_incoming_transport_closed(&e) || agent_client_protocol::is_connection_terminated(&e) {
        ConnectError::Closed { method }
    } else {
        // The SDK's own refusals say what was wrong in `data` ("unsupported ACP protocol version 99…").
        let detail = match &e.data {
            Some(serde_json::Value::String(s)) => format!("{} ({s})", e.message),
            _ => e.message.clone(),
        };
        ConnectError::Refused { method, message: detail }
    }
}

async fn call<R: JsonRpcRequest>(cx: &ConnectionTo<Agent>, request: R, timeout: Duration) -> Result<R::Response, ConnectError>
where
    R::Response: Send + 'static,
{
    let method = method_name(&request);
    match tokio::time::timeout(timeout, cx.send_request(request).block_task()).await {
        Ok(answer) => answer.map_err(|e| refused(method, e)),
        Err(_) => Err(ConnectError::Timeout { method, after: timeout }),
    }
}

/// Lines written to the agent's stdin, each ended by a newline.
fn line_sink(stdin: tokio::process::ChildStdin) -> impl futures::Sink<String, Error = std::io::Error> + Send + 'static {
    futures::sink::unfold(stdin, |mut stdin, line: String| async move {
        stdin.write_all(line.as_bytes()).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await?;
        Ok::<_, std::io::Error>(stdin)
    })
}

/// The agent's stdout as protocol lines: JSON objects pass, anything else goes to `tail`.
fn protocol_lines(stdout: tokio::process::ChildStdout, tail: Arc<OutputTail>) -> impl futures::Stream<Item = std::io::Result<String>> + Send + 'static {
    use tokio::io::AsyncReadExt as _;
    let reader = BufReader::new(stdout);
    futures::stream::unfold((reader, tail), |(mut reader, tail)| async move {
        loop {
            let mut line = Vec::new();
            match (&mut reader).take(MAX_PROTOCOL_LINE_BYTES as u64).read_until(b'\n', &mut line).await {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some((Err(e), (reader, tail))),
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            if text.starts_with('{') {
                return Some((Ok(text.to_string()), (reader, tail)));
            }
            let cut: String = text.chars().take(NOISE_LINE_BYTES).collect();
            tail.push_line(&format!("stdout: {cut}"));
        }
    })
    .boxed()
}
