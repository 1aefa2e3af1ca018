//! Model profiles and the runtime configuration they become (`OPENCODE_CONFIG_CONTENT`).
//!
//! All profiles go into one runtime configuration, so one process serves every profile and a run
//! names the profile it uses. API keys never enter the configuration text or the child's
//! environment (MCP children inherit that whole environment): each key is written to a private file
//! and referenced with OpenCode's `{file:…}` substitution.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::runtime::RuntimeKey;

/// Context window and output limit given to OpenCode for profiles that do not say otherwise.
pub const DEFAULT_CONTEXT_TOKENS: u64 = 128_000;
pub const DEFAULT_OUTPUT_TOKENS: u64 = 8_192;
/// The npm provider package OpenCode uses for OpenAI chat-completions endpoints (bundled in it).
pub const OPENAI_COMPATIBLE_NPM: &str = "@ai-sdk/openai-compatible";
/// The npm provider package OpenCode uses for Anthropic Messages endpoints (bundled in it).
pub const ANTHROPIC_NPM: &str = "@ai-sdk/anthropic";

/// The API a profile's endpoint speaks (the store's type: one name for one meaning).
pub use crate::store::ModelProtocol as Protocol;

/// How a profile authenticates. The key itself is a secret: it is never serialised to the UI.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Authentication {
    None,
    ApiKey(String),
}

impl std::fmt::Debug for Authentication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Authentication::None => f.write_str("None"),
            Authentication::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelProfile {
    pub id: String,
    pub name: String,
    pub protocol: Protocol,
    pub base_url: String,
    pub model: String,
    pub authentication: Authentication,
    /// The model accepts images: drives OpenCode's `attachment` and `modalities`, without which
    /// images are silently replaced by an error text.
    pub image_input: bool,
}

impl ModelProfile {
    /// OpenCode provider id for this profile: stable, and only `[a-z0-9-]`.
    pub fn provider_id(&self) -> String {
        let clean: String = self
            .id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
            .collect();
        format!("hearth-{clean}")
    }
}

/// A plugin Hearth gives the runtime, as source: launch writes it afresh into the runtime's private
/// root each time, so a plugin file the agent's shell changed is never what a new runtime loads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PluginSource {
    pub file_name: String,
    pub source: String,
}

/// Everything that makes one runtime process what it is. Two equal configurations share a process;
/// a different one means a different process (the registry keys runtimes by `key()`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RuntimeConfig {
    pub binary: PathBuf,
    /// Folder holding `rg`, put first on the runtime's PATH.
    pub rg_dir: Option<PathBuf>,
    pub profiles: Vec<ModelProfile>,
    /// Profile used when a run names none.
    pub default_profile: String,
    /// Plugins the runtime loads (after the runtime guard, which launch adds first).
    pub plugins: Vec<PluginSource>,
    /// The `mcp` section, as OpenCode expects it.
    pub mcp: BTreeMap<String, Value>,
    pub skills_paths: Vec<PathBuf>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("No model profile is configured; add one in Settings → Models.")]
    NoProfiles,
    #[error("The default model profile `{0}` does not exist.")]
    UnknownDefault(String),
    #[error("The model profile `{0}` does not exist (was it deleted?).")]
    UnknownProfile(String),
    #[error("The model profile `{name}` has an invalid base URL `{url}`: it must start with http:// or https://.")]
    BadUrl { name: String, url: String },
}

impl RuntimeConfig {
    /// A configuration of one profile, with no plugins, MCP servers or skills.
    pub fn single(binary: PathBuf, rg_dir: Option<PathBuf>, profile: ModelProfile) -> Self {
        Self {
            binary,
            rg_dir,
            default_profile: profile.id.clone(),
            profiles: vec![profile],
            plugins: vec![],
            mcp: BTreeMap::new(),
            skills_paths: vec![],
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.profiles.is_empty() {
            return Err(ConfigError::NoProfiles);
        }
        self.profile(&self.default_profile).map_err(|_| ConfigError::UnknownDefault(self.default_profile.clone()))?;
        for p in &self.profiles {
            if !(p.base_url.starts_with("http://") || p.base_url.starts_with("https://")) {
                return Err(ConfigError::BadUrl { name: p.name.clone(), url: p.base_url.clone() });
            }
        }
        Ok(())
    }

    pub fn profile(&self, id: &str) -> Result<&ModelProfile, ConfigError> {
        self.profiles.iter().find(|p| p.id == id).ok_or_else(|| ConfigError::UnknownProfile(id.into()))
    }

    /// The profile a run uses: the one it names, else the default.
    pub fn resolve_profile(&self, id: Option<&str>) -> Result<&ModelProfile, ConfigError> {
        self.profile(id.unwrap_or(&self.default_profile))
    }

    /// Stable key of this configuration: the registry runs one process per key, and a changed
    /// configuration (a new profile, a new API key) retires the old process. Keys enter the hash
    /// only as their SHA-256, never as text.
    pub fn key(&self) -> RuntimeKey {
        use sha2::{Digest, Sha256};
        let secrets: Vec<(String, String)> = self
            .profiles
            .iter()
            .filter_map(|p| match &p.authentication {
                Authentication::ApiKey(k) => Some((p.id.clone(), format!("{:x}", Sha256::digest(k.as_bytes())))),
                Authentication::None => None,
            })
            .collect();
        let view = json!({
            "config": self.to_opencode_json(Path::new("/secrets")),
            "rg_dir": self.rg_dir,
            "secrets": secrets,
        });
        RuntimeKey::from_config(&self.binary, &view).expect("a JSON value always encodes")
    }

    /// Where each API key is written, under the runtime's private root.
    pub fn key_file(secrets_dir: &Path, profile: &ModelProfile) -> PathBuf {
        secrets_dir.join(format!("{}.key", profile.provider_id()))
    }

    /// The configuration text for `OPENCODE_CONFIG_CONTENT`. Keys are referenced by file.
    pub fn to_opencode_json(&self, secrets_dir: &Path) -> Value {
        let mut providers = serde_json::Map::new();
        for p in &self.profiles {
            let api_key = match &p.authentication {
                Authentication::None => "hearth-no-key".to_string(),
                Authentication::ApiKey(_) => format!("{{file:{}}}", Self::key_file(secrets_dir, p).display()),
            };
            let input: Vec<&str> = if p.image_input { vec!["text", "image"] } else { vec!["text"] };
            // OpenCode's Anthropic provider wants the `/v1` base; a chat-completions one the URL as given.
            let (npm, base_url) = match p.protocol {
                Protocol::OpenAiChatCompletions => (OPENAI_COMPATIBLE_NPM, p.base_url.clone()),
                Protocol::AnthropicMessages => (ANTHROPIC_NPM, format!("{}/v1", crate::store::anthropic_root(&p.base_url))),
            };
            providers.insert(
                p.provider_id(),
                json!({
                    "npm": npm,
                    "name": p.name,
                    "options": { "baseURL": base_url, "apiKey": api_key },
                    "models": { p.model.clone(): {
                        "name": p.model,
                        "tool_call": true,
                        "attachment": p.image_input,
                        "limit": { "context": DEFAULT_CONTEXT_TOKENS, "output": DEFAULT_OUTPUT_TOKENS },
                        "modalities": { "input": input, "output": ["text"] }
                    }}
                }),
            );
        }
        let default = self.profile(&self.default_profile).ok();
        let model = default.map(|p| format!("{}/{}", p.provider_id(), p.model));
        let mut cfg = json!({
            "autoupdate": false,
            "share": "disabled",
            // Hearth keeps its own record of what a turn changed (changes/): the runtime's snapshots
            // would be a second copy, in git repositories only.
            "snapshot": false,
            "enabled_providers": self.profiles.iter().map(ModelProfile::provider_id).collect::<Vec<_>>(),
            "provider": providers,
            // Hearth compacts explicitly (a button, the self-test); automatic compaction would start
            // model calls the user did not ask for.
            "compaction": { "auto": false },
        });
        if let Some(model) = model {
            cfg["model"] = json!(model);
            cfg["small_model"] = json!(model);
        }
        if !self.mcp.is_empty() {
            cfg["mcp"] = json!(self.mcp);
        }
        if !self.skills_paths.is_empty() {
            cfg["skills"] = json!({ "paths": self.skills_paths });
        }
        cfg
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn profile(id: &str, image_input: bool, auth: Authentication) -> ModelProfile {
        ModelProfile {
            id: id.into(),
            name: format!("Profile {id}"),
            protocol: Protocol::OpenAiChatCompletions,
            base_url: "http://127.0.0.1:9999/v1".into(),
            model: "m1".into(),
            authentication: auth,
            image_input,
        }
    }

    pub fn config(profiles: Vec<ModelProfile>) -> RuntimeConfig {
        RuntimeConfig {
            binary: "/bin/opencode".into(),
            rg_dir: None,
            default_profile: profiles[0].id.clone(),
            profiles,
            plugins: vec![],
            mcp: BTreeMap::new(),
            skills_paths: vec![],
        }
    }

    #[test]
    fn image_flag_drives_attachment_and_modalities() {
        let cfg = config(vec![profile("a", true, Authentication::None), profile("b", false, Authentication::None)]);
        let j = cfg.to_opencode_json(Path::new("/s"));
        let a = &j["provider"]["hearth-a"]["models"]["m1"];
        assert_eq!(a["attachment"], json!(true));
        assert_eq!(a["modalities"]["input"], json!(["text", "image"]));
        let b = &j["provider"]["hearth-b"]["models"]["m1"];
        assert_eq!(b["attachment"], json!(false));
        assert_eq!(b["modalities"]["input"], json!(["text"]));
        assert_eq!(j["model"], json!("hearth-a/m1"));
        assert_eq!(j["enabled_providers"], json!(["hearth-a", "hearth-b"]));
        assert_eq!(j["compaction"]["auto"], json!(false));
    }

    #[test]
    fn api_keys_are_referenced_by_file_never_inlined() {
        let cfg = config(vec![profile("k", false, Authentication::ApiKey("sk-secret-123".into()))]);
        let text = cfg.to_opencode_json(Path::new("/priv/secrets")).to_string();
        assert!(!text.contains("sk-secret-123"));
        assert!(text.contains("{file:/priv/secrets/hearth-k.key}"), "{text}");
        assert!(!format!("{cfg:?}").contains("sk-secret-123"), "Debug must redact keys");
    }

    #[test]
    fn key_changes_with_the_configuration() {
        let a = config(vec![profile("a", true, Authentication::None)]);
        let mut b = a.clone();
        assert_eq!(a.key(), b.key());
        b.profiles[0].base_url = "http://127.0.0.1:1/v1".into();
        assert_ne!(a.key(), b.key());
        let mut c = a.clone();
        c.profiles[0].authentication = Authentication::ApiKey("k1".into());
        let mut d = c.clone();
        d.profiles[0].authentication = Authentication::ApiKey("k2".into());
        assert_ne!(c.key(), d.key(), "a new API key must restart the runtime");
        assert!(!c.key().as_str().contains("k1"));
    }

    #[test]
    fn validation_names_the_problem() {
        let mut c = config(vec![profile("a", true, Authentication::None)]);
        assert_eq!(c.validate(), Ok(()));
        c.default_profile = "zzz".into();
        assert_eq!(c.validate(), Err(ConfigError::UnknownDefault("zzz".into())));
        c.default_profile = "a".into();
        c.profiles[0].base_url = "ftp://x".into();
        assert!(c.validate().unwrap_err().to_string().contains("ftp://x"));
        assert_eq!(c.resolve_profile(Some("nope")).unwrap_err(), ConfigError::UnknownProfile("nope".into()));
    }

    #[test]
    fn provider_ids_are_sanitised() {
        assert_eq!(profile("My Profile/1", false, Authentication::None).provider_id(), "hearth-my-profile-1");
    }
}
