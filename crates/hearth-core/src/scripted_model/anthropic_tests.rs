//! Real HTTP against a started server, over Anthropic Messages, with bodies shaped like Claude
//! Code's: the same scripts answer, holds and pauses behave as for chat completions.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::anthropic::tests::{claude_body, claude_title_body, parse_events, reassemble, with_tool_result, PNG_A};
use super::*;

const WAIT: Duration = Duration::from_secs(5);

fn client() -> reqwest::Client {
    // Loopback only: never let a proxy from the environment see these requests.
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn messages_url(server: &ScriptedModelServer) -> String {
    // As Claude Code calls it: the Anthropic base URL, then `/v1/messages?beta=true`.
    format!("{}/v1/messages?beta=true", server.anthropic_base_url())
}

async fn post_with(client: &reqwest::Client, server: &ScriptedModelServer, body: &Value, session: &str) -> reqwest::Result<reqwest::Response> {
    client
        .post(messages_url(server))
        .header("x-api-key", server.api_key())
        .header("anthropic-version", "2023-06-01")
        .header("x-claude-code-session-id", session)
        .json(body)
        .send()
        .await
}

async fn post(server: &ScriptedModelServer, body: &Value, session: &str) -> reqwest::Response {
    post_with(&client(), server, body, session).await.unwrap()
}

/// The reply a streamed response carries: (text, tool call, stop reason).
async fn streamed(response: reqwest::Response) -> (String, Option<(String, Value)>, String) {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    reassemble(&parse_events(&response.text().await.unwrap()))
}

#[tokio::test]
async fn a_tool_use_round_trip_over_messages() {
    let server = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let body = claude_body("read marker.txt");
    let (_, call, stop) = streamed(post(&server, &body, "ses_c").await).await;
    assert_eq!(call, Some(("Read".to_owned(), json!({"file_path": "marker.txt"}))));
    assert_eq!(stop, "tool_use");

    let answered = with_tool_result(body, "Read", json!("     1\tPROJECT_9\n"));
    let (text, call, stop) = streamed(post(&server, &answered, "ses_c").await).await;
    assert_eq!((text.as_str(), call, stop.as_str()), ("PROJECT_9", None, "end_turn"));

    let recorded = server.requests_for_session("ses_c");
    assert_eq!(recorded.len(), 2);
    assert!(recorded.iter().all(|r| r.api == Api::AnthropicMessages && r.kind == RequestKind::Agent && r.stream));
    assert_eq!(recorded[1].tool_results_after_last_user(), ["     1\tPROJECT_9\n"]);
}

#[tokio::test]
async fn the_title_request_gets_json() {
    let server = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let (text, _, _) = streamed(post(&server, &claude_title_body("read marker.txt"), "ses_t").await).await;
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!({"title": "read marker.txt"}));
    assert_eq!(server.requests()[0].kind, RequestKind::Title);
}

#[tokio::test]
async fn images_are_recorded_with_the_request_that_carried_them() {
    let server = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let mut with_image = claude_body("describe this");
    with_image["messages"][0]["content"].as_array_mut().unwrap().push(json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_A}}));
    streamed(post(&server, &with_image, "ses_a").await).await;
    streamed(post(&server, &claude_body("no image"), "ses_b").await).await;
    let a = &server.requests_for_session("ses_a")[0];
    assert_eq!(a.images(), [Image::Base64 { media_type: "image/png", data: PNG_A }]);
    assert!(a.contains_text(PNG_A));
    assert!(server.requests_for_session("ses_b")[0].images().is_empty());
}

#[tokio::test]
async fn refuses_a_missing_or_wrong_key_in_anthropic_shape() {
    let server = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let client = client();
    let missing = client.post(messages_url(&server)).json(&claude_body("hi")).send().await.unwrap();
    assert_eq!(missing.status(), 401);
    let refusal: Value = missing.json().await.unwrap();
    assert_eq!(refusal["type"], "error");
    assert_eq!(refusal["error"]["type"], "authentication_error");
    let wrong = client.post(messages_url(&server)).header("x-api-key", "sk-wrong").json(&claude_body("hi")).send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(server.requests().is_empty(), "refused requests are not recorded");
    // The bearer form is accepted here too, and `count_tokens` answers without being recorded.
    let bearer = client.post(messages_url(&server)).bearer_auth(server.api_key()).json(&claude_body("hi")).send().await.unwrap();
    assert_eq!(bearer.status(), 200);
    let count = client.post(format!("{}/v1/messages/count_tokens", server.anthropic_base_url())).header("x-api-key", server.api_key()).json(&claude_body("hi")).send().await.unwrap();
    assert!(count.json::<Value>().await.unwrap()["input_tokens"].as_u64().unwrap() > 0);
    let not_json = client.post(messages_url(&server)).header("x-api-key", server.api_key()).body("{oops").send().await.unwrap();
    assert_eq!(not_json.status(), 400);
    assert_eq!(not_json.json::<Value>().await.unwrap()["error"]["type"], "invalid_request_error");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_reply_not_streamed_is_one_message_object() {
    let server = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let mut body = claude_body("read notes.md");
    body["stream"] = json!(false);
    let value: Value = post(&server, &body, "ses_n").await.json().await.unwrap();
    assert_eq!(value["type"], "message");
    assert_eq!(value["content"][0]["name"], "Read");
    assert_eq!(value["content"][0]["input"], json!({"file_path": "notes.md"}));
    assert_eq!(value["stop_reason"], "tool_use");
}

#[tokio::test]
async fn a_held_reply_is_answered_once_released() {
    let server = std::sync::Arc::new(ScriptedModelServer::start(Script::default_agent()).unwrap());
    let hold = server.hold(HoldRule::session("ses_held").with_kind(RequestKind::Agent));
    let held = tokio::spawn({
        let server = server.clone();
        async move { streamed(post(&server, &claude_body("first"), "ses_held").await).await }
    });
    assert!(hold.wait_until_held(1, WAIT).await);
    // Another session passes meanwhile.
    let (other, _, _) = streamed(post(&server, &claude_body("second"), "ses_other").await).await;
    assert_eq!(other, "Scripted reply to: second");
    assert!(!held.is_finished());
    hold.release();
    let (text, _, stop) = tokio::time::timeout(WAIT, held).await.unwrap().unwrap();
    assert_eq!((text.as_str(), stop.as_str()), ("Scripted reply to: first", "end_turn"));
}

#[tokio::test]
async fn a_held_request_whose_client_leaves_is_cancelled() {
    let server = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let hold = server.hold(HoldRule::any());
    let impatient = reqwest::Client::builder().no_proxy().timeout(Duration::from_millis(300)).build().unwrap();
    let result = post_with(&impatient, &server, &claude_body("hi"), "ses_gone").await;
    assert!(result.unwrap_err().is_timeout());
    let deadline = Instant::now() + WAIT;
    while hold.held_count() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(hold.held_count(), 0, "the abandoned request was dropped");
    // The server keeps serving.
    hold.release();
    streamed(post(&server, &claude_body("hi"), "ses_next").await).await;
}

#[tokio::test]
async fn a_paused_reply_streams_its_first_half_then_the_rest_once_the_gate_opens() {
    let gate = Gate::new();
    let script_gate = gate.clone();
    let server = ScriptedModelServer::start(Script::custom(move |_| Reply::PausedText { before: "first half, ".into(), after: "second half".into(), gate: script_gate.clone() })).unwrap();
    let mut response = post(&server, &claude_body("hi"), "ses_p").await;
    let mut seen = String::new();
    while !seen.contains("first half, ") {
        let chunk = tokio::time::timeout(WAIT, response.chunk()).await.unwrap().unwrap().expect("the first half arrives before the gate opens");
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(!seen.contains("message_stop"), "the reply is caught in the middle");
    gate.open();
    seen.push_str(&tokio::time::timeout(WAIT, response.text()).await.unwrap().unwrap());
    let (text, _, stop) = reassemble(&parse_events(&seen));
    assert_eq!((text.as_str(), stop.as_str()), ("first half, second half", "end_turn"));
}
