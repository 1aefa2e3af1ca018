//! Hearth's domain. Nothing here imports Tauri: every part is tested headless and driven by the
//! desktop shell (`src-tauri`) and the `hearth` CLI alike.

pub mod app;
pub mod child;
pub mod diagnostics;
pub mod doctor;
pub mod executable;
pub mod gateway;
pub mod images;
pub mod instance;
pub mod knowledge;
pub mod logging;
pub mod opencode;
pub mod paths;
pub mod procinfo;
pub mod ripgrep;
pub mod runtime;
pub mod scripted_model;
pub mod secrets;
pub mod skills;
pub mod space;
pub mod store;
