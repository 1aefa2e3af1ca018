//! Measurement helpers shared by the checks: per-operation latencies and a log of one session's
//! runtime events with the instant each reached Hearth.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::opencode::event_hub::{HubEvent, Subscription};
use crate::opencode::wire::Event;

use super::{ms, Figure};

/// Latencies per operation name, in the order names were first seen.
#[derive(Debug, Default)]
pub struct Latencies(Mutex<Vec<(String, Vec<f64>, u32)>>);

impl Latencies {
    /// Run `op`, recording how long it took under `name` (and whether it failed).
    pub fn measure<'a, T, E>(
        &'a self,
        name: &str,
        op: impl Future<Output = Result<T, E>> + 'a,
    ) -> impl Future<Output = Result<T, E>> + 'a {
        let name = name.to_string();
        async move {
            let started = Instant::now();
            let result = op.await;
            self.record(&name, started.elapsed(), result.is_err());
            result
        }
    }

    pub fn record(&self, name: &str, took: Duration, failed: bool) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let index = match all.iter().position(|(n, ..)| n == name) {
            Some(i) => i,
            None => {
                all.push((name.to_string(), Vec::new(), 0));
                all.len() - 1
            }
        };
        all[index].1.push(ms(took));
        all[index].2 += u32::from(failed);
    }

    /// Samples and failures of one operation.
    pub fn of(&self, name: &str) -> (Vec<f64>, u32) {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.iter().find(|(n, ..)| n == name).map(|(_, v, f)| (v.clone(), *f)).unwrap_or_default()
    }

    /// One min/median/max figure per operation, named `latency · <name>`.
    pub fn figures(&self) -> Vec<Figure> {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.iter()
            .filter_map(|(name, values, _)| Figure::distribution(format!("latency · {name}"), "ms", values))
            .collect()
    }
}

/// One event as it reached Hearth, and when.
#[derive(Debug, Clone)]
pub struct LoggedEvent {
    pub event: Arc<Event>,
    pub received: Instant,
}

impl LoggedEvent {
    pub fn is_model_output(&self) -> bool {
        self.event.is_model_output()
    }
}

/// The events of one session, as they reached Hearth.
pub struct EventLog {
    subscription: Subscription,
    events: Vec<LoggedEvent>,
    pub reconnects: u32,
}

impl EventLog {
    pub fn new(subscription: Subscription) -> Self {
        Self { subscription, events: Vec::new(), reconnects: 0 }
    }

    fn push(&mut self, event: HubEvent) {
        match event {
            HubEvent::Event { event, received, .. } => self.events.push(LoggedEvent { event, received }),
            HubEvent::Reconnected => self.reconnects += 1,
        }
    }

    /// Take in everything delivered so far.
    pub fn drain(&mut self) -> &[LoggedEvent] {
        while let Ok(event) = self.subscription.rx.try_recv() {
            self.push(event);
        }
        &self.events
    }

    /// The first event matching `pred` received after `after`, waiting up to `timeout` for it.
    pub async fn wait_for(
        &mut self,
        after: Instant,
        timeout: Duration,
        pred: impl Fn(&LoggedEvent) -> bool,
    ) -> Option<Instant> {
        let found = |events: &[LoggedEvent]| events.iter().find(|e| e.received >= after && pred(e)).map(|e| e.received);
        if let Some(at) = found(self.drain()) {
            return Some(at);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let event = tokio::time::timeout_at(deadline, self.subscription.rx.recv()).await.ok()??;
            self.push(event);
            if let Some(at) = found(&self.events[self.events.len() - 1..]) {
                return Some(at);
            }
        }
    }

    /// Delivery lag of the first model output after each model-server action instant.
    pub fn output_lags(&mut self, actions: &[Instant]) -> Vec<f64> {
        let events = self.drain();
        actions
            .iter()
            .filter_map(|&action| {
                events.iter().find(|e| e.received >= action && e.is_model_output()).map(|e| ms(e.received - action))
            })
            .collect()
    }

    pub fn count(&mut self, pred: impl Fn(&Event) -> bool) -> usize {
        self.drain().iter().filter(|e| pred(&e.event)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn latencies_keep_samples_and_failures_per_operation() {
        let l = Latencies::default();
        let _ = l.measure("get", async { Ok::<_, ()>(1) }).await;
        let _ = l.measure("get", async { Err::<(), _>("no") }).await;
        let _ = l.measure("info", async { Ok::<_, ()>(()) }).await;
        let (samples, failures) = l.of("get");
        assert_eq!((samples.len(), failures), (2, 1));
        let names: Vec<_> = l.figures().into_iter().map(|f| f.name).collect();
        assert_eq!(names, vec!["latency · get", "latency · info"]);
    }

    #[test]
    fn model_output_events() {
        let e = |json: &str| LoggedEvent { event: Arc::new(crate::opencode::wire::Envelope::decode(json).unwrap().payload), received: Instant::now() };
        let part = |kind: &str| format!(r#"{{"type":"message.part.updated","properties":{{"part":{{"type":"{kind}","id":"p","sessionID":"s","messageID":"m","callID":"c","tool":"read","state":{{"status":"running","input":{{}}}}}}}}}}"#);
        assert!(e(r#"{"type":"message.part.delta","properties":{"sessionID":"s","messageID":"m","partID":"p","field":"text","delta":"x"}}"#).is_model_output());
        assert!(e(&part("tool")).is_model_output());
        assert!(!e(&part("step-start")).is_model_output());
        assert!(!e(&part("text")).is_model_output());
        assert!(!e(r#"{"type":"session.status","properties":{"sessionID":"s","status":{"type":"busy"}}}"#).is_model_output());
    }
}
