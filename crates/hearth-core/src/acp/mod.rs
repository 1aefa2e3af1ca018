//! The ACP runtime family: agents that speak the Agent Client Protocol (JSON-RPC over their stdio),
//! behind the same runtime contract, registry and manager as OpenCode's HTTP server.
//!
//! One agent process per (agent, configuration) serves every project: an ACP session carries its
//! own working folder, so each conversation gets a native session of its own in the shared process.
//! The parts: `agents.rs` (the agents Hearth knows — presets and custom command lines — and how each
//! is found and started), `spec.rs` (a configuration, and the registry's key for it), `process.rs`
//! (the agent's process: its group, parent-death signal, records, output tail), `connection.rs`
//! (the protocol over its stdio: initialize, requests, updates routed by session, permission
//! requests), `sessions.rs` (conversation → native session, each with its own gateway credential),
//! `translate.rs` (session updates → runtime events), `run.rs` (one run to its end) and `runtime.rs`
//! (the contract's face).

pub mod agents;
pub mod claude;
mod connection;
mod process;
mod run;
mod runtime;
mod sessions;
pub mod spec;
mod translate;

pub use agents::{AgentKind, AgentMissing, AgentPreset, AgentSearch, AgentSummary, CustomAgent, GatewayCallers, PRESETS};
pub use connection::ConnectError;
pub use process::AgentLaunch;
pub use runtime::AcpRuntime;
pub use spec::{AcpBounds, AcpSpec, AgentSetup, AnthropicEndpoint, GatewayTransport};

/// The family name the registry and the manager know these runtimes by.
pub const FAMILY: &str = "acp";
/// The one protocol version Hearth speaks (ACP v1); an agent answering another is refused.
pub const PROTOCOL_VERSION: u16 = 1;
