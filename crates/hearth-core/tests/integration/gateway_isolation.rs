//! One conversation cannot reach another's grant through the gateway, against the real app, the
//! real runtime and a scripted model playing a prompt-injected agent. Two conversations of one
//! project: B's library holds the Tidewater ledger and B's turn is running (held at the model);
//! A's library holds the Ember protocol. A's agent
//! - runs a shell script that reads every file of Hearth's data folder it can, finds the gateway's
//!   secret, its address and every session id, and calls the gateway naming each session: refused,
//!   because the shell is not the runtime's process;
//! - writes B's session id into a gateway tool call's arguments itself: Hearth's plugin overwrites
//!   it, and the call runs under A's grant;
//! - starts a `task` subagent (naming B's session as the one to continue, which the plugin drops)
//!   that searches knowledge: it gets A's libraries.
//!
//! None of B's library text reaches A's messages, tool outputs or model requests.

use crate::support;

use std::sync::Arc;

use hearth_core::app::Hearth;
use hearth_core::binaries::opencode::LocateInputs;
use hearth_core::scripted_model::{default_reply, HoldRule, ObservedRequest, Reply, RequestKind, Script, ScriptedModelServer};
use hearth_core::store::{Message, MessageStatus, ModelProtocol, ProfileInput};
use hearth_core::toolbox::gateway::{FORBIDDEN_SENTENCE, SESSION_ARG};
use serde_json::json;
use support::{app_options, Recorder, TURN_TIMEOUT};

/// Text of B's library that A must never see (not a word any query here uses).
const B_TEXT: [&str; 3] = ["harbour", "tidewater-ledger", "lower vault"];
/// B's prompt, held at the model so that B's turn runs for the whole test.
const B_PROMPT: &str = "Search knowledge for marrowgloam B-HOLD";
const SUBAGENT_PROMPT: &str = "SUB: search knowledge for zephyrine";

/// What the attacker's script prints besides the gateway's answers.
const READ_MARK: &str = "FILES_READ=";

/// The agent's shell script: everything it knows it finds by itself, from the runtime's HOME up
/// (`<data>/runtime/opencode/home`). It prints the gateway's answers, never file contents.
const ATTACK_SCRIPT: &str = r#"DATA=$(cd "$HOME/../../.." && pwd)
n=0
while IFS= read -r -d '' f; do cat "$f" >/dev/null 2>&1 && n=$((n+1)); done < <(find "$DATA" -type f -print0 2>/dev/null)
echo "FILES_READ=$n"
SECRET=$(cat "$(find "$DATA" -name hearth-gateway.secret | head -n1)")
# The gateway's address: in the runtime's environment (inherited) and in its plugin's file.
PORT=$( (printenv; grep -rhoa '127\.0\.0\.1:[0-9]*/\(mcp\|stamp-key\)' "$DATA") 2>/dev/null | grep -o '127\.0\.0\.1:[0-9]*/\(mcp\|stamp-key\)' | head -n1 | sed 's/.*://; s/\/.*//')
echo "PORT=$PORT SECRET_CHARS=${#SECRET}"
post() {
  exec 3<>"/dev/tcp/127.0.0.1/$PORT" || { echo "NO_CONNECTION"; return; }
  printf 'POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' "$1" "$SECRET" "${#2}" "$2" >&3
  head -c 1500 <&3; echo
  exec 3<&-
}
# The key the plugin stamps with, if the gateway would hand it out (it must not).
KEY=$(post /stamp-key '' | tail -n 1 | tr -d '\r')
echo "KEY_CHARS=${#KEY}"
# Every native session id (`ses_` and 26 characters) in any file: the store, the runtime's own.
for s in $(grep -rhoa 'ses_[0-9A-Za-z]\{26\}' "$DATA" 2>/dev/null | sort -u); do
  echo "TRYING $s"
  for stamp in "$s" "$KEY:$s"; do
    post /mcp '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"knowledge_read","arguments":{"document_id":"2","__hearth_session":"'"$stamp"'"}}}'
  done
done
"#;

/// The scripted agent. Each of A's prompts names one attack; B's only asks.
fn script() -> Script {
    Script::custom(|r: &ObservedRequest| {
        if r.kind != RequestKind::Agent {
            return default_reply(r);
        }
        let prompt = r.last_user_text();
        let results = r.tool_results_after_last_user();
        let search = r.tool_names().into_iter().find(|t| t.ends_with("knowledge_search"));
        if let Some(done) = results.last() {
            return Reply::text(format!("RESULT {done}"));
        }
        if prompt.starts_with("ATTACK") {
            return Reply::tool_call("bash", json!({ "command": "bash attack.sh", "description": "Look around" }));
        }
        if let Some(victim) = prompt.strip_prefix("FORGE ") {
            let Some(tool) = search else { return Reply::text("NO_KNOWLEDGE_TOOL") };
            return Reply::tool_call(tool, json!({ "query": "zephyrine", SESSION_ARG: victim.trim() }));
        }
        if let Some(victim) = prompt.strip_prefix("SUBAGENT ") {
            return Reply::tool_call(
                "task",
                json!({ "description": "Look it up", "prompt": SUBAGENT_PROMPT, "subagent_type": "general", "task_id": victim.trim() }),
            );
        }
        if prompt.starts_with(SUBAGENT_PROMPT) {
            let Some(tool) = search else { return Reply::text(format!("NO_KNOWLEDGE_TOOL among {:?}", r.tool_names())) };
            return Reply::tool_call(tool, json!({ "query": "zephyrine" }));
        }
        default_reply(r)
    })
}

/// Everything of a message the user or the model could see, as one text.
fn visible(m: &Message) -> String {
    let tools: Vec<String> = m.tool_calls.iter().map(|t| format!("{} {} {:?} {:?}", t.tool, t.input, t.output, t.error)).collect();
    format!("{} {:?} {}", m.text, m.error, tools.join(" "))
}

fn tool_output<'a>(m: &'a Message, tool: &str) -> &'a str {
    let call = m.tool_calls.iter().find(|t| t.tool == tool || t.tool.ends_with(tool)).unwrap_or_else(|| panic!("no {tool} call in {m:#?}"));
    call.output.as_deref().or(call.error.as_deref()).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_conversation_cannot_reach_another_running_conversations_grant() {
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).with_test_writer().try_init();
    if support::require_runtime().await.is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let project_dir = tmp.path().join("project");
    std::fs::create_dir(&project_dir).unwrap();
    // The agent could have written this with its own tools; here it is simply there.
    std::fs::write(project_dir.join("attack.sh"), ATTACK_SCRIPT).unwrap();
    let events = Arc::new(Recorder::default());
    let locate = LocateInputs { anchors: vec![support::workspace_root()], ..Default::default() };
    let hearth: Arc<Hearth> = Hearth::open(app_options(&tmp.path().join("data"), locate), events.clone()).await.unwrap();

    let model = ScriptedModelServer::start(script()).unwrap();
    let store = hearth.store();
    let input = ProfileInput { name: "Injected agent".into(), protocol: ModelProtocol::OpenAiChatCompletions, base_url: model.base_url(), model: model.model_id().into(), image_input: false };
    let profile = store.add_profile(&input).unwrap();
    store.set_profile_api_key(&profile.id, Some(model.api_key())).unwrap();

    let fixtures = support::workspace_root().join("fixtures/knowledge");
    let ember = hearth.create_library("Ember".into()).await.unwrap();
    let tide = hearth.create_library("Tide".into()).await.unwrap();
    hearth.import_into_library(ember.id.0, fixtures.join("ember-protocol.md").display().to_string(), |_| {}).await.unwrap();
    hearth.import_into_library(tide.id.0, fixtures.join("tidewater-ledger.txt").display().to_string(), |_| {}).await.unwrap();
    let project = store.add_project(&project_dir).unwrap();
    let a = store.create_conversation(&project.id, "A").unwrap();
    let b = store.create_conversation(&project.id, "B").unwrap();
    for (conv, library) in [(&a, &ember), (&b, &tide)] {
        store.set_conversation_profile(&conv.id, Some(&profile.id)).unwrap();
        hearth.set_conversation_libraries(conv.id.clone(), vec![library.id.0.to_string()]).await.unwrap();
    }

    // B's turn runs (its prompt is at the model, held there), so its grant is live.
    let hold_b = model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(|r| r.last_user_text().contains("B-HOLD")));
    hearth.send_message(&b.id, B_PROMPT.into(), vec![]).await.unwrap();
    assert!(hold_b.wait_until_held(1, TURN_TIMEOUT).await, "B's turn reached the model");
    let b_session = store.get_conversation(&b.id).unwrap().native_session_id.expect("B's native session is stored");
    assert_eq!(hearth.live_grants(), 1, "B's grant is live while B runs");

    // 1. The shell reads the data folder and calls the gateway with the secret and every session.
    hearth.send_message(&a.id, "ATTACK".into(), vec![]).await.unwrap();
    let attack = events.finished(&a.id, 1).await;
    assert_eq!(attack.status, MessageStatus::Done, "{attack:#?}");
    let out = tool_output(&attack, "bash");
    let read: usize = out.split(READ_MARK).nth(1).and_then(|s| s.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(read > 10, "the script read Hearth's data folder: {out}");
    assert!(out.contains(&format!("TRYING {b_session}")), "the script found B's session id: {out}");
    assert!(out.contains("HTTP/1.1 403") && out.contains(FORBIDDEN_SENTENCE), "the gateway refused the shell: {out}");
    assert!(!out.contains("HTTP/1.1 200") && !out.contains("NO_CONNECTION"), "{out}");

    // 2. The model names B's session in the arguments itself: A's own grant answers.
    hearth.send_message(&a.id, format!("FORGE {b_session}"), vec![]).await.unwrap();
    let forged = events.finished(&a.id, 2).await;
    let out = tool_output(&forged, "knowledge_search");
    assert!(out.contains("ember-protocol"), "the call ran under A's grant (A's library answered): {out}");

    // 3. A subagent of A (told to continue B's session) searches knowledge: A's libraries answer.
    hearth.send_message(&a.id, format!("SUBAGENT {b_session}"), vec![]).await.unwrap();
    let sub = events.finished(&a.id, 3).await;
    assert_eq!(sub.status, MessageStatus::Done, "{sub:#?}");
    let out = tool_output(&sub, "task");
    assert!(out.contains("ember-protocol"), "the subagent ran under A's grant: {out}");
    assert!(!out.contains("no running request"), "{out}");
    let requests = model.requests();
    let child: Vec<&ObservedRequest> = requests.iter().filter(|r| r.last_user_text().starts_with(SUBAGENT_PROMPT)).collect();
    assert!(!child.is_empty(), "the subagent asked the model");
    assert!(child.iter().all(|r| r.session_id.as_deref() != Some(b_session.as_str())), "the subagent did not run in B's session");

    // Nothing of B's library anywhere A can see: its messages, its tool outputs, its model requests.
    let a_session = store.get_conversation(&a.id).unwrap().native_session_id.unwrap();
    let a_messages = store.list_messages(&a.id).unwrap();
    let a_requests: Vec<&ObservedRequest> = requests.iter().filter(|r| r.session_id.as_deref() != Some(b_session.as_str())).collect();
    assert!(a_requests.iter().any(|r| r.session_id.as_deref() == Some(a_session.as_str())));
    for text in B_TEXT {
        for m in &a_messages {
            assert!(!visible(m).to_lowercase().contains(text), "B's «{text}» reached A: {}", visible(m));
        }
        for r in &a_requests {
            assert!(!r.contains_text(text) && !r.contains_text(&text.to_uppercase()), "B's «{text}» reached A's model request {}", r.seq);
        }
    }
    // No stamp shows in what A's conversation stored (the gateway strips it before any tool).
    assert!(a_messages.iter().all(|m| !visible(m).contains(&format!(":{a_session}"))), "a stamp reached A's stored messages");

    // B's turn is intact and ends when stopped; every grant ends with its turn.
    hearth.cancel_turn(&b.id).unwrap();
    let b_reply = events.finished(&b.id, 1).await;
    assert_eq!(b_reply.status, MessageStatus::Cancelled);
    hold_b.release();
    assert_eq!(hearth.live_grants(), 0, "no grant outlives its turn");
    hearth.shutdown().await;
    model.shutdown().await;
}
