//! What a run may reach beyond the runtime's own tools: the knowledge libraries and the user's MCP
//! servers, behind the gateway, plus skill packages. One gateway per app; each run gets a grant.

use std::path::Path;
use std::sync::Arc;

use super::{blocking, AppError, AppResult, Hearth};
use crate::knowledge::{KnowledgeService, Library, LibraryId, SearchHit};
use crate::opencode::config::PluginSource;
use crate::toolbox::gateway::{AllowedCallers, CustomServerConfig, CustomServerStatus, Gateway, GatewayOptions, GatewayRunHooks, GrantScope, RunGrant, DEFAULT_GRANT_TTL, GATEWAY_MCP_NAME};
use crate::toolbox::knowledge_bridge::KnowledgeBridge;
use crate::opencode::config::RuntimeConfig;
use crate::opencode::FAMILY as OPENCODE_FAMILY;
use crate::toolbox::skills::{self, SkillStager};
use crate::store::{McpServer, McpServerInput, Store};

/// Search hits shown in the knowledge view.
pub const UI_SEARCH_LIMIT: usize = 20;

/// The parts behind the runtime's extra tools.
pub struct Tools {
    pub knowledge: Arc<KnowledgeService>,
    pub hooks: Arc<GatewayRunHooks>,
    /// The runtime config's `mcp` entry for the gateway (secret referenced by file).
    mcp_entry: serde_json::Value,
    plugin: PluginSource,
    skills: Arc<SkillStager>,
}

impl Tools {
    /// Start the knowledge service and the gateway; the gateway serves `callers` only (the
    /// runtimes' processes).
    pub async fn start(data_dir: &Path, callers: AllowedCallers) -> AppResult<Self> {
        let db = data_dir.join("knowledge.sqlite3");
        let root = data_dir.join("knowledge");
        let knowledge = Arc::new(tokio::task::spawn_blocking(move || KnowledgeService::open(db, root)).await??);
        let gw = Gateway::start(GatewayOptions { knowledge: Some(Arc::new(KnowledgeBridge(knowledge.clone()))), callers, ..Default::default() }).await?;
        let private = data_dir.join("runtime").join("gateway");
        let mcp_entry = gw.mcp_entry_with_secret_file(&private)?;
        let plugin = gw.plugin(&private)?;
        Ok(Self {
            knowledge,
            hooks: GatewayRunHooks::new(Arc::new(gw)),
            mcp_entry,
            plugin,
            skills: Arc::new(SkillStager::new(data_dir.join("skills"), data_dir.join("runtime").join("skills"))),
        })
    }

    /// Add the gateway, its plugin and the staged skills to a runtime configuration. The skills
    /// path is the same link whatever is staged, so restaging never changes the configuration
    /// (nor restarts the runtime); new instances read the new generation.
    pub async fn configure(&self, config: &mut RuntimeConfig) {
        config.mcp.insert(GATEWAY_MCP_NAME.into(), self.mcp_entry.clone());
        config.plugins.push(self.plugin.clone());
        config.skills_paths.push(self.skills.link().to_path_buf());
        let stager = self.skills.clone();
        match tokio::task::spawn_blocking(move || stager.refresh()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "could not stage the skill packages; the previous ones stay"),
            Err(e) => tracing::warn!(error = %e, "staging the skill packages stopped"),
        }
    }
}

/// A custom server as the UI lists it, with its live status.
#[derive(Debug, Clone, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct McpServerView {
    pub server: McpServer,
    pub status: Option<CustomServerStatus>,
}

/// A skill package as the UI lists it.
#[derive(Debug, Clone, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct SkillView {
    pub name: String,
    pub description: String,
    pub path: String,
    /// Why the package cannot be used, if it cannot.
    pub problem: Option<String>,
}

impl From<skills::Scanned> for SkillView {
    fn from(s: skills::Scanned) -> Self {
        let path = s.dir.display().to_string();
        match s.package {
            Ok(p) => SkillView { name: p.name, description: p.description, path, problem: None },
            Err(e) => SkillView { name: s.folder, description: String::new(), path, problem: Some(e.to_string()) },
        }
    }
}

async fn custom_configs(store: &Store) -> AppResult<Vec<CustomServerConfig>> {
    blocking(store, |s| {
        s.list_mcp_servers()?
            .into_iter()
            .map(|m| {
                let env = s.mcp_env(&m.id)?.into_iter().collect();
                Ok(CustomServerConfig {
                    id: m.id,
                    name: m.name,
                    command: m.command,
                    args: m.args,
                    env,
                    enabled: m.enabled,
                    assigned_runtimes: m.assigned_runtimes,
                    allow_dynamic_tools: m.allow_dynamic_tools,
                })
            })
            .collect()
    })
    .await
}

impl Hearth {
    /// (Re)start the user's MCP servers from the stored settings.
    pub async fn refresh_mcp_servers(&self) -> AppResult<()> {
        let configs = custom_configs(&self.store).await?;
        self.tools.hooks.gateway().set_custom_servers(configs).await;
        Ok(())
    }

    /// The grant of one run: its conversation's libraries and every enabled server assigned to it.
    /// Revoked when the returned guard goes, however the run ended, or if it never started.
    pub(crate) async fn grant_for(&self, request_id: &str, library_ids: &[String]) -> AppResult<RunGrant> {
        let servers = blocking(&self.store, |s| s.list_mcp_servers()).await?;
        let custom_servers = servers.into_iter().filter(|m| m.enabled && m.assigned_runtimes.iter().any(|r| r == OPENCODE_FAMILY)).map(|m| m.id).collect();
        Ok(self.tools.hooks.grant(request_id, GrantScope { libraries: library_ids.to_vec(), custom_servers, ttl: DEFAULT_GRANT_TTL })?)
    }

    /// Gateway grants alive now: one per turn in flight (diagnostics, tests).
    pub fn live_grants(&self) -> usize {
        self.tools.hooks.gateway().live_grants()
    }

    pub async fn list_mcp_servers(&self) -> AppResult<Vec<McpServerView>> {
        let statuses = self.tools.hooks.gateway().custom_server_statuses();
        let servers = blocking(&self.store, |s| s.list_mcp_servers()).await?;
        Ok(servers.into_iter().map(|server| McpServerView { status: statuses.iter().find(|st| st.id == server.id).cloned(), server }).collect())
    }

    /// Add (`id` None) or update a server; `env` values are secrets, stored outside the database.
    pub async fn save_mcp_server(&self, id: Option<String>, input: McpServerInput, env: Vec<(String, String)>) -> AppResult<McpServer> {
        let saved = blocking(&self.store, move |s| {
            let server = match &id {
                Some(id) => s.update_mcp_server(id, &input)?,
                None => s.add_mcp_server(&input)?,
            };
            for (k, v) in &env {
                s.set_mcp_env(&server.id, k, Some(v))?;
            }
            s.get_mcp_server(&server.id)
        })
        .await?;
        self.refresh_mcp_servers().await?;
        Ok(saved)
    }

    pub async fn set_mcp_server_enabled(&self, id: String, enabled: bool) -> AppResult<()> {
        blocking(&self.store, move |s| s.set_mcp_server_enabled(&id, enabled)).await?;
        self.refresh_mcp_servers().await
    }

    pub async fn delete_mcp_server(&self, id: String) -> AppResult<()> {
        blocking(&self.store, move |s| s.delete_mcp_server(&id)).await?;
        self.refresh_mcp_servers().await
    }

    /// Every package folder, valid or with its problem; checking them also stages a change.
    pub async fn list_skills(&self) -> AppResult<Vec<SkillView>> {
        let stager = self.tools.skills.clone();
        tokio::task::spawn_blocking(move || {
            let (packages, failure) = match stager.refresh() {
                Ok(report) => (report.packages, None),
                Err(e) => (skills::scan(stager.source()).unwrap_or_default(), Some(e.to_string())),
            };
            let mut views: Vec<SkillView> = packages.into_iter().map(SkillView::from).collect();
            // Nothing new was staged: the previous skills stay in use, and the view says why.
            views.extend(failure.map(|problem| SkillView { name: String::new(), description: String::new(), path: stager.source().display().to_string(), problem: Some(problem) }));
            views
        })
        .await
        .map_err(AppError::from)
    }

    /// Copy a skill package folder into Hearth's skills (checked and bounded first; an existing
    /// skill of that name only when `replace`), then stage it. New project instances load it.
    pub async fn add_skill(&self, folder: String, replace: bool) -> AppResult<SkillView> {
        let stager = self.tools.skills.clone();
        let package = tokio::task::spawn_blocking(move || {
            let package = stager.add(Path::new(&folder), replace)?;
            if let Err(e) = stager.refresh() {
                tracing::warn!(error = %e, "could not stage the added skill");
            }
            Ok::<_, skills::AddSkillError>(package)
        })
        .await??;
        Ok(SkillView { name: package.name, description: package.description, path: package.dir.display().to_string(), problem: None })
    }

    pub async fn list_libraries(&self) -> AppResult<Vec<Library>> {
        self.knowledge(|k| k.list_libraries()).await
    }

    pub async fn create_library(&self, name: String) -> AppResult<Library> {
        self.knowledge(move |k| k.create_library(&name)).await
    }

    pub async fn delete_library(&self, id: i64) -> AppResult<()> {
        self.knowledge(move |k| k.delete_library(LibraryId(id))).await
    }

    /// Import a file or folder into a library; `progress` is told as files are done.
    pub async fn import_into_library(&self, id: i64, path: String, progress: impl FnMut(crate::knowledge::ImportProgress) + Send + 'static) -> AppResult<crate::knowledge::ImportReport> {
        let cancel = tokio_util::sync::CancellationToken::new();
        self.knowledge(move |k| k.import_path(LibraryId(id), &path, &cancel, progress)).await
    }

    pub async fn search_knowledge(&self, library_ids: Vec<i64>, query: String) -> AppResult<Vec<SearchHit>> {
        self.knowledge(move |k| k.search(&library_ids.into_iter().map(LibraryId).collect::<Vec<_>>(), &query, UI_SEARCH_LIMIT)).await
    }

    pub async fn set_conversation_libraries(&self, conversation_id: String, library_ids: Vec<String>) -> AppResult<()> {
        blocking(&self.store, move |s| s.set_conversation_libraries(&conversation_id, &library_ids)).await
    }

    async fn knowledge<T: Send + 'static>(&self, f: impl FnOnce(&KnowledgeService) -> Result<T, crate::knowledge::KnowledgeError> + Send + 'static) -> AppResult<T> {
        Ok(self.tools.knowledge.blocking(f).await?)
    }
}
