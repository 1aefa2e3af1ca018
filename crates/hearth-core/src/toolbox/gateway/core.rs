//! What the gateway does with a tool list request and a tool call: authorize the call by the
//! session that made it, strip the session tag, route to knowledge or a custom server.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::Value;

use super::custom::{CustomServer, CALL_TIMEOUT, START_TIMEOUT};
use super::grants::{GrantError, Grants};
use super::knowledge_tools::{self as knowledge, KnowledgeAccess};
use super::plugin::SESSION_ARG;
use super::record::{CallLog, ForwardedCall};
use super::sessions::Sessions;
use super::truncate::{truncate_with_notice, MAX_RESULT_BYTES};

/// Time bounds and sizes the gateway applies; the defaults are the named constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewayLimits {
    pub call_timeout: Duration,
    pub start_timeout: Duration,
    pub max_result_bytes: usize,
}

impl Default for GatewayLimits {
    fn default() -> Self {
        Self { call_timeout: CALL_TIMEOUT, start_timeout: START_TIMEOUT, max_result_bytes: MAX_RESULT_BYTES }
    }
}

/// Tool names of each non-dynamic server, frozen when the request was granted (`None`: the server
/// was still starting, so its first list counts).
type Frozen = HashMap<String, Option<HashSet<String>>>;

pub(super) struct Core {
    pub grants: Grants,
    pub sessions: Sessions,
    pub servers: RwLock<Vec<Arc<CustomServer>>>,
    pub knowledge: Option<Arc<dyn KnowledgeAccess>>,
    pub frozen: Mutex<HashMap<String, Frozen>>,
    pub log: CallLog,
    pub limits: GatewayLimits,
}

fn refusal(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

impl Core {
    pub fn new(knowledge: Option<Arc<dyn KnowledgeAccess>>, limits: GatewayLimits) -> Self {
        Self {
            grants: Grants::new(),
            sessions: Sessions::default(),
            servers: RwLock::new(Vec::new()),
            knowledge,
            frozen: Mutex::new(HashMap::new()),
            log: CallLog::default(),
            limits,
        }
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

    pub async fn call(&self, request: CallToolRequestParams) -> CallToolResult {
        let name = request.name.to_string();
        let mut args: JsonObject = request.arguments.unwrap_or_default();
        // Strip the session tag first: nothing downstream ever sees it.
        let session = args.remove(SESSION_ARG).and_then(|v| v.as_str().map(str::to_owned));
        let grant = match self.sessions.authorize(&self.grants, session.as_deref()) {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(tool = %name, session = session.as_deref().unwrap_or("-"), reason = %e, "gateway call refused");
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
                Ok(Err(sentence)) => refusal(sentence),
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
            Err(sentence) => refusal(sentence),
        }
    }
}
