//! Session credentials: how an agent that connects to MCP servers itself (over ACP) says which of
//! its sessions made a call. Each native session is handed the gateway with a random bearer secret
//! of its own; the gateway keeps only its hash, bound to the session once the agent named it, and
//! serves a call carrying it under the grant of the request running on that session right now —
//! none when no request runs there. The process check still applies: the secret alone, read from
//! wherever, opens nothing for a process that is not the agent's. And the first process that
//! presents a credential holds it: another of the agent's processes (Claude Code runs one per
//! session, each given its credential on a command line any local process can read) presenting
//! it later is refused.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::grants::{random_text, token_tag};
use crate::runtime::SessionCredential;

/// Random bytes in one session credential.
pub const CREDENTIAL_BYTES: usize = 32;
/// Most credentials alive at once (one per open ACP session); past it the oldest is dropped, and
/// its session's calls are refused until the session is opened again.
pub const MAX_CREDENTIALS: usize = 4096;

/// Which session a presented credential belongs to, once the agent named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialSession(pub Option<String>);

struct Entry {
    id: String,
    session: Option<String>,
    issued: u64,
    /// The process that presented it first.
    holder: Option<u32>,
}

/// What a credential presented by one process opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// It is no credential of this gateway (any more).
    Unknown,
    /// Another process presented it first.
    HeldByAnother,
    Session(CredentialSession),
}

#[derive(Default)]
pub struct Credentials {
    by_hash: Mutex<HashMap<[u8; 32], Entry>>,
    issued: Mutex<u64>,
}

impl Credentials {
    pub fn issue(&self) -> SessionCredential {
        let secret = random_text(CREDENTIAL_BYTES);
        let id = token_tag(&secret);
        let issued = {
            let mut n = self.issued.lock().unwrap_or_else(|p| p.into_inner());
            *n += 1;
            *n
        };
        let mut all = self.by_hash.lock().unwrap_or_else(|p| p.into_inner());
        if all.len() >= MAX_CREDENTIALS {
            if let Some(oldest) = all.iter().min_by_key(|(_, e)| e.issued).map(|(h, _)| *h) {
                all.remove(&oldest);
            }
        }
        all.insert(Sha256::digest(secret.as_bytes()).into(), Entry { id: id.clone(), session: None, issued, holder: None });
        tracing::debug!(credential = %id, "session credential issued");
        SessionCredential { id, secret }
    }

    pub fn bind(&self, id: &str, session: &str) {
        let mut all = self.by_hash.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = all.values_mut().find(|e| e.id == id) {
            entry.session = Some(session.to_string());
            tracing::debug!(credential = %id, session = %token_tag(session), "session credential bound");
        }
    }

    pub fn revoke(&self, id: &str) {
        self.by_hash.lock().unwrap_or_else(|p| p.into_inner()).retain(|_, e| e.id != id);
    }

    /// The session `secret` belongs to; `None` when it is no credential of this gateway.
    pub fn session_of(&self, secret: &str) -> Option<CredentialSession> {
        let hash: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        self.by_hash.lock().unwrap_or_else(|p| p.into_inner()).get(&hash).map(|e| CredentialSession(e.session.clone()))
    }

    /// What `secret` opens for process `pid`; the first process to present it becomes its holder.
    pub fn claim(&self, secret: &str, pid: u32) -> Claim {
        let hash: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let mut all = self.by_hash.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = all.get_mut(&hash) else { return Claim::Unknown };
        match entry.holder {
            Some(holder) if holder != pid => Claim::HeldByAnother,
            _ => {
                entry.holder = Some(pid);
                Claim::Session(CredentialSession(entry.session.clone()))
            }
        }
    }

    pub fn count(&self) -> usize {
        self.by_hash.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_names_its_session_once_bound_and_nothing_once_revoked() {
        let c = Credentials::default();
        let a = c.issue();
        let b = c.issue();
        assert_ne!(a.secret, b.secret);
        assert_eq!(c.session_of(&a.secret), Some(CredentialSession(None)));
        c.bind(&a.id, "ses_a");
        assert_eq!(c.session_of(&a.secret), Some(CredentialSession(Some("ses_a".into()))));
        assert_eq!(c.session_of(&b.secret), Some(CredentialSession(None)));
        assert_eq!(c.session_of("guessed"), None);
        c.revoke(&a.id);
        assert_eq!(c.session_of(&a.secret), None);
        assert!(!format!("{a:?}").contains(&a.secret), "Debug never shows the secret");
    }

    #[test]
    fn the_first_process_to_present_a_credential_holds_it() {
        let c = Credentials::default();
        let a = c.issue();
        c.bind(&a.id, "ses_a");
        assert_eq!(c.claim(&a.secret, 10), Claim::Session(CredentialSession(Some("ses_a".into()))));
        assert_eq!(c.claim(&a.secret, 10), Claim::Session(CredentialSession(Some("ses_a".into()))));
        assert_eq!(c.claim(&a.secret, 11), Claim::HeldByAnother, "a second process that read the secret gets nothing");
        assert_eq!(c.claim("guessed", 10), Claim::Unknown);
    }

    #[test]
    fn past_the_bound_the_oldest_credential_goes() {
        let c = Credentials::default();
        let first = c.issue();
        for _ in 0..MAX_CREDENTIALS {
            c.issue();
        }
        assert_eq!(c.count(), MAX_CREDENTIALS);
        assert_eq!(c.session_of(&first.secret), None);
    }
}
