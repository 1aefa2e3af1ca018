//! Holds: make matching requests wait before they are answered, to observe what the runtime does
//! while a model call is in flight (isolation, abort, busy status).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::request::{ObservedRequest, RequestKind};

type Predicate = dyn Fn(&ObservedRequest) -> bool + Send + Sync + 'static;

/// Which requests a hold catches: all conditions set must match. `HoldRule::default()` catches all.
#[derive(Clone, Default)]
pub struct HoldRule {
    kind: Option<RequestKind>,
    session_id: Option<String>,
    predicate: Option<Arc<Predicate>>,
}

impl HoldRule {
    pub fn any() -> Self {
        Self::default()
    }

    pub fn kind(kind: RequestKind) -> Self {
        Self::default().with_kind(kind)
    }

    pub fn session(session_id: impl Into<String>) -> Self {
        Self::default().with_session(session_id)
    }

    pub fn with_kind(mut self, kind: RequestKind) -> Self {
        self.kind = Some(kind);
        self
    }

    pub fn with_session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    pub fn with_predicate(mut self, predicate: impl Fn(&ObservedRequest) -> bool + Send + Sync + 'static) -> Self {
        self.predicate = Some(Arc::new(predicate));
        self
    }

    pub fn matches(&self, request: &ObservedRequest) -> bool {
        self.kind.is_none_or(|kind| kind == request.kind)
            && self.session_id.as_deref().is_none_or(|id| request.session_id.as_deref() == Some(id))
            && self.predicate.as_ref().is_none_or(|predicate| predicate(request))
    }
}

impl fmt::Debug for HoldRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HoldRule")
            .field("kind", &self.kind)
            .field("session_id", &self.session_id)
            .field("predicate", &self.predicate.is_some())
            .finish()
    }
}

/// A hold's release generation that means "released for good".
const RELEASED_FOR_GOOD: u64 = u64::MAX;

/// One hold, shared by its handle and the server.
pub(super) struct Hold {
    rule: HoldRule,
    /// Bumped to let the requests held now through; [`RELEASED_FOR_GOOD`] lets every one through.
    released: watch::Sender<u64>,
    held: watch::Sender<usize>,
}

impl Hold {
    fn is_released(&self) -> bool {
        *self.released.borrow() == RELEASED_FOR_GOOD
    }

    /// Wait while this hold catches `request`. Returns false if `stop` fired first. The count of held
    /// requests drops again however the wait ends, the caller's future being dropped included
    /// (client gone).
    pub(super) async fn wait(&self, request: &ObservedRequest, stop: &CancellationToken) -> bool {
        if self.is_released() || !self.rule.matches(request) {
            return true;
        }
        struct Counted<'a>(&'a watch::Sender<usize>);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.send_modify(|n| *n -= 1);
            }
        }
        let mut released = self.released.subscribe();
        let generation = *released.borrow_and_update();
        self.held.send_modify(|n| *n += 1);
        let _counted = Counted(&self.held);
        tracing::debug!(seq = request.seq, session = ?request.session_id.as_deref().map(crate::host::logging::log_tag), "scripted model request held");
        tokio::select! {
            _ = released.wait_for(|g| *g > generation) => true,
            _ = stop.cancelled() => false,
        }
    }
}

/// The active holds of one server.
#[derive(Default)]
pub(super) struct Holds(Mutex<Vec<Arc<Hold>>>);

impl Holds {
    pub(super) fn add(self: &Arc<Self>, rule: HoldRule) -> HoldHandle {
        let hold = Arc::new(Hold { rule, released: watch::channel(0).0, held: watch::channel(0).0 });
        self.lock().push(hold.clone());
        HoldHandle { hold, holds: self.clone() }
    }

    /// Holds still in force, in the order they were added.
    pub(super) fn active(&self) -> Vec<Arc<Hold>> {
        self.lock().clone()
    }

    fn remove(&self, hold: &Arc<Hold>) {
        self.lock().retain(|h| !Arc::ptr_eq(h, hold));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Hold>>> {
        // A panic while holding this lock leaves the list intact: keep serving.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Controls one hold. Dropping the handle releases it, so a forgotten hold never wedges a request.
#[must_use = "dropping a HoldHandle releases the hold at once"]
pub struct HoldHandle {
    hold: Arc<Hold>,
    holds: Arc<Holds>,
}

impl HoldHandle {
    /// Let every held request through, and every later matching one.
    pub fn release(&self) {
        self.hold.released.send_replace(RELEASED_FOR_GOOD);
        self.holds.remove(&self.hold);
    }

    /// Let the requests held now through; later matching requests are held again.
    pub fn release_held(&self) {
        self.hold.released.send_modify(|g| {
            if *g != RELEASED_FOR_GOOD {
                *g += 1;
            }
        });
    }

    /// Requests waiting on this hold now.
    pub fn held_count(&self) -> usize {
        *self.hold.held.borrow()
    }

    /// Wait until at least `n` requests are waiting; false on timeout.
    pub async fn wait_until_held(&self, n: usize, timeout: Duration) -> bool {
        let mut held = self.hold.held.subscribe();
        tokio::time::timeout(timeout, held.wait_for(|count| *count >= n)).await.is_ok_and(|r| r.is_ok())
    }
}

impl Drop for HoldHandle {
    fn drop(&mut self) {
        self.release();
    }
}

impl fmt::Debug for HoldHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HoldHandle").field("rule", &self.hold.rule).field("held", &self.held_count()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::super::request::tests::{agent_body, title_body};
    use super::*;

    fn observed(body: serde_json::Value, session: &str) -> ObservedRequest {
        let bytes = serde_json::to_vec(&body).unwrap().into();
        ObservedRequest::new(1, Some(session.to_owned()), body, bytes)
    }

    #[test]
    fn rules_match_on_every_condition_set() {
        let agent_a = observed(agent_body("hi"), "ses_a");
        let title_a = observed(title_body(), "ses_a");
        assert!(HoldRule::any().matches(&title_a));
        assert!(HoldRule::kind(RequestKind::Agent).matches(&agent_a));
        assert!(!HoldRule::kind(RequestKind::Agent).matches(&title_a));
        assert!(HoldRule::session("ses_a").with_kind(RequestKind::Title).matches(&title_a));
        assert!(!HoldRule::session("ses_b").matches(&title_a));
        assert!(!HoldRule::any().with_predicate(|r| r.contains_text("absent")).matches(&agent_a));
    }

    #[tokio::test]
    async fn a_held_wait_ends_on_release_and_its_count_on_drop() {
        let holds = Arc::new(Holds::default());
        let handle = holds.add(HoldRule::any());
        let stop = CancellationToken::new();
        let request = observed(agent_body("hi"), "ses_a");

        // A waiter whose future is dropped (client gone) leaves no count behind.
        let abandoned = tokio::time::timeout(Duration::from_millis(20), holds.active()[0].wait(&request, &stop)).await;
        assert!(abandoned.is_err());
        assert_eq!(handle.held_count(), 0);

        let hold = holds.active()[0].clone();
        let (waiter_request, waiter_stop) = (request.clone(), stop.clone());
        let waiter = tokio::spawn(async move { hold.wait(&waiter_request, &waiter_stop).await });
        assert!(handle.wait_until_held(1, Duration::from_secs(2)).await);
        assert!(!handle.wait_until_held(2, Duration::from_millis(10)).await);
        handle.release();
        assert!(waiter.await.unwrap());
        assert_eq!(handle.held_count(), 0);
        assert!(holds.active().is_empty());
    }

    #[tokio::test]
    async fn releasing_the_held_lets_those_through_and_holds_the_next() {
        let holds = Arc::new(Holds::default());
        let handle = holds.add(HoldRule::any());
        let stop = CancellationToken::new();
        let wait = |holds: &Arc<Holds>| {
            let (hold, request, stop) = (holds.active()[0].clone(), observed(agent_body("hi"), "s"), stop.clone());
            tokio::spawn(async move { hold.wait(&request, &stop).await })
        };
        let first = wait(&holds);
        assert!(handle.wait_until_held(1, Duration::from_secs(2)).await);
        handle.release_held();
        assert!(first.await.unwrap());
        let second = wait(&holds);
        assert!(handle.wait_until_held(1, Duration::from_secs(2)).await, "a later request is held again");
        assert!(!second.is_finished());
        handle.release();
        assert!(second.await.unwrap());
    }

    #[tokio::test]
    async fn stop_ends_a_held_wait() {
        let holds = Arc::new(Holds::default());
        let _handle = holds.add(HoldRule::any());
        let stop = CancellationToken::new();
        stop.cancel();
        assert!(!holds.active()[0].wait(&observed(agent_body("hi"), "s"), &stop).await);
    }
}
