//! Hearth's desktop shell: a thin Tauri layer over `hearth-core`. Commands are one-line adapters;
//! all behaviour lives in the domain crate.

pub mod bindings;
pub(crate) mod cli;
mod commands;
mod events;
mod state;

use std::sync::Arc;

use hearth_core::app::{Hearth, HearthOptions};
use hearth_core::{logging, paths::AppPaths};

/// Entry point of the `hearth` binary: a CLI subcommand when one is given, else the window.
pub fn main_entry() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let paths = match AppPaths::resolve().and_then(|p| p.ensure().map(|_| p)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("hearth: {e}");
            return 1;
        }
    };
    let _log_guard = match logging::init(&paths.log_dir) {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("hearth: logging to file is off: {e}");
            None
        }
    };
    tracing::info!(version = env!("CARGO_PKG_VERSION"), data_dir = %paths.data_dir.display(), "hearth starting");
    if let Some(code) = cli::run(&args, &paths) {
        return code;
    }
    run_app(paths);
    0
}

fn run_app(paths: AppPaths) {
    let builder = bindings::builder();
    let app = tauri::Builder::default()
        .invoke_handler(builder.invoke_handler())
        .setup(move |app| {
            builder.mount_events(app);
            let resource_dir = tauri::Manager::path(app).resource_dir().ok();
            let options = HearthOptions {
                binaries: state::binary_inputs(&paths, resource_dir.clone()),
                paths: paths.clone(),
                registry: Default::default(),
                runtime: Default::default(),
            };
            let events = Arc::new(events::WindowEvents(app.handle().clone()));
            let hearth = tauri::async_runtime::block_on(Hearth::open(options, events))?;
            tauri::Manager::manage(app, state::AppState { paths, resource_dir, hearth });
            Ok(())
        })
        .build(tauri::generate_context!())
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
}
