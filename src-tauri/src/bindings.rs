//! The typed bridge to the UI: every command and event is registered here, and the TypeScript
//! bindings in `ui/src/lib/bindings.ts` are generated from it (never written by hand).

use tauri_specta::{collect_commands, collect_events, Builder};

use crate::commands::{conversations, diagnostics, dialogs, profiles, projects, runtime, tools};
use crate::window_updates;

/// Where the generated bindings live, relative to this crate.
pub const BINDINGS_PATH: &str = "../ui/src/lib/bindings.ts";

pub fn builder() -> Builder<tauri::Wry> {
    Builder::<tauri::Wry>::new()
        // Commands only send what Rust serialises: one type per Rust type, not a serialise/deserialise pair.
        .disable_serde_phases()
        // JSON numbers reach JavaScript as doubles anyway (tool inputs are arbitrary JSON values);
        // Hearth's own counters stay far below 2^53.
        .dangerously_cast_bigints_to_number()
        .commands(collect_commands![
            runtime::runtime_report,
            runtime::secrets_location,
            runtime::set_runtime_binary,
            runtime::runtime_processes,
            runtime::list_agents,
            runtime::add_custom_agent,
            runtime::update_custom_agent,
            runtime::remove_custom_agent,
            projects::list_projects,
            projects::add_project,
            projects::remove_project,
            projects::open_project,
            projects::set_project_outside_policy,
            projects::set_project_runtime,
            projects::list_remote_folder,
            projects::add_remote_project,
            projects::host_state,
            conversations::list_conversations,
            conversations::create_conversation,
            conversations::rename_conversation,
            conversations::delete_conversation,
            conversations::conversation_snapshot,
            conversations::send_message,
            conversations::cancel_turn,
            conversations::compact_conversation,
            conversations::reply_permission,
            conversations::stage_attachment,
            conversations::set_work_mode,
            conversations::set_conversation_profile,
            conversations::file_diff,
            conversations::undo_turn,
            conversations::redo_turns,
            conversations::fork_conversation,
            conversations::conversation_plan,
            conversations::set_conversation_runtime,
            conversations::runtime_features,
            profiles::list_profiles,
            profiles::save_profile,
            profiles::delete_profile,
            profiles::clear_profile_api_key,
            profiles::test_profile,
            profiles::app_settings,
            profiles::set_theme,
            profiles::set_default_profile,
            tools::list_libraries,
            tools::create_library,
            tools::delete_library,
            tools::import_into_library,
            tools::search_knowledge,
            tools::set_conversation_libraries,
            tools::list_mcp_servers,
            tools::save_mcp_server,
            tools::set_mcp_server_enabled,
            tools::delete_mcp_server,
            tools::list_skills,
            tools::add_skill,
            diagnostics::diagnostics_status,
            diagnostics::selftest_runtimes,
            diagnostics::run_selftest,
            diagnostics::cancel_selftest,
            diagnostics::export_report,
            dialogs::pick_paths,
        ])
        .events(collect_events![window_updates::ConversationUpdated])
}

/// The bindings file's text as the current Rust code defines it.
pub fn render() -> String {
    let tmp = std::env::temp_dir().join(format!("hearth-bindings-{}.ts", std::process::id()));
    builder()
        .export(specta_typescript::Typescript::default().header("// Generated from Rust by tauri-specta (src-tauri/src/bindings.rs). Do not edit."), &tmp)
        .expect("bindings export");
    let text = std::fs::read_to_string(&tmp).expect("read exported bindings");
    let _ = std::fs::remove_file(&tmp);
    text
}
