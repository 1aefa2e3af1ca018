use hearth_core::remote::{HostState, RemoteListing};
use hearth_core::runtime::{OutsideProject, RuntimeChoice};
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

/// Which runtime runs the project's new conversations: OpenCode's server or an ACP agent.
#[tauri::command]
#[specta::specta]
pub async fn set_project_runtime(state: State<'_, AppState>, id: String, runtime: RuntimeChoice) -> R<Project> {
    Ok(state.hearth.set_project_runtime(id, runtime).await?)
}

/// The folder `path` on `host` (its home when empty), resolved there, with its entries.
#[tauri::command]
#[specta::specta]
pub async fn list_remote_folder(state: State<'_, AppState>, host: String, path: String) -> R<RemoteListing> {
    Ok(state.hearth.list_remote_folder(host, path).await?)
}

/// Add the folder `path` on `host` as a project (checked on the host first).
#[tauri::command]
#[specta::specta]
pub async fn add_remote_project(state: State<'_, AppState>, host: String, path: String) -> R<Project> {
    Ok(state.hearth.add_remote_project(host, path).await?)
}

/// Whether `host` is connected, idle, or unreachable (with why).
#[tauri::command]
#[specta::specta]
pub async fn host_state(state: State<'_, AppState>, host: String) -> R<HostState> {
    Ok(state.hearth.host_state(host).await)
}
