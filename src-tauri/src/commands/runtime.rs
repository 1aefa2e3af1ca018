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
