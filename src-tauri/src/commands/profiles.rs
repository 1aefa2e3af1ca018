use hearth_core::app::{ProfileSave, ProfileTestOutcome};
use hearth_core::store::{AppSettings, ModelProfile, Theme};
use tauri::State;

use super::CommandError;
use crate::state::AppState;

type R<T> = Result<T, CommandError>;

#[tauri::command]
#[specta::specta]
pub async fn list_profiles(state: State<'_, AppState>) -> R<Vec<ModelProfile>> {
    Ok(state.hearth.list_profiles().await?)
}

/// Add (`id` null) or update a profile; the API key is stored outside the database.
#[tauri::command]
#[specta::specta]
pub async fn save_profile(state: State<'_, AppState>, id: Option<String>, save: ProfileSave) -> R<ModelProfile> {
    Ok(state.hearth.save_profile(id, save).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn delete_profile(state: State<'_, AppState>, id: String) -> R<()> {
    Ok(state.hearth.delete_profile(id).await?)
}

/// Remove the profile's stored API key.
#[tauri::command]
#[specta::specta]
pub async fn clear_profile_api_key(state: State<'_, AppState>, id: String) -> R<ModelProfile> {
    Ok(state.hearth.clear_profile_api_key(id).await?)
}

/// One real generation request with the profile.
#[tauri::command]
#[specta::specta]
pub async fn test_profile(state: State<'_, AppState>, id: String) -> R<ProfileTestOutcome> {
    Ok(state.hearth.test_profile(&id).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn app_settings(state: State<'_, AppState>) -> R<AppSettings> {
    Ok(state.hearth.app_settings().await?)
}

#[tauri::command]
#[specta::specta]
pub async fn set_theme(state: State<'_, AppState>, theme: Theme) -> R<()> {
    Ok(state.hearth.set_theme(theme).await?)
}

#[tauri::command]
#[specta::specta]
pub async fn set_default_profile(state: State<'_, AppState>, id: Option<String>) -> R<()> {
    Ok(state.hearth.set_default_profile(id).await?)
}
