//! A model profile that speaks Anthropic Messages, as the user adds it in the Models view (here the
//! scripted model's Anthropic endpoint stands in for Anthropic's API): the Test button speaks
//! Messages to it; `opencode acp` takes it as one conversation's model while the default stays
//! the built-in one; OpenCode's server runs its turns over Messages; and Claude Code, when the
//! profile is the default, is pointed at it instead of a Claude account.

use crate::support;

use std::sync::Arc;

use hearth_core::app::*;
use hearth_core::runtime::RuntimeChoice;
use hearth_core::scripted_model::{Api, RequestKind, Script, ScriptedModelServer};
use hearth_core::store::{MessageStatus, ModelProtocol, ProfileInput};

use support::Recorder;

const MODEL: &str = "scripted-anthropic";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_anthropic_profile_runs_opencode_and_claude_code() {
    if support::require_runtime().await.is_none() {
        return;
    }
    let claude = support::require_claude_agent().is_some();
    let endpoint = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let events = Arc::new(Recorder::default());
    let choices = [RuntimeChoice::OpenCode, RuntimeChoice::Acp { agent: "claude-code".into() }];
    let (hearth, _, projects) =
        support::hearth_with_projects(tmp.path(), events.clone(), &choices[0], &[("server", "PROJECT_31"), ("claude", "PROJECT_32"), ("acp", "PROJECT_33")]).await;
    hearth.set_project_runtime(projects[1].id.clone(), choices[1].clone()).await.unwrap();
    hearth.set_project_runtime(projects[2].id.clone(), RuntimeChoice::Acp { agent: "opencode".into() }).await.unwrap();

    let input = ProfileInput { name: "Anthropic".into(), protocol: ModelProtocol::AnthropicMessages, base_url: format!("{}/v1", endpoint.anthropic_base_url()), model: MODEL.into(), image_input: true };
    let profile = hearth.save_profile(None, ProfileSave { profile: input, api_key: Some(endpoint.api_key().into()) }).await.unwrap();
    assert_eq!(profile.protocol, ModelProtocol::AnthropicMessages);
    let tested = hearth.test_profile(&profile.id).await.unwrap();
    assert!(tested.ok, "{tested:?}");

    // opencode acp: this conversation's own profile, while the default is still the built-in one.
    let conv = hearth.store().create_conversation(&projects[2].id, "own profile").unwrap();
    hearth.set_conversation_profile(conv.id.clone(), Some(profile.id.clone())).await.unwrap();
    hearth.send_message(&conv.id, "read marker.txt".into(), vec![]).await.unwrap();
    let reply = events.finished(&conv.id, 1).await;
    assert!(reply.text.contains("PROJECT_33"), "{reply:?}");
    let agent_calls: Vec<_> = endpoint.requests().into_iter().filter(|r| r.kind == RequestKind::Agent).collect();
    assert!(!agent_calls.is_empty() && agent_calls.iter().all(|r| r.api == Api::AnthropicMessages && r.model.as_deref() == Some(MODEL)), "opencode acp used the conversation's profile");
    let builtin_calls = |m: &ScriptedModelServer| m.requests().into_iter().filter(|r| r.kind == RequestKind::Agent).count();
    let builtin_before = hearth.builtin_model().map(|m| builtin_calls(&m)).unwrap_or(0);

    // OpenCode's server and Claude Code with the profile as the default.
    hearth.set_default_profile(Some(profile.id.clone())).await.unwrap();

    let runs = if claude { 2 } else { 1 };
    for (project, marker) in projects.iter().zip(["PROJECT_31", "PROJECT_32"]).take(runs) {
        let before = endpoint.requests().len();
        let conv = hearth.store().create_conversation(&project.id, "c").unwrap();
        hearth.send_message(&conv.id, "read marker.txt".into(), vec![]).await.unwrap();
        let reply = events.finished(&conv.id, 1).await;
        assert_eq!(reply.status, MessageStatus::Done, "{reply:?}");
        assert!(reply.text.contains(marker), "{reply:?}");
        let agent_calls: Vec<_> = endpoint.requests().into_iter().skip(before).filter(|r| r.kind == RequestKind::Agent).collect();
        assert!(!agent_calls.is_empty(), "{marker}: the profile's endpoint answered the turn");
        assert!(agent_calls.iter().all(|r| r.api == Api::AnthropicMessages && r.model.as_deref() == Some(MODEL)), "{marker}: Messages requests for the profile's model");
    }
    assert_eq!(hearth.builtin_model().map(|m| builtin_calls(&m)).unwrap_or(0), builtin_before, "the built-in model answered none of these turns");
    if !claude {
        eprintln!("NOT RUN on Claude Code ({}=1)", support::SKIP_AGENT_TESTS_ENV);
    }
    hearth.shutdown().await;
    endpoint.shutdown().await;
}
