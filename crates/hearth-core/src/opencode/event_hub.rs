//! One global event stream for the whole runtime (`GET /global/event`), decoded once (`wire.rs`),
//! demultiplexed by session to the runs that wait on them, and reconnected when it drops. A
//! subagent's `session.created` also reaches the subscribers of the session that spawned it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::client::Client;
use super::wire::{Envelope, Event};

/// The runtime sends a heartbeat every 10 s; silence this long means the stream is dead.
pub const STREAM_SILENCE_LIMIT: Duration = Duration::from_secs(30);
/// Back-off between reconnect attempts: first, and the most it grows to.
pub const RECONNECT_FIRST: Duration = Duration::from_millis(200);
pub const RECONNECT_MAX: Duration = Duration::from_secs(5);
/// How long `start` waits for the first connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    #[error("the runtime's event stream did not connect within {secs} s")]
    NotConnected { secs: u64 },
}

/// What a subscriber receives.
#[derive(Debug, Clone)]
pub enum HubEvent {
    /// One runtime event, the directory it came from, and when it arrived.
    Event { event: Arc<Event>, directory: Option<String>, received: Instant },
    /// The stream dropped and is back: events may have been missed; re-read state.
    Reconnected,
}

type Routes = HashMap<String, Vec<(u64, mpsc::UnboundedSender<HubEvent>)>>;

pub struct EventHub {
    routes: Mutex<Routes>,
    next_id: AtomicU64,
    connected: watch::Sender<bool>,
    reconnects: AtomicU64,
    stop: CancellationToken,
}

/// A subscription to one session's events (and, once followed, other sessions' too); dropping it
/// unsubscribes from all of them.
pub struct Subscription {
    hub: Arc<EventHub>,
    sessions: Vec<String>,
    id: u64,
    tx: mpsc::UnboundedSender<HubEvent>,
    pub rx: mpsc::UnboundedReceiver<HubEvent>,
}

impl Subscription {
    /// Receive `session`'s events here too (a subagent's session, for its permission requests).
    pub fn follow(&mut self, session: &str) {
        if self.sessions.iter().any(|s| s == session) {
            return;
        }
        self.hub.routes.lock().unwrap().entry(session.to_string()).or_default().push((self.id, self.tx.clone()));
        self.sessions.push(session.to_string());
    }

    /// How many sessions this subscription receives.
    pub fn followed(&self) -> usize {
        self.sessions.len()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut routes = self.hub.routes.lock().unwrap();
        for session in &self.sessions {
            if let Some(subs) = routes.get_mut(session) {
                subs.retain(|(id, _)| *id != self.id);
                if subs.is_empty() {
                    routes.remove(session);
                }
            }
        }
    }
}

impl EventHub {
    /// Connect and keep the stream alive until `shutdown`. Returns once the first connection is up.
    pub async fn start(client: Client) -> Result<Arc<Self>, HubError> {
        let (connected, mut watch_rx) = watch::channel(false);
        let hub = Arc::new(Self {
            routes: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            connected,
            reconnects: AtomicU64::new(0),
            stop: CancellationToken::new(),
        });
        tokio::spawn(run_stream(Arc::downgrade(&hub), client, hub.stop.clone()));
        let ok = tokio::time::timeout(CONNECT_TIMEOUT, watch_rx.wait_for(|c| *c)).await;
        match ok {
            Ok(Ok(_)) => Ok(hub),
            _ => {
                hub.shutdown();
                Err(HubError::NotConnected { secs: CONNECT_TIMEOUT.as_secs() })
            }
        }
    }

    pub fn subscribe(self: &Arc<Self>, session: &str) -> Subscription {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.routes.lock().unwrap().entry(session.to_string()).or_default().push((id, tx.clone()));
        Subscription { hub: self.clone(), sessions: vec![session.into()], id, tx, rx }
    }

    pub fn is_connected(&self) -> bool {
        *self.connected.borrow()
    }

    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }

    pub fn shutdown(&self) {
        self.stop.cancel();
    }

    fn dispatch(&self, raw: &str, received: Instant) {
        let envelope = match Envelope::decode(raw) {
            Ok(e) => e,
            Err(e) => {
                // A shape the pinned version never sent: say so once per event, skip it.
                tracing::warn!(error = %e, "an event from the runtime could not be read; skipped");
                return;
            }
        };
        let Some(session) = envelope.payload.session_id().map(str::to_owned) else { return };
        let parent = envelope.payload.spawned_by().map(str::to_owned);
        let event = Arc::new(envelope.payload);
        let routes = self.routes.lock().unwrap();
        for target in std::iter::once(session.as_str()).chain(parent.as_deref()) {
            for (_, tx) in routes.get(target).into_iter().flatten() {
                let _ = tx.send(HubEvent::Event { event: event.clone(), directory: envelope.directory.clone(), received });
            }
        }
    }

    fn broadcast_reconnected(&self) {
        for subs in self.routes.lock().unwrap().values() {
            for (_, tx) in subs {
                let _ = tx.send(HubEvent::Reconnected);
            }
        }
    }
}

async fn run_stream(hub: std::sync::Weak<EventHub>, client: Client, stop: CancellationToken) {
    let mut backoff = RECONNECT_FIRST;
    let mut first = true;
    loop {
        let attempt = client
            .request(reqwest::Method::GET, "/global/event", None)
            .timeout(Duration::from_secs(u64::MAX / 4)) // a stream: no overall timeout
            .header("accept", "text/event-stream")
            .send();
        let resp = tokio::select! {
            _ = stop.cancelled() => return,
            r = attempt => r,
        };
        match resp {
            Ok(resp) if resp.status().is_success() => {
                backoff = RECONNECT_FIRST;
                let Some(h) = hub.upgrade() else { return };
                h.connected.send_replace(true);
                if !first {
                    h.reconnects.fetch_add(1, Ordering::Relaxed);
                    tracing::info!("runtime event stream reconnected");
                    h.broadcast_reconnected();
                }
                first = false;
                drop(h);
                let mut events = eventsource_stream::EventStream::new(resp.bytes_stream());
                loop {
                    let next = tokio::select! {
                        _ = stop.cancelled() => return,
                        n = tokio::time::timeout(STREAM_SILENCE_LIMIT, events.next()) => n,
                    };
                    match next {
                        Ok(Some(Ok(ev))) => match hub.upgrade() {
                            Some(h) => h.dispatch(&ev.data, Instant::now()),
                            None => return,
                        },
                        Ok(Some(Err(e))) => {
                            tracing::warn!(error = %e, "runtime event stream broke");
                            break;
                        }
                        Ok(None) => break,
                        Err(_) => {
                            tracing::warn!("runtime event stream went silent; reconnecting");
                            break;
                        }
                    }
                }
            }
            Ok(resp) => tracing::warn!(status = %resp.status(), "runtime event stream refused"),
            Err(e) => tracing::debug!(error = %e, "runtime event stream connect failed"),
        }
        match hub.upgrade() {
            Some(h) => h.connected.send_replace(false),
            None => return,
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(RECONNECT_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hub() -> Arc<EventHub> {
        let (connected, _) = watch::channel(true);
        Arc::new(EventHub {
            routes: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            connected,
            reconnects: AtomicU64::new(0),
            stop: CancellationToken::new(),
        })
    }

    #[tokio::test]
    async fn dispatch_routes_by_session_only() {
        let hub = hub();
        let mut a = hub.subscribe("ses_a");
        let mut b = hub.subscribe("ses_b");
        let ev = |s: &str| json!({"directory": "/p", "payload": {"type": "session.idle", "properties": {"sessionID": s}}}).to_string();
        hub.dispatch(&ev("ses_a"), Instant::now());
        hub.dispatch(&ev("ses_zzz"), Instant::now());
        hub.dispatch("not json", Instant::now());
        match a.rx.try_recv().unwrap() {
            HubEvent::Event { event, directory, .. } => {
                assert!(matches!(&*event, Event::SessionIdle(s) if s.session_id == "ses_a"));
                assert_eq!(directory.as_deref(), Some("/p"));
            }
            other => panic!("{other:?}"),
        }
        assert!(a.rx.try_recv().is_err());
        assert!(b.rx.try_recv().is_err());
        drop(b);
        assert!(!hub.routes.lock().unwrap().contains_key("ses_b"), "dropped subscription must unsubscribe");
        hub.broadcast_reconnected();
        assert!(matches!(a.rx.try_recv().unwrap(), HubEvent::Reconnected));
    }

    #[tokio::test]
    async fn a_subagent_session_is_announced_to_the_session_that_spawned_it() {
        let hub = hub();
        let mut parent = hub.subscribe("ses_parent");
        let created = json!({"directory": "/p", "payload": {"type": "session.created", "properties": {
            "sessionID": "ses_child", "info": {"id": "ses_child", "parentID": "ses_parent", "directory": "/p"}}}});
        hub.dispatch(&created.to_string(), Instant::now());
        match parent.rx.try_recv().unwrap() {
            HubEvent::Event { event, .. } => assert_eq!(event.spawned_by(), Some("ses_parent")),
            other => panic!("{other:?}"),
        }
        // The child's own later events are the child's, not the parent's.
        let idle = json!({"payload": {"type": "session.idle", "properties": {"sessionID": "ses_child"}}});
        hub.dispatch(&idle.to_string(), Instant::now());
        assert!(parent.rx.try_recv().is_err());
    }
}
