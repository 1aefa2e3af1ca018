use hearth_core::binaries::doctor::{self, RuntimeReport};
use hearth_core::store::secrets::SecretsLocation;

use super::CommandError;
use crate::state::AppState;

/// Check the runtime binary, ripgrep and the data folder.
#[tauri::command]
#[specta::specta]
pub async fn runtime_report(state: tauri::State<'_, AppState>) -> Result<RuntimeReport, CommandError> {
    Ok(doctor::check(&state.doctor_inputs()).await)
}

/// Where API keys and other secrets are kept (the desktop keyring or a private file).
#[tauri::command]
#[specta::specta]
pub fn secrets_location(state: tauri::State<'_, AppState>) -> SecretsLocation {
    state.hearth.secrets_location()
}
