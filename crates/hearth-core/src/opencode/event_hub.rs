//! One global event stream for the whole runtime (`GET /global/event`), demultiplexed by session to
//! the runs that wait on them, and reconnected when it drops.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::client::Client;

/// The runtime sends a heartbeat every 10 s; silence this long means the stream is dead.
pub const STREAM_SILENCE_LIMIT: Duration = Duration::from_secs(30);
/// Back-off between reconnect attempts: first, and the most it grows to.
pub const RECONNECT_FIRST: Duration = Duration::from_millis(200);
pub const RECONNECT_MAX: Duration = Duration::from_secs(5);
/// How long `start` waits for the first connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// What a subscriber receives.
#[derive(Debug, Clone)]
pub enum HubEvent {
    /// `{type, properties}` of one runtime event, the directory it came from, and when it arrived.
    Event { kind: String, properties: Value, directory: Option<String>, received: Instant },
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

/// A subscription to one session's events; dropping it unsubscribes.
pub struct Subscription {
    hub: Arc<EventHub>,
    session: String,
    id: u64,
    pub rx: mpsc::UnboundedReceiver<HubEvent>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut routes = self.hub.routes.lock().unwrap();
        if let Some(subs) = routes.get_mut(&self.session) {
            subs.retain(|(id, _)| *id != self.id);
            if subs.is_empty() {
                routes.remove(&self.session);
            }
        }
    }
}

/// The session an event is about, wherever the runtime put it.
pub fn session_of(properties: &Value) -> Option<&str> {
    properties["sessionID"]
        .as_str()
        .or_else(|| properties["info"]["sessionID"].as_str())
        .or_else(|| properties["part"]["sessionID"].as_str())
}

/// The session a `session.created`/`session.updated` event is about, when it is a child (a `task`
/// subagent's) of `parent`. Such events are delivered to `parent`'s subscribers too.
pub fn child_session_of<'a>(kind: &str, properties: &'a Value, parent: &str) -> Option<&'a str> {
    if !matches!(kind, "session.created" | "session.updated") {
        return None;
    }
    let info = &properties["info"];
    (info["parentID"].as_str() == Some(parent)).then(|| info["id"].as_str()).flatten()
}

impl EventHub {
    /// Connect and keep the stream alive until `shutdown`. Returns once the first connection is up.
    pub async fn start(client: Client) -> Result<Arc<Self>, String> {
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
                Err(format!("the runtime's event stream did not connect within {} s", CONNECT_TIMEOUT.as_secs()))
            }
        }
    }

    pub fn subscribe(self: &Arc<Self>, session: &str) -> Subscription {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.routes.lock().unwrap().entry(session.to_string()).or_default().push((id, tx));
        Subscription { hub: self.clone(), session: session.into(), id, rx }
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
        let Ok(v) = serde_json::from_str::<Value>(raw) else { return };
        // Global events wrap the instance event: {directory, payload:{type, properties}}.
        let payload = if v.get("payload").is_some() { &v["payload"] } else { &v };
        let Some(kind) = payload["type"].as_str() else { return };
        let properties = &payload["properties"];
        // A child session's creation also goes to its parent's run (see `child_session_of`).
        let parent = properties["info"]["parentID"].as_str().filter(|_| matches!(kind, "session.created" | "session.updated"));
        let session = session_of(properties);
        let routes = self.routes.lock().unwrap();
        let subs = [session, parent.filter(|p| Some(*p) != session)].into_iter().flatten().filter_map(|s| routes.get(s)).flatten();
        let ev = HubEvent::Event { kind: kind.to_string(), properties: properties.clone(), directory: v["directory"].as_str().map(str::to_string), received };
        for (_, tx) in subs {
            let _ = tx.send(ev.clone());
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

    #[test]
    fn finds_the_session_wherever_it_is() {
        assert_eq!(session_of(&json!({"sessionID": "ses_a"})), Some("ses_a"));
        assert_eq!(session_of(&json!({"info": {"sessionID": "ses_b"}})), Some("ses_b"));
        assert_eq!(session_of(&json!({"part": {"sessionID": "ses_c"}})), Some("ses_c"));
        assert_eq!(session_of(&json!({"id": "global"})), None);
    }

    #[tokio::test]
    async fn dispatch_routes_by_session_only() {
        let (connected, _) = watch::channel(true);
        let hub = Arc::new(EventHub {
            routes: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            connected,
            reconnects: AtomicU64::new(0),
            stop: CancellationToken::new(),
        });
        let mut a = hub.subscribe("ses_a");
        let mut b = hub.subscribe("ses_b");
        let ev = |s: &str| json!({"directory": "/p", "payload": {"type": "session.idle", "properties": {"sessionID": s}}}).to_string();
        hub.dispatch(&ev("ses_a"), Instant::now());
        hub.dispatch(&ev("ses_zzz"), Instant::now());
        match a.rx.try_recv().unwrap() {
            HubEvent::Event { kind, directory, .. } => {
                assert_eq!(kind, "session.idle");
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
    async fn a_child_sessions_creation_reaches_its_parents_subscribers_only() {
        let (connected, _) = watch::channel(true);
        let hub = Arc::new(EventHub {
            routes: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            connected,
            reconnects: AtomicU64::new(0),
            stop: CancellationToken::new(),
        });
        let mut a = hub.subscribe("ses_a");
        let mut b = hub.subscribe("ses_b");
        // As the runtime sends it: `sessionID` is the child itself, `info.parentID` its parent.
        let created = json!({"directory": "/p", "payload": {"type": "session.created", "properties": {
            "sessionID": "ses_child", "info": {"id": "ses_child", "parentID": "ses_a", "title": "t"}}}});
        hub.dispatch(&created.to_string(), Instant::now());
        let HubEvent::Event { kind, properties, .. } = a.rx.try_recv().unwrap() else { panic!("an event") };
        assert_eq!(child_session_of(&kind, &properties, "ses_a"), Some("ses_child"));
        assert_eq!(child_session_of(&kind, &properties, "ses_b"), None);
        assert!(b.rx.try_recv().is_err(), "another session's run does not see it");
        // A top-level session's creation, or another kind of event naming a parent, is not a child.
        let top = json!({"info": {"id": "ses_top"}});
        assert_eq!(child_session_of("session.created", &top, "ses_a"), None);
        assert_eq!(child_session_of("message.updated", &json!({"info": {"id": "m", "parentID": "ses_a"}}), "ses_a"), None);
    }
}
