//! Tool names as the model sees them. OpenCode names an MCP tool `<entry>_<tool>` (characters
//! outside `[A-Za-z0-9_-]` become `_`) and providers refuse names over 64 characters, so the
//! gateway keeps every name it exposes inside that budget, prefix included.

use sha2::{Digest, Sha256};

/// Name of the gateway's entry in the runtime's `mcp` config: its tools reach the model as
/// `hearth_<tool>`, and the plugin recognises them by that prefix.
pub const GATEWAY_MCP_NAME: &str = "hearth";
/// Longest tool name a model provider accepts.
pub const MAX_EXPOSED_TOOL_NAME_CHARS: usize = 64;
/// Longest prefix derived from a custom server's name.
pub const MAX_SERVER_PREFIX_CHARS: usize = 12;
/// Hex characters of the hash that keeps a shortened tool name unique.
pub const NAME_HASH_CHARS: usize = 6;

/// The prefix the plugin uses to recognise gateway tools (`hearth_`).
pub fn runtime_tool_prefix() -> String {
    format!("{GATEWAY_MCP_NAME}_")
}

/// Longest name the gateway itself may give a tool (OpenCode adds `hearth_`).
pub fn max_gateway_tool_name_chars() -> usize {
    MAX_EXPOSED_TOOL_NAME_CHARS - runtime_tool_prefix().len()
}

/// Replace every character outside `[A-Za-z0-9_-]` with `_`, as OpenCode does.
pub fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// A short prefix for a custom server, from its name, distinct from every prefix in `taken`.
pub fn server_prefix(name: &str, taken: &[String]) -> String {
    let clean: String = sanitize(&name.to_ascii_lowercase()).chars().take(MAX_SERVER_PREFIX_CHARS).collect();
    let base = clean.trim_matches(|c| c == '_' || c == '-').to_string();
    let base = if base.is_empty() { "mcp".to_string() } else { base };
    if !taken.contains(&base) {
        return base;
    }
    (2..).map(|n| format!("{base}{n}")).find(|p| !taken.contains(p)).expect("an unused suffix exists")
}

/// The gateway's name for `tool` of the server with `prefix`: `<prefix>_<tool>`, shortened with a
/// hash of the original when it would exceed the budget (so two long names stay distinct).
pub fn exposed_tool_name(prefix: &str, tool: &str) -> String {
    let full = format!("{prefix}_{}", sanitize(tool));
    let budget = max_gateway_tool_name_chars();
    if full.len() <= budget {
        return full;
    }
    let hash = format!("{:x}", Sha256::digest(tool.as_bytes()));
    let keep = budget - NAME_HASH_CHARS - 1;
    format!("{}_{}", &full[..keep], &hash[..NAME_HASH_CHARS])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_prefixed_and_bounded() {
        assert_eq!(sanitize("a.b/c d-e_f"), "a_b_c_d-e_f");
        assert_eq!(server_prefix("Shared blueprint", &[]), "shared_bluep");
        assert_eq!(server_prefix("Shared blueprint", &["shared_bluep".into()]), "shared_bluep2");
        assert_eq!(server_prefix("!!!", &[]), "mcp");
        assert_eq!(exposed_tool_name("fx", "create_game_blueprint"), "fx_create_game_blueprint");
        let long_a = exposed_tool_name("shared_bluep", &format!("{}_a", "x".repeat(80)));
        let long_b = exposed_tool_name("shared_bluep", &format!("{}_b", "x".repeat(80)));
        assert_eq!(long_a.len(), max_gateway_tool_name_chars());
        assert_ne!(long_a, long_b, "shortened names stay distinct");
        let as_model_sees_it = format!("{}{long_a}", runtime_tool_prefix());
        assert_eq!(as_model_sees_it.len(), MAX_EXPOSED_TOOL_NAME_CHARS);
        assert!(as_model_sees_it.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }
}
