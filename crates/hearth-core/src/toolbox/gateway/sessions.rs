//! Which native session is running which request, with the token granted for that request.
//!
//! OpenCode tells an MCP server nothing about the caller; the plugin adds the session id to each
//! call, and this table turns that session id into the request running on it right now.

use std::collections::HashMap;
use std::sync::Mutex;

use super::grants::{CapabilityToken, GrantError, Grants, ValidGrant};

/// Most sessions bound at once (one per running request; ended requests unbind).
pub const MAX_BOUND_SESSIONS: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("This tool call did not say which conversation made it (is the Hearth plugin loaded?), so it was refused.")]
    NoSession,
    #[error("This conversation has no running request with a Hearth grant, so the call was refused.")]
    UnboundSession,
    #[error("Too many conversations are running at once; try again when one finishes.")]
    TooManySessions,
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
}

impl Sessions {
    /// Bind `session_id` to `request_id`; `token` must be the one granted for that very request.
    pub fn bind(&self, grants: &Grants, session_id: &str, request_id: &str, token: &CapabilityToken) -> Result<(), AuthError> {
        grants.validate(request_id, Some(token.expose()))?;
        let mut bound = self.bound.lock().unwrap();
        if bound.len() >= MAX_BOUND_SESSIONS && !bound.contains_key(session_id) {
            return Err(AuthError::TooManySessions);
        }
        tracing::debug!(session_id, request_id, token = %token.tag(), "session bound");
        bound.insert(session_id.to_string(), Binding { request_id: request_id.to_string(), token: token.clone() });
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
        let a = grants.grant("req-a", scope());
        let b = grants.grant("req-b", scope());
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
        let a = grants.grant("req-a", scope());
        sessions.bind(&grants, "ses_a", "req-a", &a).unwrap();
        grants.revoke("req-a");
        assert_eq!(sessions.authorize(&grants, Some("ses_a")), Err(AuthError::Grant(GrantError::Revoked)));
        sessions.unbind_request("req-a");
        assert_eq!(sessions.authorize(&grants, Some("ses_a")), Err(AuthError::UnboundSession));
    }
}
