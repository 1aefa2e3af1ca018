//! Tauri commands: one-line adapters over `hearth-core`.

pub mod conversations;
pub mod diagnostics;
pub mod dialogs;
pub mod error;
pub mod profiles;
pub mod projects;
pub mod runtime;
pub mod tools;

pub use error::CommandError;
