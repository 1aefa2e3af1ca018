//! The gateway's side of a run: grant before the run, bind its native session when the runtime
//! knows it (before the prompt is sent), revoke when it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{CapabilityToken, Gateway, GrantScope};
use crate::runtime::{Cause, GrantRefused, RunHooks};

/// Grants waiting for their run's session, by request id. Bounded by the runs in flight.
pub struct GatewayRunHooks {
    gateway: Arc<Gateway>,
    pending: Mutex<HashMap<String, CapabilityToken>>,
}

impl GatewayRunHooks {
    pub fn new(gateway: Arc<Gateway>) -> Arc<Self> {
        Arc::new(Self { gateway, pending: Mutex::new(HashMap::new()) })
    }

    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// Grant `scope` to the request about to run; returns the token's tag (a short hash, for logs
    /// and diagnostics — never the token).
    pub fn grant(&self, request_id: &str, scope: GrantScope) -> String {
        let token = self.gateway.grant(request_id, scope);
        let tag = token.tag();
        self.pending.lock().unwrap().insert(request_id.into(), token);
        tag
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

    fn child_session(&self, request_id: &str, child_session_id: &str) {
        let token = self.pending.lock().unwrap().get(request_id).cloned();
        if let Some(token) = token {
            if let Err(e) = self.gateway.bind_session(child_session_id, request_id, &token) {
                tracing::warn!(error = %e, "a subagent session could not share its request's grant");
            }
        }
    }

    fn run_ended(&self, request_id: &str) {
        self.pending.lock().unwrap().remove(request_id);
        self.gateway.request_ended(request_id);
    }
}
