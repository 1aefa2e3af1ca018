//! Which native session is running which request, with the token granted for that request.
//!
//! OpenCode tells an MCP server nothing about the caller; the plugin stamps each call with the
//! session id, and this table turns that session id into the request running on it right now. A
//! `task` subagent's session is bound to the request of the session that spawned it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;

use super::grants::{token_tag, CapabilityToken, GrantError, Grants, ValidGrant};

/// Most sessions bound at once (a running request's session and its subagents'; ended requests
/// unbind).
pub const MAX_BOUND_SESSIONS: usize = 4096;
/// How long a call from a session not bound yet waits for its binding before it is refused.
pub const UNBOUND_SESSION_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("This tool call did not say which conversation made it (is the Hearth plugin loaded?), so it was refused.")]
    NoSession,
    #[error("This tool call's conversation stamp was not written by Hearth's plugin (a model cannot choose its conversation), so it was refused.")]
    ForgedStamp,
    #[error("This conversation has no running request with a Hearth grant, so the call was refused.")]
    UnboundSession,
    #[error("Too many conversations are running at once; try again when one finishes.")]
    TooManySessions,
    #[error("The subagent's session already belongs to another running request, so it was not given this one's grant.")]
    SessionTaken,
    #[error(transparent)]
    Grant(#[from] GrantError),
}

#[derive(Debug)]
struct Binding {
    request_id: String,
    token: CapabilityToken,
}

#[derive(Debug, Default)]
pub struct Sessions {
    bound: Mutex<HashMap<String, Binding>>,
    /// Told whenever a session is bound, so a call waiting for its binding can look again.
    bound_changed: Notify,
}

impl Sessions {
    /// Bind `session_id` to `request_id`; `token` must be the one granted for that very request.
    pub fn bind(&self, grants: &Grants, session_id: &str, request_id: &str, token: &CapabilityToken) -> Result<(), AuthError> {
        grants.validate(request_id, Some(token.expose()))?;
        self.insert(session_id, Binding { request_id: request_id.to_string(), token: token.clone() })
    }

    /// Bind `child`, a session the runtime created under `parent` (a `task` subagent), to the
    /// request `parent` runs now. `parent` must be bound to `request_id`; `child` must not be bound
    /// to any other request.
    pub fn bind_child(&self, grants: &Grants, request_id: &str, parent: &str, child: &str) -> Result<(), AuthError> {
        let token = {
            let bound = self.bound.lock().unwrap();
            let parent = bound.get(parent).filter(|b| b.request_id == request_id).ok_or(AuthError::UnboundSession)?;
            match bound.get(child) {
                Some(b) if b.request_id != request_id => return Err(AuthError::SessionTaken),
                // Told again (every `session.updated` of the child): nothing to do.
                Some(_) => return Ok(()),
                None => {}
            }
            parent.token.clone()
        };
        self.bind(grants, child, request_id, &token)
    }

    fn insert(&self, session_id: &str, binding: Binding) -> Result<(), AuthError> {
        let mut bound = self.bound.lock().unwrap();
        if bound.len() >= MAX_BOUND_SESSIONS && !bound.contains_key(session_id) {
            return Err(AuthError::TooManySessions);
        }
        tracing::debug!(session = %token_tag(session_id), request_id = %binding.request_id, token = %binding.token.tag(), "session bound");
        bound.insert(session_id.to_string(), binding);
        drop(bound);
        self.bound_changed.notify_waiters();
        Ok(())
    }

    /// Forget every session bound to `request_id`.
    pub fn unbind_request(&self, request_id: &str) {
        self.bound.lock().unwrap().retain(|_, b| b.request_id != request_id);
    }

    pub fn unbind_session(&self, session_id: &str) {
        self.bound.lock().unwrap().remove(session_id);
    }

    /// The grant the call from `session_id` runs under, checked now (expiry, revocation).
    pub fn authorize(&self, grants: &Grants, session_id: Option<&str>) -> Result<ValidGrant, AuthError> {
        let session_id = session_id.filter(|s| !s.is_empty()).ok_or(AuthError::NoSession)?;
        let (request_id, token) = {
            let bound = self.bound.lock().unwrap();
            let b = bound.get(session_id).ok_or(AuthError::UnboundSession)?;
            (b.request_id.clone(), b.token.clone())
        };
        Ok(grants.validate(&request_id, Some(token.expose()))?)
    }

    /// [`Sessions::authorize`], but a session not bound yet is given up to `wait` to be bound: a
    /// subagent's session is bound when the run sees it created, which may be a moment after the
    /// subagent's first call.
    pub async fn authorize_waiting(&self, grants: &Grants, session_id: Option<&str>, wait: Duration) -> Result<ValidGrant, AuthError> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let changed = self.bound_changed.notified();
            tokio::pin!(changed);
            // Registered before looking, so a binding made in between is not missed.
            changed.as_mut().enable();
            match self.authorize(grants, session_id) {
                Err(AuthError::UnboundSession) => {}
                done => return done,
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.authorize(grants, session_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::grants::{GrantScope, DEFAULT_GRANT_TTL};
    use super::*;

    fn scope() -> GrantScope {
        GrantScope { ttl: DEFAULT_GRANT_TTL, ..Default::default() }
    }

    #[test]
    fn a_session_runs_under_its_own_request_grant() {
        let (grants, sessions) = (Grants::new(), Sessions::default());
        let a = grants.grant("req-a", scope()).unwrap();
        let b = grants.grant("req-b", scope()).unwrap();
        sessions.bind(&grants, "ses_a", "req-a", &a).unwrap();
        sessions.bind(&grants, "ses_b", "req-b", &b).unwrap();
        assert_eq!(sessions.authorize(&grants, Some("ses_a")).unwrap().request_id, "req-a");
        assert_eq!(sessions.authorize(&grants, Some("ses_b")).unwrap().request_id, "req-b");
        // Binding a session with another request's token is refused.
        assert_eq!(sessions.bind(&grants, "ses_c", "req-a", &b), Err(AuthError::Grant(GrantError::OtherRequest)));
        assert_eq!(sessions.authorize(&grants, Some("ses_c")), Err(AuthError::UnboundSession));
        assert_eq!(sessions.authorize(&grants, None), Err(AuthError::NoSession));
    }

    #[test]
    fn revocation_reaches_bound_sessions() {
        let (grants, sessions) = (Grants::new(), Sessions::default());
        let a = grants.grant("req-a", scope()).unwrap();
        sessions.bind(&grants, "ses_a", "req-a", &a).unwrap();
        grants.revoke("req-a");
        assert_eq!(sessions.authorize(&grants, Some("ses_a")), Err(AuthError::Grant(GrantError::Revoked)));
        sessions.unbind_request("req-a");
        assert_eq!(sessions.authorize(&grants, Some("ses_a")), Err(AuthError::UnboundSession));
    }

    #[test]
    fn a_child_session_runs_under_its_parents_request_only() {
        let (grants, sessions) = (Grants::new(), Sessions::default());
        let a = grants.grant("req-a", scope()).unwrap();
        let b = grants.grant("req-b", scope()).unwrap();
        sessions.bind(&grants, "ses_a", "req-a", &a).unwrap();
        sessions.bind(&grants, "ses_b", "req-b", &b).unwrap();
        sessions.bind_child(&grants, "req-a", "ses_a", "ses_a_child").unwrap();
        assert_eq!(sessions.authorize(&grants, Some("ses_a_child")).unwrap().request_id, "req-a");
        // The parent must be bound to that very request, and a session of another running request
        // is not taken over.
        assert_eq!(sessions.bind_child(&grants, "req-b", "ses_a", "ses_x"), Err(AuthError::UnboundSession));
        assert_eq!(sessions.bind_child(&grants, "req-a", "ses_a", "ses_b"), Err(AuthError::SessionTaken));
        assert_eq!(sessions.authorize(&grants, Some("ses_b")).unwrap().request_id, "req-b");
        assert_eq!(sessions.bind_child(&grants, "req-a", "ses_nobody", "ses_y"), Err(AuthError::UnboundSession));
        // The child ends with its parent's request.
        grants.revoke("req-a");
        sessions.unbind_request("req-a");
        assert_eq!(sessions.authorize(&grants, Some("ses_a_child")), Err(AuthError::UnboundSession));
    }

    #[tokio::test]
    async fn a_call_waits_briefly_for_its_session_to_be_bound() {
        let (grants, sessions) = (std::sync::Arc::new(Grants::new()), std::sync::Arc::new(Sessions::default()));
        let a = grants.grant("req-a", scope()).unwrap();
        sessions.bind(&grants, "ses_a", "req-a", &a).unwrap();
        let waiting = {
            let (grants, sessions) = (grants.clone(), sessions.clone());
            tokio::spawn(async move { sessions.authorize_waiting(&grants, Some("ses_child"), Duration::from_secs(30)).await })
        };
        tokio::task::yield_now().await;
        sessions.bind_child(&grants, "req-a", "ses_a", "ses_child").unwrap();
        assert_eq!(waiting.await.unwrap().unwrap().request_id, "req-a");
        // Never bound: refused once the wait is over, not before.
        let started = tokio::time::Instant::now();
        let wait = Duration::from_millis(100);
        assert_eq!(sessions.authorize_waiting(&grants, Some("ses_never"), wait).await, Err(AuthError::UnboundSession));
        assert!(started.elapsed() >= wait);
        // Nothing to wait for without a session.
        assert_eq!(sessions.authorize_waiting(&grants, None, Duration::from_secs(30)).await, Err(AuthError::NoSession));
    }
}
