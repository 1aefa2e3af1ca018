//! End to end with the REAL runtime: one `opencode serve` for two projects, two conversations
//! each running at once, two waves. Each run loads the staged skill, then calls the fixture's
//! `create_game_blueprint` through the gateway with seed = its request id; every forwarded call
//! must run under the token granted for the very request that made it. A run whose grant does not
//! name the server is refused.

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use hearth_core::toolbox::gateway::*;
use hearth_core::opencode::OpenCodeRuntime;
use hearth_core::runtime::*;
use hearth_core::scripted_model::{default_reply, Reply, RequestKind, Script, ScriptedModelServer};
use hearth_core::toolbox::skills;
use hearth_core::space::{resolve_local, ExecutionSpace};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const FIXTURE: &str = env!("CARGO_BIN_EXE_hearth-mcp-fixture");
/// Bound on one run (first prompt in a new project takes 3–10 s here; more under load).
const RUN_TIMEOUT: Duration = Duration::from_secs(180);
const SKILL_MARKER: &str = "HEARTH_SKILL_WEB_3D_GAME";

/// The agent: load the skill, call the blueprint tool with seed = request id, answer with what
/// the tools returned.
fn script() -> Script {
    Script::custom(|r| {
        if r.kind != RequestKind::Agent {
            return default_reply(r);
        }
        let Some(tool) = r.tool_names().into_iter().find(|n| n.ends_with("_create_game_blueprint")) else {
            return Reply::text(format!("NO_BLUEPRINT_TOOL among {:?}", r.tool_names()));
        };
        let prompt = r.last_user_text();
        let request_id = prompt.split("REQUEST_").nth(1).and_then(|s| s.split_whitespace().next()).unwrap_or("").to_string();
        let results = r.tool_results_after_last_user();
        match results.len() {
            0 => Reply::tool_call("skill", json!({ "name": "web-3d-game" })),
            1 => Reply::tool_call(tool, json!({ "theme": "neon-ruins", "seed": request_id, "targetCount": 5 })),
            _ => Reply::text(format!("skill_loaded={} tool={}", results[0].contains(SKILL_MARKER), results[1])),
        }
    })
}

struct Outcome {
    request_id: String,
    session: String,
    text: String,
}

/// One run: grant, then the runtime binds the session through its hooks before the prompt is sent
/// and revokes the grant when the run ends.
async fn run(rt: &OpenCodeRuntime, hooks: &Arc<GatewayRunHooks>, space: &ExecutionSpace, conversation: &str, wave: usize, scope: GrantScope) -> (Outcome, String) {
    let request_id = uuid::Uuid::new_v4().to_string();
    let grant = hooks.grant(&request_id, scope).unwrap();
    let tag = grant.tag().to_string();
    let mut request = support::run_request(conversation, &format!("Build the game for wave {wave}. REQUEST_{request_id}"), space);
    request.request_id = request_id.clone();
    let mut stream = rt.run(request, CancellationToken::new());
    let (mut session, mut text) = (String::new(), None);
    let all = async {
        while let Some(ev) = stream.next().await {
            match ev {
                RuntimeEvent::Session { native_session_id, .. } => session = native_session_id,
                RuntimeEvent::Ended { end: TurnEnd::Done { text: t, .. } } => text = Some(t),
                RuntimeEvent::Ended { end } => panic!("{conversation} wave {wave}: {end:?}"),
                _ => {}
            }
        }
    };
    tokio::time::timeout(RUN_TIMEOUT, all).await.expect("run timed out");
    (Outcome { request_id, session, text: text.expect("no Done event") }, tag)
}

fn staged_skills(root: &Path) -> std::path::PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/skills");
    let stager = skills::SkillStager::new(fixtures, root.join("skills"));
    assert!(stager.refresh().unwrap().packages.iter().all(|s| s.package.is_ok()), "fixture skills are valid");
    stager.link().to_path_buf()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_tool_call_runs_under_the_grant_of_the_request_that_made_it() {
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).with_test_writer().try_init();
    let Some(support::FoundRuntime { binary, rg_dir }) = support::require_runtime().await else { return };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let spaces: Vec<ExecutionSpace> = (0..2)
        .map(|i| {
            let dir = root.join(format!("project-{i}"));
            std::fs::create_dir(&dir).unwrap();
            resolve_local(&dir).unwrap()
        })
        .collect();

    let (callers, runtime_slot) = support::runtime_callers();
    let gw = Arc::new(Gateway::start(GatewayOptions { callers, ..Default::default() }).await.unwrap());
    let hooks = GatewayRunHooks::new(gw.clone());
    gw.set_custom_servers(vec![CustomServerConfig {
        id: "fbf42200-4e60-48d0-b5f2-e816db38ac54".into(),
        name: "Fixture".into(),
        command: FIXTURE.into(),
        args: vec![],
        env: BTreeMap::new(),
        enabled: true,
        assigned_runtimes: vec!["opencode".into()],
        allow_dynamic_tools: false,
    }])
    .await;
    let statuses = gw.wait_until_settled(Duration::from_secs(20)).await;
    assert!(matches!(statuses[0].state, ServerState::Ready { .. }), "{statuses:?}");
    let server_id = statuses[0].id.clone();

    let model = ScriptedModelServer::start(script()).unwrap();
    let mut config = support::scripted_config(&support::FoundRuntime { binary, rg_dir }, &model, false);
    let private = root.join("gateway");
    config.mcp.insert(GATEWAY_MCP_NAME.into(), gw.mcp_entry_with_secret_file(&private).unwrap());
    config.plugins.push(gw.plugin(&private).unwrap());
    config.skills_paths.push(staged_skills(&root));
    assert!(!config.to_opencode_json(Path::new("/s")).to_string().contains(gw.authorization().trim_start_matches("Bearer ")), "the secret is referenced by file");
    let host = RuntimeHost { hooks: Some(hooks.clone() as Arc<dyn RunHooks>), ..Default::default() };
    let rt = OpenCodeRuntime::new(config, root.join("runtime"), host);
    runtime_slot.set(rt.clone()).ok().unwrap();

    let granted = GrantScope { libraries: vec![], custom_servers: vec![server_id.clone()], ttl: DEFAULT_GRANT_TTL };
    let mut outcomes = Vec::new();
    let mut tags: HashMap<String, String> = HashMap::new();
    for wave in 0..2 {
        let runs = spaces.iter().enumerate().flat_map(|(p, space)| {
            let (rt, hooks, granted) = (&rt, &hooks, granted.clone());
            (0..2).map(move |c| {
                let granted = granted.clone();
                async move { run(rt, hooks, space, &format!("project-{p}-{c}"), wave, granted).await }
            })
        });
        for (outcome, tag) in futures::future::join_all(runs).await {
            tags.insert(outcome.request_id.clone(), tag);
            outcomes.push(outcome);
        }
    }
    assert_eq!(outcomes.len(), 8);
    for o in &outcomes {
        assert!(o.text.contains("skill_loaded=true"), "{}: the staged skill reached the agent: {}", o.request_id, o.text);
        for needle in [o.request_id.as_str(), fixture::GAME_GLOBAL, fixture::RELAY_NAME] {
            assert!(o.text.contains(needle), "{}: «{needle}» missing from {}", o.request_id, o.text);
        }
    }
    let sessions: std::collections::HashSet<_> = outcomes.iter().map(|o| &o.session).collect();
    assert_eq!(sessions.len(), 4, "two waves continue four native sessions");

    let calls = gw.recorded_calls();
    assert_eq!(calls.len(), 8, "one forwarded call per request: {calls:#?}");
    for call in &calls {
        assert_eq!(call.server_id, server_id);
        assert_eq!(call.tool, "create_game_blueprint");
        assert_eq!(call.args["seed"], json!(call.request_id), "the call was authorized by the grant of the request that made it");
        assert_eq!(Some(&call.token_tag), tags.get(&call.request_id), "recorded under that request's own token");
        assert!(call.args.get(SESSION_ARG).is_none(), "the session tag is stripped before forwarding");
    }
    let distinct: std::collections::HashSet<_> = calls.iter().map(|c| &c.request_id).collect();
    assert_eq!(distinct.len(), 8);

    // A conversation of the same project whose grant does not name the server is refused.
    let no_server = GrantScope { libraries: vec![], custom_servers: vec![], ttl: DEFAULT_GRANT_TTL };
    let (refused, _) = run(&rt, &hooks, &spaces[0], "project-0-0", 2, no_server).await;
    assert!(refused.text.contains("no grant for the MCP server \"Fixture\""), "{}", refused.text);
    assert!(!refused.text.contains(fixture::RELAY_NAME));
    assert_eq!(gw.recorded_calls().len(), 8, "the refused call was not forwarded");

    let fixture_pid = gw.custom_server_pid(&server_id).await.unwrap();
    rt.dispose().await;
    gw.dispose().await;
    assert!(support::gone_within(fixture_pid, Duration::from_secs(5)).await, "the custom server outlived the gateway");
    model.shutdown().await;
}
