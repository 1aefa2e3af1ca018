//! The runtime's HTTP API, one method per route Hearth uses, with typed answers (`wire.rs`). Every
//! call names the directory it is for (`?directory=`), which is how one process serves many
//! projects.

use std::time::Duration;

use serde_json::{json, Value};

use super::launch::USERNAME;
use super::wire::{StatusMap, StoredMessage};
use crate::runtime::PermissionReply;

/// Time for one ordinary API call. Prompts are asynchronous (`prompt_async`), so nothing here waits
/// for a model; `summarize` blocks until compaction ends and gets its own bound.
pub const API_TIMEOUT: Duration = Duration::from_secs(30);
pub const SUMMARIZE_TIMEOUT: Duration = Duration::from_secs(600);
/// Time to open a TCP connection to the runtime on loopback.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest response body read from the runtime (a long session's message list).
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;
/// Title of the throw-away session that warms a project (never shown: it is deleted at once).
const WARM_UP_TITLE: &str = "Hearth warm-up";
/// Bytes of a refusal's body quoted in an error.
const QUOTED_BODY_BYTES: usize = 500;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ApiError {
    #[error("could not reach the runtime: {0}")]
    Transport(String),
    #[error("the runtime answered {status} to {route}: {body}")]
    Status { route: String, status: u16, body: String },
    #[error("the runtime sent an unreadable answer to {route}: {detail}")]
    Decode { route: String, detail: String },
}

/// `GET /global/health`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Health {
    pub healthy: bool,
    pub version: String,
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
        let http = reqwest::Client::builder().no_proxy().connect_timeout(CONNECT_TIMEOUT).build().expect("reqwest client");
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
        self.send_as(route, rb).await
    }

    async fn send_as<T: serde::de::DeserializeOwned + Default>(&self, route: &str, rb: reqwest::RequestBuilder) -> Result<T, ApiError> {
        let shown = |text: &str| redact_session(route, text);
        let resp = rb.send().await.map_err(|e| ApiError::Transport(shown(&e.to_string())))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| ApiError::Transport(shown(&e.to_string())))?;
        if bytes.len() > MAX_RESPONSE_BYTES {
            return Err(ApiError::Decode { route: shown(route), detail: format!("{} bytes is over the limit", bytes.len()) });
        }
        if !status.is_success() {
            let body = crate::binaries::executable::tail(&bytes, QUOTED_BODY_BYTES);
            return Err(ApiError::Status { route: shown(route), status: status.as_u16(), body: shown(&body) });
        }
        if bytes.is_empty() {
            return Ok(T::default());
        }
        serde_json::from_slice(&bytes).map_err(|e| ApiError::Decode { route: shown(route), detail: e.to_string() })
    }

    pub async fn health(&self) -> Result<Health, ApiError> {
        let v: Value = self.send_as("/global/health", self.request(reqwest::Method::GET, "/global/health", None)).await?;
        serde_json::from_value(v).map_err(|e| ApiError::Decode { route: "/global/health".into(), detail: e.to_string() })
    }

    pub async fn create_session(&self, directory: &str, title: &str, permission: &Value) -> Result<String, ApiError> {
        #[derive(Default, serde::Deserialize)]
        struct Created {
            id: String,
        }
        let body = json!({ "title": title, "permission": permission });
        let created: Created = self.send_as("/session", self.request(reqwest::Method::POST, "/session", Some(directory)).json(&body)).await?;
        if created.id.is_empty() {
            return Err(ApiError::Decode { route: "/session".into(), detail: "no session id".into() });
        }
        Ok(created.id)
    }

    /// Replace a session's permission rules (the project's outside-folder policy changed).
    pub async fn set_session_permission(&self, directory: &str, session: &str, permission: &Value) -> Result<(), ApiError> {
        let route = format!("/session/{session}");
        let rb = self.request(reqwest::Method::PATCH, &route, Some(directory)).json(&json!({ "permission": permission }));
        self.send_as::<Value>(&route, rb).await.map(drop)
    }

    pub async fn prompt_async(&self, directory: &str, session: &str, body: &impl serde::Serialize) -> Result<(), ApiError> {
        let route = format!("/session/{session}/prompt_async");
        self.send_as::<Value>(&route, self.request(reqwest::Method::POST, &route, Some(directory)).json(body)).await.map(drop)
    }

    pub async fn abort(&self, directory: &str, session: &str) -> Result<(), ApiError> {
        let route = format!("/session/{session}/abort");
        self.send_as::<Value>(&route, self.request(reqwest::Method::POST, &route, Some(directory))).await.map(drop)
    }

    /// Native compaction; `true` when the runtime compacted.
    pub async fn summarize(&self, directory: &str, session: &str, provider: &str, model: &str) -> Result<bool, ApiError> {
        let route = format!("/session/{session}/summarize");
        let rb = self
            .request(reqwest::Method::POST, &route, Some(directory))
            .timeout(SUMMARIZE_TIMEOUT)
            .json(&json!({ "providerID": provider, "modelID": model }));
        self.send_as(&route, rb).await
    }

    /// Store a user message without calling the model (`noReply`); returns its id. Used to build
    /// conversations for diagnostics without model calls.
    pub async fn store_user_message(&self, directory: &str, session: &str, text: &str) -> Result<String, ApiError> {
        let route = format!("/session/{session}/message");
        let body = json!({ "noReply": true, "parts": [{ "type": "text", "text": text }] });
        let stored: Value = self.send_as(&route, self.request(reqwest::Method::POST, &route, Some(directory)).json(&body)).await?;
        let message: StoredMessage =
            serde_json::from_value(stored).map_err(|e| ApiError::Decode { route: route.clone(), detail: e.to_string() })?;
        Ok(message.info.id)
    }

    /// Every message of a session, oldest first.
    pub async fn messages(&self, directory: &str, session: &str) -> Result<Vec<StoredMessage>, ApiError> {
        let route = format!("/session/{session}/message");
        self.send_as(&route, self.request(reqwest::Method::GET, &route, Some(directory))).await
    }

    /// The messages as the runtime sent them (diagnostics copy stored parts as templates).
    pub async fn messages_json(&self, directory: &str, session: &str) -> Result<Value, ApiError> {
        let route = format!("/session/{session}/message");
        self.send(&route, self.request(reqwest::Method::GET, &route, Some(directory))).await
    }

    /// Mark the session's messages from `message_id` on as reverted (dropped at the next prompt).
    pub async fn revert(&self, directory: &str, session: &str, message_id: &str) -> Result<(), ApiError> {
        let route = format!("/session/{session}/revert");
        let rb = self.request(reqwest::Method::POST, &route, Some(directory)).json(&json!({ "messageID": message_id }));
        self.send_as::<Value>(&route, rb).await.map(drop)
    }

    pub async fn unrevert(&self, directory: &str, session: &str) -> Result<(), ApiError> {
        let route = format!("/session/{session}/unrevert");
        self.send_as::<Value>(&route, self.request(reqwest::Method::POST, &route, Some(directory))).await.map(drop)
    }

    /// A copy of the session with its messages before `message_id` (all when `None`); its id.
    pub async fn fork(&self, directory: &str, session: &str, message_id: Option<&str>) -> Result<String, ApiError> {
        let route = format!("/session/{session}/fork");
        let body = match message_id {
            Some(id) => json!({ "messageID": id }),
            None => json!({}),
        };
        #[derive(serde::Deserialize, Default)]
        struct Forked {
            id: String,
        }
        let forked: Forked = self.send_as(&route, self.request(reqwest::Method::POST, &route, Some(directory)).json(&body)).await?;
        Ok(forked.id)
    }

    pub async fn todo(&self, directory: &str, session: &str) -> Result<Vec<Todo>, ApiError> {
        let route = format!("/session/{session}/todo");
        self.send_as(&route, self.request(reqwest::Method::GET, &route, Some(directory))).await
    }

    /// Busy and retrying sessions of a directory (idle ones are not listed).
    pub async fn session_status(&self, directory: &str) -> Result<StatusMap, ApiError> {
        self.send_as("/session/status", self.request(reqwest::Method::GET, "/session/status", Some(directory))).await
    }

    pub async fn reply_permission(&self, directory: &str, id: &str, reply: PermissionReply) -> Result<(), ApiError> {
        let reply = match reply {
            PermissionReply::Once => "once",
            PermissionReply::Always => "always",
            PermissionReply::Reject => "reject",
        };
        let route = format!("/permission/{id}/reply");
        let rb = self.request(reqwest::Method::POST, &route, Some(directory)).json(&json!({ "reply": reply }));
        self.send_as::<Value>(&route, rb).await.map(drop)
    }

    pub async fn dispose_instance(&self, directory: &str) -> Result<(), ApiError> {
        self.send_as::<Value>("/instance/dispose", self.request(reqwest::Method::POST, "/instance/dispose", Some(directory))).await.map(drop)
    }

    /// Make the runtime create the directory's instance (config, plugins) and nothing else.
    pub async fn open_instance(&self, directory: &str) -> Result<(), ApiError> {
        self.send_as::<Value>("/path", self.request(reqwest::Method::GET, "/path", Some(directory))).await.map(drop)
    }

    /// Make the runtime create the directory's instance now, and start what its first prompt would
    /// otherwise start lazily: MCP connections, the tool registry, skills, commands, providers and
    /// the file watcher. Cheap GETs; only a real model call warms the rest (the provider SDK).
    pub async fn warm(&self, directory: &str, model: Option<(&str, &str)>) -> Result<(), ApiError> {
        let get = |route: &'static str| async move { self.send_as::<Value>(route, self.request(reqwest::Method::GET, route, Some(directory))).await.map(drop) };
        // The instance first (config, plugins, skills), so the others do not race to create it.
        get("/agent").await?;
        let file = async {
            let rb = self.request(reqwest::Method::GET, "/file", Some(directory)).query(&[("path", ".")]);
            self.send_as::<Value>("/file", rb).await.map(drop)
        };
        // The tool definitions the first prompt's model is offered.
        let definitions = async {
            let Some((provider, model)) = model else { return Ok(()) };
            let rb = self.request(reqwest::Method::GET, "/experimental/tool", Some(directory)).query(&[("provider", provider), ("model", model)]);
            self.send_as::<Value>("/experimental/tool", rb).await.map(drop)
        };
        let (mcp, tools, skills, commands, providers, files, defs, vcs, path) = tokio::join!(
            get("/mcp"),
            get("/experimental/tool/ids"),
            get("/skill"),
            get("/command"),
            get("/config/providers"),
            file,
            definitions,
            get("/vcs"),
            get("/path")
        );
        mcp.and(tools).and(skills).and(commands).and(providers).and(files).and(defs).and(vcs).and(path)?;
        // A prompt's own first steps in the directory (its session and stored message), without a
        // model call: a throw-away session takes a message that asks for no reply, then goes.
        let session = self.create_session(directory, WARM_UP_TITLE, &json!([])).await?;
        let route = format!("/session/{session}/message");
        let mut body = json!({ "noReply": true, "agent": super::prompt::AGENT, "parts": [{ "type": "text", "text": WARM_UP_TITLE }] });
        if let Some((provider, model)) = model {
            body["model"] = json!({ "providerID": provider, "modelID": model });
        }
        let stored = self.send_as::<Value>(&route, self.request(reqwest::Method::POST, &route, Some(directory)).json(&body)).await.map(drop);
        let route = format!("/session/{session}");
        let deleted = self.send_as::<Value>(&route, self.request(reqwest::Method::DELETE, &route, Some(directory))).await.map(drop);
        stored.and(deleted)
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

/// One entry of a session's todo list, as the runtime keeps it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Todo {
    pub content: String,
    pub status: String,
}
