//! Hearth's domain. Nothing here imports Tauri: every part is tested headless and driven by the
//! desktop shell (`src-tauri`) and the `hearth` CLI alike.
//!
//! The parts, from the user's action down to the machine:
//! - [`app`]: one object behind every user action (the window and the CLI adapt it);
//! - [`store`]: projects, conversations, messages, settings, and the secrets kept beside them;
//! - [`runtime`]: the runtime contract, and the registry and manager that share one runtime process;
//! - [`opencode`]: the OpenCode runtime family (launch, HTTP client, event stream, runs);
//! - [`toolbox`]: what a run may reach beyond its runtime's own tools (the MCP gateway, skills);
//! - [`knowledge`]: the SQLite knowledge base the gateway searches;
//! - [`images`], [`space`]: image intake, and where a project's files live;
//! - [`diagnostics`], [`scripted_model`]: the self-test and the built-in model it runs against;
//! - [`binaries`]: the programs Hearth finds and checks (the runtime, ripgrep, the doctor);
//! - [`host`]: the machine itself: child processes, process info, paths, logging, one Hearth per
//!   data folder.

pub mod acp;
pub mod app;
pub mod binaries;
pub mod changes;
pub mod diagnostics;
pub mod host;
pub mod images;
pub mod knowledge;
pub mod opencode;
pub mod remote;
pub mod runtime;
pub mod scripted_model;
pub mod space;
pub mod store;
pub mod toolbox;
