//! Measurement helpers shared by the checks: per-operation latencies and a log of one session's
//! runtime events with the instant each reached Hearth.

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::opencode::event_hub::{HubEvent, Subscription};

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

/// One event as logged (without its payload: parts can be hundreds of KiB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedEvent {
    pub kind: String,
    /// `part.type` of `message.part.updated` events.
    pub part_type: Option<String>,
    pub received: Instant,
}

impl LoggedEvent {
    /// Caused by a model response: streamed text, or a tool part the model asked for. (Text part
    /// updates are not counted: the prompt's own text part can reach Hearth after the request.)
    pub fn is_model_output(&self) -> bool {
        self.kind == "message.part.delta"
            || (self.kind == "message.part.updated" && self.part_type.as_deref() == Some("tool"))
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
            HubEvent::Event { kind, properties, received, .. } => {
                let part_type = properties["part"]["type"].as_str().map(str::to_string);
                self.events.push(LoggedEvent { kind, part_type, received });
            }
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

    pub fn count(&mut self, kind: &str) -> usize {
        self.drain().iter().filter(|e| e.kind == kind).count()
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
        let e = |kind: &str, part: Option<&str>| LoggedEvent {
            kind: kind.into(),
            part_type: part.map(String::from),
            received: Instant::now(),
        };
        assert!(e("message.part.delta", None).is_model_output());
        assert!(e("message.part.updated", Some("tool")).is_model_output());
        assert!(!e("message.part.updated", Some("step-start")).is_model_output());
        assert!(!e("message.part.updated", Some("text")).is_model_output());
        assert!(!e("session.status", None).is_model_output());
    }
}
