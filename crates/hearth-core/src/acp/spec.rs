//! One ACP agent configuration: which agent, how it is started (its setup), where its sessions reach
//! Hearth's gateway, the model it is told to use, and its bounds. Two equal specs share one agent
//! process; the registry keeps one current configuration per agent (its slot).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::agents::{AgentKind, AgentMissing, AgentPreset, AgentSearch, GatewayCallers};
use super::process::AgentLaunch;
use super::runtime::AcpRuntime;
use crate::opencode::config::RuntimeConfig;
use crate::runtime::{ProcessRuntime, RuntimeError, RuntimeHost, RuntimeKey, RuntimeSlot, RuntimeSpec};

/// How long an agent may take to answer `initialize` (Bun and Node agents start in 2–5 s here).
pub const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long opening a session may take (Claude Code starts a process per session).
pub const SESSION_OPEN_TIMEOUT: Duration = Duration::from_secs(60);
/// Small calls: a model or mode choice, closing a session.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// After `session/cancel`, how long the agent gets to end the prompt before the turn ends anyway.
pub const CANCEL_SETTLE_TIMEOUT: Duration = Duration::from_secs(10);
/// A prompt during which the agent sends nothing at all for this long has hung: the turn fails
/// with a sentence (the agent itself stays; a later turn may work).
pub const PROMPT_SILENCE_LIMIT: Duration = Duration::from_secs(10 * 60);

/// The time bounds of one agent's protocol (tests shorten them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AcpBounds {
    pub initialize: Duration,
    pub session_open: Duration,
    pub call: Duration,
    pub cancel_settle: Duration,
    pub prompt_silence: Duration,
}

impl Default for AcpBounds {
    fn default() -> Self {
        Self {
            initialize: INITIALIZE_TIMEOUT,
            session_open: SESSION_OPEN_TIMEOUT,
            call: CALL_TIMEOUT,
            cancel_settle: CANCEL_SETTLE_TIMEOUT,
            prompt_silence: PROMPT_SILENCE_LIMIT,
        }
    }
}

/// An Anthropic Messages endpoint from one of the user's model profiles, for Claude Code.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct AnthropicEndpoint {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
}

impl std::fmt::Debug for AnthropicEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicEndpoint").field("base_url", &self.base_url).field("model", &self.model).finish_non_exhaustive()
    }
}

/// How an agent's process is prepared and started.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AgentSetup {
    /// `opencode acp`, with the same configuration (profiles, skills) and the same guard and
    /// private root as OpenCode's server.
    OpenCode { config: RuntimeConfig },
    /// Claude Code's adapter. With an endpoint, in a private configuration folder told to use it;
    /// without, with the user's own account and settings.
    ClaudeCode { program: PathBuf, endpoint: Option<AnthropicEndpoint> },
    /// A program run with the user's own environment and configuration (Codex, Gemini, custom).
    Plain { program: PathBuf, args: Vec<String> },
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("The agent's private folder {path} could not be prepared: {source}")]
    Root { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    OpenCode(#[from] crate::opencode::config::ConfigError),
    #[error(transparent)]
    OpenCodeRoot(#[from] crate::opencode::launch::LaunchError),
    #[error(transparent)]
    Claude(#[from] super::claude::ClaudeEnvError),
}

impl AgentSetup {
    /// The program this setup runs.
    pub fn program(&self) -> &Path {
        match self {
            AgentSetup::OpenCode { config } => &config.binary,
            AgentSetup::ClaudeCode { program, .. } | AgentSetup::Plain { program, .. } => program,
        }
    }

    /// Prepare `root` (the agent's private folder) and say how to start the agent.
    pub fn prepare(&self, root: &Path) -> Result<AgentLaunch, SetupError> {
        let err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SetupError::Root { path, source }
        };
        std::fs::create_dir_all(root).map_err(err(root))?;
        match self {
            AgentSetup::OpenCode { config } => {
                config.validate()?;
                let (args, env) = crate::opencode::launch::prepare_acp(config, root)?;
                Ok(AgentLaunch { program: config.binary.clone(), args, env, current_dir: root.to_path_buf() })
            }
            AgentSetup::ClaudeCode { program, endpoint: Some(endpoint) } => {
                let key = endpoint.api_key.clone().unwrap_or_else(|| "hearth-no-key".into());
                let private = super::claude::claude_code_env(&root.join("home"), endpoint.base_url.trim_end_matches('/'), &key)?;
                let mut env: Vec<(String, String)> = private.into_iter().map(|(k, v)| (k, v.to_string_lossy().into_owned())).collect();
                env.push(("PATH".into(), std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.into())));
                env.push(("ANTHROPIC_MODEL".into(), endpoint.model.clone()));
                env.push(("ANTHROPIC_SMALL_FAST_MODEL".into(), endpoint.model.clone()));
                Ok(AgentLaunch { program: program.clone(), args: vec![], env, current_dir: root.to_path_buf() })
            }
            AgentSetup::ClaudeCode { program, endpoint: None } => {
                let mut env = user_env();
                env.extend(super::claude::OFFLINE_SWITCHES.iter().map(|(k, v)| (k.to_string(), v.to_string())));
                Ok(AgentLaunch { program: program.clone(), args: vec![], env, current_dir: root.to_path_buf() })
            }
            AgentSetup::Plain { program, args } => Ok(AgentLaunch { program: program.clone(), args: args.clone(), env: user_env(), current_dir: root.to_path_buf() }),
        }
    }
}

/// PATH when Hearth itself has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The user's own environment, for an agent that runs with the user's account and configuration,
/// without Hearth's own variables.
fn user_env() -> Vec<(String, String)> {
    std::env::vars().filter(|(k, _)| !k.starts_with("HEARTH_")).collect()
}

impl AcpSpec {
    /// The spec of a preset: the one way the app and the diagnostics turn a preset and its setup
    /// into a configuration, so what the self-test proves is what a conversation runs.
    /// `project` is the project folder, used only by agents that run one process per project.
    ///
    /// `opencode acp` is not handed the gateway per session: it keeps one MCP client per folder,
    /// named as `session/new` names it, so a second session of the folder would replace the first
    /// one's credential and its calls would carry the other's. It reaches the gateway as OpenCode's
    /// server does instead, through its configuration, with Hearth's plugin stamping each call with
    /// the calling session (the `config` of its setup must carry both, as `Tools::configure` adds).
    pub fn for_preset(preset: &AgentPreset, setup: AgentSetup, gateway_url: Option<String>, bridge: Option<Vec<String>>, project: &Path, bounds: AcpBounds) -> Self {
        let gateway_url = gateway_url.filter(|_| preset.kind != AgentKind::OpenCode);
        let model = match &setup {
            AgentSetup::OpenCode { config } => config.resolve_profile(None).ok().map(opencode_model_id),
            _ => None,
        };
        AcpSpec {
            agent_id: preset.id.to_string(),
            name: preset.name.to_string(),
            kind: preset.kind,
            setup,
            callers: preset.callers,
            read_only_mode: preset.read_only_mode.map(str::to_owned),
            gateway_url,
            bridge,
            transport: GatewayTransport::Auto,
            model,
            project: preset.process_per_project.then(|| project.to_path_buf()),
            bounds,
        }
    }

    /// The model a session of this agent should use for a request naming `profile` (`None`: the
    /// configuration's default): `opencode acp` takes any of the configuration's profiles by its
    /// `provider/model` id; other agents keep the model their setup gave them.
    pub fn model_for(&self, profile: Option<&str>) -> Option<String> {
        match &self.setup {
            AgentSetup::OpenCode { config } => config.resolve_profile(profile).ok().map(opencode_model_id).or_else(|| self.model.clone()),
            _ => self.model.clone(),
        }
    }
}

/// How `opencode acp` names a profile's model in `session/set_config_option model`.
fn opencode_model_id(profile: &crate::opencode::config::ModelProfile) -> String {
    format!("{}/{}", profile.provider_id(), profile.model)
}

impl AgentSetup {
    /// How a preset other than a custom agent is started: `opencode acp` with `config` (the
    /// located runtime binary), Claude Code pointed at `anthropic` when given, the others as the
    /// preset's command line. The program is found by `search`.
    pub fn for_preset(preset: &AgentPreset, search: &AgentSearch, config: &RuntimeConfig, anthropic: Option<AnthropicEndpoint>) -> Result<Self, AgentMissing> {
        Ok(match preset.kind {
            AgentKind::OpenCode => AgentSetup::OpenCode { config: config.clone() },
            AgentKind::ClaudeCode => AgentSetup::ClaudeCode { program: search.locate(preset)?, endpoint: anthropic },
            _ => AgentSetup::Plain { program: search.locate(preset)?, args: preset.args.iter().map(|a| a.to_string()).collect() },
        })
    }
}

/// How an agent's sessions reach Hearth's gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub enum GatewayTransport {
    /// Over HTTP where the agent announces it can, else through the stdio bridge.
    #[default]
    Auto,
    /// Through the stdio bridge even where the agent could use HTTP (an agent whose HTTP MCP
    /// client does not work, and the tests of the bridge with a real agent).
    Stdio,
}

/// Everything that makes one agent process what it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AcpSpec {
    /// The agent's id (a preset's, or `custom-<id>`): its registry slot.
    pub agent_id: String,
    pub name: String,
    pub kind: AgentKind,
    pub setup: AgentSetup,
    pub callers: GatewayCallers,
    /// The session mode for Hearth's Ask mode (read-only), where the agent has one.
    pub read_only_mode: Option<String>,
    /// Where sessions reach Hearth's gateway (its MCP endpoint); `None`: no gateway tools.
    pub gateway_url: Option<String>,
    /// The command of Hearth's stdio bridge to the gateway (`hearth mcp-bridge`), handed to each
    /// session of an agent that takes MCP servers over stdio only; `None`: such an agent gets no
    /// gateway tools.
    pub bridge: Option<Vec<String>>,
    /// How sessions reach the gateway.
    pub transport: GatewayTransport,
    /// The model each session is told to use (`session/set_config_option model`), if any.
    pub model: Option<String>,
    /// Set for agents that run one process per project (their sandbox is their working folder):
    /// the project's folder, which the process starts in.
    pub project: Option<PathBuf>,
    pub bounds: AcpBounds,
}

impl AcpSpec {
    /// The registry's key: the program and everything else, secrets as their SHA-256 only.
    pub fn runtime_key(&self) -> RuntimeKey {
        use sha2::{Digest, Sha256};
        let setup = match &self.setup {
            AgentSetup::OpenCode { config } => json!({"opencode": config.key().as_str()}),
            AgentSetup::ClaudeCode { endpoint, .. } => json!({"claude": endpoint.as_ref().map(|e| json!({
                "base_url": e.base_url,
                "model": e.model,
                "key": e.api_key.as_ref().map(|k| format!("{:x}", Sha256::digest(k.as_bytes()))),
            }))}),
            AgentSetup::Plain { args, .. } => json!({"args": args}),
        };
        let view = json!({
            "agent": self.agent_id,
            "setup": setup,
            "read_only_mode": self.read_only_mode,
            "gateway": self.gateway_url,
            "bridge": self.bridge,
            "transport": self.transport,
            "model": self.model,
            "project": self.project,
            "bounds": format!("{:?}", self.bounds),
        });
        RuntimeKey::from_config(self.setup.program(), &view).expect("a JSON value always encodes")
    }
}

impl RuntimeSpec for AcpSpec {
    fn family(&self) -> &'static str {
        super::FAMILY
    }

    fn slot(&self) -> RuntimeSlot {
        match &self.project {
            // One process per project: each project's is its own slot, so they never retire each other.
            Some(project) => RuntimeSlot::variant(super::FAMILY, format!("{}@{}", self.agent_id, project.display())),
            None => RuntimeSlot::variant(super::FAMILY, self.agent_id.clone()),
        }
    }

    fn key(&self) -> RuntimeKey {
        self.runtime_key()
    }

    fn create(&self, host: &RuntimeHost) -> Result<Arc<dyn ProcessRuntime>, RuntimeError> {
        let root = host.root.join(super::FAMILY).join(&self.agent_id);
        Ok(Arc::new(AcpRuntime::new(self.clone(), root, host.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(setup: AgentSetup) -> AcpSpec {
        AcpSpec {
            agent_id: "claude-code".into(),
            name: "Claude Code".into(),
            kind: AgentKind::ClaudeCode,
            setup,
            callers: GatewayCallers::AgentChildren,
            read_only_mode: Some("plan".into()),
            gateway_url: Some("http://127.0.0.1:1/mcp".into()),
            bridge: None,
            transport: GatewayTransport::Auto,
            model: None,
            project: None,
            bounds: AcpBounds::default(),
        }
    }

    fn claude(key: &str) -> AgentSetup {
        AgentSetup::ClaudeCode {
            program: "/bin/claude-agent-acp".into(),
            endpoint: Some(AnthropicEndpoint { base_url: "http://127.0.0.1:9/v1".into(), api_key: Some(key.into()), model: "m".into() }),
        }
    }

    #[test]
    fn the_key_changes_with_the_endpoints_key_but_never_shows_it() {
        let a = spec(claude("sk-one"));
        let b = spec(claude("sk-two"));
        assert_ne!(a.key(), b.key());
        assert_eq!(a.key(), spec(claude("sk-one")).key());
        assert!(!format!("{a:?}").contains("sk-one"), "Debug hides the key");
        assert_eq!(a.slot().to_string(), "acp:claude-code");
    }

    #[test]
    fn a_private_claude_setup_writes_its_settings_and_points_at_the_endpoint() {
        let tmp = tempfile::tempdir().unwrap();
        let launch = claude("sk-one").prepare(tmp.path()).unwrap();
        let env: std::collections::HashMap<_, _> = launch.env.iter().cloned().collect();
        assert_eq!(env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9/v1");
        assert_eq!(env["ANTHROPIC_MODEL"], "m");
        assert_eq!(env["HOME"], tmp.path().join("home").display().to_string());
        assert!(tmp.path().join("home/.claude/settings.json").is_file());
        assert!(!format!("{launch:?}").contains("sk-one"), "Debug shows variable names only");
    }

    #[test]
    fn per_project_agents_have_a_slot_per_project() {
        let mut a = spec(AgentSetup::Plain { program: "/bin/codex-acp".into(), args: vec![] });
        a.project = Some("/p/one".into());
        let mut b = a.clone();
        b.project = Some("/p/two".into());
        assert_ne!(a.slot(), b.slot());
        assert_ne!(a.key(), b.key());
    }
}
