//! Hearth's domain. Nothing here imports Tauri: every part is tested headless and driven by the
//! desktop shell (`src-tauri`) and the `hearth` CLI alike.

pub mod doctor;
pub mod executable;
pub mod gateway;
pub mod logging;
pub mod opencode;
pub mod paths;
pub mod ripgrep;
pub mod runtime;
pub mod scripted_model;
pub mod skills;
pub mod space;
