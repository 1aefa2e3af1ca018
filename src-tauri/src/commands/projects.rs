use hearth_core::runtime::OutsideProject;
use hearth_core::store::Project;
use tauri::State;

use super::CommandError;
use crate::state::AppState;

type R<T> = Result<T, CommandError>;

#[tauri::command]
#[specta::specta]
pub async fn list_projects(state: State<'_, AppState>) -> R<Vec<Project>> {
    Ok(state.hearth.list_projects().await?)
}

/// Add a project folder (the same folder twice gives the existing project).
#[tauri::command]
#[specta::specta]
pub async fn add_project(state: State<'_, AppState>, path: String) -> R<Project> {
    Ok(state.hearth.add_project(path).await?)
}

/// Remove a project from Hearth; its folder is never touched.
#[tauri::command]
#[specta::specta]
pub async fn remove_project(state: State<'_, AppState>, id: String) -> R<()> {
    Ok(state.hearth.remove_project(id).await?)
}

/// Refuse, or ask the user, when the agent reaches outside the project folder (from the next
/// message of each conversation).
#[tauri::command]
#[specta::specta]
pub async fn set_project_outside_policy(state: State<'_, AppState>, id: String, policy: OutsideProject) -> R<Project> {
    Ok(state.hearth.set_project_outside_policy(id, policy).await?)
}

/// Mark a project opened and pre-warm its runtime instance.
#[tauri::command]
#[specta::specta]
pub async fn open_project(state: State<'_, AppState>, id: String) -> R<()> {
    Ok(state.hearth.open_project(&id).await?)
}
