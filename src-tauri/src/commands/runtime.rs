use hearth_core::binaries::doctor::{self, RuntimeReport};

use super::CommandError;
use crate::state::AppState;

/// Check the runtime binary, ripgrep and the data folder.
#[tauri::command]
#[specta::specta]
pub async fn runtime_report(state: tauri::State<'_, AppState>) -> Result<RuntimeReport, CommandError> {
    Ok(doctor::check(&state.doctor_inputs()).await)
}
