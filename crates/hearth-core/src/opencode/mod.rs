//! The embedded OpenCode agent server: its configuration, launch, HTTP client, event stream and
//! the runtime that runs conversations on it. Finding the binary is [`crate::binaries::opencode`].

pub mod client;
mod compaction;
pub mod config;
pub mod event_hub;
pub mod guard;
pub mod launch;
pub mod prompt;
mod run;
pub mod runtime;
mod server;
pub use server::Place;
pub mod sessions;
pub mod turn;
pub mod wire;

pub use runtime::{HeldClient, OpenCodeRuntime, FAMILY};
pub use server::StartError;

/// The one runtime version Hearth speaks to. `package.json` pins the same `opencode-ai` version; a
/// test keeps the two in step.
pub const PINNED_VERSION: &str = "1.18.33";
/// Environment variable naming the runtime binary explicitly.
pub const BIN_ENV: &str = "HEARTH_OPENCODE_BIN";
/// The npm package that carries the runtime.
pub const NPM_PACKAGE: &str = "opencode-ai";
