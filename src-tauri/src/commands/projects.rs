use hearth_core::runtime::OutsideProject;
use hearth_core::store::{Conversation, Message, Project};
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

#[tauri::command]
#[specta::specta]
pub async fn list_conversations(state: State<'_, AppState>, project_id: String) -> R<Vec<Conversation>> {
    Ok(state.hearth.list_conversations(project_id).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn create_conversation(state: State<'_, AppState>, project_id: String, title: String) -> R<Conversation> {
    Ok(state.hearth.create_conversation(project_id, title).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn rename_conversation(state: State<'_, AppState>, id: String, title: String) -> R<()> {
    Ok(state.hearth.rename_conversation(id, title).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn delete_conversation(state: State<'_, AppState>, id: String) -> R<()> {
    Ok(state.hearth.delete_conversation(&id).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn list_messages(state: State<'_, AppState>, conversation_id: String) -> R<Vec<Message>> {
    Ok(state.hearth.list_messages(conversation_id).await?)
}
