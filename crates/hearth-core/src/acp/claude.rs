//! Claude Code (its ACP adapter `@agentclientprotocol/claude-agent-acp` and the native `claude` it
//! starts) pointed at an Anthropic endpoint of one of Hearth's profiles — the built-in scripted
//! model's [`crate::scripted_model::ScriptedModelServer::anthropic_base_url`] among them: a
//! private home and config folder, the settings it needs to ask before acting, and every kind of
//! background traffic switched off.
//!
//! Found necessary by running it against a loopback endpoint: without `defaultMode: "default"`
//! Claude Code starts in `auto` mode, whose classifier calls (to a model the endpoint does not
//! script) block every tool call; without `CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION=false` a
//! "suggestion" request follows each turn.
//!
//! The adapter hands each session's MCP servers to its `claude` process on the command line
//! (`--mcp-config`), which any local user can read: the gateway credential of a session is
//! therefore never enough alone — the gateway serves it only from the adapter's own processes
//! (see [`super::GatewayCallers::AgentChildren`]) and only while a request runs on that session.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The adapter's entry script under a checkout or install root (run with `node`).
pub const CLAUDE_ACP_ENTRY: &str = "node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js";

/// Switches that keep Claude Code from calling anything but the configured endpoint, and from
/// making model calls a script does not expect.
pub const OFFLINE_SWITCHES: &[(&str, &str)] = &[
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("DISABLE_TELEMETRY", "1"),
    ("DISABLE_AUTOUPDATER", "1"),
    ("DISABLE_ERROR_REPORTING", "1"),
    ("DISABLE_BUG_COMMAND", "1"),
    ("CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION", "false"),
    // MCP tools are offered as tools in every request instead of being deferred behind ToolSearch,
    // so a model (scripted or not) can call them without a search round trip first.
    ("ENABLE_TOOL_SEARCH", "false"),
];

/// The settings file Claude Code reads from its config folder.
const SETTINGS: &str = r#"{"permissions":{"defaultMode":"default"}}"#;

#[derive(Debug, thiserror::Error)]
pub enum ClaudeEnvError {
    #[error("Could not prepare Claude Code's private folder {}: {source}", path.display())]
    Prepare {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Prepare `home` (created if missing; Claude Code keeps its config, sessions and temporary files
/// under it) and return the variables to start the adapter with. Start it with a cleared
/// environment plus these and a `PATH`, so nothing of the user's own Claude setup (a real API key,
/// a config folder, a proxy) reaches it.
pub fn claude_code_env(home: &Path, base_url: &str, api_key: &str) -> Result<Vec<(String, OsString)>, ClaudeEnvError> {
    let config = home.join(".claude");
    let dirs = [("XDG_CONFIG_HOME", home.join(".config")), ("XDG_DATA_HOME", home.join(".local/share")), ("XDG_CACHE_HOME", home.join(".cache")), ("XDG_STATE_HOME", home.join(".local/state")), ("TMPDIR", home.join("tmp"))];
    for dir in std::iter::once(&config).chain(dirs.iter().map(|(_, dir)| dir)) {
        std::fs::create_dir_all(dir).map_err(|source| ClaudeEnvError::Prepare { path: dir.clone(), source })?;
    }
    let settings = config.join("settings.json");
    std::fs::write(&settings, SETTINGS).map_err(|source| ClaudeEnvError::Prepare { path: settings, source })?;

    let mut env: Vec<(String, OsString)> = vec![
        ("HOME".into(), home.into()),
        ("CLAUDE_CONFIG_DIR".into(), config.into()),
        ("ANTHROPIC_BASE_URL".into(), base_url.into()),
        ("ANTHROPIC_API_KEY".into(), api_key.into()),
        ("LANG".into(), "C.UTF-8".into()),
    ];
    env.extend(dirs.into_iter().map(|(name, dir)| (name.to_owned(), dir.into())));
    env.extend(OFFLINE_SWITCHES.iter().map(|(name, value)| ((*name).to_owned(), (*value).into())));
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepares_a_private_home_with_the_settings() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let env = claude_code_env(&home, "http://127.0.0.1:9", "sk-x").unwrap();
        let get = |name: &str| env.iter().find(|(n, _)| n == name).map(|(_, v)| v.to_str().unwrap().to_owned());
        assert_eq!(get("HOME").unwrap(), home.to_str().unwrap());
        assert_eq!(get("CLAUDE_CONFIG_DIR").unwrap(), home.join(".claude").to_str().unwrap());
        assert_eq!(get("ANTHROPIC_BASE_URL").as_deref(), Some("http://127.0.0.1:9"));
        assert_eq!(get("CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION").as_deref(), Some("false"));
        assert!(home.join("tmp").is_dir());
        let settings: serde_json::Value = serde_json::from_slice(&std::fs::read(home.join(".claude/settings.json")).unwrap()).unwrap();
        assert_eq!(settings["permissions"]["defaultMode"], "default");
    }

    #[test]
    fn an_unusable_home_is_a_clear_error() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let err = claude_code_env(&file.path().join("home"), "http://127.0.0.1:9", "k").unwrap_err();
        assert!(err.to_string().starts_with("Could not prepare Claude Code's private folder"), "{err}");
    }
}
