//! The gateway's promises over real HTTP with a real MCP client: only the runtime Hearth started
//! gets in — its process, with the secret (401 without the secret, 403 from any other process) —
//! and every call runs under the grant of the request running on the session its plugin stamped,
//! or is refused. Secrets and session ids never reach the logs.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use hearth_core::host::clock::{self, ManualClock, SharedClock};
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
        // Everything Hearth logs, at its most verbose; the app's filter keeps rmcp's whole-message
        // logs out whatever RUST_LOG says.
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(hearth_core::host::logging::filter("trace"))
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

/// Session ids of this file: distinctive, so a search of the log finds only them.
const SES_A: &str = "ses_alpha_5c1e";
const SES_B: &str = "ses_bravo_93d0";
const SES_C: &str = "ses_charlie_0a4f";
const PRIVATE_TEXT: &str = "Prism budget is secret.";

async fn gateway_with(limits: GatewayLimits, clock: SharedClock) -> Gateway {
    let kb = InMemoryKnowledge::default();
    kb.add("public", "doc-1", "Relay glossary", "The Prism Relay bends light between targets.");
    kb.add("private", "doc-2", "Budget", PRIVATE_TEXT);
    // The test process plays the runtime: it is the one allowed caller.
    Gateway::start(GatewayOptions { knowledge: Some(Arc::new(kb)), limits, callers: AllowedCallers::this_process(), clock, ..Default::default() }).await.unwrap()
}

/// Unbound sessions wait only a moment here; the wait itself is tested beside `Sessions`.
async fn gateway() -> Gateway {
    gateway_on(clock::system()).await
}

/// The same, with grants' expiry measured on `clock`.
async fn gateway_on(clock: SharedClock) -> Gateway {
    gateway_with(GatewayLimits { unbound_session_wait: Duration::from_millis(200), ..Default::default() }, clock).await
}

fn secret(gw: &Gateway) -> String {
    gw.authorization().strip_prefix("Bearer ").unwrap().to_string()
}

async fn client(gw: &Gateway) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(gw.url()).auth_header(secret(gw)));
    ().serve(transport).await.expect("the MCP client connects with the secret")
}

/// A call with `stamp` under the session argument, as the plugin would write it (or not).
async fn call(c: &RunningService<RoleClient, ()>, tool: &str, mut args: Value, stamp: Option<&str>) -> CallToolResult {
    if let Some(s) = stamp {
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

fn scope(libs: &[&str], ttl: Duration) -> GrantScope {
    GrantScope { libraries: libs.iter().map(|s| s.to_string()).collect(), custom_servers: vec![], ttl }
}

/// POST `body` to `path` of the gateway from a CHILD process (bash, over /dev/tcp) holding the
/// secret, as the agent's shell tool would; returns the raw HTTP answer.
async fn post_from_child(gw: &Gateway, path: &str, body: &str) -> String {
    let port = gw.url().trim_start_matches("http://127.0.0.1:").split('/').next().unwrap().to_string();
    let script = r#"exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 9
printf 'POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' "$ROUTE" "$SECRET" "${#BODY}" "$BODY" >&3
cat <&3"#;
    let out = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        // The secret goes by environment, not on a command line other processes can list.
        .env("PORT", port)
        .env("ROUTE", path)
        .env("SECRET", secret(gw))
        .env("BODY", body)
        .output()
        .await
        .expect("bash runs");
    assert!(out.status.success(), "the child could not connect: {out:?}");
    String::from_utf8_lossy(&out.stdout).to_string()
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
    // A running request's capability token is not the gateway's secret either.
    let token = gw.grant("req-t", scope(&["public"], DEFAULT_GRANT_TTL)).unwrap();
    let bad = [None, Some("Bearer wrong".to_string()), Some(gw.authorization().replace("Bearer ", "Basic ")), Some("Bearer ".into()), Some(format!("Bearer {}", token.expose()))];
    for bad in bad {
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
    assert!(!log_text().contains(&secret(&gw)), "the secret was logged");
    assert!(!log_text().contains(token.expose()), "a token was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_runs_under_its_own_request_grant_or_is_refused() {
    logs();
    let clock = ManualClock::new();
    let gw = gateway_on(clock.clone()).await;
    let c = client(&gw).await;
    let names: Vec<String> = c.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
    assert!(names.contains(&"knowledge_search".to_string()) && names.contains(&"knowledge_read".to_string()), "{names:?}");
    let q = json!({"query": "prism"});
    let (stamp_a, stamp_b, stamp_c) = (gw.stamp(SES_A), gw.stamp(SES_B), gw.stamp(SES_C));

    // No stamp (plugin missing), or a session running no granted request.
    assert_refused(&call(&c, "knowledge_search", q.clone(), None).await, "did not say which conversation");
    assert_refused(&call(&c, "knowledge_search", q.clone(), Some(&gw.stamp("ses_nobody"))).await, "no running request");

    let a = gw.grant("req-a", scope(&["public"], DEFAULT_GRANT_TTL)).unwrap();
    let b = gw.grant("req-b", scope(&["private"], DEFAULT_GRANT_TTL)).unwrap();
    // Binding needs the token granted for that very request.
    assert_eq!(gw.bind_session(SES_A, "req-a", &b), Err(AuthError::Grant(GrantError::OtherRequest)));
    let forged = CapabilityToken::from_text(format!("hct_{}", "A".repeat(43)));
    assert_eq!(gw.bind_session(SES_A, "req-a", &forged), Err(AuthError::Grant(GrantError::Unknown)));
    assert_eq!(gw.bind_session(SES_A, "req-a", &CapabilityToken::from_text("nonsense")), Err(AuthError::Grant(GrantError::Malformed)));
    assert_refused(&call(&c, "knowledge_search", q.clone(), Some(&stamp_a)).await, "no running request");

    gw.bind_session(SES_A, "req-a", &a).unwrap();
    gw.bind_session(SES_B, "req-b", &b).unwrap();
    let found = call(&c, "knowledge_search", q.clone(), Some(&stamp_a)).await;
    assert_eq!(found.is_error, Some(false), "{}", text(&found));
    assert!(text(&found).contains("Relay glossary") && !text(&found).contains("Budget"), "only granted libraries: {}", text(&found));
    let read = call(&c, "knowledge_read", json!({"document_id": "doc-1"}), Some(&stamp_a)).await;
    assert!(text(&read).contains("bends light"), "{}", text(&read));
    assert_refused(&call(&c, "knowledge_read", json!({"document_id": "doc-2"}), Some(&stamp_a)).await, "No document doc-2");

    // B is running. A session id written by a model — bare, or with a key it made up — is not a
    // stamp of Hearth's plugin: refused, and B's library stays B's.
    for fake in [SES_B.to_string(), format!("guess:{SES_B}"), format!(":{SES_B}"), stamp_b.replace(':', "")] {
        let r = call(&c, "knowledge_search", json!({"query": "budget"}), Some(&fake)).await;
        assert_refused(&r, "not written by Hearth's plugin");
        assert!(!text(&r).contains(PRIVATE_TEXT));
    }
    let theirs = call(&c, "knowledge_read", json!({"document_id": "doc-2"}), Some(&stamp_b)).await;
    assert!(text(&theirs).contains(PRIVATE_TEXT), "B's own stamp reaches B's library: {}", text(&theirs));

    // Expired grant.
    let short = gw.grant("req-c", scope(&["public"], Duration::from_secs(60))).unwrap();
    gw.bind_session(SES_C, "req-c", &short).unwrap();
    clock.advance(Duration::from_secs(60));
    assert_refused(&call(&c, "knowledge_search", q.clone(), Some(&stamp_c)).await, "expired");

    // A new request on the same session moves the session to the new grant; the old one ends.
    let a2 = gw.grant("req-a2", scope(&[], DEFAULT_GRANT_TTL)).unwrap();
    gw.bind_session(SES_A, "req-a2", &a2).unwrap();
    gw.request_ended("req-a");
    assert_refused(&call(&c, "knowledge_search", q.clone(), Some(&stamp_a)).await, "No knowledge library is attached");
    assert_eq!(gw.bind_session("ses_x", "req-a", &a), Err(AuthError::Grant(GrantError::Revoked)), "an ended request's token is dead");
    gw.request_ended("req-a2");
    assert_refused(&call(&c, "knowledge_search", q, Some(&stamp_a)).await, "no running request");

    c.cancel().await.unwrap();
    gw.dispose().await;
    let logged = log_text();
    assert!(logged.contains(&a.tag()), "the capture works and names tokens by tag");
    for t in [&a, &b, &short, &a2] {
        assert!(!logged.contains(t.expose()), "a token was logged in clear");
    }
    assert!(!logged.contains(&secret(&gw)), "the gateway secret was logged");
    assert!(logged.contains(&hearth_core::host::logging::log_tag(SES_A)), "sessions are named by tag");
    for session in [SES_A, SES_B, SES_C] {
        assert!(!logged.contains(session), "a session id was logged in clear: {session}: {}", logged.lines().filter(|l| l.contains(session)).take(5).collect::<Vec<_>>().join("\n"));
    }
    let key = stamp_a.split(':').next().unwrap();
    assert!(!logged.contains(key), "the stamp key was logged");
}

/// The attack of the issue, over real HTTP: a process holding nothing but the user's file access
/// (the secret, B's session id, even B's genuine stamp) is not the runtime, so it is refused while
/// B's request is running; the same call from the runtime's process would have been served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_with_the_secret_and_a_running_session_is_refused() {
    logs();
    let gw = gateway().await;
    let b = gw.grant("req-b", scope(&["private"], DEFAULT_GRANT_TTL)).unwrap();
    gw.bind_session(SES_B, "req-b", &b).unwrap();
    let read_b = |stamp: &str| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "knowledge_read", "arguments": {"document_id": "doc-2", SESSION_ARG: stamp}}})
            .to_string()
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "agent", "version": "1"}}})
    .to_string();
    for (path, body) in [(MCP_PATH, init), (MCP_PATH, read_b(SES_B)), (MCP_PATH, read_b(&gw.stamp(SES_B))), (STAMP_KEY_PATH, String::new())] {
        let answer = post_from_child(&gw, path, &body).await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{path}: {answer}");
        assert!(answer.contains(FORBIDDEN_SENTENCE), "{answer}");
        assert!(!answer.contains(PRIVATE_TEXT), "B's document reached another process: {answer}");
    }
    // Without the secret the child is turned away before anyone looks at its process.
    let no_secret = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(format!("exec 3<>/dev/tcp/127.0.0.1/{}; printf 'POST /mcp HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n' >&3; cat <&3", gw.url().trim_start_matches("http://127.0.0.1:").trim_end_matches(MCP_PATH)))
        .output()
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&no_secret.stdout).starts_with("HTTP/1.1 401"), "{no_secret:?}");

    // The runtime's process (here the test process) with B's stamp is served: the refusals above
    // were about the process, not the call.
    let c = client(&gw).await;
    let served = call(&c, "knowledge_read", json!({"document_id": "doc-2"}), Some(&gw.stamp(SES_B))).await;
    assert!(text(&served).contains(PRIVATE_TEXT), "{}", text(&served));
    // And the stamp key is handed to it alone.
    let http = reqwest::Client::new();
    let key = http.post(gw.url().replace(MCP_PATH, STAMP_KEY_PATH)).header("authorization", gw.authorization()).send().await.unwrap();
    assert_eq!(key.status(), 200);
    assert_eq!(format!("{}:{SES_B}", key.text().await.unwrap()), gw.stamp(SES_B));
    c.cancel().await.unwrap();
    gw.dispose().await;
}

/// Gateway callers that are not this process: even Hearth itself is refused by a gateway that
/// serves a runtime alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_for_another_process_refuses_this_one() {
    let gw = Gateway::start(GatewayOptions { callers: AllowedCallers::pids(|| vec![1]), ..Default::default() }).await.unwrap();
    let resp = reqwest::Client::new().post(gw.url()).header("authorization", gw.authorization()).json(&json!({})).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(resp.text().await.unwrap(), FORBIDDEN_SENTENCE);
    gw.dispose().await;
}
