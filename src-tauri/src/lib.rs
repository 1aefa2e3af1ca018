//! Hearth's desktop shell: a thin Tauri layer over `hearth-core`. Commands are one-line adapters;
//! all behaviour lives in the domain crate.

pub mod bindings;
mod cli;
mod commands;
mod state;

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
    tauri::Builder::default()
        .invoke_handler(builder.invoke_handler())
        .setup(move |app| {
            builder.mount_events(app);
            let resource_dir = tauri::Manager::path(app).resource_dir().ok();
            tauri::Manager::manage(app, state::AppState::new(paths, resource_dir));
            Ok(())
        })
        .run(tauri::generate_context!())
        .expect("the Tauri runtime failed to start");
}
