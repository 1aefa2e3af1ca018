//! The gateway's side of a run: grant before the run, bind its native session when the runtime
//! knows it (before the prompt is sent) and its subagents' sessions as they are created, revoke
//! when it ends — or when it never starts, since the grant is a guard its turn owns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::grants::token_tag;
use super::{CapabilityToken, Gateway, GrantError, GrantScope};
use crate::runtime::{Cause, GrantRefused, RunHooks};

/// Grants waiting for their run's session, by request id. Bounded by the live grants.
pub struct GatewayRunHooks {
    gateway: Arc<Gateway>,
    pending: Mutex<HashMap<String, CapabilityToken>>,
}

/// One request's grant, revoked when dropped: whoever holds it (the turn) ends the grant even if
/// the run never started (the runtime failed to launch, the project folder vanished).
pub struct RunGrant {
    hooks: Arc<GatewayRunHooks>,
    request_id: String,
    tag: String,
}

impl RunGrant {
    /// The token's tag (a short hash, for logs and diagnostics — never the token).
    pub fn tag(&self) -> &str {
        &self.tag
    }

    pub fn request_id(&self) -> &str {
        &self.request_id
    }
}

impl Drop for RunGrant {
    fn drop(&mut self) {
        // Idempotent: the run itself also ends the grant when it ends.
        self.hooks.run_ended(&self.request_id);
    }
}

impl std::fmt::Debug for RunGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunGrant").field("request_id", &self.request_id).field("token", &self.tag).finish()
    }
}

impl GatewayRunHooks {
    pub fn new(gateway: Arc<Gateway>) -> Arc<Self> {
        Arc::new(Self { gateway, pending: Mutex::new(HashMap::new()) })
    }

    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// Grant `scope` to the request about to run. Keep the returned guard until the run is over.
    pub fn grant(self: &Arc<Self>, request_id: &str, scope: GrantScope) -> Result<RunGrant, GrantError> {
        let token = self.gateway.grant(request_id, scope)?;
        let tag = token.tag();
        self.pending.lock().unwrap().insert(request_id.into(), token);
        Ok(RunGrant { hooks: self.clone(), request_id: request_id.into(), tag })
    }
}

impl RunHooks for GatewayRunHooks {
    fn session_ready(&self, request_id: &str, session_id: &str) -> Result<(), GrantRefused> {
        let token = self.pending.lock().unwrap().get(request_id).cloned();
        match token {
            // A run without a grant gets no tools of the gateway: its calls are refused there.
            None => Ok(()),
            Some(token) => self.gateway.bind_session(session_id, request_id, &token).map_err(|e| GrantRefused(Cause::new(e))),
        }
    }

    fn child_session(&self, request_id: &str, parent_session_id: &str, child_session_id: &str) {
        if let Err(e) = self.gateway.bind_child(request_id, parent_session_id, child_session_id) {
            // The subagent's gateway calls are then refused with a sentence; the run goes on.
            tracing::warn!(request_id, parent = %token_tag(parent_session_id), child = %token_tag(child_session_id), reason = %e, "subagent session not bound");
        }
    }

    fn run_ended(&self, request_id: &str) {
        self.pending.lock().unwrap().remove(request_id);
        self.gateway.request_ended(request_id);
    }

    fn issue_credential(&self) -> Option<crate::runtime::SessionCredential> {
        Some(self.gateway.issue_credential())
    }

    fn bind_credential(&self, credential_id: &str, session_id: &str) {
        self.gateway.bind_credential(credential_id, session_id)
    }

    fn revoke_credential(&self, credential_id: &str) {
        self.gateway.revoke_credential(credential_id)
    }
}
