//! Conversation → native session in one agent process. A conversation's first run opens a session
//! in its project's folder (`session/new`); a conversation Hearth knew from before (after a restart
//! of Hearth or of the agent) continues its stored session (`session/load`) where the agent can.
//! Each session is handed Hearth's gateway with a credential of its own, revoked when the session
//! goes. One turn at a time per conversation.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{CloseSessionRequest, EnvVariable, HttpHeader, LoadSessionRequest, McpServer, McpServerHttp, McpServerStdio, NewSessionRequest};

use super::connection::{ConnectError, Connection};
use super::spec::AcpSpec;
use crate::runtime::{PlanStep, RunHooks};
use crate::space::ExecutionSpace;
use crate::toolbox::gateway::bridge::{BRIDGE_CREDENTIAL_ENV, BRIDGE_URL_ENV};

/// The name the gateway has among a session's MCP servers (its tools reach the model as
/// `hearth_…` or `mcp__hearth__…`, as each agent names them).
pub const GATEWAY_SERVER_NAME: &str = "hearth";

/// One conversation's session in the running agent.
#[derive(Debug, Clone)]
pub struct OpenSession {
    pub id: String,
    pub cwd: PathBuf,
    /// The gateway credential this session was given, if any.
    credential: Option<String>,
    /// The session mode last set (Ask mode's read-only mode, or the agent's default).
    pub mode: Option<String>,
    /// The mode the agent opened the session in (what Execute mode goes back to).
    pub default_mode: Option<String>,
    /// The model last chosen for the session (`None`: the agent's own default so far).
    pub model: Option<String>,
}

/// How a conversation's session was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// Already open in this process.
    Open,
    New,
    /// The stored session, continued after a restart.
    Loaded,
}

#[derive(Default)]
pub struct Sessions {
    open: Mutex<HashMap<String, OpenSession>>,
    /// One turn at a time per conversation.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The last plan each session's agent sent.
    plans: Mutex<HashMap<String, Vec<PlanStep>>>,
}

impl Sessions {
    pub fn conversation_lock(&self, conversation: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.locks.lock().unwrap_or_else(|p| p.into_inner()).entry(conversation.to_string()).or_default().clone()
    }

    pub fn native(&self, conversation: &str) -> Option<OpenSession> {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).get(conversation).cloned()
    }

    pub fn update(&self, conversation: &str, f: impl FnOnce(&mut OpenSession)) {
        if let Some(s) = self.open.lock().unwrap_or_else(|p| p.into_inner()).get_mut(conversation) {
            f(s);
        }
    }

    /// Folders with a session open now, for the status.
    pub fn open_folders(&self) -> Vec<String> {
        let mut folders: Vec<String> = self.open.lock().unwrap_or_else(|p| p.into_inner()).values().map(|s| s.cwd.display().to_string()).collect();
        folders.sort();
        folders.dedup();
        folders
    }

    pub fn set_plan(&self, session: &str, plan: Vec<PlanStep>) {
        self.plans.lock().unwrap_or_else(|p| p.into_inner()).insert(session.to_string(), plan);
    }

    pub fn plan(&self, session: &str) -> Vec<PlanStep> {
        self.plans.lock().unwrap_or_else(|p| p.into_inner()).get(session).cloned().unwrap_or_default()
    }

    /// The conversation's session, opened or continued if this process has none for it.
    pub async fn session_for(
        &self,
        connection: &Connection,
        spec: &AcpSpec,
        hooks: Option<&dyn RunHooks>,
        conversation: &str,
        space: &ExecutionSpace,
        stored: Option<&str>,
    ) -> Result<(OpenSession, Opened), ConnectError> {
        if let Some(open) = self.native(conversation).filter(|s| s.cwd == space.root) {
            return Ok((open, Opened::Open));
        }
        // Over HTTP where the agent connects to MCP servers that way; else through Hearth's stdio
        // bridge, which the agent starts for this session alone.
        let http = connection.info.mcp_http && spec.transport == super::spec::GatewayTransport::Auto;
        let reach = spec.gateway_url.as_ref().and_then(|url| match (http, &spec.bridge) {
            (true, _) => Some((url, None)),
            (false, Some(bridge)) => Some((url, Some(bridge))),
            (false, None) => None,
        });
        let credential = reach.and_then(|_| hooks.and_then(|h| h.issue_credential()));
        let servers: Vec<McpServer> = match (reach, &credential) {
            (Some((url, None)), Some(c)) => vec![McpServer::Http(
                McpServerHttp::new(GATEWAY_SERVER_NAME, url.as_str()).headers(vec![HttpHeader::new("Authorization", format!("Bearer {}", c.secret))]),
            )],
            (Some((url, Some(bridge))), Some(c)) => vec![McpServer::Stdio(
                McpServerStdio::new(GATEWAY_SERVER_NAME, &bridge[0]).args(bridge[1..].to_vec()).env(vec![
                    EnvVariable::new(BRIDGE_URL_ENV, url.as_str()),
                    EnvVariable::new(BRIDGE_CREDENTIAL_ENV, c.secret.as_str()),
                ]),
            )],
            _ => vec![],
        };
        let opened = match stored.filter(|_| connection.info.load_session) {
            Some(id) => {
                let load = LoadSessionRequest::new(id.to_string(), space.root.clone()).mcp_servers(servers.clone());
                match connection.call(load, spec.bounds.session_open).await {
                    Ok(answer) => Ok((id.to_string(), answer.modes.map(|m| m.current_mode_id.0.to_string()), Opened::Loaded)),
                    // The agent no longer has it (its data was reset): a new session, and the
                    // conversation goes on without the agent remembering it.
                    Err(ConnectError::Refused { message, .. }) => {
                        tracing::warn!(conversation, %message, "the agent could not load the stored session; opening a new one");
                        self.open_new(connection, spec, space, servers).await
                    }
                    Err(e) => Err(e),
                }
            }
            None => self.open_new(connection, spec, space, servers).await,
        };
        let (id, default_mode, how) = match opened {
            Ok(o) => o,
            Err(e) => {
                if let (Some(h), Some(c)) = (hooks, &credential) {
                    h.revoke_credential(&c.id);
                }
                return Err(e);
            }
        };
        if let (Some(h), Some(c)) = (hooks, &credential) {
            h.bind_credential(&c.id, &id);
        }
        let session = OpenSession { id, cwd: space.root.clone(), credential: credential.map(|c| c.id), mode: default_mode.clone(), default_mode, model: None };
        let replaced = self.open.lock().unwrap_or_else(|p| p.into_inner()).insert(conversation.to_string(), session.clone());
        if let (Some(old), Some(h)) = (replaced.and_then(|s| s.credential), hooks) {
            h.revoke_credential(&old);
        }
        Ok((session, how))
    }

    async fn open_new(&self, connection: &Connection, spec: &AcpSpec, space: &ExecutionSpace, servers: Vec<McpServer>) -> Result<(String, Option<String>, Opened), ConnectError> {
        let request = NewSessionRequest::new(space.root.clone()).mcp_servers(servers);
        let answer = connection.call(request, spec.bounds.session_open).await?;
        Ok((answer.session_id.0.to_string(), answer.modes.map(|m| m.current_mode_id.0.to_string()), Opened::New))
    }

    /// Forget the conversation's session (its credential is revoked).
    pub fn release(&self, conversation: &str, hooks: Option<&dyn RunHooks>) -> Option<OpenSession> {
        let gone = self.open.lock().unwrap_or_else(|p| p.into_inner()).remove(conversation);
        if let (Some(h), Some(c)) = (hooks, gone.as_ref().and_then(|s| s.credential.as_ref())) {
            h.revoke_credential(c);
        }
        gone
    }

    /// Close every session in `folder` in the agent (freeing what it holds for them, e.g. Claude
    /// Code's process per session) and forget them. Skipped for conversations with a turn running.
    pub async fn close_folder(&self, connection: &Connection, spec: &AcpSpec, hooks: Option<&dyn RunHooks>, folder: &std::path::Path) {
        let conversations: Vec<String> =
            self.open.lock().unwrap_or_else(|p| p.into_inner()).iter().filter(|(_, s)| s.cwd == folder).map(|(c, _)| c.clone()).collect();
        for conversation in conversations {
            let lock = self.conversation_lock(&conversation);
            let Ok(_idle) = lock.try_lock() else { continue };
            if let Some(session) = self.release(&conversation, hooks) {
                // Agents without `session/close` refuse it: the session then stays in the agent.
                if let Err(e) = connection.call(CloseSessionRequest::new(session.id.clone()), spec.bounds.call).await {
                    tracing::debug!(error = %e, "the agent did not close an idle session");
                }
            }
        }
    }

    /// The agent process is gone: every session with it (their credentials are revoked).
    pub fn forget_all(&self, hooks: Option<&dyn RunHooks>) {
        let all: Vec<OpenSession> = self.open.lock().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, s)| s).collect();
        if let Some(h) = hooks {
            for c in all.iter().filter_map(|s| s.credential.as_ref()) {
                h.revoke_credential(c);
            }
        }
    }
}
