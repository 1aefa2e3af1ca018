//! Agents the user added by their command line (a program and its arguments), run over ACP like a
//! preset. Nothing secret is stored here: an agent that needs a key reads it from the user's own
//! environment or configuration.

use rusqlite::{params, OptionalExtension, Row};

use super::error::{check_name, StoreError, StoreResult};
use super::{expect_one, from_json_list, new_id, now_ms, to_json_list, Store, MAX_MCP_ARG_CHARS, MAX_MCP_LIST_ITEMS, MAX_NAME_CHARS};
use crate::acp::CustomAgent;

/// Most custom agents kept.
pub const MAX_CUSTOM_AGENTS: usize = 32;

const COLUMNS: &str = "id, name, command";

fn from_row(row: &Row<'_>) -> rusqlite::Result<CustomAgent> {
    Ok(CustomAgent { id: row.get(0)?, name: row.get(1)?, command: from_json_list(&row.get::<_, String>(2)?) })
}

fn validated(name: &str, command: &[String]) -> StoreResult<(String, Vec<String>)> {
    let name = name.trim().to_owned();
    check_name("agent name", &name, MAX_NAME_CHARS)?;
    let command: Vec<String> = command.iter().map(|a| a.trim().to_owned()).filter(|a| !a.is_empty()).collect();
    let program = command.first().ok_or(StoreError::Empty { what: "agent command" })?;
    check_name("agent command", program, MAX_MCP_ARG_CHARS)?;
    if command.len() > MAX_MCP_LIST_ITEMS {
        return Err(StoreError::TooMany { what: "arguments of one agent", max: MAX_MCP_LIST_ITEMS });
    }
    for arg in &command {
        let chars = arg.chars().count();
        if chars > MAX_MCP_ARG_CHARS {
            return Err(StoreError::TooLong { what: "agent argument", chars, max: MAX_MCP_ARG_CHARS });
        }
    }
    Ok((name, command))
}

impl Store {
    pub fn add_custom_agent(&self, name: &str, command: &[String]) -> StoreResult<CustomAgent> {
        let (name, command) = validated(name, command)?;
        let inner = self.lock();
        let count: i64 = inner.conn.query_row("SELECT count(*) FROM acp_agents", [], |r| r.get(0))?;
        if count as usize >= MAX_CUSTOM_AGENTS {
            return Err(StoreError::TooMany { what: "custom agents", max: MAX_CUSTOM_AGENTS });
        }
        let agent = CustomAgent { id: new_id(), name, command };
        inner.conn.execute(
            "INSERT INTO acp_agents (id, name, command, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![agent.id, agent.name, to_json_list(&agent.command), now_ms()],
        )?;
        Ok(agent)
    }

    pub fn update_custom_agent(&self, id: &str, name: &str, command: &[String]) -> StoreResult<CustomAgent> {
        let (name, command) = validated(name, command)?;
        let changed = self.lock().conn.execute("UPDATE acp_agents SET name = ?2, command = ?3 WHERE id = ?1", params![id, name, to_json_list(&command)])?;
        expect_one(changed, "agent", id)?;
        Ok(CustomAgent { id: id.to_owned(), name, command })
    }

    pub fn list_custom_agents(&self) -> StoreResult<Vec<CustomAgent>> {
        let inner = self.lock();
        let mut stmt = inner.conn.prepare_cached(&format!("SELECT {COLUMNS} FROM acp_agents ORDER BY created_at, rowid"))?;
        let rows = stmt.query_map([], from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn get_custom_agent(&self, id: &str) -> StoreResult<CustomAgent> {
        self.lock()
            .conn
            .query_row(&format!("SELECT {COLUMNS} FROM acp_agents WHERE id = ?1"), [id], from_row)
            .optional()?
            .ok_or_else(|| StoreError::NotFound { what: "agent", id: id.to_owned() })
    }

    pub fn remove_custom_agent(&self, id: &str) -> StoreResult<()> {
        let changed = self.lock().conn.execute("DELETE FROM acp_agents WHERE id = ?1", [id])?;
        expect_one(changed, "agent", id)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::test_support::open_at;

    #[test]
    fn custom_agents_are_kept_validated_and_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open_at(tmp.path());
        let cmd = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let a = store.add_custom_agent("  My agent ", &cmd(&["my-agent", "--acp", " "])).unwrap();
        assert_eq!((a.name.as_str(), a.command.clone()), ("My agent", cmd(&["my-agent", "--acp"])));
        assert!(store.add_custom_agent("Empty", &cmd(&["  "])).is_err());
        let b = store.update_custom_agent(&a.id, "Renamed", &cmd(&["/opt/agent"])).unwrap();
        assert_eq!(store.list_custom_agents().unwrap(), vec![b.clone()]);
        assert_eq!(store.get_custom_agent(&a.id).unwrap(), b);
        store.remove_custom_agent(&a.id).unwrap();
        assert!(store.get_custom_agent(&a.id).is_err());
        for i in 0..super::MAX_CUSTOM_AGENTS {
            store.add_custom_agent(&format!("a{i}"), &cmd(&["x"])).unwrap();
        }
        assert!(store.add_custom_agent("one too many", &cmd(&["x"])).is_err());
    }
}
