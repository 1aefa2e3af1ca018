//! The HTTP side: a loopback-only, key-protected endpoint speaking OpenAI chat completions
//! (`/v1/chat/completions`, for OpenCode) and Anthropic Messages (`/v1/messages`, for Claude Code),
//! both answered by the same [`Script`]. Connections are served by tasks this server owns, so
//! shutting down (or dropping) the server ends every one of them.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use bytes::Bytes;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::anthropic;
use super::hold::{HoldHandle, HoldRule, Holds};
use super::record::Recorder;
use super::request::{Api, ObservedRequest};
use super::script::{Reply, Script};
use super::wire::{self, Message};

/// Largest accepted request body. A 32 MiB context corpus, JSON-escaped, can triple in size.
pub const MAX_REQUEST_BODY_BYTES: usize = 128 * 1024 * 1024;
/// The one model this server lists and answers as.
pub const MODEL_ID: &str = "scripted";
/// How long shutdown lets open connections finish before ending them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Bodies larger than this are parsed on the blocking pool, so one huge prompt does not stall the
/// async workers serving other requests.
pub const BLOCKING_PARSE_BYTES: usize = 1024 * 1024;
/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
pub enum ModelServerError {
    #[error("The scripted model server needs a running async runtime.")]
    NoRuntime,
    #[error("The scripted model server could not listen on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
}

struct Shared {
    api_key: String,
    /// Part of every tool-call id: an agent keeps a session's history across a restart of Hearth,
    /// and a new server's ids must never repeat an old one's (Claude Code takes a repeated id for
    /// an interrupted call).
    instance: String,
    script: RwLock<Script>,
    recorder: Recorder,
    holds: Arc<Holds>,
    /// Fired by shutdown: stops accepting, ends holds, closes connections.
    stop: CancellationToken,
}

impl Shared {
    fn script(&self) -> Script {
        self.script.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

/// A running scripted model server. Dropping it stops it too, without waiting.
pub struct ScriptedModelServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl ScriptedModelServer {
    /// Listen on 127.0.0.1 at a free port with a fresh random API key. Must be called inside a
    /// tokio runtime.
    pub fn start(script: Script) -> Result<Self, ModelServerError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| ModelServerError::NoRuntime)?;
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(ModelServerError::Bind)?;
        listener.set_nonblocking(true).map_err(ModelServerError::Bind)?;
        let addr = listener.local_addr().map_err(ModelServerError::Bind)?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener).map_err(ModelServerError::Bind)?
        };
        let shared = Arc::new(Shared {
            api_key: format!("sk-hearth-{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple()),
            instance: uuid::Uuid::new_v4().simple().to_string()[..8].to_string(),
            script: RwLock::new(script),
            recorder: Recorder::default(),
            holds: Arc::default(),
            stop: CancellationToken::new(),
        });
        let task = runtime.spawn(serve(listener, router(shared.clone()), shared.stop.clone()));
        tracing::info!(port = addr.port(), "scripted model server listening");
        Ok(Self { shared, addr, task: Mutex::new(Some(task)) })
    }

    /// The OpenAI base URL, e.g. `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The Anthropic base URL (`ANTHROPIC_BASE_URL`), e.g. `http://127.0.0.1:PORT`: the client adds
    /// `/v1/messages` itself.
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The key every request must carry, as `Authorization: Bearer <key>` or `x-api-key: <key>`.
    pub fn api_key(&self) -> &str {
        &self.shared.api_key
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn model_id(&self) -> &'static str {
        MODEL_ID
    }

    /// Replace the script for requests that arrive (or are released) from now on.
    pub fn set_script(&self, script: Script) {
        *self.shared.script.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = script;
    }

    /// Every recorded request, oldest first (bounded by the `MAX_RECORDED_*` constants).
    pub fn requests(&self) -> Vec<ObservedRequest> {
        self.shared.recorder.all()
    }

    pub fn requests_for_session(&self, session_id: &str) -> Vec<ObservedRequest> {
        self.shared.recorder.for_session(session_id)
    }

    pub fn clear_requests(&self) {
        self.shared.recorder.clear();
    }

    /// Make matching requests wait, before their reply, until the handle is released or dropped.
    pub fn hold(&self, rule: HoldRule) -> HoldHandle {
        self.shared.holds.add(rule)
    }

    /// Stop accepting, end held requests, give open connections [`SHUTDOWN_GRACE`] to finish, then
    /// end them. Idempotent.
    pub async fn shutdown(&self) {
        self.shared.stop.cancel();
        let task = self.task.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
            tracing::info!(port = self.addr.port(), "scripted model server stopped");
        }
    }
}

impl Drop for ScriptedModelServer {
    fn drop(&mut self) {
        self.shared.stop.cancel();
        // Aborting the accept task drops its set of connection tasks, which aborts them all.
        if let Some(task) = self.task.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner()).take() {
            task.abort();
        }
    }
}

impl std::fmt::Debug for ScriptedModelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModelServer").field("addr", &self.addr).finish_non_exhaustive()
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/messages", post(anthropic_messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/models", get(models))
        .fallback(|request: Request| async move { error(api_of(request.uri().path()), Refusal::NotFound, "No such route on the scripted model server.") })
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BODY_BYTES))
        // Outermost: the key is checked before any body is read.
        .layer(middleware::from_fn_with_state(shared.clone(), require_key))
        .with_state(shared)
}

/// Lets a handler end its own connection without answering ([`Reply::Drop`]).
#[derive(Clone)]
struct ConnectionControl(CancellationToken);

async fn serve(listener: TcpListener, router: Router, stop: CancellationToken) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_connection(stream, router.clone(), stop.clone()));
                }
                Err(err) => {
                    tracing::warn!(%err, "scripted model server could not accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async { while connections.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::debug!(open = connections.len(), "scripted model server ending connections after the grace period");
    }
    // Dropping the set aborts whatever is still open.
}

async fn serve_connection(stream: TcpStream, router: Router, stop: CancellationToken) {
    let close = CancellationToken::new();
    let control = ConnectionControl(close.clone());
    let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(control.clone());
        tower_service::Service::call(&mut router.clone(), request)
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(err) = result {
                tracing::debug!(%err, "scripted model connection ended with an error");
            }
        }
        _ = close.cancelled() => tracing::debug!("scripted model dropped a connection as scripted"),
        _ = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// The API a path belongs to, for the shape of its error bodies.
fn api_of(path: &str) -> Api {
    if path.starts_with("/v1/messages") {
        Api::AnthropicMessages
    } else {
        Api::ChatCompletions
    }
}

/// The key as OpenAI clients send it (`Authorization: Bearer`) or Anthropic ones (`x-api-key`).
async fn require_key(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let text = |name| headers.get(name).and_then(|value: &header::HeaderValue| value.to_str().ok());
    let bearer = text(header::AUTHORIZATION.as_str()).and_then(|value| value.strip_prefix("Bearer "));
    let presented = [bearer, text("x-api-key")];
    if !presented.into_iter().flatten().any(|key| same_secret(key.trim().as_bytes(), shared.api_key.as_bytes())) {
        return error(api_of(request.uri().path()), Refusal::Unauthorized, "Missing or wrong API key.");
    }
    next.run(request).await
}

/// Compare without an early exit on the first differing byte.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "hearth"}]}))
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    Extension(connection): Extension<ConnectionControl>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(Api::ChatCompletions, &shared, &connection, &headers, body).await
}

async fn anthropic_messages(
    State(shared): State<Arc<Shared>>,
    Extension(connection): Extension<ConnectionControl>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(Api::AnthropicMessages, &shared, &connection, &headers, body).await
}

/// Not a model call: answered from the body's size, not recorded.
async fn count_tokens(body: Bytes) -> Response {
    Json(anthropic::token_count(body.len())).into_response()
}

/// Record the request, wait out any hold, and answer as the script says, in the request's API.
async fn answer(api: Api, shared: &Shared, connection: &ConnectionControl, headers: &HeaderMap, body: Bytes) -> Response {
    let body_value = match parse_body(body.clone()).await {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => return error(api, Refusal::BadRequest, "The body must be a JSON object."),
        Err(refused) => return error(api, Refusal::BadRequest, &refused.to_string()),
    };
    let session_id = ["x-session-id", "x-session-affinity", "x-claude-code-session-id"].into_iter().find_map(|name| header_text(headers, name));
    let request = shared.recorder.record(api, session_id, body_value, body);
    tracing::debug!(seq = request.seq, ?api, kind = ?request.kind, session = ?request.session_id.as_deref().map(crate::host::logging::log_tag), bytes = request.body_bytes.len(), "scripted model request");

    for hold in shared.holds.active() {
        if !hold.wait(&request, &shared.stop).await {
            return error(api, Refusal::ShuttingDown, "The scripted model server is stopping.");
        }
    }

    let message = match shared.script().reply(&request) {
        Reply::Text(text) => Message::Text(text),
        Reply::ToolCall { name, arguments } => {
            let id = match api {
                Api::ChatCompletions => format!("call_{}_{}", shared.instance, request.seq),
                Api::AnthropicMessages => anthropic::tool_use_id(&shared.instance, request.seq),
            };
            Message::ToolCall { id, name, arguments: arguments.to_string() }
        }
        Reply::Status { code, body } => return status_reply(code, body),
        Reply::PausedText { before, after, gate } => {
            // The first delta, then the rest once the gate opens.
            let (first, rest) = match api {
                Api::ChatCompletions => wire::paused_events(&request, &before, &after, MODEL_ID),
                Api::AnthropicMessages => anthropic::paused_events(&request, &before, &after, MODEL_ID),
            };
            use futures::StreamExt as _;
            let stream = futures::stream::iter(first)
                .chain(futures::stream::once(async move {
                    gate.opened().await;
                    futures::stream::iter(rest)
                })
                .flatten())
                .map(|event| Ok::<_, Infallible>(Bytes::from(event)));
            return event_stream(Body::from_stream(stream));
        }
        Reply::Paced { text, pieces, every } if request.stream => {
            let message = Message::Text(text);
            let events = match api {
                Api::ChatCompletions => wire::stream_events_in(&request, &message, pieces, MODEL_ID),
                Api::AnthropicMessages => anthropic::stream_events_in(&request, &message, pieces, MODEL_ID),
            };
            use futures::StreamExt as _;
            let stream = futures::stream::iter(events).then(move |event| async move {
                tokio::time::sleep(every).await;
                Ok::<_, Infallible>(Bytes::from(event))
            });
            return event_stream(Body::from_stream(stream));
        }
        Reply::Paced { text, .. } => Message::Text(text),
        Reply::Drop => {
            connection.0.cancel();
            // The connection task drops this future along with the connection.
            return std::future::pending().await;
        }
    };
    match (api, request.stream) {
        (Api::ChatCompletions, true) => event_stream(events_body(wire::stream_events(&request, &message, MODEL_ID))),
        (Api::AnthropicMessages, true) => event_stream(events_body(anthropic::stream_events(&request, &message, MODEL_ID))),
        (Api::ChatCompletions, false) => Json(wire::completion(&request, &message, MODEL_ID)).into_response(),
        (Api::AnthropicMessages, false) => Json(anthropic::message_object(&request, &message, MODEL_ID)).into_response(),
    }
}

fn events_body(events: Vec<String>) -> Body {
    Body::from_stream(futures::stream::iter(events.into_iter().map(|event| Ok::<_, Infallible>(Bytes::from(event)))))
}

fn event_stream(body: Body) -> Response {
    ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// Why a request body was refused; its Display is the error message the client gets.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("The body is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("Parsing the body failed: {0}")]
    ParseTask(#[source] tokio::task::JoinError),
}

async fn parse_body(body: Bytes) -> Result<Value, BodyError> {
    let large = body.len() > BLOCKING_PARSE_BYTES;
    let parse = move || serde_json::from_slice::<Value>(&body).map_err(BodyError::NotJson);
    if large {
        tokio::task::spawn_blocking(parse).await.unwrap_or_else(|err| Err(BodyError::ParseTask(err)))
    } else {
        parse()
    }
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|value| value.to_str().ok()).map(str::to_owned).filter(|value| !value.is_empty())
}

fn status_reply(code: u16, body: String) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if serde_json::from_str::<Value>(&body).is_ok() { "application/json" } else { "text/plain; charset=utf-8" };
    (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Why the server refused a request.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    Unauthorized,
    BadRequest,
    NotFound,
    ShuttingDown,
}

impl Refusal {
    fn status(self) -> StatusCode {
        match self {
            Refusal::Unauthorized => StatusCode::UNAUTHORIZED,
            Refusal::BadRequest => StatusCode::BAD_REQUEST,
            Refusal::NotFound => StatusCode::NOT_FOUND,
            Refusal::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The error code each API's clients know for it.
    fn code(self, api: Api) -> &'static str {
        match (api, self) {
            (Api::ChatCompletions, Refusal::Unauthorized) => "invalid_api_key",
            (Api::AnthropicMessages, Refusal::Unauthorized) => "authentication_error",
            (_, Refusal::BadRequest) => "invalid_request_error",
            (Api::ChatCompletions, Refusal::NotFound) => "not_found",
            (Api::AnthropicMessages, Refusal::NotFound) => "not_found_error",
            (Api::ChatCompletions, Refusal::ShuttingDown) => "server_shutdown",
            (Api::AnthropicMessages, Refusal::ShuttingDown) => "overloaded_error",
        }
    }
}

/// An error body shaped as the request's API shapes them.
fn error(api: Api, refusal: Refusal, message: &str) -> Response {
    let code = refusal.code(api);
    let body = match api {
        Api::ChatCompletions => json!({"error": {"message": message, "type": code, "code": code}}),
        Api::AnthropicMessages => anthropic::error_body(code, message),
    };
    (refusal.status(), Json(body)).into_response()
}
