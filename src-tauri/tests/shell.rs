//! The shell's own tests: the generated bindings are current, errors cross the IPC edge as a code and
//! a sentence, the native dialogs' choices. An integration test of the `hearth_app` library (not
//! unit tests inside it): the release build then compiles the app's library once, not twice.

use hearth_app::bindings::{render, BINDINGS_PATH};
use hearth_app::commands::dialogs::{path_text, start_folder, PickPurpose, Picks};
use hearth_app::commands::error::CommandError;
use hearth_core::app::{AppError, ErrorCode};
use tauri_plugin_dialog::FilePath;

/// Fails when the checked-in bindings differ from what Rust defines; `HEARTH_UPDATE_BINDINGS=1`
/// rewrites them (`npm run bindings`).
#[test]
fn checked_in_bindings_are_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(BINDINGS_PATH);
    let fresh = render();
    if std::env::var_os("HEARTH_UPDATE_BINDINGS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(current == fresh, "ui/src/lib/bindings.ts is stale: run `npm run bindings`");
}

#[test]
fn an_app_error_crosses_as_its_code_and_its_sentence() {
    let e = CommandError::from(AppError::Busy);
    assert_eq!(e.code, ErrorCode::Busy);
    assert_eq!(e.message, AppError::Busy.to_string());
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["code"], "busy");
}

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
