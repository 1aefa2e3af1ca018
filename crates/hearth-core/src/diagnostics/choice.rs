//! The runtimes a check can run against — OpenCode's server, and the ACP agents that can be pointed
//! at the built-in scripted model (`opencode acp`, Claude Code) — and the selection each check
//! hands the manager for one of them. The selection is made by the same constructors the app uses
//! (`AgentSetup::for_preset`, `AcpSpec::for_preset`), only on the scripted model and in a sandbox.

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::acp::agents::is_opencode;
use crate::acp::agents::{AgentPreset, AgentSearch, CLAUDE_CODE, OPENCODE as OPENCODE_ACP};
use crate::acp::{AcpBounds, AcpSpec, AgentKind, AgentSetup, AnthropicEndpoint, GatewayTransport};
use crate::opencode::config::RuntimeConfig;
use crate::runtime::{RuntimeChoice, RuntimeSelection};
use crate::scripted_model::ScriptedModelServer;
use crate::toolbox::gateway::{Gateway, GATEWAY_MCP_NAME};

use super::remote_sandbox::RemoteSandbox;
use super::CheckError;

/// The name a report gives OpenCode's HTTP server (the window's name for it too).
pub const SERVER_LABEL: &str = "OpenCode (server)";

/// Every runtime the self-test knows how to check, in the order it runs them.
pub fn checkable() -> Vec<RuntimeChoice> {
    std::iter::once(RuntimeChoice::OpenCode).chain([OPENCODE_ACP, CLAUDE_CODE].iter().map(|p| RuntimeChoice::Acp { agent: p.id.into() })).collect()
}

/// The runtime's name in a report: "OpenCode (server)", "Claude Code", or the choice itself.
pub fn label(choice: &RuntimeChoice) -> String {
    match choice {
        RuntimeChoice::OpenCode => SERVER_LABEL.into(),
        RuntimeChoice::Acp { agent } => AgentPreset::by_id(agent).map(|p| p.name.to_string()).unwrap_or_else(|| choice.as_stored()),
    }
}

/// Why `choice` cannot be checked here (an agent that is not installed, or one the scripted model
/// cannot stand in for); `None` when it can.
pub fn unavailable(choice: &RuntimeChoice, agents: &AgentSearch) -> Option<String> {
    let RuntimeChoice::Acp { agent } = choice else { return None };
    match AgentPreset::by_id(agent) {
        Some(p) if p.kind == AgentKind::OpenCode => None,
        Some(p) if p.kind == AgentKind::ClaudeCode => agents.locate(p).err().map(|e| e.to_string()),
        Some(p) => Some(format!("{} cannot be pointed at the built-in model, so the self-test cannot check it.", p.name)),
        None => Some(format!("The self-test checks only the agents Hearth ships presets for, not {agent}.")),
    }
}

/// Why `choice` cannot be checked on `host`: projects on other hosts run OpenCode's server only.
pub fn unavailable_on(choice: &RuntimeChoice, host: &str) -> Option<String> {
    match choice {
        RuntimeChoice::OpenCode => None,
        RuntimeChoice::Acp { .. } => Some(format!("{} runs on this machine only, so the self-test cannot check it on {host}.", label(choice))),
    }
}

/// What a check's runtime is made of.
pub struct CheckSetup<'a> {
    /// The runtime binary, `rg` and the scripted model as the only profile.
    pub config: RuntimeConfig,
    pub model: &'a ScriptedModelServer,
    /// The gateway every session reaches, with the folder its secret file goes in.
    pub gateway: Option<(&'a Gateway, PathBuf)>,
    /// A staged skills folder (OpenCode's server and its ACP agent read it).
    pub skills: Option<PathBuf>,
    pub agents: &'a AgentSearch,
    /// Hearth's stdio bridge to the gateway, and whether sessions must use it (see `AcpSpec`).
    pub bridge: Option<Vec<String>>,
    pub transport: GatewayTransport,
    /// The project folder (agents that run one process per project start there).
    pub project: &'a Path,
    /// The host the projects are on, when they are not here.
    pub remote: Option<&'a RemoteSandbox>,
}

/// The selection for `choice`, as the app would make it, on the scripted model.
pub fn selection(choice: &RuntimeChoice, setup: CheckSetup<'_>) -> Result<RuntimeSelection, CheckError> {
    let mut config = setup.config;
    config.skills_paths.extend(setup.skills);
    // OpenCode, its server and its ACP agent alike, reaches the gateway through its configuration
    // (see `AcpSpec::for_preset`); other agents through their sessions.
    if let Some((gateway, private)) = &setup.gateway {
        let entry = gateway.mcp_entry_with_secret_file(private).map_err(|e| CheckError::Sandbox(e.to_string()))?;
        config.mcp.insert(GATEWAY_MCP_NAME.into(), entry);
        config.plugins.push(gateway.plugin(private).map_err(|e| CheckError::Sandbox(e.to_string()))?);
    }
    let agent = match (choice, setup.remote) {
        (RuntimeChoice::OpenCode, Some(remote)) => return Ok(remote.selection(config)),
        (RuntimeChoice::OpenCode, None) => return Ok(Arc::new(config)),
        (_, Some(remote)) => return Err(CheckError::Options(unavailable_on(choice, remote.host()).unwrap_or_default())),
        (RuntimeChoice::Acp { agent }, None) => agent,
    };
    let preset = AgentPreset::by_id(agent).ok_or_else(|| CheckError::Options(format!("there is no agent preset {agent}")))?;
    let anthropic = (preset.kind == AgentKind::ClaudeCode).then(|| AnthropicEndpoint {
        base_url: setup.model.anthropic_base_url(),
        api_key: Some(setup.model.api_key().to_string()),
        model: setup.model.model_id().to_string(),
    });
    let agent_setup = AgentSetup::for_preset(preset, setup.agents, &config, anthropic).map_err(|e| CheckError::Runtime(e.to_string()))?;
    let gateway_url = setup.gateway.as_ref().map(|(g, _)| g.url());
    let mut spec = AcpSpec::for_preset(preset, agent_setup, gateway_url, setup.bridge, setup.project, AcpBounds::default());
    spec.transport = setup.transport;
    Ok(Arc::new(spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opencode_is_always_checkable_and_other_agents_say_why_not() {
        let nowhere = AgentSearch { path_var: Some("/nonexistent".into()), ..Default::default() };
        assert_eq!(unavailable(&RuntimeChoice::OpenCode, &nowhere), None);
        assert_eq!(unavailable(&RuntimeChoice::Acp { agent: "opencode".into() }, &nowhere), None);
        let claude = unavailable(&RuntimeChoice::Acp { agent: "claude-code".into() }, &nowhere).unwrap();
        assert!(claude.contains("Claude Code was not found"), "{claude}");
        let codex = unavailable(&RuntimeChoice::Acp { agent: "codex".into() }, &nowhere).unwrap();
        assert!(codex.contains("cannot be pointed at the built-in model"), "{codex}");
        assert_eq!(label(&RuntimeChoice::OpenCode), SERVER_LABEL);
        assert_eq!(label(&RuntimeChoice::Acp { agent: "claude-code".into() }), "Claude Code");
        assert_eq!(checkable().len(), 3);
    }
}
