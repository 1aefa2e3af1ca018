//! What the gateway does with a tool list request and a tool call: authorize the call by the
//! session that made it, strip the session tag, route to knowledge or a custom server.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::Value;

use super::credentials::{CredentialSession, Credentials};
use super::custom::{CustomServer, CALL_TIMEOUT, START_TIMEOUT};
use super::grants::{constant_time_eq, random_text, token_tag, GrantError, Grants};
use super::knowledge_tools::{self as knowledge, KnowledgeAccess};
use super::plugin::SESSION_ARG;
use super::record::{CallLog, ForwardedCall};
use super::sessions::{AuthError, Sessions, UNBOUND_SESSION_WAIT};
use super::truncate::{truncate_with_notice, MAX_RESULT_BYTES};
use crate::host::clock::SharedClock;

/// Time bounds and sizes the gateway applies; the defaults are the named constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewayLimits {
    pub call_timeout: Duration,
    pub start_timeout: Duration,
    pub max_result_bytes: usize,
    /// How long a call from a session not bound yet (a subagent's, just created) waits.
    pub unbound_session_wait: Duration,
}

impl Default for GatewayLimits {
    fn default() -> Self {
        Self { call_timeout: CALL_TIMEOUT, start_timeout: START_TIMEOUT, max_result_bytes: MAX_RESULT_BYTES, unbound_session_wait: UNBOUND_SESSION_WAIT }
    }
}

/// Tool names of each non-dynamic server, frozen when the request was granted (`None`: the server
/// was still starting, so its first list counts).
type Frozen = HashMap<String, Option<HashSet<String>>>;

/// Random bytes of the key the plugin stamps calls with.
pub const STAMP_KEY_BYTES: usize = 32;

pub(super) struct Core {
    pub grants: Grants,
    /// Handed only to the runtime's process (see `server::STAMP_KEY_PATH`): a stamp carrying it was
    /// written by Hearth's plugin, not by a model.
    pub stamp_key: String,
    pub sessions: Sessions,
    /// Session credentials of agents that reach the gateway themselves (ACP).
    pub credentials: Credentials,
    pub servers: RwLock<Vec<Arc<CustomServer>>>,
    pub knowledge: Option<Arc<dyn KnowledgeAccess>>,
    pub frozen: Mutex<HashMap<String, Frozen>>,
    pub log: CallLog,
    pub limits: GatewayLimits,
    /// Runtimes on other hosts, by the local ssh process that carries their connections, each with
    /// a stamp key of its own (handed to it at launch, never served over the link).
    pub links: RwLock<HashMap<u32, String>>,
}

/// The local process a request's connection came from (the runtime's, or an ssh link's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerPid(pub u32);

fn refusal(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

impl Core {
    pub fn new(knowledge: Option<Arc<dyn KnowledgeAccess>>, limits: GatewayLimits, clock: SharedClock) -> Self {
        Self {
            grants: Grants::with_clock(clock),
            stamp_key: random_text(STAMP_KEY_BYTES),
            sessions: Sessions::default(),
            credentials: Credentials::default(),
            servers: RwLock::new(Vec::new()),
            knowledge,
            frozen: Mutex::new(HashMap::new()),
            log: CallLog::default(),
            limits,
            links: RwLock::new(HashMap::new()),
        }
    }

    /// Whether `pid` is the ssh link of a runtime on another host.
    pub fn is_link(&self, pid: u32) -> bool {
        self.links.read().unwrap().contains_key(&pid)
    }

    /// The key a stamp from `caller` must carry: its link's own, else the local runtimes'.
    fn stamp_key_for(&self, caller: Option<CallerPid>) -> String {
        caller.and_then(|CallerPid(pid)| self.links.read().unwrap().get(&pid).cloned()).unwrap_or_else(|| self.stamp_key.clone())
    }

    fn servers(&self) -> Vec<Arc<CustomServer>> {
        self.servers.read().unwrap().clone()
    }

    /// Freeze the tool lists of the non-dynamic servers in `server_ids` for `request_id`.
    pub fn freeze(&self, request_id: &str, server_ids: &[String]) {
        let frozen: Frozen = self
            .servers()
            .into_iter()
            .filter(|s| server_ids.contains(&s.config.id) && !s.config.allow_dynamic_tools)
            .map(|s| {
                let names = s.is_ready().then(|| s.tools().iter().map(|t| t.name.to_string()).collect());
                (s.config.id.clone(), names)
            })
            .collect();
        self.frozen.lock().unwrap().insert(request_id.to_string(), frozen);
    }

    pub fn forget(&self, request_id: &str) {
        self.frozen.lock().unwrap().remove(request_id);
    }

    /// Every tool the gateway offers: knowledge tools, then each ready server's tools.
    pub async fn tool_list(&self) -> Vec<Tool> {
        let mut tools = Vec::new();
        if self.knowledge.is_some() {
            for (name, description, schema) in knowledge::tool_definitions() {
                let Value::Object(schema) = schema else { continue };
                tools.push(Tool::new(name, description, Arc::new(schema)));
            }
        }
        for server in self.servers() {
            if !server.is_ready() {
                continue;
            }
            server.refresh_if_stale(self.limits.call_timeout).await;
            for tool in server.tools() {
                let mut exposed = tool.clone();
                exposed.name = super::naming::exposed_tool_name(&server.prefix, &tool.name).into();
                let description = tool.description.as_deref().unwrap_or("");
                exposed.description = Some(format!("[{}] {description}", server.config.name).into());
                tools.push(exposed);
            }
        }
        tools
    }

    fn route(&self, name: &str) -> Option<(Arc<CustomServer>, String)> {
        self.servers().into_iter().filter(|s| s.is_ready()).find_map(|s| {
            let upstream = s.tool_names().into_iter().find(|(exposed, _)| exposed == name).map(|(_, up)| up)?;
            Some((s, upstream))
        })
    }

    /// The stamp the plugin writes for `session_id`: `<stamp key>:<session id>`.
    pub fn stamp(&self, session_id: &str) -> String {
        format!("{}:{session_id}", self.stamp_key)
    }

    /// The session a stamp names, if the stamp carries the key of the runtime it came from.
    fn session_of_stamp<'a>(&self, stamp: Option<&'a str>, caller: Option<CallerPid>) -> Result<Option<&'a str>, AuthError> {
        let Some(stamp) = stamp.filter(|s| !s.is_empty()) else { return Ok(None) };
        let expected = self.stamp_key_for(caller);
        match stamp.split_once(':') {
            Some((key, session)) if constant_time_eq(key.as_bytes(), expected.as_bytes()) => Ok(Some(session)),
            _ => Err(AuthError::ForgedStamp),
        }
    }

    /// Serve one tool call. `credential` is the session a session credential named (an ACP
    /// agent's call); without one, the call's stamp names it (OpenCode's plugin).
    pub async fn call(&self, request: CallToolRequestParams, credential: Option<CredentialSession>, caller: Option<CallerPid>) -> CallToolResult {
        let name = request.name.to_string();
        let mut args: JsonObject = request.arguments.unwrap_or_default();
        // Strip the stamp first: nothing downstream ever sees it.
        let stamp = args.remove(SESSION_ARG).and_then(|v| v.as_str().map(str::to_owned));
        let session = match &credential {
            // A model-written stamp cannot move a credential's call to another session.
            Some(CredentialSession(session)) => session.as_deref().ok_or(AuthError::UnboundSession).map(Some),
            None => self.session_of_stamp(stamp.as_deref(), caller),
        };
        let authorized = match &session {
            Ok(session) => self.sessions.authorize_waiting(&self.grants, *session, self.limits.unbound_session_wait).await,
            Err(e) => Err(e.clone()),
        };
        let grant = match authorized {
            Ok(g) => g,
            Err(e) => {
                let session = session.ok().flatten().map(token_tag).unwrap_or_else(|| "-".into());
                tracing::warn!(tool = %name, %session, reason = %e, "gateway call refused");
                return refusal(e.to_string());
            }
        };
        if name == knowledge::SEARCH_TOOL || name == knowledge::READ_TOOL {
            let Some(access) = self.knowledge.clone() else {
                return refusal("Knowledge is not available in this Hearth.");
            };
            let libraries = grant.scope.libraries.clone();
            let max = self.limits.max_result_bytes;
            let out = tokio::task::spawn_blocking(move || knowledge::call(access.as_ref(), &libraries, &name, &args)).await;
            return match out {
                Ok(Ok(text)) => CallToolResult::success(vec![ContentBlock::text(truncate_with_notice(&text, max))]),
                Ok(Err(refused)) => refusal(refused.to_string()),
                Err(_) => refusal("The knowledge search failed inside Hearth."),
            };
        }
        let Some((server, upstream)) = self.route(&name) else {
            return refusal(format!("There is no Hearth tool named {name} (its server may have stopped)."));
        };
        if !grant.scope.custom_servers.contains(&server.config.id) {
            tracing::warn!(request_id = %grant.request_id, token = %grant.token_tag, server = %server.config.id, "call outside the grant refused");
            return refusal(GrantError::NotGranted(format!("the MCP server \"{}\"", server.config.name)).to_string());
        }
        if !server.config.allow_dynamic_tools {
            let frozen = self.frozen.lock().unwrap().get(&grant.request_id).and_then(|f| f.get(&server.config.id).cloned());
            if let Some(Some(names)) = frozen {
                if !names.contains(&upstream) {
                    return refusal(format!("The tool {upstream} was not offered by \"{}\" when this request started; it can be used from the next message.", server.config.name));
                }
            }
        }
        self.log.push(ForwardedCall {
            request_id: grant.request_id.clone(),
            token_tag: grant.token_tag.clone(),
            server_id: server.config.id.clone(),
            tool: upstream.clone(),
            args: Value::Object(args.clone()),
        });
        tracing::info!(request_id = %grant.request_id, token = %grant.token_tag, server = %server.config.id, tool = %upstream, "forwarding tool call");
        match server.call(&upstream, args, self.limits.call_timeout, self.limits.max_result_bytes).await {
            Ok(result) => result,
            Err(error) => refusal(error.to_string()),
        }
    }
}
