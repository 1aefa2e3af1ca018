//! Every limit the store enforces, in one place. Each one refuses with a sentence (see `StoreError`)
//! instead of letting one runaway input slow or bloat the app for good.

use std::time::Duration;

/// Projects in the sidebar.
pub const MAX_PROJECTS: usize = 500;
/// Characters in a project name, conversation title, profile or MCP server name.
pub const MAX_NAME_CHARS: usize = 200;
/// Bytes of text a user can send in one message (pasting 5 MB of text is refused with a sentence).
pub const MAX_MESSAGE_TEXT_BYTES: usize = 1024 * 1024;
/// Bytes of one assistant reply's text; streaming past it stops with `ReplyTooLong`.
pub const MAX_REPLY_TEXT_BYTES: usize = 16 * 1024 * 1024;
/// Attachments (images) on one message.
pub const MAX_ATTACHMENTS_PER_MESSAGE: usize = 10;
/// Bytes of one attachment's thumbnail PNG kept in the database.
pub const MAX_THUMBNAIL_BYTES: usize = 256 * 1024;
/// Tool calls recorded on one reply.
pub const MAX_TOOL_CALLS_PER_MESSAGE: usize = 2000;
/// Bytes kept of one tool call's output, error or serialised input; the rest is cut with a note.
pub const MAX_TOOL_TEXT_BYTES: usize = 1024 * 1024;
/// Knowledge libraries one conversation may use.
pub const MAX_LIBRARIES_PER_CONVERSATION: usize = 64;
/// Model profiles.
pub const MAX_PROFILES: usize = 100;
/// Characters of a profile's base URL or model name.
pub const MAX_URL_CHARS: usize = 2048;
/// Custom MCP servers.
pub const MAX_MCP_SERVERS: usize = 64;
/// Arguments, environment names or assigned runtimes of one MCP server.
pub const MAX_MCP_LIST_ITEMS: usize = 128;
/// Characters of one MCP command or argument.
pub const MAX_MCP_ARG_CHARS: usize = 4096;
/// Bytes of one app setting's JSON value.
pub const MAX_SETTING_VALUE_BYTES: usize = 64 * 1024;

/// Streamed reply text is coalesced in memory and written when this many bytes are waiting...
pub const APPEND_FLUSH_BYTES: usize = 16 * 1024;
/// ...or when this long has passed since the last write, so a crash loses at most this much.
pub const APPEND_FLUSH_INTERVAL: Duration = Duration::from_millis(200);
/// How long a statement waits for another connection's lock (e.g. the CLI) before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
