//! Which native session serves which conversation, and the locks that keep turns in order: one turn
//! at a time per conversation, and no instance disposed under a run of its directory.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::client::{ApiError, Client};
use crate::runtime::{OutsideProject, WorkMode};
use crate::space::ExecutionSpace;

/// Tools a session in `Ask` mode may not use (denied by its rules, so the runtime does not even
/// offer them to the model).
pub const ASK_MODE_DENIED: &[&str] = &["bash", "edit", "write", "apply_patch", "task"];

/// The permission rules Hearth keeps on a session. The runtime's own rules allow everything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRules {
    pub outside: OutsideProject,
    pub mode: WorkMode,
}

impl SessionRules {
    /// The ruleset, complete: sent at creation, and appended whole when it changes (the runtime
    /// appends rules and the last match wins, so a complete set overrides every earlier one). A
    /// prompt's own `tools` map would REPLACE the session's rules, outside-project ones included,
    /// which is why `Ask` mode is set here and never per prompt.
    pub fn to_json(self) -> Value {
        let outside = match self.outside {
            OutsideProject::Deny => "deny",
            OutsideProject::Ask => "ask",
        };
        let tools = if self.mode == WorkMode::Ask { "deny" } else { "allow" };
        let mut rules = vec![
            json!({ "permission": "external_directory", "pattern": "*", "action": outside }),
            // A question blocks the turn on an answer Hearth has no window for.
            json!({ "permission": "question", "pattern": "*", "action": "deny" }),
        ];
        rules.extend(ASK_MODE_DENIED.iter().map(|tool| json!({ "permission": tool, "pattern": "*", "action": tools })));
        Value::Array(rules)
    }
}

/// A conversation's native session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NativeSession {
    pub id: String,
    pub directory: String,
    /// The rules the session was last given; `None` when it was restored from the app's store and
    /// its rules are not known yet.
    pub rules: Option<SessionRules>,
}

#[derive(Default)]
pub(super) struct Sessions {
    by_conversation: Mutex<HashMap<String, NativeSession>>,
    conversation_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Runs hold their directory's lock shared; disposing the instance needs it exclusively, so an
    /// instance is never disposed under a run (a dispose decided a moment ago would abort it).
    directory_locks: Mutex<HashMap<String, Arc<tokio::sync::RwLock<()>>>>,
    /// Directories whose instance the runtime holds now.
    instances: Mutex<BTreeSet<String>>,
}

impl Sessions {
    pub fn native(&self, conversation_id: &str) -> Option<NativeSession> {
        self.by_conversation.lock().unwrap().get(conversation_id).cloned()
    }

    /// The conversation's session in `space`: the one it has, the one the app stored for it (after
    /// a restart), or a new one — with `rules` applied either way.
    pub async fn session_for(
        &self,
        client: &Client,
        conversation_id: &str,
        space: &ExecutionSpace,
        stored: Option<&str>,
        rules: SessionRules,
    ) -> Result<String, ApiError> {
        let directory = space.root_str();
        let known = self.native(conversation_id).filter(|s| s.directory == directory);
        let candidate = known.or_else(|| {
            stored.map(|id| NativeSession { id: id.to_owned(), directory: directory.to_owned(), rules: None })
        });
        if let Some(session) = candidate {
            if session.rules == Some(rules) {
                return Ok(session.id);
            }
            match client.set_session_permission(directory, &session.id, &rules.to_json()).await {
                Ok(()) => {
                    self.remember(conversation_id, NativeSession { rules: Some(rules), ..session.clone() });
                    return Ok(session.id);
                }
                // The runtime no longer has it (its data was reset): the conversation starts a new one.
                Err(ApiError::Status { status: 404, .. }) => {
                    tracing::warn!(conversation_id, "the runtime no longer has this conversation's session; starting a new one");
                }
                Err(e) => return Err(e),
            }
        }
        let title = format!("Hearth {conversation_id}");
        let id = client.create_session(directory, &title, &rules.to_json()).await?;
        self.remember(conversation_id, NativeSession { id: id.clone(), directory: directory.to_owned(), rules: Some(rules) });
        Ok(id)
    }

    fn remember(&self, conversation_id: &str, session: NativeSession) {
        self.by_conversation.lock().unwrap().insert(conversation_id.to_owned(), session);
    }

    /// Forget a conversation (deleted or reset in the app).
    pub fn release(&self, conversation_id: &str) {
        self.by_conversation.lock().unwrap().remove(conversation_id);
        self.conversation_locks.lock().unwrap().remove(conversation_id);
    }

    pub fn conversation_lock(&self, conversation_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.conversation_locks.lock().unwrap().entry(conversation_id.into()).or_default().clone()
    }

    pub fn directory_lock(&self, directory: &str) -> Arc<tokio::sync::RwLock<()>> {
        self.directory_locks.lock().unwrap().entry(directory.into()).or_default().clone()
    }

    pub fn instance_opened(&self, directory: &str) {
        self.instances.lock().unwrap().insert(directory.into());
    }

    pub fn instance_closed(&self, directory: &str) {
        self.instances.lock().unwrap().remove(directory);
    }

    /// The process that held the instances is gone.
    pub fn all_instances_closed(&self) {
        self.instances.lock().unwrap().clear();
    }

    pub fn open_instances(&self) -> Vec<String> {
        self.instances.lock().unwrap().iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ask_mode_denies_the_editing_tools_and_execute_allows_them_again() {
        let ask = SessionRules { outside: OutsideProject::Deny, mode: WorkMode::Ask }.to_json();
        let rule = |rules: &Value, perm: &str| rules.as_array().unwrap().iter().rev().find(|r| r["permission"] == perm).map(|r| r["action"].clone());
        for tool in ASK_MODE_DENIED {
            assert_eq!(rule(&ask, tool), Some(json!("deny")), "{tool}");
        }
        assert_eq!(rule(&ask, "external_directory"), Some(json!("deny")));
        let execute = SessionRules { outside: OutsideProject::Ask, mode: WorkMode::Execute }.to_json();
        assert_eq!(rule(&execute, "bash"), Some(json!("allow")), "an appended set must override an earlier Ask mode");
        assert_eq!(rule(&execute, "external_directory"), Some(json!("ask")));
        assert_eq!(rule(&execute, "question"), Some(json!("deny")));
    }
}
