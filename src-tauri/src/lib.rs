//! Hearth's desktop shell: a thin Tauri layer over `hearth-core`. Commands are one-line adapters;
//! all behaviour lives in the domain crate.

pub mod bindings;
pub(crate) mod cli;
pub mod commands;
mod window_updates;
mod state;

use std::path::PathBuf;
use std::sync::Arc;

use hearth_core::app::{startup, Hearth, HearthOptions};
use hearth_core::host::{display, logging, paths::AppPaths, single_instance as instance};

/// Entry point of the `hearth` binary: a CLI subcommand when one is given, else the window.
pub fn main_entry() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // First, while the process has one thread: it may set WebKit's environment.
    let painting = args.is_empty().then(display::WebViewPainting::apply);
    let context = tauri::generate_context!();
    // Where an installed app keeps its bundled runtime and ripgrep; the CLI needs it as much as the
    // window (`hearth selftest` from /usr/bin must find /usr/lib/Hearth/bin, not a checkout's copy).
    let resource_dir = tauri::utils::platform::resource_dir(context.package_info(), &tauri::Env::default()).ok();
    let paths = match AppPaths::resolve().and_then(|p| p.ensure().map(|_| p)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("hearth: {e}");
            if args.is_empty() {
                // Started from a desktop menu there is no terminal: say it where the user looks.
                startup_failure_dialog(&e.to_string());
            }
            return 1;
        }
    };
    // A subcommand's own output is the point: its stderr gets warnings only.
    let console = if args.is_empty() { logging::Console::Full } else { logging::Console::Quiet };
    let _log_guard = match logging::init(&paths.log_dir, console) {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("hearth: logging to file is off: {e}");
            None
        }
    };
    tracing::info!(version = env!("CARGO_PKG_VERSION"), data_dir = %paths.data_dir.display(), "hearth starting");
    if let Some(painting) = painting {
        tracing::info!(?painting, "web view painting chosen");
    }
    if let Some(code) = cli::run(&args, &paths, resource_dir.clone()) {
        return code;
    }
    // One window per data folder: a second start brings the first forward instead of fighting
    // over its store and runtime.
    let guard = match instance::acquire(&paths.data_dir) {
        Ok(instance::Acquire::First(guard)) => guard,
        Ok(instance::Acquire::AlreadyRunning(instance::Activation::Focused)) => {
            tracing::info!("Hearth already runs on this data folder: brought its window forward");
            eprintln!("hearth: Hearth is already running; its window was brought to the front.");
            return 0;
        }
        Ok(instance::Acquire::AlreadyRunning(instance::Activation::NoAnswer { holder_pid })) => {
            let who = holder_pid.map(|p| format!(" (process {p})")).unwrap_or_default();
            let message = format!("Hearth is already running on the data folder {}{who} but did not answer. Close it, or wait for it to respond, and start Hearth again.", paths.data_dir.display());
            eprintln!("hearth: {message}");
            startup_failure_dialog(&message);
            return 1;
        }
        Err(e) => {
            eprintln!("hearth: {e}");
            startup_failure_dialog(&e.to_string());
            return 1;
        }
    };
    run_app(context, paths, resource_dir, guard)
}

/// Show, unminimise and focus the main window (asked for by a second start of Hearth).
fn bring_forward(handle: &tauri::AppHandle) {
    let Some(window) = tauri::Manager::get_webview_window(handle, "main") else { return };
    let _ = window.unminimize();
    let _ = window.show();
    let _ = window.set_focus();
    tracing::info!("a second start of Hearth brought the window forward");
}

/// A blocking native message for a failure that happens before there is a window to show it in.
fn startup_failure_dialog(message: &str) {
    rfd::MessageDialog::new()
        .set_level(rfd::MessageLevel::Error)
        .set_title("Hearth cannot start")
        .set_description(message)
        .set_buttons(rfd::MessageButtons::Ok)
        .show();
}

/// Open the app, then its window; the exit code.
fn run_app(context: tauri::Context<tauri::Wry>, paths: AppPaths, resource_dir: Option<PathBuf>, guard: instance::InstanceGuard) -> i32 {
    let mut options = HearthOptions::new(paths.clone(), state::binary_inputs(&paths, resource_dir.clone()));
    options.bridge_command = Some(cli::bridge_command());
    options.ssh_config = cli::ssh_config();
    let updates = Arc::new(window_updates::WindowUpdates::default());
    // Before the window: files Hearth cannot use (a damaged secrets file, a database from a newer
    // Hearth, a failed upgrade) are named in a native message, and nothing else starts.
    let hearth = match tauri::async_runtime::block_on(Hearth::open(options, updates.clone())) {
        Ok(hearth) => hearth,
        Err(e) => {
            tracing::error!(error = %e, "Hearth could not open its data folder");
            let message = startup::open_failure_message(&e, &paths);
            eprintln!("hearth: {message}");
            startup_failure_dialog(&message);
            return 1;
        }
    };
    let builder = bindings::builder();
    let app = tauri::Builder::default()
        .plugin(tauri_plugin_dialog::init())
        .invoke_handler(builder.invoke_handler())
        .setup(move |app| {
            builder.mount_events(app);
            updates.attach(app.handle().clone());
            let handle = app.handle().clone();
            guard.serve(move || bring_forward(&handle));
            // Held until the process exits: the data folder stays ours while the app runs.
            tauri::Manager::manage(app, guard);
            tauri::Manager::manage(app, state::AppState { paths, resource_dir, hearth });
            Ok(())
        })
        .build(context)
        .expect("the Tauri runtime failed to start");
    app.run(|handle, event| {
        if let tauri::RunEvent::Exit = event {
            // Stop every turn and the runtime before the process ends: no child outlives the app.
            if let Some(state) = tauri::Manager::try_state::<state::AppState>(handle) {
                tauri::async_runtime::block_on(state.hearth.shutdown());
                tracing::info!("hearth stopped");
            }
        }
    });
    0
}
