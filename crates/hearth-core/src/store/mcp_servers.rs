//! Custom MCP servers (stdio) the user configured. Environment variable NAMES are stored here; their
//! values are secrets (tokens, passwords) and go to the [`SecretStore`].
//!
//! [`SecretStore`]: crate::store::secrets::SecretStore

use rusqlite::{params, OptionalExtension, Row};

use super::error::{check_name, StoreError, StoreResult};
use super::{expect_one, from_json_list, new_id, now_ms, to_json_list, Store, MAX_MCP_ARG_CHARS, MAX_MCP_LIST_ITEMS, MAX_MCP_SERVERS, MAX_NAME_CHARS};

/// A server as the UI sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct McpServer {
    pub id: String,
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// Names of the environment variables set for it; the values are secrets and never shown.
    pub env_keys: Vec<String>,
    pub enabled: bool,
    /// Let the server change its tool list while running (otherwise the list is frozen at start).
    pub allow_dynamic_tools: bool,
    /// Runtime selections that get this server.
    pub assigned_runtimes: Vec<String>,
}

/// What the user edits (environment values are set one by one with [`Store::set_mcp_env`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct McpServerInput {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub enabled: bool,
    pub allow_dynamic_tools: bool,
    pub assigned_runtimes: Vec<String>,
}

const COLUMNS: &str = "id, name, command, args, env_keys, enabled, allow_dynamic_tools, assigned_runtimes";

fn from_row(row: &Row<'_>) -> rusqlite::Result<McpServer> {
    Ok(McpServer {
        id: row.get(0)?,
        name: row.get(1)?,
        command: row.get(2)?,
        args: from_json_list(&row.get::<_, String>(3)?),
        env_keys: from_json_list(&row.get::<_, String>(4)?),
        enabled: row.get(5)?,
        allow_dynamic_tools: row.get(6)?,
        assigned_runtimes: from_json_list(&row.get::<_, String>(7)?),
    })
}

fn secret_name(server_id: &str, env_name: &str) -> String {
    format!("mcp:{server_id}:{env_name}")
}

fn validated(input: &McpServerInput) -> StoreResult<McpServerInput> {
    let name = input.name.trim().to_owned();
    check_name("server name", &name, MAX_NAME_CHARS)?;
    let command = input.command.trim().to_owned();
    check_name("server command", &command, MAX_MCP_ARG_CHARS)?;
    for (what, list) in [("arguments of one server", &input.args), ("runtimes per server", &input.assigned_runtimes)] {
        if list.len() > MAX_MCP_LIST_ITEMS {
            return Err(StoreError::TooMany { what, max: MAX_MCP_LIST_ITEMS });
        }
    }
    for arg in &input.args {
        let chars = arg.chars().count();
        if chars > MAX_MCP_ARG_CHARS {
            return Err(StoreError::TooLong { what: "server argument", chars, max: MAX_MCP_ARG_CHARS });
        }
    }
    Ok(McpServerInput { name, command, ..input.clone() })
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= MAX_NAME_CHARS
}

impl Store {
    pub fn add_mcp_server(&self, input: &McpServerInput) -> StoreResult<McpServer> {
        let input = validated(input)?;
        let id = new_id();
        {
            let inner = self.lock();
            let count: i64 = inner.conn.query_row("SELECT count(*) FROM mcp_servers", [], |r| r.get(0))?;
            if count as usize >= MAX_MCP_SERVERS {
                return Err(StoreError::TooMany { what: "MCP servers", max: MAX_MCP_SERVERS });
            }
            inner.conn.execute(
                &format!("INSERT INTO mcp_servers ({COLUMNS}, created_at) VALUES (?1, ?2, ?3, ?4, '[]', ?5, ?6, ?7, ?8)"),
                params![
                    id,
                    input.name,
                    input.command,
                    to_json_list(&input.args),
                    input.enabled,
                    input.allow_dynamic_tools,
                    to_json_list(&input.assigned_runtimes),
                    now_ms()
                ],
            )?;
        }
        self.get_mcp_server(&id)
    }

    /// Every server, in the order they were added.
    pub fn list_mcp_servers(&self) -> StoreResult<Vec<McpServer>> {
        let inner = self.lock();
        let mut stmt = inner.conn.prepare_cached(&format!("SELECT {COLUMNS} FROM mcp_servers ORDER BY created_at, rowid"))?;
        let rows = stmt.query_map([], from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn get_mcp_server(&self, id: &str) -> StoreResult<McpServer> {
        self.lock()
            .conn
            .query_row(&format!("SELECT {COLUMNS} FROM mcp_servers WHERE id = ?1"), [id], from_row)
            .optional()?
            .ok_or_else(|| StoreError::NotFound { what: "MCP server", id: id.to_owned() })
    }

    pub fn update_mcp_server(&self, id: &str, input: &McpServerInput) -> StoreResult<McpServer> {
        let input = validated(input)?;
        let changed = self.lock().conn.execute(
            "UPDATE mcp_servers SET name = ?2, command = ?3, args = ?4, enabled = ?5, allow_dynamic_tools = ?6, assigned_runtimes = ?7 WHERE id = ?1",
            params![
                id,
                input.name,
                input.command,
                to_json_list(&input.args),
                input.enabled,
                input.allow_dynamic_tools,
                to_json_list(&input.assigned_runtimes)
            ],
        )?;
        expect_one(changed, "MCP server", id)?;
        self.get_mcp_server(id)
    }

    pub fn set_mcp_server_enabled(&self, id: &str, enabled: bool) -> StoreResult<()> {
        let changed = self.lock().conn.execute("UPDATE mcp_servers SET enabled = ?2 WHERE id = ?1", params![id, enabled])?;
        expect_one(changed, "MCP server", id)
    }

    /// Delete a server and its environment values.
    pub fn delete_mcp_server(&self, id: &str) -> StoreResult<()> {
        let server = self.get_mcp_server(id)?;
        let changed = self.lock().conn.execute("DELETE FROM mcp_servers WHERE id = ?1", [id])?;
        expect_one(changed, "MCP server", id)?;
        for name in &server.env_keys {
            self.secrets.delete(&secret_name(id, name))?;
        }
        Ok(())
    }

    /// Set (`Some`) or remove (`None`) one environment variable of a server. The value goes to the
    /// secret store; only the name is kept here.
    pub fn set_mcp_env(&self, id: &str, name: &str, value: Option<&str>) -> StoreResult<()> {
        let name = name.trim();
        if !valid_env_name(name) {
            return Err(StoreError::InvalidEnvName { name: name.chars().take(64).collect() });
        }
        let mut keys = self.get_mcp_server(id)?.env_keys;
        match value {
            Some(value) => {
                if !keys.iter().any(|k| k == name) {
                    if keys.len() >= MAX_MCP_LIST_ITEMS {
                        return Err(StoreError::TooMany { what: "environment variables per server", max: MAX_MCP_LIST_ITEMS });
                    }
                    keys.push(name.to_owned());
                }
                self.secrets.set(&secret_name(id, name), value)?;
            }
            None => {
                keys.retain(|k| k != name);
                self.secrets.delete(&secret_name(id, name))?;
            }
        }
        let changed =
            self.lock().conn.execute("UPDATE mcp_servers SET env_keys = ?2 WHERE id = ?1", params![id, to_json_list(&keys)])?;
        expect_one(changed, "MCP server", id)
    }

    /// The server's environment (name, value), for launching it. Never send it to the UI.
    pub fn mcp_env(&self, id: &str) -> StoreResult<Vec<(String, String)>> {
        let server = self.get_mcp_server(id)?;
        let mut env = Vec::with_capacity(server.env_keys.len());
        for name in server.env_keys {
            if let Some(value) = self.secrets.get(&secret_name(id, &name))? {
                env.push((name, value));
            }
        }
        Ok(env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::open_at;

    fn input(name: &str) -> McpServerInput {
        McpServerInput {
            name: name.into(),
            command: "npx".into(),
            args: vec!["-y".into(), "@modelcontextprotocol/server-github".into()],
            enabled: true,
            allow_dynamic_tools: false,
            assigned_runtimes: vec!["opencode".into()],
        }
    }

    #[test]
    fn mcp_servers_crud_with_secret_environment() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let a = store.add_mcp_server(&input("GitHub")).unwrap();
        let b = store.add_mcp_server(&input("Files")).unwrap();
        store.set_mcp_env(&a.id, "GITHUB_TOKEN", Some("ghp_secret_value")).unwrap();
        store.set_mcp_env(&a.id, "LOG_LEVEL", Some("debug")).unwrap();
        store.set_mcp_server_enabled(&b.id, false).unwrap();
        let mut edit = input("GitHub (work)");
        edit.allow_dynamic_tools = true;
        store.update_mcp_server(&a.id, &edit).unwrap();
        drop(store);

        let store = open_at(dir.path());
        let servers = store.list_mcp_servers().unwrap();
        let names: Vec<_> = servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["GitHub (work)", "Files"]);
        assert_eq!(servers[0].env_keys, ["GITHUB_TOKEN", "LOG_LEVEL"]);
        assert!(servers[0].allow_dynamic_tools && !servers[1].enabled);
        assert_eq!(servers[0].args[1], "@modelcontextprotocol/server-github");
        assert!(!serde_json::to_string(&servers).unwrap().contains("ghp_secret_value"));
        assert_eq!(store.mcp_env(&a.id).unwrap()[0], ("GITHUB_TOKEN".to_owned(), "ghp_secret_value".to_owned()));

        store.set_mcp_env(&a.id, "LOG_LEVEL", None).unwrap();
        assert_eq!(store.get_mcp_server(&a.id).unwrap().env_keys, ["GITHUB_TOKEN"]);
        store.delete_mcp_server(&a.id).unwrap();
        assert_eq!(store.secrets().get(&secret_name(&a.id, "GITHUB_TOKEN")).unwrap(), None);
        assert_eq!(store.list_mcp_servers().unwrap().len(), 1);
    }

    #[test]
    fn bad_server_settings_are_refused_with_a_sentence() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let mut no_command = input("x");
        no_command.command = " ".into();
        assert_eq!(store.add_mcp_server(&no_command).unwrap_err().to_string(), "The server command cannot be empty.");
        let s = store.add_mcp_server(&input("ok")).unwrap();
        let err = store.set_mcp_env(&s.id, "1BAD NAME", Some("v")).unwrap_err();
        assert!(err.to_string().contains("is not a valid environment variable name"), "{err}");
        let err = store.set_mcp_server_enabled("missing", true).unwrap_err();
        assert_eq!(err.to_string(), "This MCP server no longer exists (it may have been deleted).");
    }
}
