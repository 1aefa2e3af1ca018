//! The stdio bridge to the gateway, for an agent that connects to MCP servers over stdio only:
//! the agent starts `hearth mcp-bridge` as a session's MCP server, with the gateway's URL and that
//! session's credential in its environment, and the bridge serves, over its stdin/stdout, the tools
//! the gateway lists and the calls it answers for that credential. It holds nothing of its own: a
//! call it forwards is judged by the gateway like any other (the process check, the credential's
//! holder, the grant of the request running on its session).

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};

/// The subcommand of the `hearth` binary that runs the bridge.
pub const BRIDGE_SUBCOMMAND: &str = "mcp-bridge";
/// The gateway's MCP URL, in the bridge's environment.
pub const BRIDGE_URL_ENV: &str = "HEARTH_GATEWAY_URL";
/// The session's credential, in the bridge's environment.
pub const BRIDGE_CREDENTIAL_ENV: &str = "HEARTH_GATEWAY_CREDENTIAL";

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("{0} is not set: the bridge is started by an agent Hearth runs, not by hand")]
    MissingEnv(&'static str),
    #[error("the gateway at {url} could not be reached: {reason}")]
    Gateway { url: String, reason: String },
    #[error("the agent's side of the bridge failed: {0}")]
    Agent(String),
}

struct Bridge {
    gateway: Arc<RunningService<RoleClient, ()>>,
}

fn upstream(e: rmcp::ServiceError) -> ErrorData {
    ErrorData::internal_error(format!("Hearth's gateway did not answer: {e}"), None)
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(Implementation::new("hearth-mcp-bridge", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, _context: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        let tools = self.gateway.list_all_tools().await.map_err(upstream)?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(&self, request: CallToolRequestParams, _context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        Ok(self.gateway.call_tool(request).await.map_err(upstream)?.into())
    }
}

/// Run the bridge on this process's stdin/stdout with what its environment names, until the agent
/// closes it.
pub async fn run_stdio_bridge() -> Result<(), BridgeError> {
    let url = std::env::var(BRIDGE_URL_ENV).map_err(|_| BridgeError::MissingEnv(BRIDGE_URL_ENV))?;
    let credential = std::env::var(BRIDGE_CREDENTIAL_ENV).map_err(|_| BridgeError::MissingEnv(BRIDGE_CREDENTIAL_ENV))?;
    let transport = StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(credential));
    let gateway = ().serve(transport).await.map_err(|e| BridgeError::Gateway { url: url.clone(), reason: e.to_string() })?;
    let service = Bridge { gateway: Arc::new(gateway) }.serve(rmcp::transport::stdio()).await.map_err(|e| BridgeError::Agent(e.to_string()))?;
    service.waiting().await.map_err(|e| BridgeError::Agent(e.to_string()))?;
    Ok(())
}
