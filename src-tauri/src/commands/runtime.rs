use hearth_core::binaries::doctor::RuntimeReport;
use hearth_core::runtime::RegisteredRuntimeStatus;
use hearth_core::store::secrets::SecretsLocation;

use super::CommandError;
use crate::state::AppState;

/// Check the runtime binary (the one chosen in the Runtime view in its place), ripgrep and the
/// data folder.
#[tauri::command]
#[specta::specta]
pub async fn runtime_report(state: tauri::State<'_, AppState>) -> Result<RuntimeReport, CommandError> {
    Ok(state.hearth.runtime_report(state.doctor_inputs()).await?)
}

/// Use this runtime binary (`None`: the copy Hearth finds itself); checked on next use.
#[tauri::command]
#[specta::specta]
pub async fn set_runtime_binary(state: tauri::State<'_, AppState>, path: Option<String>) -> Result<(), CommandError> {
    Ok(state.hearth.set_runtime_binary(path).await?)
}

/// The runtime processes alive now, with how often each was started.
#[tauri::command]
#[specta::specta]
pub fn runtime_processes(state: tauri::State<'_, AppState>) -> Vec<RegisteredRuntimeStatus> {
    state.hearth.runtime_statuses()
}

/// Where API keys and other secrets are kept (the desktop keyring or a private file).
#[tauri::command]
#[specta::specta]
pub fn secrets_location(state: tauri::State<'_, AppState>) -> SecretsLocation {
    state.hearth.secrets_location()
}

/// Every runtime a project can choose, with where each agent was found or why it cannot run.
#[tauri::command]
#[specta::specta]
pub async fn list_agents(state: tauri::State<'_, AppState>) -> Result<Vec<hearth_core::acp::AgentSummary>, CommandError> {
    Ok(state.hearth.list_agents().await?)
}

/// Add an agent by its command line (program, then arguments).
#[tauri::command]
#[specta::specta]
pub async fn add_custom_agent(state: tauri::State<'_, AppState>, name: String, command: Vec<String>) -> Result<hearth_core::acp::CustomAgent, CommandError> {
    Ok(state.hearth.add_custom_agent(name, command).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn update_custom_agent(state: tauri::State<'_, AppState>, id: String, name: String, command: Vec<String>) -> Result<hearth_core::acp::CustomAgent, CommandError> {
    Ok(state.hearth.update_custom_agent(id, name, command).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn remove_custom_agent(state: tauri::State<'_, AppState>, id: String) -> Result<(), CommandError> {
    Ok(state.hearth.remove_custom_agent(id).await?)
}
