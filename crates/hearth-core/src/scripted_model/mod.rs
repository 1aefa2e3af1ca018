//! A built-in scripted model server, speaking OpenAI chat completions and Anthropic Messages.
//!
//! It backs the app's "scripted model" profile (usable with no account or key) and the diagnostics
//! self-test, and lets tests drive the real agents deterministically: OpenCode over chat
//! completions, Claude Code over Messages. It listens on 127.0.0.1 only, behind a random API key;
//! it records every model request, reads it into one request model whichever API it came in,
//! answers it as its [`Script`] says, and can hold matching requests to observe the agent mid-call.

mod anthropic;
mod edits;
mod hold;
mod long_reply;
mod record;
mod request;
mod script;
mod server;
mod wire;

pub use edits::{edit_commands, edit_reply, EditCommand};
pub use hold::{HoldHandle, HoldRule};
pub use record::{MAX_RECORDED_BODY_BYTES, MAX_RECORDED_REQUESTS};
pub use request::{classify, Api, Image, ObservedRequest, Part, RequestKind, Role, ToolOffer, Turn};
pub use script::{default_reply, find_marker, read_request, skill_request, Gate, Reply, Script, MAX_ECHO_CHARS, MAX_TITLE_CHARS, SUMMARY_PREFIX};
pub use server::{ModelServerError, ScriptedModelServer, BLOCKING_PARSE_BYTES, MAX_REQUEST_BODY_BYTES, MODEL_ID, SHUTDOWN_GRACE};
pub use wire::{MAX_ARGUMENT_DELTAS, MAX_TEXT_DELTAS};

#[cfg(test)]
mod anthropic_tests;
#[cfg(test)]
mod tests;
