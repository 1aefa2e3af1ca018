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
enum Picks {
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

    fn picks(self) -> Picks {
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
fn start_folder(near: Option<&str>) -> Option<PathBuf> {
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

fn path_text(p: FilePath) -> Result<String, DialogError> {
    let shown = p.to_string();
    let path = p.into_path().map_err(|_| DialogError::NotUnicode(shown.clone()))?;
    path.into_os_string().into_string().map_err(|_| DialogError::NotUnicode(shown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_picked_only_for_knowledge_and_the_runtime_binary_and_every_purpose_has_a_title() {
        use PickPurpose::*;
        for p in [ProjectFolder, KnowledgeFiles, KnowledgeFolder, SkillFolder, RuntimeBinary] {
            assert!(!p.title().is_empty());
            let expected = match p {
                PickPurpose::KnowledgeFiles => Picks::Files,
                PickPurpose::RuntimeBinary => Picks::File,
                _ => Picks::Folder,
            };
            assert_eq!(p.picks(), expected, "{p:?}");
        }
    }

    #[test]
    fn the_dialog_opens_beside_the_last_project_or_at_home() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("proj");
        std::fs::create_dir(&project).unwrap();
        assert_eq!(start_folder(Some(project.to_str().unwrap())), Some(tmp.path().to_path_buf()));
        assert_eq!(start_folder(Some("/no/such/parent/proj")), dirs::home_dir());
        assert_eq!(start_folder(None), dirs::home_dir());
    }

    #[test]
    fn a_plain_path_is_passed_through() {
        let p = FilePath::Path("/home/u/my project".into());
        assert_eq!(path_text(p).unwrap(), "/home/u/my project");
    }
}
