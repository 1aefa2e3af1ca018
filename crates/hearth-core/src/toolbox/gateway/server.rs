//! The gateway's MCP endpoint: streamable HTTP (rmcp) on loopback, behind the gateway secret.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::core::Core;
use super::grants::{constant_time_eq, token_tag};

/// Path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";
/// Largest request body accepted (tool arguments come from a model; they are small).
pub const MAX_REQUEST_BODY_BYTES: usize = 4 * 1024 * 1024;
/// On dispose, how long open streams get to close before the server task is ended.
pub const HTTP_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// The sentence sent with a 401.
pub const UNAUTHORIZED_SENTENCE: &str = "Hearth's MCP gateway serves only the runtime Hearth started; this request did not carry its secret.";

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

    async fn call_tool(&self, request: CallToolRequestParams, _context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        Ok(self.core.call(request).await.into())
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

/// Listen on 127.0.0.1 (a free port) and serve the core behind `secret`.
pub(super) async fn serve(core: Arc<Core>, secret: &str) -> std::io::Result<HttpServer> {
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
    let service = StreamableHttpService::new(move || Ok(Handler { core: core.clone() }), Arc::new(LocalSessionManager::default()), config);
    let expected: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
    let app = axum::Router::new()
        .route_service(MCP_PATH, service)
        .layer(middleware::from_fn(move |request: Request, next: Next| async move { authorize(expected, request, next).await }));
    let shutdown = cancel.clone();
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await {
            tracing::error!(error = %e, "gateway HTTP server stopped");
        }
    });
    tracing::info!(%addr, "MCP gateway listening");
    Ok(HttpServer { addr, cancel, task })
}

/// 401 unless `Authorization: Bearer <secret>` (compared as hashes, in constant time).
async fn authorize(expected: [u8; 32], request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.get(..7).filter(|p| p.eq_ignore_ascii_case("bearer ")).map(|_| v[7..].trim()));
    match presented {
        Some(secret) if constant_time_eq(&Sha256::digest(secret.as_bytes()), &expected) => next.run(request).await,
        other => {
            tracing::warn!(presented = %other.map(token_tag).unwrap_or_else(|| "none".into()), "gateway request without its secret refused");
            (StatusCode::UNAUTHORIZED, UNAUTHORIZED_SENTENCE).into_response()
        }
    }
}
