//! The bounded log of requests one server received.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;
use serde_json::Value;

use super::request::{Api, ObservedRequest};

/// Requests kept per server; older ones are dropped first.
pub const MAX_RECORDED_REQUESTS: usize = 1024;
/// Raw body bytes kept per server; older requests are dropped first, the newest is always kept.
pub const MAX_RECORDED_BODY_BYTES: usize = 512 * 1024 * 1024;

struct Log {
    max_requests: usize,
    max_bytes: usize,
    next_seq: u64,
    requests: VecDeque<ObservedRequest>,
    bytes: usize,
}

pub(super) struct Recorder(Mutex<Log>);

impl Default for Recorder {
    fn default() -> Self {
        Self::with_limits(MAX_RECORDED_REQUESTS, MAX_RECORDED_BODY_BYTES)
    }
}

impl Recorder {
    fn with_limits(max_requests: usize, max_bytes: usize) -> Self {
        Self(Mutex::new(Log { max_requests, max_bytes, next_seq: 0, requests: VecDeque::new(), bytes: 0 }))
    }

    /// Number, record and return a request.
    pub(super) fn record(&self, api: Api, session_id: Option<String>, body: Value, body_bytes: Bytes) -> ObservedRequest {
        let mut log = self.lock();
        log.next_seq += 1;
        let request = ObservedRequest::new_for(api, log.next_seq, session_id, body, body_bytes);
        log.bytes += request.body_bytes.len();
        log.requests.push_back(request.clone());
        while log.requests.len() > log.max_requests || (log.bytes > log.max_bytes && log.requests.len() > 1) {
            if let Some(old) = log.requests.pop_front() {
                log.bytes -= old.body_bytes.len();
            }
        }
        request
    }

    pub(super) fn all(&self) -> Vec<ObservedRequest> {
        self.lock().requests.iter().cloned().collect()
    }

    pub(super) fn for_session(&self, session_id: &str) -> Vec<ObservedRequest> {
        self.lock().requests.iter().filter(|r| r.session_id.as_deref() == Some(session_id)).cloned().collect()
    }

    pub(super) fn clear(&self) {
        let mut log = self.lock();
        log.requests.clear();
        log.bytes = 0;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_in_order_and_drops_the_oldest_beyond_the_bound() {
        let recorder = Recorder::default();
        for _ in 0..MAX_RECORDED_REQUESTS + 3 {
            recorder.record(Api::ChatCompletions, Some("ses".into()), json!({}), Bytes::from_static(b"{}"));
        }
        let all = recorder.all();
        assert_eq!(all.len(), MAX_RECORDED_REQUESTS);
        assert_eq!(all[0].seq, 4);
        assert_eq!(all.last().unwrap().seq, MAX_RECORDED_REQUESTS as u64 + 3);
        assert_eq!(recorder.for_session("ses").len(), MAX_RECORDED_REQUESTS);
        assert!(recorder.for_session("other").is_empty());
        recorder.clear();
        assert!(recorder.all().is_empty());
    }

    #[test]
    fn the_byte_bound_keeps_the_newest_request() {
        let recorder = Recorder::with_limits(10, 100);
        let big = Bytes::from(vec![b' '; 51]);
        for _ in 0..3 {
            recorder.record(Api::AnthropicMessages, None, json!({}), big.clone());
        }
        let all = recorder.all();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].seq, 3);
    }
}
