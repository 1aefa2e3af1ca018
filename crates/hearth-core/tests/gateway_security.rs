//! The gateway's promises over real HTTP with a real MCP client: only the runtime Hearth started
//! gets in (401 otherwise), and every call runs under the grant of the request running on the
//! calling session, or is refused. Secrets never reach the logs.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use hearth_core::toolbox::gateway::*;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

/// Everything any thread of this test binary logged.
fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf: Arc<Mutex<Vec<u8>>> = Arc::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || Capture(writer.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber per test binary");
        buf
    })
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn log_text() -> String {
    String::from_utf8_lossy(&logs().lock().unwrap()).to_string()
}

async fn gateway() -> Gateway {
    let kb = InMemoryKnowledge::default();
    kb.add("public", "doc-1", "Relay glossary", "The Prism Relay bends light between targets.");
    kb.add("private", "doc-2", "Budget", "Prism budget is secret.");
    Gateway::start(GatewayOptions { knowledge: Some(Arc::new(kb)), ..Default::default() }).await.unwrap()
}

async fn client(gw: &Gateway) -> RunningService<RoleClient, ()> {
    let secret = gw.authorization().strip_prefix("Bearer ").unwrap().to_string();
    let transport = StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(gw.url()).auth_header(secret));
    ().serve(transport).await.expect("the MCP client connects with the secret")
}

async fn call(c: &RunningService<RoleClient, ()>, tool: &str, mut args: Value, session: Option<&str>) -> CallToolResult {
    if let Some(s) = session {
        args[SESSION_ARG] = json!(s);
    }
    c.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().unwrap().clone())).await.unwrap()
}

fn text(r: &CallToolResult) -> String {
    r.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<Vec<_>>().join("\n")
}

fn assert_refused(r: &CallToolResult, sentence: &str) {
    assert_eq!(r.is_error, Some(true), "refused: {}", text(r));
    assert!(text(r).contains(sentence), "expected «{sentence}» in «{}»", text(r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gateway_secret_every_request_is_401() {
    logs();
    let gw = gateway().await;
    assert!(gw.url().starts_with("http://127.0.0.1:"), "loopback only: {}", gw.url());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let http = reqwest::Client::new();
    let post = |auth: Option<String>| {
        let mut r = http.post(gw.url()).header("accept", "application/json, text/event-stream").json(&init);
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        r.send()
    };
    for bad in [None, Some("Bearer wrong".to_string()), Some(gw.authorization().replace("Bearer ", "Basic ")), Some("Bearer ".into())] {
        let resp = post(bad.clone()).await.unwrap();
        assert_eq!(resp.status(), 401, "{bad:?}");
        assert_eq!(resp.text().await.unwrap(), UNAUTHORIZED_SENTENCE);
    }
    let ok = post(Some(gw.authorization())).await.unwrap();
    assert_eq!(ok.status(), 200, "the right secret gets in");
    // A client that knows the URL but not the secret cannot even initialise.
    let stranger = StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(gw.url()).auth_header("guess"));
    assert!(().serve(stranger).await.is_err());
    gw.dispose().await;
    assert!(!log_text().contains(gw.authorization().trim_start_matches("Bearer ")), "the secret was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_runs_under_its_own_request_grant_or_is_refused() {
    logs();
    let gw = gateway().await;
    let c = client(&gw).await;
    let names: Vec<String> = c.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
    assert!(names.contains(&"knowledge_search".to_string()) && names.contains(&"knowledge_read".to_string()), "{names:?}");
    let q = json!({"query": "prism"});

    // No session tag (plugin missing), or a session running no granted request.
    assert_refused(&call(&c, "knowledge_search", q.clone(), None).await, "did not say which conversation");
    assert_refused(&call(&c, "knowledge_search", q.clone(), Some("ses_nobody")).await, "no running request");

    let scope = |libs: &[&str], ttl: Duration| GrantScope { libraries: libs.iter().map(|s| s.to_string()).collect(), custom_servers: vec![], ttl };
    let a = gw.grant("req-a", scope(&["public"], DEFAULT_GRANT_TTL));
    let b = gw.grant("req-b", scope(&[], DEFAULT_GRANT_TTL));
    // Binding needs the token granted for that very request.
    assert_eq!(gw.bind_session("ses_a", "req-a", &b), Err(AuthError::Grant(GrantError::OtherRequest)));
    let forged = CapabilityToken::from_text(format!("hct_{}", "A".repeat(43)));
    assert_eq!(gw.bind_session("ses_a", "req-a", &forged), Err(AuthError::Grant(GrantError::Unknown)));
    assert_eq!(gw.bind_session("ses_a", "req-a", &CapabilityToken::from_text("nonsense")), Err(AuthError::Grant(GrantError::Malformed)));
    assert_refused(&call(&c, "knowledge_search", q.clone(), Some("ses_a")).await, "no running request");

    gw.bind_session("ses_a", "req-a", &a).unwrap();
    gw.bind_session("ses_b", "req-b", &b).unwrap();
    let found = call(&c, "knowledge_search", q.clone(), Some("ses_a")).await;
    assert_eq!(found.is_error, Some(false), "{}", text(&found));
    assert!(text(&found).contains("Relay glossary") && !text(&found).contains("Budget"), "only granted libraries: {}", text(&found));
    let read = call(&c, "knowledge_read", json!({"document_id": "doc-1"}), Some("ses_a")).await;
    assert!(text(&read).contains("bends light"), "{}", text(&read));
    assert_refused(&call(&c, "knowledge_read", json!({"document_id": "doc-2"}), Some("ses_a")).await, "No document doc-2");
    // Same project, another conversation, no knowledge grant: a refusal, not data.
    assert_refused(&call(&c, "knowledge_search", q.clone(), Some("ses_b")).await, "No knowledge library is attached");

    // Expired grant.
    let short = gw.grant("req-c", scope(&["public"], Duration::from_millis(200)));
    gw.bind_session("ses_c", "req-c", &short).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_refused(&call(&c, "knowledge_search", q.clone(), Some("ses_c")).await, "expired");

    // A new request on the same session moves the session to the new grant; the old one ends.
    let a2 = gw.grant("req-a2", scope(&[], DEFAULT_GRANT_TTL));
    gw.bind_session("ses_a", "req-a2", &a2).unwrap();
    gw.request_ended("req-a");
    assert_refused(&call(&c, "knowledge_search", q.clone(), Some("ses_a")).await, "No knowledge library is attached");
    assert_eq!(gw.bind_session("ses_x", "req-a", &a), Err(AuthError::Grant(GrantError::Revoked)), "an ended request's token is dead");
    gw.request_ended("req-a2");
    assert_refused(&call(&c, "knowledge_search", q, Some("ses_a")).await, "no running request");

    c.cancel().await.unwrap();
    gw.dispose().await;
    let logged = log_text();
    assert!(logged.contains(&a.tag()), "the capture works and names tokens by tag");
    for t in [&a, &b, &short, &a2] {
        assert!(!logged.contains(t.expose()), "a token was logged in clear");
    }
    assert!(!logged.contains(gw.authorization().trim_start_matches("Bearer ")), "the gateway secret was logged");
}
