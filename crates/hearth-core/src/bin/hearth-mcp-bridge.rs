//! Hearth's stdio bridge to its gateway, as the tests start it: see
//! `hearth_core::toolbox::gateway::bridge` (the app runs the same code as `hearth mcp-bridge`).

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if let Err(e) = hearth_core::toolbox::gateway::bridge::run_stdio_bridge().await {
        eprintln!("hearth-mcp-bridge: {e}");
        std::process::exit(1);
    }
}
