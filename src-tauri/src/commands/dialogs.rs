//! Native open dialogs (GTK's file chooser on Linux). A shell concern only: the domain sees nothing
//! but the path the user chose, through the same commands a typed path goes through.

use std::path::{Path, PathBuf};

use tauri::{AppHandle, Manager};
use tauri_plugin_dialog::{DialogExt, FilePath};

use super::CommandError;

type R<T> = Result<T, CommandError>;

/// What a dialog is for: its title, and what it picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, specta::Type)]
pub enum PickPurpose {
    ProjectFolder,
    KnowledgeFiles,
    KnowledgeFolder,
    SkillFolder,
    RuntimeBinary,
}

/// What a dialog lets the user choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Picks {
    Folder,
    Files,
    File,
}

impl PickPurpose {
    pub fn title(self) -> &'static str {
        match self {
            Self::ProjectFolder => "Add a project folder",
            Self::KnowledgeFiles => "Import files into the library",
            Self::KnowledgeFolder => "Import a folder into the library",
            Self::SkillFolder => "Add a skill package (a folder with SKILL.md)",
            Self::RuntimeBinary => "Choose the OpenCode runtime binary",
        }
    }

    pub fn picks(self) -> Picks {
        match self {
            Self::KnowledgeFiles => Picks::Files,
            Self::RuntimeBinary => Picks::File,
            Self::ProjectFolder | Self::KnowledgeFolder | Self::SkillFolder => Picks::Folder,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DialogError {
    #[error("Hearth cannot use “{0}”: its path is not valid Unicode. Rename it, or choose another.")]
    NotUnicode(String),
    #[error("The file dialog closed without an answer. Try again.")]
    Closed,
}

/// Show the dialog for `purpose` over the main window, opened in the folder that holds `near` (e.g.
/// the last project added) or else the home folder; the chosen paths, or none when cancelled.
#[tauri::command]
#[specta::specta]
pub async fn pick_paths(app: AppHandle, purpose: PickPurpose, near: Option<String>) -> R<Vec<String>> {
    Ok(pick(&app, purpose, near).await?)
}

/// Where the dialog opens: GTK's default is "Recent", which is empty on a new machine and takes
/// no typed path.
pub fn start_folder(near: Option<&str>) -> Option<PathBuf> {
    near.map(Path::new)
        .and_then(Path::parent)
        .filter(|p| p.is_dir())
        .map(Path::to_path_buf)
        .or_else(dirs::home_dir)
}

async fn pick(app: &AppHandle, purpose: PickPurpose, near: Option<String>) -> Result<Vec<String>, DialogError> {
    let mut dialog = app.dialog().file().set_title(purpose.title());
    if let Some(dir) = start_folder(near.as_deref()) {
        dialog = dialog.set_directory(dir);
    }
    if let Some(window) = app.get_webview_window("main") {
        dialog = dialog.set_parent(&window);
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<Vec<FilePath>>();
    match purpose.picks() {
        Picks::Files => dialog.pick_files(move |p| drop(tx.send(p.unwrap_or_default()))),
        Picks::File => dialog.pick_file(move |p| drop(tx.send(p.into_iter().collect()))),
        Picks::Folder => dialog.pick_folder(move |p| drop(tx.send(p.into_iter().collect()))),
    }
    let chosen = rx.await.map_err(|_| DialogError::Closed)?;
    chosen.into_iter().map(path_text).collect()
}

pub fn path_text(p: FilePath) -> Result<String, DialogError> {
    let shown = p.to_string();
    let path = p.into_path().map_err(|_| DialogError::NotUnicode(shown.clone()))?;
    path.into_os_string().into_string().map_err(|_| DialogError::NotUnicode(shown))
}
