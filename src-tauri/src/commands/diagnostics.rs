use hearth_core::app::diagnostics::{DiagnosticsStatus, SelftestRequest, SelftestRuntime};
use hearth_core::diagnostics::selftest::SelftestReport;
use hearth_core::diagnostics::{Progress, ProgressSink};
use tauri::ipc::Channel;
use tauri::State;

use super::CommandError;
use crate::state::AppState;

type R<T> = Result<T, CommandError>;

#[tauri::command]
#[specta::specta]
pub async fn diagnostics_status(state: State<'_, AppState>) -> R<DiagnosticsStatus> {
    Ok(state.hearth.diagnostics_status().await)
}

/// The runtimes the self-test can check, each with why not when it cannot.
#[tauri::command]
#[specta::specta]
pub fn selftest_runtimes(state: State<'_, AppState>) -> Vec<SelftestRuntime> {
    state.hearth.selftest_runtimes()
}

/// Run the self-test (reuse and isolation checks) in a sandbox; progress on `on_progress`.
#[tauri::command]
#[specta::specta]
pub async fn run_selftest(state: State<'_, AppState>, request: SelftestRequest, on_progress: Channel<Progress>) -> R<SelftestReport> {
    let sink = ProgressSink::new(move |p| {
        let _ = on_progress.send(p);
    });
    Ok(state.hearth.run_selftest(request, crate::cli::fixture_command(), sink).await?)
}

#[tauri::command]
#[specta::specta]
pub fn cancel_selftest(state: State<'_, AppState>) -> bool {
    state.hearth.cancel_selftest()
}

/// Save the last self-test report as JSON in the data folder; returns its path.
#[tauri::command]
#[specta::specta]
pub async fn export_report(state: State<'_, AppState>) -> R<String> {
    Ok(state.hearth.export_report().await?)
}
