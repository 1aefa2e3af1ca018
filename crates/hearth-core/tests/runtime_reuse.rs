//! goodbuddy's runtime-reuse test, ported: one real `opencode serve` across 2 and 10 projects, 2
//! conversations each, 2 concurrent waves — tools, continuation, per-request images, compaction;
//! for 2 projects also the skill and the user's MCP server through the gateway, each call under the
//! grant of the request that made it.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use hearth_core::toolbox::gateway::*;
use hearth_core::opencode::runtime::{OpenCodeRuntime, RuntimeOptions, SharedOpenCode};
use hearth_core::toolbox::skills;
use hearth_core::runtime::*;
use hearth_core::scripted_model::{default_reply, find_marker, Reply, RequestKind, Script, ScriptedModelServer};
use hearth_core::space::resolve_local;
use tokio_util::sync::CancellationToken;

/// Bound on one run (first prompt in a new project takes 3–10 s here; more under load).
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

async fn reuse(project_count: usize) {
    let Some((binary, rg_dir)) = support::require_runtime().await else { return };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let mut spaces = Vec::new();
    for i in 0..project_count {
        let dir = root.join(format!("project-{i}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("marker.txt"), format!("PROJECT_{i}")).unwrap();
        spaces.push(resolve_local(&dir).unwrap());
    }
    let with_images = project_count == 2;
    let images: Vec<Vec<u8>> = (0..2).map(|i| support::png(i + 1)).collect();
    let images_b64: Vec<String> = images.iter().map(|b| base64::engine::general_purpose::STANDARD.encode(b)).collect();

    // The 2-project case is goodbuddy's full seed: read the marker, load the skill, call the
    // user's MCP server through the gateway with seed = the request id, then answer the marker.
    let capability_results: Arc<Mutex<Vec<String>>> = Arc::default();
    let script = if with_images {
        let capability_results = capability_results.clone();
        Script::custom(move |r| {
            if r.kind != RequestKind::Agent || !r.has_tool("read") {
                return default_reply(r);
            }
            let results = r.tool_results_after_last_user();
            let request_id = r.last_user_text().split("REQUEST_").nth(1).and_then(|s| s.split_whitespace().next()).unwrap_or("").to_string();
            match results.len() {
                0 => Reply::tool_call("read", serde_json::json!({ "filePath": "marker.txt" })),
                1 => Reply::tool_call("skill", serde_json::json!({ "name": "web-3d-game" })),
                2 => match r.tool_names().into_iter().find(|n| n.ends_with("_create_game_blueprint")) {
                    Some(tool) => Reply::tool_call(tool, serde_json::json!({ "theme": "neon-ruins", "seed": request_id, "targetCount": 5 })),
                    None => Reply::text("the shared MCP fixture is not exposed"),
                },
                _ => {
                    capability_results.lock().unwrap().push(results.join("\n"));
                    Reply::text(find_marker(&results[0]).unwrap_or("NO_MARKER").to_string())
                }
            }
        })
    } else {
        Script::default_agent()
    };
    let model = ScriptedModelServer::start(script).unwrap();
    let mut config = support::config_for(binary, rg_dir, &model, with_images);
    let mut options = RuntimeOptions::default();
    let mut gateway = None;
    let created: Arc<Mutex<Vec<Arc<OpenCodeRuntime>>>> = Arc::default();
    if with_images {
        // The gateway serves the runtime's process only.
        let runtimes = created.clone();
        let callers = AllowedCallers::pids(move || runtimes.lock().unwrap().iter().filter_map(|rt| SharedOpenCode(rt.clone()).status().pid).collect());
        let gw = Arc::new(Gateway::start(GatewayOptions { callers, ..Default::default() }).await.unwrap());
        gw.set_custom_servers(vec![CustomServerConfig {
            id: "fbf42200-4e60-48d0-b5f2-e816db38ac54".into(),
            name: "Shared blueprint".into(),
            command: env!("CARGO_BIN_EXE_hearth-mcp-fixture").into(),
            args: vec![],
            env: Default::default(),
            enabled: true,
            assigned_runtimes: vec![OPENCODE_FAMILY.into()],
            allow_dynamic_tools: false,
        }])
        .await;
        let statuses = gw.wait_until_settled(Duration::from_secs(30)).await;
        assert!(matches!(statuses[0].state, ServerState::Ready { .. }), "{statuses:?}");
        let private = root.join("gateway");
        config.mcp.insert(GATEWAY_MCP_NAME.into(), gw.mcp_entry_with_secret_file(&private).unwrap());
        config.plugins.push(plugin_url(&gw.write_plugin(&private).unwrap()));
        let skills_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/skills");
        let packages: Vec<_> = skills::scan(&skills_dir).into_iter().collect::<Result<_, _>>().unwrap();
        config.skills_paths.push(skills::stage(&packages, &root.join("skills")).unwrap());
        let hooks = GatewayRunHooks::new(gw);
        options.hooks = Some(hooks.clone() as Arc<dyn RunHooks>);
        gateway = Some(hooks);
    }
    let grant_tags: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let key = config.key();
    let registry = Arc::new(LocalRuntimeRegistry::new());
    let manager = {
        let (registry, created, config, rt_root, options) = (registry.clone(), created.clone(), config.clone(), root.join("runtime"), options.clone());
        let release_registry = registry.clone();
        SelectedRuntimeManager::new(
            1,
            move |selection: RuntimeSelection, space| {
                let (registry, created, config, rt_root, options) = (registry.clone(), created.clone(), config.clone(), rt_root.clone(), options.clone());
                async move {
                    registry
                        .acquire(OPENCODE_FAMILY, selection.key, space, move || {
                            let rt = OpenCodeRuntime::with_options(config, rt_root, options);
                            created.lock().unwrap().push(rt.clone());
                            Ok(Arc::new(SharedOpenCode(rt)) as Arc<dyn ProcessRuntime>)
                        })
                        .await
                }
            },
            move |id: String| {
                let registry = release_registry.clone();
                async move { registry.release_conversation(&id).await }
            },
        )
    };
    let selection = RuntimeSelection { provider: "opencode".into(), key };
    let mut facades = Vec::new();
    for space in &spaces {
        facades.push(manager.get_runtime(&selection, space).await.unwrap());
    }

    let mut native_sessions: HashMap<String, String> = HashMap::new(); // conversation → session
    let mut wave0_requests: Vec<(String, usize)> = Vec::new(); // request id → project
    for wave in 0..2 {
        let runs = facades.iter().enumerate().flat_map(|(p, facade)| {
            let (images, gateway, grant_tags) = (&images, &gateway, &grant_tags);
            (0..2).map(move |c| {
                let facade = facade.clone();
                let request_id = uuid::Uuid::new_v4().to_string();
                let grant = gateway.as_ref().map(|hooks| {
                    let scope = GrantScope { libraries: vec![], custom_servers: vec!["fbf42200-4e60-48d0-b5f2-e816db38ac54".into()], ttl: DEFAULT_GRANT_TTL };
                    let grant = hooks.grant(&request_id, scope).unwrap();
                    grant_tags.lock().unwrap().insert(request_id.clone(), grant.tag().to_string());
                    grant
                });
                let conversation_id = format!("project-{p}-{c}");
                let request = RunRequest {
                    request_id: request_id.clone(),
                    conversation_id: conversation_id.clone(),
                    prompt: format!("Read marker.txt for wave {wave}. REQUEST_{request_id}"),
                    work_mode: WorkMode::Execute,
                    images: if with_images && wave == 0 {
                        vec![ImageInput { name: format!("project-{p}.png"), media_type: "image/png".into(), bytes: Arc::new(images[p].clone()) }]
                    } else {
                        vec![]
                    },
                    profile_id: None,
                    space: facade.space().clone(),
                };
                async move {
                    let _grant = grant;
                    let mut stream = facade.run(request, CancellationToken::new());
                    let (mut text, mut done, mut tools) = (String::new(), None, Vec::new());
                    let all = async {
                        while let Some(ev) = stream.next().await {
                            match ev {
                                RuntimeEvent::TextDelta { text: t } => text.push_str(&t),
                                RuntimeEvent::ToolFinished { tool, output, .. } => tools.push((tool, output)),
                                RuntimeEvent::Done { native_session_id, text: final_text } => done = Some((native_session_id, final_text)),
                                RuntimeEvent::Error { message } => panic!("{conversation_id} wave {wave}: {message}"),
                                _ => {}
                            }
                        }
                    };
                    tokio::time::timeout(RUN_TIMEOUT, all).await.expect("run timed out");
                    (p, conversation_id, request_id, text, done.expect("no Done event"), tools)
                }
            })
        });
        for (p, conversation, request_id, text, (session, final_text), tools) in futures::future::join_all(runs).await {
            assert_eq!(text, format!("PROJECT_{p}"), "{conversation} wave {wave}: streamed text");
            assert_eq!(final_text, text);
            assert!(tools.iter().any(|(t, out)| t == "read" && out.contains(&format!("PROJECT_{p}"))), "{conversation}: the runtime's read tool read the marker: {tools:?}");
            if with_images {
                assert!(tools.iter().any(|(t, out)| t == "skill" && out.contains("HEARTH_SKILL_WEB_3D_GAME")), "{conversation}: the skill loaded: {tools:?}");
            }
            if wave == 0 {
                native_sessions.insert(conversation, session);
                wave0_requests.push((request_id, p));
            } else {
                assert_eq!(native_sessions[&conversation], session, "{conversation}: wave 2 continues the same native session");
            }
        }
    }

    let distinct: HashSet<_> = native_sessions.values().collect();
    assert_eq!(distinct.len(), 2 * project_count, "distinct native sessions");
    let requests = model.requests();
    for session in native_sessions.values() {
        let agent: Vec<_> = requests.iter().filter(|r| r.session_id.as_deref() == Some(session) && r.kind == RequestKind::Agent).collect();
        assert!(
            agent.iter().any(|r| r.last_user_text().contains("for wave 1") && r.contains_text("for wave 0")),
            "session {session}: the model saw the earlier turn when continuing"
        );
    }
    if with_images {
        for (request_id, p) in &wave0_requests {
            let seen: Vec<_> = requests.iter().filter(|r| r.last_user_text().contains(request_id.as_str())).collect();
            assert!(!seen.is_empty());
            for r in seen {
                assert!(r.contains_text(&images_b64[*p]), "request {request_id}: its own image reached the model");
                assert!(!r.contains_text(&images_b64[1 - p]), "request {request_id}: another project's image leaked");
            }
        }
    }

    if let Some(hooks) = &gateway {
        let results = capability_results.lock().unwrap().clone();
        assert_eq!(results.len(), 8, "every run reached the capability step");
        for r in &results {
            assert!(r.contains(fixture::GAME_GLOBAL) && r.contains(fixture::RELAY_NAME), "capability result: {r}");
        }
        let calls = hooks.gateway().recorded_calls();
        assert_eq!(calls.len(), 8, "8 MCP calls through the gateway: {calls:#?}");
        let tags = grant_tags.lock().unwrap().clone();
        for call in &calls {
            assert_eq!(call.args["seed"], serde_json::json!(call.request_id), "authorized by the grant of the request that made it");
            assert_eq!(Some(&call.token_tag), tags.get(&call.request_id), "under that request's own token");
        }
        assert_eq!(calls.iter().map(|c| &c.request_id).collect::<HashSet<_>>().len(), 8);
    }

    for (i, facade) in facades.iter().enumerate() {
        let outcome = facade
            .compact_conversation(
                CompactRequest { request_id: uuid::Uuid::new_v4().to_string(), conversation_id: format!("project-{i}-0"), profile_id: None, space: facade.space().clone() },
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert!(outcome.compacted, "project {i}: compacted");
        assert_eq!(outcome.native_session_id, native_sessions[&format!("project-{i}-0")]);
    }
    assert!(model.requests().iter().any(|r| r.kind == RequestKind::Compaction));

    for facade in &facades {
        assert!(facade.test_connection().await.unwrap().healthy);
    }
    // Idle instances beyond the warm bound were disposed inside the runtime.
    let status = SharedOpenCode(created.lock().unwrap()[0].clone()).status();
    assert!(
        status.open_instances.len() <= RegistryConfig::default().max_warm_instances,
        "open instances {:?}",
        status.open_instances
    );
    let owners: HashSet<_> = facades.iter().map(|f| f.owner_id()).collect();
    assert_eq!(owners.len(), 1, "one process-owning runtime behind every facade");
    assert_eq!(created.lock().unwrap().len(), 1, "one runtime created");
    let runtime = created.lock().unwrap()[0].clone();
    assert_eq!(runtime.launches(), 1, "exactly one runtime launch");
    for (i, space) in spaces.iter().enumerate() {
        assert_eq!(std::fs::read_to_string(space.root.join("marker.txt")).unwrap(), format!("PROJECT_{i}"));
    }
    manager.release_conversation("project-0-0").await.unwrap();
    assert_eq!(runtime.native_session("project-0-0"), None);

    let pid = SharedOpenCode(runtime.clone()).status().pid.expect("running runtime has a pid");
    manager.dispose().await;
    registry.dispose().await;
    assert!(support::gone_within(pid, 10).await, "runtime process {pid} left behind after dispose");
    if let Some(hooks) = gateway {
        hooks.gateway().dispose().await;
    }
    model.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reuse_across_2_projects() {
    reuse(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reuse_across_10_projects() {
    reuse(10).await;
}
