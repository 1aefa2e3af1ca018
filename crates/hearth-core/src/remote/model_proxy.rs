//! Model requests of runtimes on other hosts, made from this machine: each host's runtime sends
//! them through its link's reverse forward to this proxy, with a token of its link instead of an
//! API key; the proxy checks the token and the connecting process (the link's own ssh), puts the
//! profile's real key on the request and sends it to the profile's endpoint. API keys never go to
//! a host, and the built-in model, which listens on this machine's loopback only, serves remote
//! runtimes too. Responses stream through as they come (server-sent events included).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, RwLock};

use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use tokio_util::sync::CancellationToken;

use crate::opencode::config::{Authentication, ModelProfile, Protocol, RuntimeConfig};

/// Largest request body forwarded (a prompt with images and a long history).
pub const MAX_BODY_BYTES: usize = 128 * 1024 * 1024;
/// The path prefix a remote runtime's provider base URL points at: `/p/<provider id>`.
pub const PATH_PREFIX: &str = "/p";

/// One profile as the proxy forwards to it.
#[derive(Clone)]
struct Upstream {
    /// What the runtime's provider base URL stands for here (with `/v1` for Anthropic's API).
    base: String,
    protocol: Protocol,
    key: Option<String>,
}

#[derive(Default)]
struct Table {
    upstreams: HashMap<String, Upstream>,
    /// Link tokens and the local ssh process each must come from.
    tokens: HashMap<String, u32>,
}

/// The proxy: one per Hearth, serving every host's runtime.
pub struct ModelProxy {
    addr: SocketAddr,
    table: Arc<RwLock<Table>>,
    stop: CancellationToken,
}

#[derive(Clone)]
struct Shared {
    table: Arc<RwLock<Table>>,
    http: reqwest::Client,
    /// Where the proxy listens (the connection's other end, to find its process).
    addr: SocketAddr,
}

impl ModelProxy {
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let table: Arc<RwLock<Table>> = Arc::default();
        let http = reqwest::Client::builder().no_proxy().build().map_err(std::io::Error::other)?;
        let app = axum::Router::new()
            .route(&format!("{PATH_PREFIX}/{{provider}}/{{*rest}}"), axum::routing::any(forward))
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(Shared { table: table.clone(), http, addr });
        let stop = CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            let served = axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).with_graceful_shutdown(until.cancelled_owned());
            if let Err(e) = served.await {
                tracing::error!(error = %e, "model proxy stopped");
            }
        });
        Ok(Self { addr, table, stop })
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Serve `config`'s profiles (a runtime's configuration is about to be sent to a host).
    pub fn serve_profiles(&self, config: &RuntimeConfig) {
        let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
        for p in &config.profiles {
            table.upstreams.insert(p.provider_id(), upstream(p));
        }
    }

    /// A new token for the link whose local ssh process is `link_pid`.
    pub fn issue_token(&self, link_pid: u32) -> String {
        let token = format!("hearth-link-{}", uuid::Uuid::new_v4().simple());
        self.table.write().unwrap_or_else(|p| p.into_inner()).tokens.insert(token.clone(), link_pid);
        token
    }

    pub fn revoke_token(&self, token: &str) {
        self.table.write().unwrap_or_else(|p| p.into_inner()).tokens.remove(token);
    }

    pub fn shutdown(&self) {
        self.stop.cancel();
    }
}

impl Drop for ModelProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn upstream(p: &ModelProfile) -> Upstream {
    let base = match p.protocol {
        Protocol::OpenAiChatCompletions => p.base_url.trim_end_matches('/').to_string(),
        Protocol::AnthropicMessages => format!("{}/v1", crate::store::anthropic_root(&p.base_url)),
    };
    let key = match &p.authentication {
        Authentication::ApiKey(k) => Some(k.clone()),
        Authentication::None => None,
    };
    Upstream { base, protocol: p.protocol, key }
}

/// A remote runtime's provider entry: its base URL through the link's forward (`{env:…}` names the
/// port), the link's token instead of the key.
pub fn remote_provider_options(provider_id: &str, port_env: &str, token_file: &str) -> serde_json::Value {
    serde_json::json!({ "baseURL": format!("http://127.0.0.1:{{env:{port_env}}}{PATH_PREFIX}/{provider_id}"), "apiKey": format!("{{file:{token_file}}}") })
}

fn presented_token(headers: &HeaderMap) -> Option<String> {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer ")).map(str::to_owned);
    bearer.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::to_owned))
}

/// Headers never passed on: the hop's own, and the credentials the proxy replaces.
const DROPPED: &[&str] = &["host", "authorization", "x-api-key", "content-length", "connection", "transfer-encoding", "accept-encoding"];

async fn forward(State(shared): State<Shared>, ConnectInfo(client): ConnectInfo<SocketAddr>, Path((provider, rest)): Path<(String, String)>, request: Request) -> Response {
    let token = presented_token(request.headers());
    let (upstream, link_pid) = {
        let table = shared.table.read().unwrap_or_else(|p| p.into_inner());
        (table.upstreams.get(&provider).cloned(), token.as_ref().and_then(|t| table.tokens.get(t).copied()))
    };
    let Some(link_pid) = link_pid else {
        return (StatusCode::UNAUTHORIZED, "Hearth's model proxy serves only the runtimes Hearth started on other hosts.").into_response();
    };
    // The token must come over its own link: the ssh process that holds the connection's local end.
    let server = shared.addr;
    let peer = tokio::task::spawn_blocking(move || crate::host::peer::identify(client, server, &[link_pid])).await;
    if !matches!(peer, Ok(Ok(crate::host::peer::Peer::Allowed { .. }))) {
        return (StatusCode::FORBIDDEN, "This link's token came from another process.").into_response();
    }
    let Some(upstream) = upstream else {
        return (StatusCode::NOT_FOUND, format!("Hearth has no model profile {provider} for this runtime.")).into_response();
    };
    let query = request.uri().query().map(|q| format!("?{q}")).unwrap_or_default();
    let url = format!("{}/{rest}{query}", upstream.base);
    let (parts, body) = request.into_parts();
    let mut out = shared.http.request(parts.method, &url);
    for (name, value) in parts.headers.iter().filter(|(n, _)| !DROPPED.contains(&n.as_str())) {
        out = out.header(name, value);
    }
    if let Some(key) = &upstream.key {
        out = match upstream.protocol {
            Protocol::OpenAiChatCompletions => out.bearer_auth(key),
            Protocol::AnthropicMessages => out.header("x-api-key", key),
        };
    }
    let body = reqwest::Body::wrap_stream(body.into_data_stream());
    match out.body(body).send().await {
        Ok(answer) => {
            let mut response = Response::builder().status(answer.status().as_u16());
            for (name, value) in answer.headers() {
                if !DROPPED.contains(&name.as_str()) {
                    response = response.header(HeaderName::from_bytes(name.as_str().as_bytes()).expect("a header name"), value.as_bytes());
                }
            }
            let stream = answer.bytes_stream().map_err(std::io::Error::other);
            response.body(Body::from_stream(stream)).unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
        }
        Err(e) => (StatusCode::BAD_GATEWAY, format!("Hearth could not reach the model endpoint of profile {provider}: {e}")).into_response(),
    }
}
