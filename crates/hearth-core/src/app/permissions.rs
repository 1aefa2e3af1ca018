//! Permission requests of running replies, and the "always" answers each conversation gave.
//!
//! The runtime keeps an "always" answer per project instance, shared by every session there and
//! ranked above each session's own rules: one conversation's "always" would open those paths to
//! every conversation of the project — even after the project is set to Refuse — until the
//! instance closes. So Hearth never sends the runtime "always". It answers "once" and keeps the
//! "always" itself, for that conversation only: a later request of the same conversation for the
//! same permission and the same paths is answered "once" without asking again. Kept in memory
//! (until Hearth closes), and dropped for a project whose outside-folder setting changes.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::runtime::PermissionReply;

/// Distinct (permission, path pattern) pairs one conversation keeps as "always" answers; past it,
/// "always" still allows the request at hand, and the next one is asked again.
pub const MAX_ALWAYS_PER_CONVERSATION: usize = 64;

/// A request waiting for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Asked {
    conversation_id: String,
    permission: String,
    patterns: Vec<String>,
}

#[derive(Default)]
pub(crate) struct Permissions {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// By permission id.
    pending: HashMap<String, Asked>,
    /// By conversation: the (permission, pattern) pairs it answered "always".
    always: HashMap<String, HashSet<(String, String)>>,
}

impl Permissions {
    /// The runtime asks. `true` when the conversation answered "always" for every path of this
    /// request before: the caller answers "once" for the user. Otherwise it waits for the user.
    pub fn asked(&self, conversation_id: &str, permission_id: &str, permission: &str, patterns: &[String]) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let covered = !patterns.is_empty()
            && inner.always.get(conversation_id).is_some_and(|set| patterns.iter().all(|p| set.contains(&(permission.to_owned(), p.clone()))));
        if !covered {
            let asked = Asked { conversation_id: conversation_id.into(), permission: permission.into(), patterns: patterns.to_vec() };
            inner.pending.insert(permission_id.into(), asked);
        }
        covered
    }

    /// What the runtime is told for the user's answer: never its project-wide "always".
    pub fn to_runtime(reply: PermissionReply) -> PermissionReply {
        match reply {
            PermissionReply::Always => PermissionReply::Once,
            other => other,
        }
    }

    /// The runtime took the user's answer to `permission_id`; an "always" is kept for the
    /// conversation that was asked.
    pub fn answered(&self, conversation_id: &str, permission_id: &str, reply: PermissionReply) {
        let mut inner = self.inner.lock().unwrap();
        let Some(asked) = inner.pending.remove(permission_id) else { return };
        if reply != PermissionReply::Always || asked.conversation_id != conversation_id {
            return;
        }
        let kept = inner.always.entry(asked.conversation_id).or_default();
        for pattern in asked.patterns {
            if kept.len() >= MAX_ALWAYS_PER_CONVERSATION {
                tracing::warn!(conversation_id, max = MAX_ALWAYS_PER_CONVERSATION, "too many \"always\" answers kept; this one allowed once");
                break;
            }
            kept.insert((asked.permission.clone(), pattern));
        }
    }

    /// The conversation's turn ended: its unanswered requests are gone with it.
    pub fn turn_ended(&self, conversation_id: &str) {
        self.inner.lock().unwrap().pending.retain(|_, a| a.conversation_id != conversation_id);
    }

    /// Forget everything the conversations were asked and answered.
    pub fn forget<'a>(&self, conversation_ids: impl IntoIterator<Item = &'a str>) {
        let mut inner = self.inner.lock().unwrap();
        for id in conversation_ids {
            inner.always.remove(id);
            inner.pending.retain(|_, a| a.conversation_id != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn etc() -> Vec<String> {
        vec!["/etc/*".to_string()]
    }

    #[test]
    fn always_is_kept_for_the_conversation_that_answered_and_nowhere_else() {
        let p = Permissions::default();
        assert!(!p.asked("a", "per_1", "external_directory", &etc()), "first time: the user is asked");
        assert_eq!(Permissions::to_runtime(PermissionReply::Always), PermissionReply::Once, "the runtime never hears always");
        p.answered("a", "per_1", PermissionReply::Always);
        assert!(p.asked("a", "per_2", "external_directory", &etc()), "the same paths again: answered for the user");
        assert!(!p.asked("b", "per_3", "external_directory", &etc()), "another conversation is asked");
        assert!(!p.asked("a", "per_4", "external_directory", &["/var/*".to_string()]), "other paths are asked");
        assert!(!p.asked("a", "per_5", "bash", &etc()), "another permission is asked");
        let both = vec!["/etc/*".to_string(), "/var/*".to_string()];
        assert!(!p.asked("a", "per_6", "external_directory", &both), "only partly answered: asked");

        p.forget(["a"]);
        assert!(!p.asked("a", "per_7", "external_directory", &etc()), "forgotten: asked again");
    }

    #[test]
    fn once_and_reject_are_not_kept_and_unanswered_requests_end_with_the_turn() {
        let p = Permissions::default();
        p.asked("a", "per_1", "external_directory", &etc());
        p.answered("a", "per_1", PermissionReply::Once);
        p.asked("a", "per_2", "external_directory", &etc());
        p.answered("a", "per_2", PermissionReply::Reject);
        assert!(!p.asked("a", "per_3", "external_directory", &etc()));
        p.turn_ended("a");
        p.answered("a", "per_3", PermissionReply::Always);
        assert!(!p.asked("a", "per_4", "external_directory", &etc()), "an answer after the turn ended keeps nothing");
        p.answered("b", "per_4", PermissionReply::Always);
        assert!(!p.asked("a", "per_5", "external_directory", &etc()), "another conversation cannot answer for this one");
    }

    #[test]
    fn the_kept_answers_are_bounded() {
        let p = Permissions::default();
        let many: Vec<String> = (0..MAX_ALWAYS_PER_CONVERSATION + 5).map(|i| format!("/d{i}/*")).collect();
        p.asked("a", "per_1", "external_directory", &many);
        p.answered("a", "per_1", PermissionReply::Always);
        assert_eq!(p.inner.lock().unwrap().always["a"].len(), MAX_ALWAYS_PER_CONVERSATION);
    }
}
