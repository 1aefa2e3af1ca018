//! Turning the stored settings into the one runtime configuration: every profile (the built-in
//! scripted model included, with its live address), the located binaries, and later the gateway.

use std::path::PathBuf;
use std::sync::Arc;

use crate::binaries::executable::ProbeEnv;
use crate::opencode::config::{Authentication, ModelProfile, Protocol, RuntimeConfig};
use crate::binaries::opencode::{self as locate, LocateInputs};
use crate::binaries::ripgrep::{self, RgInputs};
use super::{AppError, AppResult};
use crate::scripted_model::{default_reply, Gate, ModelServerError, Reply, RequestKind, Script, ScriptedModelServer};
use crate::store::{self, Store, BUILTIN_SCRIPTED_BASE_URL};

/// Where to look for the binaries (injected: tests and the installed app differ).
#[derive(Debug, Clone)]
pub struct BinaryInputs {
    pub opencode: LocateInputs,
    pub ripgrep: RgInputs,
    pub probe_home: PathBuf,
}

/// The binaries, checked once and reused until asked to look again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    pub opencode: PathBuf,
    pub rg_dir: PathBuf,
}

pub async fn locate_binaries(inputs: &BinaryInputs) -> AppResult<Binaries> {
    let env = ProbeEnv { scratch_home: inputs.probe_home.clone() };
    let (oc, rg) = tokio::join!(locate::locate(&inputs.opencode, &env), ripgrep::locate(&inputs.ripgrep, &env));
    let (oc, rg) = (oc?, rg?);
    let rg_dir = rg.path.parent().map(PathBuf::from).unwrap_or_default();
    Ok(Binaries { opencode: oc.path, rg_dir })
}

/// A message containing this is held by the built-in model until the user stops the turn: a way
/// to try cancelling without a slow real model (and what the e2e suite uses).
pub const BUILTIN_HOLD_DIRECTIVE: &str = "[hold]";
/// What the built-in model streams of a held reply before it waits: the user (and a test) sees
/// that the reply has reached the model and is being held.
pub const BUILTIN_HOLD_NOTICE: &str = "Holding this reply until you press Stop.";

/// The built-in model's script: the default agent, with `[hold]` replies held after their notice.
pub fn builtin_script() -> Script {
    // Never opened: a held reply ends when the runtime aborts it.
    let never = Gate::new();
    Script::custom(move |r| {
        if r.kind == RequestKind::Agent && r.last_user_text().contains(BUILTIN_HOLD_DIRECTIVE) {
            return Reply::PausedText { before: BUILTIN_HOLD_NOTICE.into(), after: String::new(), gate: never.clone() };
        }
        default_reply(r)
    })
}

/// The built-in scripted model server, started on first use and kept for the app's lifetime.
#[derive(Default)]
pub struct BuiltinModel(tokio::sync::OnceCell<Arc<ScriptedModelServer>>);

impl BuiltinModel {
    pub async fn get(&self) -> Result<Arc<ScriptedModelServer>, ModelServerError> {
        self.0.get_or_try_init(|| async { Ok(Arc::new(ScriptedModelServer::start(builtin_script())?)) }).await.cloned()
    }

    pub fn started(&self) -> Option<Arc<ScriptedModelServer>> {
        self.0.get().cloned()
    }
}

/// The runtime configuration for the stored profiles.
pub async fn runtime_config(store: &Store, binaries: &Binaries, builtin: &BuiltinModel) -> AppResult<RuntimeConfig> {
    let s = store.clone();
    let (profiles, settings) = tokio::task::spawn_blocking(move || -> Result<_, store::StoreError> {
        let profiles = s.list_profiles()?;
        let with_keys = profiles
            .into_iter()
            .map(|p| {
                let key = if p.has_api_key { s.profile_api_key(&p.id)? } else { None };
                Ok((p, key))
            })
            .collect::<Result<Vec<_>, store::StoreError>>()?;
        Ok((with_keys, s.app_settings()?))
    })
    .await?
    .map_err(AppError::from)?;

    let mut out = Vec::new();
    for (p, key) in profiles {
        let (base_url, authentication) = if p.base_url == BUILTIN_SCRIPTED_BASE_URL {
            let server = builtin.get().await?;
            (server.base_url(), Authentication::ApiKey(server.api_key().to_string()))
        } else {
            (p.base_url.clone(), key.map(Authentication::ApiKey).unwrap_or(Authentication::None))
        };
        out.push(ModelProfile {
            id: p.id.clone(),
            name: p.name.clone(),
            // The built-in model is reached over chat completions (it speaks Anthropic's API too,
            // which Claude Code is given).
            protocol: if p.base_url == BUILTIN_SCRIPTED_BASE_URL { Protocol::OpenAiChatCompletions } else { p.protocol },
            base_url,
            model: p.model.clone(),
            authentication,
            image_input: p.image_input,
        });
    }
    let default_profile = settings
        .default_profile_id
        .filter(|id| out.iter().any(|p| &p.id == id))
        .or_else(|| out.first().map(|p| p.id.clone()))
        .unwrap_or_default();
    Ok(RuntimeConfig {
        binary: binaries.opencode.clone(),
        rg_dir: Some(binaries.rg_dir.clone()),
        profiles: out,
        default_profile,
        plugins: vec![],
        mcp: Default::default(),
        skills_paths: vec![],
    })
}
