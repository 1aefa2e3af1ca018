//! Hearth's integration tests against real parts: the pinned runtime binary, real SQLite files, the
//! real MCP protocol, real child processes. One test crate (not one per file): each would link the
//! whole domain crate again, and in a release build that cost ten minutes of CI for nothing.
//! `cargo test -p hearth-core --test integration <module>::` runs one file's tests.
//!
//! Two tests stay crates of their own: the keyring test (`tests/secrets_keyring.rs`) runs its cases
//! in child processes with their own session bus, and the gateway security test
//! (`tests/gateway_security.rs`) owns the process's one global log subscriber, to prove no secret
//! reaches any log line.

mod support;

mod acp_bad_agents;
mod acp_policy;
mod acp_recovery;
mod acp_runtime;
mod agent_reach;
mod app_changes;
mod app_flow;
mod app_policy;
mod profiles_anthropic;
mod claude_acp;
mod gateway_custom;
mod gateway_isolation;
mod gateway_runtime;
mod isolation_check;
mod real_runtime;
mod remote_app;
mod remote_bad_input;
mod remote_runtime;
mod remote_selftest;
mod runtime_behaviour;
mod runtime_hygiene;
mod runtime_recovery;
mod selftest;
mod selftest_acp;
mod selftest_full_disk;
mod skills_runtime;
