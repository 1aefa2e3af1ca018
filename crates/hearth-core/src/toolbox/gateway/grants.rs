//! Capability tokens: what one request may reach through the gateway, and for how long.
//!
//! A token is 256 random bits bound to ONE request id. Only its SHA-256 is stored, compared in
//! constant time; logs carry a short hash ([`token_tag`]), never the token.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::host::clock::{self, SharedClock};

/// Random bytes in one capability token (256 bits: far beyond guessing).
pub const TOKEN_RANDOM_BYTES: usize = 32;
/// Every token starts with this, so a stray token in a file or log is recognisable.
pub const TOKEN_PREFIX: &str = "hct_";
/// Longest lifetime a grant may ask for; a run longer than this needs a new grant.
pub const MAX_GRANT_TTL: Duration = Duration::from_secs(6 * 60 * 60);
/// Lifetime used when the caller has no better idea.
pub const DEFAULT_GRANT_TTL: Duration = Duration::from_secs(60 * 60);
/// Most grants alive at once (one per running request). A hard bound: when it is reached, expired
/// grants are dropped, and if none has expired the new grant is refused.
pub const MAX_LIVE_GRANTS: usize = 4096;
/// Hex characters of a token's hash shown in logs and diagnostics.
pub const TOKEN_TAG_CHARS: usize = crate::host::logging::LOG_TAG_CHARS;

/// What a grant allows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GrantScope {
    /// Knowledge libraries the request may search and read.
    pub libraries: Vec<String>,
    /// Ids of the custom MCP servers the request may call.
    pub custom_servers: Vec<String>,
    /// Lifetime; capped at [`MAX_GRANT_TTL`].
    pub ttl: Duration,
}

/// The secret handed to the caller of [`Grants::grant`]. Debug and Display show only its tag.
#[derive(Clone, PartialEq, Eq)]
pub struct CapabilityToken(String);

impl CapabilityToken {
    /// The token text (to hand to [`crate::toolbox::gateway::Gateway::bind_session`]); never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Wrap text received from elsewhere (it is validated on use, not here).
    pub fn from_text(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    pub fn tag(&self) -> String {
        token_tag(&self.0)
    }
}

impl fmt::Debug for CapabilityToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CapabilityToken({})", self.tag())
    }
}

impl fmt::Display for CapabilityToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "token {}", self.tag())
    }
}

/// A short, non-reversible name for a secret, safe for logs.
pub fn token_tag(secret: &str) -> String {
    crate::host::logging::log_tag(secret)
}

/// `n` bytes from the OS random source, URL-safe base64 without padding.
pub fn random_text(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Equal-length byte strings compared without an early exit.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("This tool call carries no capability token; Hearth only serves calls made for a running request.")]
    Missing,
    #[error("The capability token is malformed.")]
    Malformed,
    #[error("The capability token was not issued by this Hearth (forged or from an earlier session).")]
    Unknown,
    #[error("The capability token has expired; send the message again.")]
    Expired,
    #[error("The capability token was revoked because its request ended.")]
    Revoked,
    #[error("The capability token belongs to a different request and cannot be used for this one.")]
    OtherRequest,
    #[error("This request has no grant for {0}.")]
    NotGranted(String),
    #[error("Too many replies are running at once (Hearth allows {MAX_LIVE_GRANTS}); wait for one to finish and send the message again.")]
    TooManyGrants,
}

/// What a valid token resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidGrant {
    pub request_id: String,
    pub scope: GrantScope,
    /// Short hash of the token, for records and logs.
    pub token_tag: String,
}

#[derive(Debug)]
struct Grant {
    token_hash: [u8; 32],
    token_tag: String,
    scope: GrantScope,
    expires: Instant,
}

/// The live grants, by request id. A request has at most one grant; granting again replaces it.
#[derive(Debug)]
pub struct Grants {
    clock: SharedClock,
    live: Mutex<HashMap<String, Grant>>,
    /// Requests that ended: their tokens say "revoked" rather than "forged" (bounded like `live`).
    revoked: Mutex<HashMap<[u8; 32], Instant>>,
}

impl Default for Grants {
    fn default() -> Self {
        Self::with_clock(clock::system())
    }
}

impl Grants {
    pub fn new() -> Self {
        Self::default()
    }

    /// Grants whose expiry is measured on `clock`.
    pub fn with_clock(clock: SharedClock) -> Self {
        Self { clock, live: Mutex::default(), revoked: Mutex::default() }
    }

    /// Issue a token for `request_id`, replacing (and so revoking) any earlier one. Refused when
    /// [`MAX_LIVE_GRANTS`] unexpired grants are alive.
    pub fn grant(&self, request_id: &str, mut scope: GrantScope) -> Result<CapabilityToken, GrantError> {
        scope.ttl = scope.ttl.min(MAX_GRANT_TTL);
        let now = self.clock.now();
        let mut live = self.live.lock().unwrap();
        if live.len() >= MAX_LIVE_GRANTS && !live.contains_key(request_id) {
            let before = live.len();
            live.retain(|_, g| g.expires > now);
            if before > live.len() {
                tracing::debug!(dropped = before - live.len(), "expired grants dropped");
            }
            if live.len() >= MAX_LIVE_GRANTS {
                tracing::warn!(limit = MAX_LIVE_GRANTS, "grant refused: the grant table is full");
                return Err(GrantError::TooManyGrants);
            }
        }
        let token = CapabilityToken(format!("{TOKEN_PREFIX}{}", random_text(TOKEN_RANDOM_BYTES)));
        let hash: [u8; 32] = Sha256::digest(token.0.as_bytes()).into();
        let tag = token.tag();
        tracing::debug!(request_id, token = %tag, ttl_s = scope.ttl.as_secs(), "grant issued");
        let grant = Grant { token_hash: hash, token_tag: tag, expires: now + scope.ttl, scope };
        if let Some(old) = live.insert(request_id.to_string(), grant) {
            self.remember_revoked(old.token_hash);
        }
        Ok(token)
    }

    /// End `request_id`'s grant: its token is refused from now on. Idempotent.
    pub fn revoke(&self, request_id: &str) -> bool {
        let removed = self.live.lock().unwrap().remove(request_id);
        match removed {
            Some(g) => {
                tracing::debug!(request_id, token = %g.token_tag, "grant revoked");
                self.remember_revoked(g.token_hash);
                true
            }
            None => false,
        }
    }

    fn remember_revoked(&self, hash: [u8; 32]) {
        let mut revoked = self.revoked.lock().unwrap();
        if revoked.len() >= MAX_LIVE_GRANTS {
            // Forget the oldest half: those tokens then read as "unknown", still refused.
            let mut times: Vec<Instant> = revoked.values().copied().collect();
            times.sort();
            let cut = times[times.len() / 2];
            revoked.retain(|_, t| *t > cut);
        }
        revoked.insert(hash, self.clock.now());
    }

    /// Check `token` for `request_id`: well-formed, issued here, for THIS request, not expired,
    /// not revoked.
    pub fn validate(&self, request_id: &str, token: Option<&str>) -> Result<ValidGrant, GrantError> {
        let token = token.filter(|t| !t.is_empty()).ok_or(GrantError::Missing)?;
        if !well_formed(token) {
            return Err(GrantError::Malformed);
        }
        let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let live = self.live.lock().unwrap();
        if let Some(grant) = live.get(request_id) {
            if constant_time_eq(&grant.token_hash, &hash) {
                if self.clock.now() >= grant.expires {
                    return Err(GrantError::Expired);
                }
                return Ok(ValidGrant { request_id: request_id.to_string(), scope: grant.scope.clone(), token_tag: grant.token_tag.clone() });
            }
        }
        // Not this request's token: say why, without revealing which request it belongs to.
        if live.values().any(|g| constant_time_eq(&g.token_hash, &hash)) {
            return Err(GrantError::OtherRequest);
        }
        drop(live);
        if self.revoked.lock().unwrap().contains_key(&hash) {
            return Err(GrantError::Revoked);
        }
        Err(GrantError::Unknown)
    }

    pub fn live_count(&self) -> usize {
        self.live.lock().unwrap().len()
    }
}

fn well_formed(token: &str) -> bool {
    let Some(body) = token.strip_prefix(TOKEN_PREFIX) else { return false };
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(body).is_ok_and(|b| b.len() == TOKEN_RANDOM_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::clock::ManualClock;

    fn scope(ttl: Duration) -> GrantScope {
        GrantScope { libraries: vec!["docs".into()], custom_servers: vec!["s1".into()], ttl }
    }

    #[test]
    fn a_token_works_for_its_own_request_only() {
        let grants = Grants::new();
        let a = grants.grant("req-a", scope(DEFAULT_GRANT_TTL)).unwrap();
        let b = grants.grant("req-b", scope(DEFAULT_GRANT_TTL)).unwrap();
        assert_ne!(a, b);
        let ok = grants.validate("req-a", Some(a.expose())).unwrap();
        assert_eq!(ok.request_id, "req-a");
        assert_eq!(ok.scope.libraries, vec!["docs".to_string()]);
        assert_eq!(grants.validate("req-a", Some(b.expose())), Err(GrantError::OtherRequest));
        assert_eq!(grants.validate("req-b", Some(a.expose())), Err(GrantError::OtherRequest));
    }

    #[test]
    fn missing_malformed_forged_expired_and_revoked_are_refused() {
        let clock = ManualClock::new();
        let grants = Grants::with_clock(clock.clone());
        let a = grants.grant("req-a", scope(DEFAULT_GRANT_TTL)).unwrap();
        assert_eq!(grants.validate("req-a", None), Err(GrantError::Missing));
        assert_eq!(grants.validate("req-a", Some("")), Err(GrantError::Missing));
        assert_eq!(grants.validate("req-a", Some("Bearer xyz")), Err(GrantError::Malformed));
        assert_eq!(grants.validate("req-a", Some("hct_short")), Err(GrantError::Malformed));
        let forged = format!("{TOKEN_PREFIX}{}", random_text(TOKEN_RANDOM_BYTES));
        assert_eq!(grants.validate("req-a", Some(&forged)), Err(GrantError::Unknown));
        // One flipped character of a real token is a forgery too.
        let mut flipped = a.expose().to_string();
        let last = flipped.pop().unwrap();
        flipped.push(if last == 'A' { 'B' } else { 'A' });
        assert!(grants.validate("req-a", Some(&flipped)).is_err());

        let short = grants.grant("req-s", scope(Duration::from_secs(60))).unwrap();
        clock.advance(Duration::from_secs(59));
        assert!(grants.validate("req-s", Some(short.expose())).is_ok(), "alive until its expiry");
        clock.advance(Duration::from_secs(1));
        assert_eq!(grants.validate("req-s", Some(short.expose())), Err(GrantError::Expired));

        assert!(grants.revoke("req-a"));
        assert!(!grants.revoke("req-a"), "revoking twice is harmless");
        assert_eq!(grants.validate("req-a", Some(a.expose())), Err(GrantError::Revoked));
    }

    #[test]
    fn granting_again_replaces_the_old_token() {
        let grants = Grants::new();
        let first = grants.grant("r", scope(DEFAULT_GRANT_TTL)).unwrap();
        let second = grants.grant("r", scope(DEFAULT_GRANT_TTL)).unwrap();
        assert_eq!(grants.validate("r", Some(first.expose())), Err(GrantError::Revoked));
        assert!(grants.validate("r", Some(second.expose())).is_ok());
        assert_eq!(grants.live_count(), 1);
    }

    #[test]
    fn ttl_is_capped_and_tokens_are_long_and_hidden_from_debug() {
        let grants = Grants::new();
        let t = grants.grant("r", scope(Duration::from_secs(10 * 24 * 3600))).unwrap();
        assert_eq!(grants.validate("r", Some(t.expose())).unwrap().scope.ttl, MAX_GRANT_TTL);
        assert!(t.expose().len() >= TOKEN_PREFIX.len() + 43, "≥ 256 bits of base64");
        let shown = format!("{t:?} {t}");
        assert!(!shown.contains(t.expose()), "{shown}");
        assert!(shown.contains(&t.tag()));
    }

    #[test]
    fn the_grant_table_is_full_at_its_bound_until_one_expires_or_ends() {
        let clock = ManualClock::new();
        let grants = Grants::with_clock(clock.clone());
        for i in 0..MAX_LIVE_GRANTS - 1 {
            grants.grant(&format!("req-{i}"), scope(DEFAULT_GRANT_TTL)).unwrap();
        }
        let short = grants.grant("short", scope(Duration::from_secs(1))).unwrap();
        assert_eq!(grants.live_count(), MAX_LIVE_GRANTS);
        clock.advance(Duration::from_secs(1));
        // Full, but one has expired: it goes, the new one comes in.
        let newest = grants.grant("newest", scope(DEFAULT_GRANT_TTL)).unwrap();
        assert_eq!(grants.live_count(), MAX_LIVE_GRANTS);
        assert_eq!(grants.validate("short", Some(short.expose())), Err(GrantError::Unknown));
        // Full of live grants: refused, and nothing already granted is touched.
        assert_eq!(grants.grant("one-more", scope(DEFAULT_GRANT_TTL)), Err(GrantError::TooManyGrants));
        assert_eq!(grants.live_count(), MAX_LIVE_GRANTS);
        assert!(grants.validate("newest", Some(newest.expose())).is_ok());
        // Granting again to a request that has a grant replaces it; ending one frees a place.
        assert!(grants.grant("req-0", scope(DEFAULT_GRANT_TTL)).is_ok());
        assert!(grants.revoke("req-1"));
        assert!(grants.grant("one-more", scope(DEFAULT_GRANT_TTL)).is_ok());
        assert!(GrantError::TooManyGrants.to_string().contains("wait for one to finish"));
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
