//! The runtime's HTTP API, one method per route Hearth uses. Every call names the directory it is
//! for (`?directory=`), which is how one process serves many projects.

use std::time::Duration;

use serde_json::{json, Value};

use super::launch::USERNAME;

/// Time for one ordinary API call. Prompts are asynchronous (`prompt_async`), so nothing here waits
/// for a model; `summarize` blocks until compaction ends and gets its own bound.
pub const API_TIMEOUT: Duration = Duration::from_secs(30);
pub const SUMMARIZE_TIMEOUT: Duration = Duration::from_secs(600);
/// Largest response body read from the runtime (a long session's message list).
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ApiError {
    #[error("could not reach the runtime: {0}")]
    Transport(String),
    #[error("the runtime answered {status} to {route}: {body}")]
    Status { route: String, status: u16, body: String },
    #[error("the runtime sent an unreadable answer to {route}: {detail}")]
    Decode { route: String, detail: String },
}

/// `text` with the native session id of `route` (`/session/<id>/…`) replaced by its log tag:
/// errors reach logs and the window, and a session id is what a call to the gateway is stamped with.
fn redact_session(route: &str, text: &str) -> String {
    match route.strip_prefix("/session/").map(|r| r.split('/').next().unwrap_or(r)).filter(|id| !id.is_empty()) {
        Some(id) => text.replace(id, &format!("ses#{}", crate::host::logging::log_tag(id))),
        None => text.to_string(),
    }
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    password: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("base", &self.base).finish_non_exhaustive()
    }
}

impl Client {
    pub fn new(base: &str, password: &str) -> Self {
        let http = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .expect("reqwest client");
        Self { http, base: base.trim_end_matches('/').into(), password: password.into() }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// A request with auth, the directory routing parameter and a timeout.
    pub fn request(&self, method: reqwest::Method, route: &str, directory: Option<&str>) -> reqwest::RequestBuilder {
        let mut rb = self.http.request(method, format!("{}{}", self.base, route)).basic_auth(USERNAME, Some(&self.password));
        if let Some(d) = directory {
            rb = rb.query(&[("directory", d)]);
        }
        rb.timeout(API_TIMEOUT)
    }

    /// Send a request built with [`Client::request`] and decode its JSON answer (routes without a
    /// method of their own, e.g. for diagnostics).
    pub async fn send(&self, route: &str, rb: reqwest::RequestBuilder) -> Result<Value, ApiError> {
        let shown = |text: &str| redact_session(route, text);
        let resp = rb.send().await.map_err(|e| ApiError::Transport(shown(&e.to_string())))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| ApiError::Transport(shown(&e.to_string())))?;
        if bytes.len() > MAX_RESPONSE_BYTES {
            return Err(ApiError::Decode { route: shown(route), detail: format!("{} bytes is over the limit", bytes.len()) });
        }
        if !status.is_success() {
            let body = crate::binaries::executable::tail(&bytes, 500);
            return Err(ApiError::Status { route: shown(route), status: status.as_u16(), body: shown(&body) });
        }
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|e| ApiError::Decode { route: shown(route), detail: e.to_string() })
    }

    pub async fn health(&self) -> Result<Value, ApiError> {
        self.send("/global/health", self.request(reqwest::Method::GET, "/global/health", None)).await
    }

    pub async fn create_session(&self, directory: &str, title: &str, permission: &Value) -> Result<String, ApiError> {
        let body = json!({ "title": title, "permission": permission });
        let v = self.send("/session", self.request(reqwest::Method::POST, "/session", Some(directory)).json(&body)).await?;
        v["id"].as_str().map(str::to_string).ok_or_else(|| ApiError::Decode { route: "/session".into(), detail: "no session id".into() })
    }

    pub async fn prompt_async(&self, directory: &str, session: &str, body: &Value) -> Result<(), ApiError> {
        let route = format!("/session/{session}/prompt_async");
        self.send(&route, self.request(reqwest::Method::POST, &route, Some(directory)).json(body)).await.map(|_| ())
    }

    pub async fn abort(&self, directory: &str, session: &str) -> Result<(), ApiError> {
        let route = format!("/session/{session}/abort");
        self.send(&route, self.request(reqwest::Method::POST, &route, Some(directory))).await.map(|_| ())
    }

    pub async fn summarize(&self, directory: &str, session: &str, provider: &str, model: &str) -> Result<Value, ApiError> {
        let route = format!("/session/{session}/summarize");
        let rb = self
            .request(reqwest::Method::POST, &route, Some(directory))
            .timeout(SUMMARIZE_TIMEOUT)
            .json(&json!({ "providerID": provider, "modelID": model }));
        self.send(&route, rb).await
    }

    /// Store a user message without calling the model (`noReply`); returns the stored message
    /// (`{info, parts}`). Used to build conversations for diagnostics without model calls.
    pub async fn store_user_message(&self, directory: &str, session: &str, text: &str) -> Result<Value, ApiError> {
        let route = format!("/session/{session}/message");
        let body = json!({ "noReply": true, "parts": [{ "type": "text", "text": text }] });
        self.send(&route, self.request(reqwest::Method::POST, &route, Some(directory)).json(&body)).await
    }

    pub async fn messages(&self, directory: &str, session: &str) -> Result<Value, ApiError> {
        let route = format!("/session/{session}/message");
        self.send(&route, self.request(reqwest::Method::GET, &route, Some(directory))).await
    }

    pub async fn session_status(&self, directory: &str) -> Result<Value, ApiError> {
        self.send("/session/status", self.request(reqwest::Method::GET, "/session/status", Some(directory))).await
    }

    pub async fn reply_permission(&self, directory: &str, id: &str, reply: &str) -> Result<(), ApiError> {
        let route = format!("/permission/{id}/reply");
        let rb = self.request(reqwest::Method::POST, &route, Some(directory)).json(&json!({ "reply": reply }));
        self.send(&route, rb).await.map(|_| ())
    }

    pub async fn dispose_instance(&self, directory: &str) -> Result<(), ApiError> {
        self.send("/instance/dispose", self.request(reqwest::Method::POST, "/instance/dispose", Some(directory))).await.map(|_| ())
    }

    /// A cheap call that makes the runtime create the directory's instance now (pre-warming).
    pub async fn warm(&self, directory: &str) -> Result<(), ApiError> {
        self.send("/agent", self.request(reqwest::Method::GET, "/agent", Some(directory))).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_a_session_by_its_tag() {
        let tag = crate::host::logging::log_tag("ses_abc123");
        let shown = redact_session("/session/ses_abc123/prompt_async", "error sending request for url (http://127.0.0.1:9/session/ses_abc123/prompt_async)");
        assert!(!shown.contains("ses_abc123") && shown.contains(&tag), "{shown}");
        assert_eq!(redact_session("/session/ses_abc123", "Session ses_abc123 not found"), format!("Session ses#{tag} not found"));
        assert_eq!(redact_session("/global/health", "no session here"), "no session here");
        assert_eq!(redact_session("/session", "POST /session failed"), "POST /session failed");
    }
}
