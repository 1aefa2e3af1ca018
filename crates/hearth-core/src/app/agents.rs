//! The runtime a conversation runs on, as the user chose it: OpenCode's server, or an agent over
//! ACP (a preset found on the machine, or a custom command line). Turns a choice into the selection
//! the manager runs, lists every agent for the Runtime view, and keeps the choices.

use std::sync::Arc;

use super::{blocking, AppError, AppResult, Hearth};
use crate::acp::agents::{AgentPreset, AgentSearch, CUSTOM_PREFIX};
use crate::acp::agents::AgentAbilities;
use crate::acp::{AcpRuntime, AcpSpec, AgentKind, AgentSetup, AgentSummary, AnthropicEndpoint, CustomAgent, GatewayCallers, PRESETS};
use crate::runtime::{FailureKind, RuntimeChoice, RuntimeSelection, TurnEnd};
use crate::space::ExecutionSpace;
use crate::opencode::config::Authentication;
use crate::store::{anthropic_root, Conversation, ModelProtocol, Project, BUILTIN_SCRIPTED_BASE_URL};

/// The last failure of each agent, by its runtime choice, for the Runtime view: a turn that ended
/// because the agent could not start, stopped or fell silent. Its next finished turn clears it.
#[derive(Default)]
pub(crate) struct AgentFailures(std::sync::Mutex<std::collections::HashMap<String, String>>);

impl AgentFailures {
    pub fn turn_ended(&self, choice: &RuntimeChoice, end: &TurnEnd) {
        if !matches!(choice, RuntimeChoice::Acp { .. }) {
            return;
        }
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match end {
            TurnEnd::Done { .. } => {
                all.remove(&choice.as_stored());
            }
            TurnEnd::Failed(f) if matches!(f.kind, FailureKind::Start | FailureKind::RuntimeDied | FailureKind::Unreachable | FailureKind::Refused) => {
                all.insert(choice.as_stored(), f.message.clone());
            }
            _ => {}
        }
    }

    fn last(&self, choice: &str) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(choice).cloned()
    }
}

/// The runtime a conversation uses: its own choice, else its project's.
pub fn choice_of(conversation: &Conversation, project: &Project) -> RuntimeChoice {
    conversation.runtime.clone().unwrap_or_else(|| project.runtime.clone())
}

impl Hearth {
    pub(crate) fn agent_search(&self) -> AgentSearch {
        AgentSearch::from_process(self.binary_inputs.opencode.anchors.clone())
    }

    /// The manager's selection for `choice` in `space`.
    pub(crate) async fn selection_for(&self, choice: &RuntimeChoice, space: &ExecutionSpace) -> AppResult<RuntimeSelection> {
        let binaries = self.binaries().await?;
        let mut config = super::runtime_config::runtime_config(&self.store, &binaries, &self.builtin).await?;
        let agent = match choice {
            RuntimeChoice::OpenCode => {
                self.tools.configure(&mut config).await;
                return Ok(Arc::new(config));
            }
            RuntimeChoice::Acp { agent } => agent,
        };
        let gateway_url = Some(self.tools.hooks.gateway().url());
        if let Some(id) = agent.strip_prefix(CUSTOM_PREFIX) {
            let custom = self.custom_agent(id).await?;
            let program = self.agent_search().locate_custom(&custom)?;
            return Ok(Arc::new(AcpSpec {
                agent_id: agent.clone(),
                name: custom.name,
                kind: AgentKind::Custom,
                setup: AgentSetup::Plain { program, args: custom.command[1..].to_vec() },
                // A custom agent's shell may be its direct child too: only its own process is served.
                callers: GatewayCallers::AgentProcess,
                read_only_mode: None,
                gateway_url,
                bridge: self.bridge_command.clone(),
                transport: Default::default(),
                model: None,
                project: None,
                bounds: self.acp_bounds,
            }));
        }
        let preset = AgentPreset::by_id(agent).ok_or_else(|| AppError::UnknownAgent(agent.clone()))?;
        if preset.kind == AgentKind::OpenCode {
            // Like the server: the gateway and its stamping plugin in the configuration (see
            // `AcpSpec::for_preset`), and the staged skills.
            self.tools.configure(&mut config).await;
        }
        let anthropic = match preset.kind {
            AgentKind::ClaudeCode => self.claude_endpoint(&config).await?,
            _ => None,
        };
        let setup = AgentSetup::for_preset(preset, &self.agent_search(), &config, anthropic)?;
        Ok(Arc::new(AcpSpec::for_preset(preset, setup, gateway_url, self.bridge_command.clone(), &space.root, self.acp_bounds)))
    }

    /// Where Claude Code is pointed: the default profile when Claude Code can use it — the built-in
    /// model (its Anthropic endpoint, no account needed) or a profile speaking Anthropic Messages —
    /// in a private configuration folder; otherwise (an OpenAI-compatible default) nowhere, and it
    /// uses the user's own Claude account and settings. One process serves every conversation, so
    /// the default profile, not each conversation's, decides.
    async fn claude_endpoint(&self, config: &crate::opencode::config::RuntimeConfig) -> AppResult<Option<AnthropicEndpoint>> {
        let Ok(default) = config.resolve_profile(None) else { return Ok(None) };
        let stored = blocking(&self.store, |s| s.list_profiles()).await?;
        if stored.iter().any(|p| p.id == default.id && p.base_url == BUILTIN_SCRIPTED_BASE_URL) {
            let server = self.builtin.get().await?;
            return Ok(Some(AnthropicEndpoint { base_url: server.anthropic_base_url(), api_key: Some(server.api_key().to_string()), model: server.model_id().to_string() }));
        }
        Ok((default.protocol == ModelProtocol::AnthropicMessages).then(|| AnthropicEndpoint {
            base_url: anthropic_root(&default.base_url).to_string(),
            api_key: match &default.authentication {
                Authentication::ApiKey(k) => Some(k.clone()),
                Authentication::None => None,
            },
            model: default.model.clone(),
        }))
    }

    async fn custom_agent(&self, id: &str) -> AppResult<CustomAgent> {
        let id = id.to_string();
        blocking(&self.store, move |s| s.get_custom_agent(&id)).await
    }

    /// Every agent a project can choose, with where it was found or why it cannot run, what it
    /// can do, its version and its last failure.
    pub async fn list_agents(&self) -> AppResult<Vec<AgentSummary>> {
        let search = self.agent_search();
        let runtime = self.binaries().await.map(|b| b.opencode);
        let mut out = Vec::new();
        for preset in PRESETS {
            let found = match preset.kind {
                AgentKind::OpenCode => runtime.as_ref().cloned().map_err(|e| e.to_string()),
                _ => search.locate(preset).map_err(|e| e.to_string()),
            };
            let choice = RuntimeChoice::Acp { agent: preset.id.into() }.as_stored();
            out.push(self.summary(choice, preset.name.into(), preset.kind, found, preset.tested));
        }
        let customs = blocking(&self.store, |s| s.list_custom_agents()).await?;
        for custom in customs {
            let found = search.locate_custom(&custom).map_err(|e| e.to_string());
            let choice = RuntimeChoice::Acp { agent: format!("{CUSTOM_PREFIX}{}", custom.id) }.as_stored();
            out.push(self.summary(choice, custom.name.clone(), AgentKind::Custom, found, None));
        }
        Ok(out)
    }

    fn summary(&self, choice: String, name: String, kind: AgentKind, found: Result<std::path::PathBuf, String>, tested: Option<AgentAbilities>) -> AgentSummary {
        // What the agent said of itself when it last started in this Hearth, if it did.
        let seen = self.runtimes.processes_of(&choice).iter().find_map(|p| p.as_any().downcast_ref::<AcpRuntime>().and_then(AcpRuntime::agent_info));
        AgentSummary {
            name,
            kind,
            binary: found.as_ref().ok().map(|p| p.display().to_string()),
            problem: found.err(),
            abilities: seen.as_ref().map(|i| AgentAbilities { continues_after_restart: i.load_session, images: i.images }).or(tested),
            abilities_seen: seen.is_some(),
            version: seen.map(|i| i.version).filter(|v| !v.is_empty()),
            last_failure: self.agent_failures.last(&choice),
            choice,
        }
    }

    pub async fn add_custom_agent(&self, name: String, command: Vec<String>) -> AppResult<CustomAgent> {
        blocking(&self.store, move |s| s.add_custom_agent(&name, &command)).await
    }

    pub async fn update_custom_agent(&self, id: String, name: String, command: Vec<String>) -> AppResult<CustomAgent> {
        blocking(&self.store, move |s| s.update_custom_agent(&id, &name, &command)).await
    }

    pub async fn remove_custom_agent(&self, id: String) -> AppResult<()> {
        blocking(&self.store, move |s| s.remove_custom_agent(&id)).await
    }

    /// The runtime a project's new conversations use (those with messages keep theirs).
    pub async fn set_project_runtime(&self, project_id: String, runtime: RuntimeChoice) -> AppResult<Project> {
        blocking(&self.store, move |s| {
            s.set_project_runtime(&project_id, &runtime)?;
            s.get_project(&project_id)
        })
        .await
    }

    /// A conversation's own runtime (`None`: its project's), before its first message.
    pub async fn set_conversation_runtime(&self, conversation_id: String, runtime: Option<RuntimeChoice>) -> AppResult<Conversation> {
        blocking(&self.store, move |s| {
            s.set_conversation_runtime(&conversation_id, runtime.as_ref())?;
            s.get_conversation(&conversation_id)
        })
        .await
    }
}
