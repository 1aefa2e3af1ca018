//! Tauri commands: one-line adapters over `hearth-core`.

pub mod error;
pub mod runtime;

pub use error::CommandError;
