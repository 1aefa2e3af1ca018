//! A stdio MCP server for tests and the self-test: see `hearth_core::toolbox::gateway::fixture`.

use hearth_core::toolbox::gateway::fixture::{run_fixture, FixtureMode};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run_fixture(FixtureMode::from_args(&args)).await {
        eprintln!("hearth-mcp-fixture: {e}");
        std::process::exit(1);
    }
}
