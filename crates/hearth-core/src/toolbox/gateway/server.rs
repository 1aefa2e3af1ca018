//! The gateway's MCP endpoint: streamable HTTP (rmcp) on loopback, behind the gateway secret, for
//! the runtime's own process only.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{Extension, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::IncomingStream;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::callers::AllowedCallers;
use super::core::{CallerPid, Core};
use super::credentials::{Claim, CredentialSession};
use super::grants::{constant_time_eq, token_tag};
use crate::host::peer::Peer;

/// Path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";
/// Where the runtime's plugin fetches the key it stamps calls with (POST, same guard as MCP).
pub const STAMP_KEY_PATH: &str = "/stamp-key";
/// Largest request body accepted (tool arguments come from a model; they are small).
pub const MAX_REQUEST_BODY_BYTES: usize = 4 * 1024 * 1024;
/// On dispose, how long open streams get to close before the server task is ended.
pub const HTTP_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// The sentence sent with a 401.
pub const UNAUTHORIZED_SENTENCE: &str = "Hearth's MCP gateway serves only the runtime Hearth started; this request did not carry its secret.";
/// The sentence sent with a 403: the secret was right, the process was not.
pub const FORBIDDEN_SENTENCE: &str = "Hearth's MCP gateway serves only the runtime process Hearth started; this connection came from another process (a tool the agent ran is not the runtime), so it was refused.";

/// One MCP session's handler; all share the gateway's core.
#[derive(Clone)]
pub(super) struct Handler {
    pub core: Arc<Core>,
}

impl ServerHandler for Handler {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hearth-gateway", env!("CARGO_PKG_VERSION")))
            .with_instructions("Hearth's tools: knowledge libraries and MCP servers the user attached to this conversation.")
    }

    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, _context: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.core.tool_list().await))
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        // The HTTP layer put the session a session credential named on the request (see `authorize`).
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let credential = parts.and_then(|parts| parts.extensions.get::<CredentialSession>().cloned());
        let caller = parts.and_then(|parts| parts.extensions.get::<CallerPid>().copied());
        Ok(self.core.call(request, credential, caller).await.into())
    }
}

pub(super) struct HttpServer {
    pub addr: SocketAddr,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    pub async fn stop(self) {
        self.cancel.cancel();
        let mut task = self.task;
        if tokio::time::timeout(HTTP_SHUTDOWN_GRACE, &mut task).await.is_err() {
            task.abort();
        }
    }
}

/// What every request must pass: the gateway secret, from a connection the runtime holds.
struct Guard {
    core: Arc<Core>,
    secret_hash: [u8; 32],
    callers: AllowedCallers,
    addr: SocketAddr,
}

/// One accepted connection: its client address, and the process found holding it (looked up on
/// the connection's first request, then kept: a socket does not change hands by itself).
#[derive(Clone)]
struct Connection {
    client: SocketAddr,
    verified: Arc<OnceLock<u32>>,
}

impl Connected<IncomingStream<'_, tokio::net::TcpListener>> for Connection {
    fn connect_info(stream: IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        Connection { client: *stream.remote_addr(), verified: Arc::default() }
    }
}

/// Listen on 127.0.0.1 (a free port) and serve the core behind `secret`, to `callers` only. The
/// plugin in the runtime fetches `stamp_key` from [`STAMP_KEY_PATH`].
pub(super) async fn serve(core: Arc<Core>, secret: &str, callers: AllowedCallers, stamp_key: String) -> std::io::Result<HttpServer> {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let cancel = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(cancel.child_token())
        .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
        // Stateless, plain JSON answers: no MCP session to keep, no SSE framing per call. The
        // gateway's state lives in its grants, not in MCP sessions.
        .with_legacy_session_mode(false)
        .with_json_response(true);
    let guard_core = core.clone();
    let stamp_core = core.clone();
    let service = StreamableHttpService::new(move || Ok(Handler { core: core.clone() }), Arc::new(LocalSessionManager::default()), config);
    let guard = Arc::new(Guard { core: guard_core, secret_hash: Sha256::digest(secret.as_bytes()).into(), callers, addr });
    let app = axum::Router::new()
        .route_service(MCP_PATH, service)
        .route(STAMP_KEY_PATH, post(move |Extension(CallerPid(pid)): Extension<CallerPid>| async move {
            // A runtime on another host got its own key at launch: nothing on that host may fetch one.
            if stamp_core.is_link(pid) {
                return (StatusCode::FORBIDDEN, FORBIDDEN_SENTENCE).into_response();
            }
            stamp_key.into_response()
        }))
        .layer(middleware::from_fn_with_state(guard, authorize));
    let shutdown = cancel.clone();
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app.into_make_service_with_connect_info::<Connection>()).with_graceful_shutdown(shutdown.cancelled_owned());
        if let Err(e) = served.await {
            tracing::error!(error = %e, "gateway HTTP server stopped");
        }
    });
    tracing::info!(%addr, "MCP gateway listening");
    Ok(HttpServer { addr, cancel, task })
}

/// 401 unless `Authorization: Bearer <secret>` (compared as hashes, in constant time) or a session
/// credential (which the request then carries to the tool call); 403 unless the connection's
/// client socket is held by an allowed process.
async fn authorize(State(guard): State<Arc<Guard>>, ConnectInfo(connection): ConnectInfo<Connection>, mut request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.get(..7).filter(|p| p.eq_ignore_ascii_case("bearer ")).map(|_| v[7..].trim().to_string()));
    let credential = presented.as_deref().and_then(|p| guard.core.credentials.session_of(p));
    match presented.as_deref() {
        Some(secret) if constant_time_eq(&Sha256::digest(secret.as_bytes()), &guard.secret_hash) => {}
        Some(_) if credential.is_some() => {}
        other => {
            tracing::warn!(presented = %other.map(token_tag).unwrap_or_else(|| "none".into()), "gateway request without its secret refused");
            return (StatusCode::UNAUTHORIZED, UNAUTHORIZED_SENTENCE).into_response();
        }
    }
    if connection.verified.get().is_none() {
        let (client, addr, callers) = (connection.client, guard.addr, guard.callers.clone());
        let found = tokio::task::spawn_blocking(move || callers.identify(client, addr)).await;
        match found {
            Ok(Ok(Peer::Allowed { pid })) => {
                tracing::debug!(%client, pid, "gateway connection from the runtime's process");
                let _ = connection.verified.set(pid);
            }
            Ok(Ok(other)) => {
                tracing::warn!(%client, peer = ?other, "gateway request from a process other than the runtime refused");
                return (StatusCode::FORBIDDEN, FORBIDDEN_SENTENCE).into_response();
            }
            Ok(Err(e)) => {
                tracing::warn!(%client, error = %e, "gateway request refused: its process could not be checked");
                return (StatusCode::FORBIDDEN, FORBIDDEN_SENTENCE).into_response();
            }
            Err(e) => {
                tracing::warn!(%client, error = %e, "gateway request refused: the process check stopped");
                return (StatusCode::FORBIDDEN, FORBIDDEN_SENTENCE).into_response();
            }
        }
    }
    let pid = *connection.verified.get().expect("verified above");
    request.extensions_mut().insert(CallerPid(pid));
    if credential.is_some() {
        match guard.core.credentials.claim(presented.as_deref().unwrap_or_default(), pid) {
            Claim::Session(session) => {
                request.extensions_mut().insert(session);
            }
            Claim::HeldByAnother => {
                tracing::warn!(pid, "a session credential presented by a second process refused");
                return (StatusCode::FORBIDDEN, FORBIDDEN_SENTENCE).into_response();
            }
            Claim::Unknown => return (StatusCode::UNAUTHORIZED, UNAUTHORIZED_SENTENCE).into_response(),
        }
    }
    next.run(request).await
}
