//! The agents Hearth runs over ACP: the presets it knows — how each is found on the machine, what it
//! can do, which of its processes may call Hearth's gateway — and custom agents the user names by a
//! command line, like a custom MCP server.

use std::path::{Path, PathBuf};

/// Which agent program an agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum AgentKind {
    /// `opencode acp`: the bundled runtime binary, always available.
    OpenCode,
    /// Claude Code through its ACP adapter (`claude-agent-acp`).
    ClaudeCode,
    /// Codex through its ACP adapter (`codex-acp`).
    Codex,
    /// Gemini CLI (`gemini --acp`).
    Gemini,
    /// A command line the user gave.
    Custom,
}

/// Which processes of an agent may call Hearth's gateway for its sessions. The agent's own tools
/// (its shell) run as the user in the same process tree, so the gateway serves the processes that
/// hold the agent's MCP clients and nothing below them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum GatewayCallers {
    /// The agent process itself (its shell commands are its children).
    AgentProcess,
    /// The agent process and its direct children: Claude Code's adapter runs one `claude` process
    /// per session, which holds that session's MCP clients (its shell commands are grandchildren).
    AgentChildren,
}

/// What Hearth knows of an agent it ships a preset for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentPreset {
    pub kind: AgentKind,
    /// Stable id: the runtime choice a project stores (`acp:<id>`).
    pub id: &'static str,
    pub name: &'static str,
    /// Executable looked up on PATH and in `node_modules/.bin` (not used for OpenCode, which is the
    /// located runtime binary).
    pub program: &'static str,
    pub args: &'static [&'static str],
    /// Environment variable naming the executable explicitly (checked first).
    pub bin_env: &'static str,
    /// What to run to install it, for the sentence shown when it is missing.
    pub install: &'static str,
    pub callers: GatewayCallers,
    /// The agent's sandbox is its process's working folder (Codex): one process per project.
    pub process_per_project: bool,
    /// The session mode that keeps the agent read-only (Hearth's Ask mode), where it has one.
    pub read_only_mode: Option<&'static str>,
    /// What the version Hearth's tests run (pinned in `package.json`) announced of itself, shown
    /// until the agent has started here and said so itself; `None` when Hearth has not run it.
    pub tested: Option<AgentAbilities>,
}

/// What an agent announces in `initialize` that a user choosing it cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct AgentAbilities {
    /// It can load a stored session: a conversation continues after Hearth restarts.
    pub continues_after_restart: bool,
    /// It takes images in prompts.
    pub images: bool,
}

pub const OPENCODE: AgentPreset = AgentPreset {
    kind: AgentKind::OpenCode,
    id: "opencode",
    name: "OpenCode (ACP)",
    program: "opencode",
    args: &["acp"],
    bin_env: crate::opencode::BIN_ENV,
    install: "it is the bundled runtime: see the Runtime view",
    callers: GatewayCallers::AgentProcess,
    process_per_project: false,
    read_only_mode: Some("plan"),
    tested: Some(AgentAbilities { continues_after_restart: true, images: true }),
};

pub const CLAUDE_CODE: AgentPreset = AgentPreset {
    kind: AgentKind::ClaudeCode,
    id: "claude-code",
    name: "Claude Code",
    program: "claude-agent-acp",
    args: &[],
    bin_env: "HEARTH_CLAUDE_ACP_BIN",
    install: "npm install -g @agentclientprotocol/claude-agent-acp",
    callers: GatewayCallers::AgentChildren,
    process_per_project: false,
    read_only_mode: Some("plan"),
    tested: Some(AgentAbilities { continues_after_restart: true, images: true }),
};

pub const CODEX: AgentPreset = AgentPreset {
    kind: AgentKind::Codex,
    id: "codex",
    name: "Codex",
    program: "codex-acp",
    args: &[],
    bin_env: "HEARTH_CODEX_ACP_BIN",
    install: "npm install -g @zed-industries/codex-acp",
    callers: GatewayCallers::AgentProcess,
    process_per_project: true,
    read_only_mode: Some("read-only"),
    tested: None,
};

pub const GEMINI: AgentPreset = AgentPreset {
    kind: AgentKind::Gemini,
    id: "gemini",
    name: "Gemini CLI",
    program: "gemini",
    args: &["--acp"],
    bin_env: "HEARTH_GEMINI_BIN",
    install: "npm install -g @google/gemini-cli",
    callers: GatewayCallers::AgentProcess,
    process_per_project: false,
    read_only_mode: None,
    tested: None,
};

/// Whether `choice` runs OpenCode: its server, or its ACP agent (one binary, one configuration of
/// profiles and skills).
pub fn is_opencode(choice: &crate::runtime::RuntimeChoice) -> bool {
    match choice {
        crate::runtime::RuntimeChoice::OpenCode => true,
        crate::runtime::RuntimeChoice::Acp { agent } => agent == OPENCODE.id,
    }
}

/// Every preset, in the order the window lists them.
pub const PRESETS: &[AgentPreset] = &[OPENCODE, CLAUDE_CODE, CODEX, GEMINI];

impl AgentPreset {
    pub fn by_id(id: &str) -> Option<&'static AgentPreset> {
        PRESETS.iter().find(|p| p.id == id)
    }
}

/// An agent the user added by its command line.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct CustomAgent {
    pub id: String,
    pub name: String,
    /// The program and its arguments.
    pub command: Vec<String>,
}

/// Custom agents' runtime choices are `acp:custom-<id>`.
pub const CUSTOM_PREFIX: &str = "custom-";

/// An agent as the Runtime view lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct AgentSummary {
    /// The runtime choice that selects it (`acp:<id>`).
    pub choice: String,
    pub name: String,
    pub kind: AgentKind,
    /// Where it was found; `None` when it is missing.
    pub binary: Option<String>,
    /// Why it cannot run, in a sentence (missing, and how to install it); `None` when it can.
    pub problem: Option<String>,
    /// What it can do, as it announced when it last started here, else as the tested version
    /// did; `None` until either is known (a custom agent before its first start).
    pub abilities: Option<AgentAbilities>,
    /// Whether `abilities` is what the agent announced here (not the tested version's).
    pub abilities_seen: bool,
    /// The version it reported when it last started here.
    pub version: Option<String>,
    /// The last time it was used and failed (could not start, stopped, fell silent): the sentence
    /// the conversation showed. Cleared by its next finished reply.
    pub last_failure: Option<String>,
}

/// Why an agent cannot be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentMissing {
    #[error("{name} was not found: {env} is set to {path}, which is not an executable file.")]
    BadExplicit { name: String, env: String, path: String },
    #[error("{name} was not found on this machine (looked for `{program}` on PATH). To use it, run: {install}")]
    NotInstalled { name: String, program: String, install: String },
    #[error("The custom agent `{name}` has no command line; edit it in the Runtime view.")]
    EmptyCommand { name: String },
    #[error("The custom agent `{name}` runs `{program}`, which was not found (not a file, and not on PATH).")]
    CustomNotFound { name: String, program: String },
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// Find `program` as a shell would: a path with a slash is taken as it is, a bare name is looked
/// up in each folder of `path_var`.
pub fn find_program(program: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return is_executable(&p).then_some(p);
    }
    std::env::split_paths(path_var?).map(|dir| dir.join(program)).find(|p| is_executable(p))
}

/// Where to look for a preset's executable: its variable, then PATH, then `node_modules/.bin`
/// above each anchor (a checkout's development install).
#[derive(Debug, Clone, Default)]
pub struct AgentSearch {
    pub env: Vec<(String, PathBuf)>,
    pub path_var: Option<std::ffi::OsString>,
    pub anchors: Vec<PathBuf>,
}

impl AgentSearch {
    /// The search this process would do: its environment and PATH, and `anchors`.
    pub fn from_process(anchors: Vec<PathBuf>) -> Self {
        let env = PRESETS
            .iter()
            .filter_map(|p| std::env::var_os(p.bin_env).filter(|v| !v.is_empty()).map(|v| (p.bin_env.to_string(), PathBuf::from(v))))
            .collect();
        Self { env, path_var: std::env::var_os("PATH"), anchors }
    }

    /// The executable of a preset other than OpenCode (whose binary is the located runtime).
    pub fn locate(&self, preset: &AgentPreset) -> Result<PathBuf, AgentMissing> {
        if let Some((_, path)) = self.env.iter().find(|(k, _)| k == preset.bin_env) {
            return if is_executable(path) {
                Ok(path.clone())
            } else {
                Err(AgentMissing::BadExplicit { name: preset.name.into(), env: preset.bin_env.into(), path: path.display().to_string() })
            };
        }
        if let Some(found) = find_program(preset.program, self.path_var.as_deref()) {
            return Ok(found);
        }
        for anchor in &self.anchors {
            for dir in anchor.ancestors() {
                let candidate = dir.join("node_modules/.bin").join(preset.program);
                if is_executable(&candidate) {
                    return Ok(candidate);
                }
            }
        }
        Err(AgentMissing::NotInstalled { name: preset.name.into(), program: preset.program.into(), install: preset.install.into() })
    }

    /// A custom agent's program, resolved like a shell would.
    pub fn locate_custom(&self, agent: &CustomAgent) -> Result<PathBuf, AgentMissing> {
        let program = agent.command.first().filter(|p| !p.trim().is_empty()).ok_or_else(|| AgentMissing::EmptyCommand { name: agent.name.clone() })?;
        find_program(program, self.path_var.as_deref()).ok_or_else(|| AgentMissing::CustomNotFound { name: agent.name.clone(), program: program.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn exe(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_preset_is_found_by_its_variable_then_path_then_a_checkouts_node_modules() {
        let tmp = tempfile::tempdir().unwrap();
        let checkout = tmp.path().join("checkout");
        let in_modules = checkout.join("node_modules/.bin/claude-agent-acp");
        exe(&in_modules);
        let search = AgentSearch { anchors: vec![checkout.join("target/release")], ..Default::default() };
        assert_eq!(search.locate(&CLAUDE_CODE).unwrap(), in_modules);

        let on_path = tmp.path().join("bin/claude-agent-acp");
        exe(&on_path);
        let search = AgentSearch { path_var: Some(tmp.path().join("bin").into()), ..search };
        assert_eq!(search.locate(&CLAUDE_CODE).unwrap(), on_path);

        let explicit = tmp.path().join("elsewhere/adapter");
        exe(&explicit);
        let search = AgentSearch { env: vec![(CLAUDE_CODE.bin_env.into(), explicit.clone())], ..search };
        assert_eq!(search.locate(&CLAUDE_CODE).unwrap(), explicit);
    }

    #[test]
    fn a_missing_agent_says_how_to_install_it_and_a_wrong_variable_names_itself() {
        let tmp = tempfile::tempdir().unwrap();
        let search = AgentSearch { path_var: Some(tmp.path().into()), ..Default::default() };
        let err = search.locate(&CODEX).unwrap_err();
        assert!(matches!(err, AgentMissing::NotInstalled { .. }));
        assert!(err.to_string().contains("npm install -g @zed-industries/codex-acp"), "{err}");

        let search = AgentSearch { env: vec![(GEMINI.bin_env.into(), tmp.path().join("nope"))], ..search };
        let err = search.locate(&GEMINI).unwrap_err();
        assert!(err.to_string().contains("HEARTH_GEMINI_BIN"), "{err}");
    }

    #[test]
    fn a_custom_agent_needs_a_program_that_exists() {
        let search = AgentSearch { path_var: std::env::var_os("PATH"), ..Default::default() };
        let agent = |command: &[&str]| CustomAgent { id: "a".into(), name: "Mine".into(), command: command.iter().map(|s| s.to_string()).collect() };
        assert!(matches!(search.locate_custom(&agent(&[])), Err(AgentMissing::EmptyCommand { .. })));
        assert!(matches!(search.locate_custom(&agent(&["/no/such/agent"])), Err(AgentMissing::CustomNotFound { .. })));
        assert!(search.locate_custom(&agent(&["sh", "-c", "true"])).is_ok());
    }
}
