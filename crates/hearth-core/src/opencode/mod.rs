//! The embedded OpenCode agent server: locating the pinned binary (this module), and later launching,
//! supervising and talking to it.

pub mod client;
pub mod config;
pub mod events;
pub mod launch;
pub mod locate;
pub mod records;
pub mod runtime;
pub mod turn;

/// The one runtime version Hearth speaks to. `package.json` pins the same `opencode-ai` version; a
/// test keeps the two in step.
pub const PINNED_VERSION: &str = "1.18.33";
/// Environment variable naming the runtime binary explicitly.
pub const BIN_ENV: &str = "HEARTH_OPENCODE_BIN";
/// The npm package that carries the runtime.
pub const NPM_PACKAGE: &str = "opencode-ai";
