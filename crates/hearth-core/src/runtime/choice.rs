//! Which runtime runs a conversation: OpenCode's server (the default), or an agent over the Agent
//! Client Protocol. A project chooses; a conversation may choose otherwise before its first message,
//! and keeps its runtime from then on (its native session lives in that runtime).

use std::fmt;

/// A runtime choice, as a project or conversation stores it (`opencode`, `acp:<agent id>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(tag = "family", rename_all = "camelCase")]
pub enum RuntimeChoice {
    /// OpenCode's HTTP server, shared by every project.
    #[default]
    OpenCode,
    /// An ACP agent: a preset's id (`claude-code`) or a custom agent's (`custom-<id>`).
    Acp { agent: String },
}

const ACP_PREFIX: &str = "acp:";

/// What a runtime offers beyond running turns, so the window offers only what works there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeFeatures {
    /// Compact a conversation on request (`AgentRuntime::compact_conversation`).
    pub compact: bool,
    /// Undo and redo a turn: the files and the runtime's history together (`rewind_history`).
    pub undo: bool,
    /// Fork a conversation from a reply (`fork_session`).
    pub fork: bool,
}

impl RuntimeChoice {
    /// The stored form. Parsing it back gives the same choice.
    pub fn as_stored(&self) -> String {
        self.to_string()
    }

    /// What this runtime offers: OpenCode's server all of it; an ACP agent none, since the
    /// protocol has no request to compact, forget turns or copy a session (the files a turn
    /// changed are still listed and their diffs shown).
    pub fn features(&self) -> RuntimeFeatures {
        let all = matches!(self, RuntimeChoice::OpenCode);
        RuntimeFeatures { compact: all, undo: all, fork: all }
    }

    /// [`Self::features`] for a project on another host (`remote`): no undo there, since Hearth's
    /// record of a turn's files is kept on this machine.
    pub fn features_where(&self, remote: bool) -> RuntimeFeatures {
        let f = self.features();
        RuntimeFeatures { undo: f.undo && !remote, ..f }
    }

    /// The choice a stored text names; anything unknown (from a newer build) is the default, so a
    /// project never becomes unusable.
    pub fn from_stored(text: &str) -> Self {
        match text.strip_prefix(ACP_PREFIX) {
            Some(agent) if !agent.is_empty() => RuntimeChoice::Acp { agent: agent.to_string() },
            _ => RuntimeChoice::OpenCode,
        }
    }
}

impl fmt::Display for RuntimeChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeChoice::OpenCode => f.write_str("opencode"),
            RuntimeChoice::Acp { agent } => write!(f, "{ACP_PREFIX}{agent}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_round_trip_and_unknown_text_is_the_default() {
        for c in [RuntimeChoice::OpenCode, RuntimeChoice::Acp { agent: "claude-code".into() }, RuntimeChoice::Acp { agent: "custom-1f".into() }] {
            assert_eq!(RuntimeChoice::from_stored(&c.as_stored()), c);
        }
        assert_eq!(RuntimeChoice::from_stored("future:thing"), RuntimeChoice::OpenCode);
        assert_eq!(RuntimeChoice::from_stored("acp:"), RuntimeChoice::OpenCode);
        assert_eq!(serde_json::to_string(&RuntimeChoice::Acp { agent: "gemini".into() }).unwrap(), r#"{"family":"acp","agent":"gemini"}"#);
    }
}
