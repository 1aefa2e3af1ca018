use hearth_core::app::{ConversationSnapshot, StagedAttachment};
use hearth_core::changes::FileDiff;
use hearth_core::runtime::{CompactOutcome, PermissionReply, PlanStep, WorkMode};
use hearth_core::store::{Conversation, Message};
use tauri::State;

use super::CommandError;
use crate::state::AppState;

type R<T> = Result<T, CommandError>;

/// Store the message, start the reply (streamed as `ConversationUpdated` events), return the message.
#[tauri::command]
#[specta::specta]
pub async fn send_message(state: State<'_, AppState>, conversation_id: String, text: String, attachment_ids: Vec<String>) -> R<Message> {
    Ok(state.hearth.send_message(&conversation_id, text, attachment_ids).await?)
}

#[tauri::command]
#[specta::specta]
pub fn cancel_turn(state: State<'_, AppState>, conversation_id: String) -> R<()> {
    Ok(state.hearth.cancel_turn(&conversation_id)?)
}

#[tauri::command]
#[specta::specta]
pub async fn compact_conversation(state: State<'_, AppState>, conversation_id: String) -> R<CompactOutcome> {
    Ok(state.hearth.compact_conversation(&conversation_id).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn reply_permission(state: State<'_, AppState>, conversation_id: String, permission_id: String, reply: PermissionReply) -> R<()> {
    Ok(state.hearth.reply_permission(&conversation_id, &permission_id, reply).await?)
}

/// Validate and stage an image picked, pasted or dropped in the composer.
#[tauri::command]
#[specta::specta]
pub async fn stage_attachment(state: State<'_, AppState>, name: String, data_base64: String) -> R<StagedAttachment> {
    Ok(state.hearth.stage_attachment(name, data_base64).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn set_work_mode(state: State<'_, AppState>, conversation_id: String, mode: WorkMode) -> R<()> {
    Ok(state.hearth.set_work_mode(conversation_id, mode).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn set_conversation_profile(state: State<'_, AppState>, conversation_id: String, profile_id: Option<String>) -> R<()> {
    Ok(state.hearth.set_conversation_profile(conversation_id, profile_id).await?)
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
pub async fn conversation_snapshot(state: State<'_, AppState>, conversation_id: String) -> R<ConversationSnapshot> {
    Ok(state.hearth.conversation_snapshot(conversation_id).await?)
}

/// One page of one file's difference in a reply's turn.
#[tauri::command]
#[specta::specta]
pub async fn file_diff(state: State<'_, AppState>, reply_id: String, path: String, page: u32) -> R<FileDiff> {
    Ok(state.hearth.file_diff(&reply_id, &path, page).await?)
}

/// Undo a reply's turn and the later ones (`force`: overwrite files changed since).
#[tauri::command]
#[specta::specta]
pub async fn undo_turn(state: State<'_, AppState>, conversation_id: String, reply_id: String, force: bool) -> R<()> {
    Ok(state.hearth.undo_turn(&conversation_id, &reply_id, force).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn redo_turns(state: State<'_, AppState>, conversation_id: String, force: bool) -> R<()> {
    Ok(state.hearth.redo_turns(&conversation_id, force).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn fork_conversation(state: State<'_, AppState>, conversation_id: String, reply_id: String) -> R<Conversation> {
    Ok(state.hearth.fork_conversation(&conversation_id, &reply_id).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn conversation_plan(state: State<'_, AppState>, conversation_id: String) -> R<Vec<PlanStep>> {
    Ok(state.hearth.conversation_plan(&conversation_id).await?)
}

/// A conversation's own runtime (`None`: its project's); only before its first message.
#[tauri::command]
#[specta::specta]
pub async fn set_conversation_runtime(state: State<'_, AppState>, id: String, runtime: Option<hearth_core::runtime::RuntimeChoice>) -> R<Conversation> {
    Ok(state.hearth.set_conversation_runtime(id, runtime).await?)
}

/// What a runtime offers beyond turns (compact, undo, fork), for a project here or on another
/// host (`remote`), so the window shows only what works.
#[tauri::command]
#[specta::specta]
pub fn runtime_features(runtime: hearth_core::runtime::RuntimeChoice, remote: bool) -> hearth_core::runtime::RuntimeFeatures {
    runtime.features_where(remote)
}
