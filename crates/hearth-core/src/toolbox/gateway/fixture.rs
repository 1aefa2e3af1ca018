//! A small stdio MCP server used by tests, the benchmark and the self-test as a "custom server":
//! `create_game_blueprint` (the reuse check's tool), plus tools that misbehave on purpose.
//! Run it as `hearth-mcp-fixture [--exit-at-once | --garbage]`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

/// Every blueprint names this relay, so a test can tell the fixture's answer from anything else.
pub const RELAY_NAME: &str = "Prism Relay";
/// The global a blueprint's game script defines.
pub const GAME_GLOBAL: &str = "window.__HEARTH_GAME__";
/// Largest result the `huge` tool produces.
pub const MAX_HUGE_BYTES: usize = 64 * 1024 * 1024;
/// How long `hang` sleeps (far beyond any call bound).
pub const HANG_FOR: Duration = Duration::from_secs(3600);

/// How the fixture behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixtureMode {
    /// A well-behaved MCP server.
    Serve,
    /// Exit with status 3 before reading anything.
    ExitAtOnce,
    /// Answer every line with text that is not JSON-RPC.
    Garbage,
}

impl FixtureMode {
    pub fn from_args(args: &[String]) -> Self {
        if args.iter().any(|a| a == "--exit-at-once") {
            FixtureMode::ExitAtOnce
        } else if args.iter().any(|a| a == "--garbage") {
            FixtureMode::Garbage
        } else {
            FixtureMode::Serve
        }
    }
}

#[derive(Clone, Default)]
struct Fixture {
    bonus: Arc<AtomicBool>,
}

fn schema(v: Value) -> Arc<serde_json::Map<String, Value>> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

impl Fixture {
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            Tool::new(
                "create_game_blueprint",
                "Create a blueprint for a small web 3D game: scene, targets and the relay that links them.",
                schema(json!({"type": "object", "properties": {
                    "theme": {"type": "string"}, "seed": {"type": "string"}, "targetCount": {"type": "integer"}
                }, "required": ["theme", "seed", "targetCount"]})),
            ),
            Tool::new("hang", "Never answers (for testing call time bounds).", schema(json!({"type": "object", "properties": {}}))),
            Tool::new(
                "huge",
                "Returns `bytes` bytes of text (for testing result bounds).",
                schema(json!({"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]})),
            ),
            Tool::new("unlock_bonus", "Adds the `bonus` tool and announces the new tool list.", schema(json!({"type": "object", "properties": {}}))),
            Tool::new("echo_args", "Returns its arguments as JSON.", schema(json!({"type": "object"}))),
        ];
        if self.bonus.load(Ordering::SeqCst) {
            tools.push(Tool::new("bonus", "A tool that appears later.", schema(json!({"type": "object", "properties": {}}))));
        }
        tools
    }
}

/// The blueprint text: carries the seed, the game global and the relay name.
pub fn blueprint(theme: &str, seed: &str, target_count: i64) -> String {
    let targets: Vec<String> = (0..target_count.clamp(0, 64)).map(|i| format!("{{id:'target-{i}',x:{},z:{}}}", (i * 7) % 11 - 5, (i * 5) % 9 - 4)).collect();
    format!(
        "Blueprint for a {theme} game (seed {seed}).\n\
         Relay: {RELAY_NAME} links the {target_count} targets.\n\
         <script type=\"module\">\n{GAME_GLOBAL} = {{ seed: '{seed}', theme: '{theme}', relay: '{RELAY_NAME}', targets: [{}] }};\n</script>\n",
        targets.join(",")
    )
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_server_info(Implementation::new("hearth-mcp-fixture", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, _context: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let text = |v: &str| ContentBlock::text(v.to_string());
        let result = match request.name.as_ref() {
            "create_game_blueprint" => {
                let theme = args.get("theme").and_then(Value::as_str).unwrap_or("untitled");
                let Some(seed) = args.get("seed").and_then(Value::as_str) else {
                    return Ok(CallToolResult::error(vec![text("create_game_blueprint needs a string `seed`.")]).into());
                };
                let count = args.get("targetCount").and_then(Value::as_i64).unwrap_or(3);
                CallToolResult::success(vec![text(&blueprint(theme, seed, count))])
            }
            "hang" => {
                tokio::select! {
                    _ = tokio::time::sleep(HANG_FOR) => {}
                    _ = context.ct.cancelled() => {}
                }
                CallToolResult::success(vec![text("woke up")])
            }
            "huge" => {
                let n = args.get("bytes").and_then(Value::as_u64).unwrap_or(0) as usize;
                CallToolResult::success(vec![text(&"x".repeat(n.min(MAX_HUGE_BYTES)))])
            }
            "unlock_bonus" => {
                self.bonus.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                CallToolResult::success(vec![text("bonus unlocked")])
            }
            "echo_args" => CallToolResult::success(vec![text(&Value::Object(args).to_string())]),
            "bonus" if self.bonus.load(Ordering::SeqCst) => CallToolResult::success(vec![text("BONUS_OK")]),
            other => CallToolResult::error(vec![text(&format!("The fixture has no tool {other}."))]),
        };
        Ok(result.into())
    }
}

/// Serve the fixture on this process's stdin/stdout until the client goes away.
pub async fn run_fixture_stdio() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    run_fixture(FixtureMode::Serve).await
}

pub async fn run_fixture(mode: FixtureMode) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    match mode {
        FixtureMode::ExitAtOnce => {
            eprintln!("hearth-mcp-fixture: exiting at once, as asked");
            std::process::exit(3);
        }
        FixtureMode::Garbage => {
            use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            let mut out = tokio::io::stdout();
            while let Some(_line) = lines.next_line().await? {
                out.write_all(b"this is not JSON-RPC, sorry\n").await?;
                out.flush().await?;
            }
            Ok(())
        }
        FixtureMode::Serve => {
            let service = Fixture::default().serve(rmcp::transport::stdio()).await?;
            service.waiting().await?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blueprint_carries_seed_global_and_relay() {
        let b = blueprint("neon-ruins", "seed-123", 5);
        assert!(b.contains("seed-123") && b.contains(GAME_GLOBAL) && b.contains(RELAY_NAME), "{b}");
        assert_eq!(b.matches("target-").count(), 5);
    }
}
