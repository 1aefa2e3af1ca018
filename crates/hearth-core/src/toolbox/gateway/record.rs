//! A bounded record of the calls the gateway forwarded, for tests and diagnostics.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde_json::Value;

/// Most forwarded calls kept; older ones are dropped first.
pub const MAX_RECORDED_CALLS: usize = 512;

/// One call forwarded to a custom server, with the grant it ran under.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForwardedCall {
    pub request_id: String,
    /// Short hash of the capability token (never the token).
    pub token_tag: String,
    pub server_id: String,
    /// The server's own tool name.
    pub tool: String,
    /// Arguments as forwarded (the session tag already stripped).
    pub args: Value,
}

#[derive(Debug, Default)]
pub struct CallLog(Mutex<VecDeque<ForwardedCall>>);

impl CallLog {
    pub fn push(&self, call: ForwardedCall) {
        let mut q = self.0.lock().unwrap();
        if q.len() >= MAX_RECORDED_CALLS {
            q.pop_front();
        }
        q.push_back(call);
    }

    pub fn all(&self) -> Vec<ForwardedCall> {
        self.0.lock().unwrap().iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_bounded() {
        let log = CallLog::default();
        for i in 0..MAX_RECORDED_CALLS + 5 {
            log.push(ForwardedCall { request_id: i.to_string(), token_tag: "t".into(), server_id: "s".into(), tool: "x".into(), args: Value::Null });
        }
        let all = log.all();
        assert_eq!(all.len(), MAX_RECORDED_CALLS);
        assert_eq!(all[0].request_id, "5");
    }
}
