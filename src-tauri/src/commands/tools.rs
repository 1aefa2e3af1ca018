use hearth_core::app::tools::{McpServerView, SkillView};
use hearth_core::knowledge::{ImportProgress, ImportReport, Library, SearchHit};
use hearth_core::store::{McpServer, McpServerInput};
use tauri::ipc::Channel;
use tauri::State;

use super::CommandError;
use crate::state::AppState;

type R<T> = Result<T, CommandError>;

#[tauri::command]
#[specta::specta]
pub async fn list_libraries(state: State<'_, AppState>) -> R<Vec<Library>> {
    Ok(state.hearth.list_libraries().await?)
}

#[tauri::command]
#[specta::specta]
pub async fn create_library(state: State<'_, AppState>, name: String) -> R<Library> {
    Ok(state.hearth.create_library(name).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn delete_library(state: State<'_, AppState>, id: i64) -> R<()> {
    Ok(state.hearth.delete_library(id).await?)
}

/// Import a file or folder; progress is streamed on `on_progress`.
#[tauri::command]
#[specta::specta]
pub async fn import_into_library(state: State<'_, AppState>, id: i64, path: String, on_progress: Channel<ImportProgress>) -> R<ImportReport> {
    Ok(state.hearth.import_into_library(id, path, move |p| { let _ = on_progress.send(p); }).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn search_knowledge(state: State<'_, AppState>, library_ids: Vec<i64>, query: String) -> R<Vec<SearchHit>> {
    Ok(state.hearth.search_knowledge(library_ids, query).await?)
}

/// Which libraries a conversation's runs may read.
#[tauri::command]
#[specta::specta]
pub async fn set_conversation_libraries(state: State<'_, AppState>, conversation_id: String, library_ids: Vec<String>) -> R<()> {
    Ok(state.hearth.set_conversation_libraries(conversation_id, library_ids).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn list_mcp_servers(state: State<'_, AppState>) -> R<Vec<McpServerView>> {
    Ok(state.hearth.list_mcp_servers().await?)
}

/// Add or update a stdio MCP server; `env` values are secrets kept outside the database.
#[tauri::command]
#[specta::specta]
pub async fn save_mcp_server(state: State<'_, AppState>, id: Option<String>, input: McpServerInput, env: Vec<(String, String)>) -> R<McpServer> {
    Ok(state.hearth.save_mcp_server(id, input, env).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn set_mcp_server_enabled(state: State<'_, AppState>, id: String, enabled: bool) -> R<()> {
    Ok(state.hearth.set_mcp_server_enabled(id, enabled).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn delete_mcp_server(state: State<'_, AppState>, id: String) -> R<()> {
    Ok(state.hearth.delete_mcp_server(id).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn list_skills(state: State<'_, AppState>) -> R<Vec<SkillView>> {
    Ok(state.hearth.list_skills().await?)
}

/// Add a skill package folder (with a SKILL.md); an existing skill of that name only when `replace`.
#[tauri::command]
#[specta::specta]
pub async fn add_skill(state: State<'_, AppState>, folder: String, replace: bool) -> R<SkillView> {
    Ok(state.hearth.add_skill(folder, replace).await?)
}
