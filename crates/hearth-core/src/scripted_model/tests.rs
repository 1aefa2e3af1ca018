//! Real HTTP against a started server, with bodies shaped like OpenCode's.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::request::tests::{agent_body, compaction_body, title_body, tool};
use super::*;

const WAIT: Duration = Duration::from_secs(5);

fn client() -> reqwest::Client {
    // Loopback only: never let a proxy from the environment see these requests.
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn start(script: Script) -> ScriptedModelServer {
    ScriptedModelServer::start(script).unwrap()
}

async fn post(server: &ScriptedModelServer, body: &Value, session: Option<&str>) -> reqwest::Response {
    post_with(&client(), server, body, session).await.unwrap()
}

async fn post_with(
    client: &reqwest::Client,
    server: &ScriptedModelServer,
    body: &Value,
    session: Option<&str>,
) -> reqwest::Result<reqwest::Response> {
    let mut request = client.post(format!("{}/chat/completions", server.base_url())).bearer_auth(server.api_key()).json(body);
    if let Some(session) = session {
        request = request.header("x-session-id", session).header("x-session-affinity", session);
    }
    request.send().await
}

/// Parse an SSE body into its JSON chunks, checking it ends with `[DONE]`.
async fn sse_chunks(response: reqwest::Response) -> Vec<Value> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert_eq!(events.last(), Some(&"data: [DONE]"), "{text}");
    events[..events.len() - 1].iter().map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap()).collect()
}

fn streamed_text(chunks: &[Value]) -> String {
    chunks.iter().filter_map(|c| c.pointer("/choices/0/delta/content")?.as_str()).collect()
}

fn finish_reason(chunks: &[Value]) -> Option<String> {
    chunks.iter().find_map(|c| c.pointer("/choices/0/finish_reason")?.as_str().map(str::to_owned))
}

fn push_tool_result(body: &mut Value, name: &str, output: &str) {
    let messages = body["messages"].as_array_mut().unwrap();
    let id = format!("call_{}", messages.len());
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
}

#[tokio::test]
async fn streams_text_as_openai_sse_with_usage() {
    let server = start(Script::default_agent());
    assert!(server.base_url().starts_with("http://127.0.0.1:"));
    assert!(server.base_url().ends_with(&format!(":{}/v1", server.port())));
    let chunks = sse_chunks(post(&server, &agent_body("hello there"), None).await).await;
    assert_eq!(streamed_text(&chunks), "Scripted reply to: hello there");
    assert!(chunks.iter().filter(|c| c.pointer("/choices/0/delta/content").is_some()).count() > 1, "streamed in deltas");
    assert_eq!(finish_reason(&chunks).as_deref(), Some("stop"));
    let usage = chunks.last().unwrap();
    assert!(usage["usage"]["total_tokens"].as_u64().unwrap() > 0);

    // Without include_usage there is no usage chunk.
    let mut body = agent_body("hello");
    body["stream_options"] = json!({"include_usage": false});
    let chunks = sse_chunks(post(&server, &body, None).await).await;
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
}

#[tokio::test]
async fn streams_a_tool_call_the_way_opencode_accepts_it() {
    let server = start(Script::default_agent());
    let chunks = sse_chunks(post(&server, &agent_body("Read marker.txt for wave 0"), Some("ses_1")).await).await;
    let head = &chunks[0]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(head["index"], 0);
    assert_eq!(head["type"], "function");
    assert_eq!(head["function"], json!({"name": "read", "arguments": ""}));
    assert!(head["id"].as_str().unwrap().starts_with("call_"));
    let arguments: String =
        chunks.iter().filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0/function/arguments")?.as_str()).collect();
    assert_eq!(serde_json::from_str::<Value>(&arguments).unwrap(), json!({"filePath": "marker.txt"}));
    assert_eq!(finish_reason(&chunks).as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn answers_non_streaming_requests_with_a_completion_object() {
    let server = start(Script::default_agent());
    let mut body = agent_body("read notes.md");
    body["stream"] = json!(false);
    let response = post(&server, &body, None).await;
    assert_eq!(response.status(), 200);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["object"], "chat.completion");
    assert_eq!(value["choices"][0]["finish_reason"], "tool_calls");
    let call = &value["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "read");
    assert_eq!(serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(), json!({"filePath": "notes.md"}));
    assert!(!server.requests()[0].stream);
}

#[tokio::test]
async fn refuses_requests_without_the_key() {
    let server = start(Script::default_agent());
    let url = format!("{}/chat/completions", server.base_url());
    let client = client();
    let missing = client.post(&url).json(&agent_body("hi")).send().await.unwrap();
    assert_eq!(missing.status(), 401);
    let wrong = client.post(&url).bearer_auth("sk-wrong").json(&agent_body("hi")).send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let models_url = format!("{}/models", server.base_url());
    assert_eq!(client.get(&models_url).send().await.unwrap().status(), 401);
    assert!(server.requests().is_empty(), "refused requests are not recorded");

    let models: Value = client.get(&models_url).bearer_auth(server.api_key()).send().await.unwrap().json().await.unwrap();
    assert_eq!(models["data"][0]["id"], MODEL_ID);
    let unknown = client.get(format!("{}/nothing", server.base_url())).bearer_auth(server.api_key()).send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    let not_json = client.post(&url).bearer_auth(server.api_key()).body("{oops").send().await.unwrap();
    assert_eq!(not_json.status(), 400);
    // Two servers never share a key.
    assert_ne!(server.api_key(), start(Script::default_agent()).api_key());
}

#[tokio::test]
async fn classifies_and_records_requests_per_session() {
    let server = start(Script::default_agent());
    let title = streamed_text(&sse_chunks(post(&server, &title_body(), Some("ses_a")).await).await);
    assert_eq!(title, "Read marker.txt for wave 0");
    let summary = streamed_text(&sse_chunks(post(&server, &compaction_body(), Some("ses_a")).await).await);
    assert!(summary.starts_with(SUMMARY_PREFIX), "{summary}");
    sse_chunks(post(&server, &agent_body("hello"), Some("ses_b")).await).await;

    let requests = server.requests();
    let kinds: Vec<RequestKind> = requests.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [RequestKind::Title, RequestKind::Compaction, RequestKind::Agent]);
    assert_eq!(requests.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(requests[0].received_at <= requests[2].received_at);
    let a = server.requests_for_session("ses_a");
    assert_eq!(a.len(), 2);
    assert!(a.iter().all(|r| r.session_id.as_deref() == Some("ses_a") && r.stream));
    let b = server.requests_for_session("ses_b");
    assert_eq!(b[0].last_user_text(), "hello");
    assert_eq!(b[0].tool_names(), vec!["read", "bash", "skill"]);
    assert_eq!(b[0].model.as_deref(), Some("scripted"));
    assert!(b[0].contains_text("You are opencode"));
    server.clear_requests();
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn default_script_reads_the_marker_then_answers_it() {
    let server = start(Script::default_agent());
    let mut body = agent_body("Read marker.txt for wave 1. REQUEST_abc");
    let first = sse_chunks(post(&server, &body, Some("ses_1")).await).await;
    assert_eq!(finish_reason(&first).as_deref(), Some("tool_calls"));
    push_tool_result(&mut body, "read", "<path>/p/marker.txt</path>\n<content>\n00001| PROJECT_7\n</content>");
    let second = sse_chunks(post(&server, &body, Some("ses_1")).await).await;
    assert_eq!(streamed_text(&second), "PROJECT_7");
    assert_eq!(finish_reason(&second).as_deref(), Some("stop"));
    let recorded = server.requests_for_session("ses_1");
    assert_eq!(recorded[1].tool_results_after_last_user().len(), 1);
}

#[tokio::test]
async fn custom_script_drives_a_multi_step_flow() {
    // read → skill → MCP tool → text, as the capability self-test does.
    let server = start(Script::custom(|request| {
        if request.kind != RequestKind::Agent {
            return default_reply(request);
        }
        match request.tool_results_after_last_user().len() {
            0 => Reply::tool_call("read", json!({"filePath": "marker.txt"})),
            1 => Reply::tool_call("skill", json!({"name": "web-3d-game"})),
            2 => match request.tool_names().into_iter().find(|n| n.ends_with("_create_game_blueprint")) {
                Some(name) => Reply::tool_call(name, json!({"theme": "neon-ruins"})),
                None => Reply::Status { code: 500, body: "MCP tool not exposed".into() },
            },
            _ => Reply::text(format!("done: {}", request.tool_results_after_last_user().join(" | "))),
        }
    }));
    let mut body = agent_body("build a game");
    body["tools"].as_array_mut().unwrap().push(tool("blueprint_create_game_blueprint"));
    body["stream"] = json!(false);
    let mut calls = Vec::new();
    for output in ["PROJECT_1", "skill loaded", "Prism Relay"] {
        let value: Value = post(&server, &body, Some("ses_flow")).await.json().await.unwrap();
        let name = value["choices"][0]["message"]["tool_calls"][0]["function"]["name"].as_str().unwrap().to_owned();
        push_tool_result(&mut body, &name, output);
        calls.push(name);
    }
    assert_eq!(calls, ["read", "skill", "blueprint_create_game_blueprint"]);
    let value: Value = post(&server, &body, Some("ses_flow")).await.json().await.unwrap();
    assert_eq!(value["choices"][0]["message"]["content"], "done: PROJECT_1 | skill loaded | Prism Relay");
}

#[tokio::test]
async fn a_hold_blocks_one_session_while_another_completes() {
    let server = std::sync::Arc::new(start(Script::default_agent()));
    let hold = server.hold(HoldRule::session("ses_a").with_kind(RequestKind::Agent));
    let held = tokio::spawn({
        let server = server.clone();
        async move { sse_chunks(post(&server, &agent_body("first"), Some("ses_a")).await).await }
    });
    assert!(hold.wait_until_held(1, WAIT).await);
    // Another session, and another kind of the same session, pass.
    let other = sse_chunks(post(&server, &agent_body("second"), Some("ses_b")).await).await;
    assert_eq!(streamed_text(&other), "Scripted reply to: second");
    sse_chunks(post(&server, &title_body(), Some("ses_a")).await).await;
    assert!(!held.is_finished());
    assert_eq!(hold.held_count(), 1);

    hold.release();
    let chunks = tokio::time::timeout(WAIT, held).await.unwrap().unwrap();
    assert_eq!(streamed_text(&chunks), "Scripted reply to: first");
    assert_eq!(hold.held_count(), 0);
    // Released: later matching requests pass at once.
    sse_chunks(post(&server, &agent_body("third"), Some("ses_a")).await).await;
}

#[tokio::test]
async fn a_held_request_whose_client_leaves_is_not_counted_any_more() {
    let server = start(Script::default_agent());
    let hold = server.hold(HoldRule::any());
    let impatient = reqwest::Client::builder().no_proxy().timeout(Duration::from_millis(300)).build().unwrap();
    let result = post_with(&impatient, &server, &agent_body("hi"), Some("ses_gone")).await;
    assert!(result.unwrap_err().is_timeout());
    let deadline = Instant::now() + WAIT;
    while hold.held_count() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(hold.held_count(), 0, "the abandoned request was dropped");
}

#[tokio::test]
async fn status_and_drop_replies_simulate_provider_failures() {
    let server = start(Script::custom(|request| match request.session_id.as_deref() {
        Some("busy") => Reply::Status { code: 429, body: r#"{"error":{"message":"rate limited"}}"#.into() },
        Some("broken") => Reply::Status { code: 500, body: "upstream exploded".into() },
        Some("gone") => Reply::Drop,
        _ => default_reply(request),
    }));
    let busy = post(&server, &agent_body("hi"), Some("busy")).await;
    assert_eq!(busy.status(), 429);
    assert_eq!(busy.headers()["content-type"], "application/json");
    assert_eq!(busy.json::<Value>().await.unwrap()["error"]["message"], "rate limited");
    let broken = post(&server, &agent_body("hi"), Some("broken")).await;
    assert_eq!(broken.status(), 500);
    assert_eq!(broken.text().await.unwrap(), "upstream exploded");
    let gone = post_with(&client(), &server, &agent_body("hi"), Some("gone")).await;
    assert!(gone.is_err(), "the connection closes without a response");
    // The server keeps serving everyone else.
    sse_chunks(post(&server, &agent_body("hi"), Some("fine")).await).await;
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn a_forty_mib_body_arrives_intact() {
    let server = start(Script::default_agent());
    // Quotes, backslashes and newlines make the JSON escaping grow the body, as a real corpus would.
    let line = "corpus line with \"quotes\", a \\ backslash and\ttabs\n";
    let corpus = line.repeat(40 * 1024 * 1024 / line.len() + 1) + "END_OF_CORPUS";
    let mut body = agent_body(&corpus);
    body["stream"] = json!(false);
    let bytes = serde_json::to_vec(&body).unwrap();
    assert!(bytes.len() > 40 * 1024 * 1024);
    let response = client()
        .post(format!("{}/chat/completions", server.base_url()))
        .bearer_auth(server.api_key())
        .header("content-type", "application/json")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let recorded = server.requests().pop().unwrap();
    assert!(recorded.body_bytes == bytes, "recorded byte-exact");
    assert!(recorded.contains_text("END_OF_CORPUS"));
    assert_eq!(recorded.last_user_text().len(), corpus.len());
}

#[tokio::test]
async fn serves_twenty_requests_at_once() {
    let server = std::sync::Arc::new(start(Script::default_agent()));
    let client = client();
    let tasks = (0..20).map(|i| {
        let (server, client) = (server.clone(), client.clone());
        tokio::spawn(async move {
            let session = format!("ses_{i}");
            let response = post_with(&client, &server, &agent_body(&format!("prompt {i}")), Some(&session)).await.unwrap();
            (i, streamed_text(&sse_chunks(response).await))
        })
    });
    for (i, text) in futures::future::try_join_all(tasks).await.unwrap() {
        assert_eq!(text, format!("Scripted reply to: prompt {i}"));
    }
    let mut seqs: Vec<u64> = server.requests().iter().map(|r| r.seq).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=20).collect::<Vec<_>>());
}

#[tokio::test]
async fn shutdown_ends_held_requests_and_closes_the_port() {
    let server = std::sync::Arc::new(start(Script::default_agent()));
    let hold = server.hold(HoldRule::any());
    let held = tokio::spawn({
        let server = server.clone();
        async move { post_with(&client(), &server, &agent_body("hi"), None).await.map(|r| r.status()) }
    });
    assert!(hold.wait_until_held(1, WAIT).await);
    let started = Instant::now();
    server.shutdown().await;
    assert!(started.elapsed() < SHUTDOWN_GRACE, "held requests end at once");
    let status = held.await.unwrap();
    assert!(status.is_err() || status.unwrap() == 503);
    assert!(tokio::net::TcpStream::connect(("127.0.0.1", server.port())).await.is_err());
    server.shutdown().await; // idempotent
}

#[tokio::test]
async fn dropping_the_server_stops_it() {
    let server = start(Script::default_agent());
    let port = server.port();
    let hold = server.hold(HoldRule::any());
    let url = format!("{}/chat/completions", server.base_url());
    let key = server.api_key().to_owned();
    let held = tokio::spawn(async move { client().post(url).bearer_auth(key).json(&agent_body("hi")).send().await });
    assert!(hold.wait_until_held(1, WAIT).await);
    drop(server);
    // The held request's connection is ended with the server, not left waiting.
    assert!(tokio::time::timeout(WAIT, held).await.unwrap().unwrap().is_err());
    assert_eq!(hold.held_count(), 0);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err());
}

#[tokio::test]
async fn the_script_can_be_replaced_while_running() {
    let server = start(Script::default_agent());
    server.set_script(Script::custom(|_| Reply::text("replaced")));
    let chunks = sse_chunks(post(&server, &agent_body("hi"), None).await).await;
    assert_eq!(streamed_text(&chunks), "replaced");
}

#[test]
fn starting_outside_a_runtime_is_an_error() {
    assert!(matches!(ScriptedModelServer::start(Script::default_agent()), Err(ModelServerError::NoRuntime)));
}
