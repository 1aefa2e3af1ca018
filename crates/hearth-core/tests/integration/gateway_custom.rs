//! Custom stdio MCP servers behind the gateway, with the real fixture binary: proxied under a
//! prefix and only under a grant naming them; broken servers get a clear status; hung tools and
//! huge results are bounded; nothing outlives dispose.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hearth_core::toolbox::gateway::*;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

const FIXTURE: &str = env!("CARGO_BIN_EXE_hearth-mcp-fixture");
/// Bound on a server reaching Ready in these tests.
const SETTLE: Duration = Duration::from_secs(20);

fn server(id: &str, name: &str, command: &str, args: &[&str]) -> CustomServerConfig {
    CustomServerConfig {
        id: id.into(),
        name: name.into(),
        command: command.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: BTreeMap::from([("FIXTURE_TOKEN".to_string(), "not-for-the-ui".to_string())]),
        enabled: true,
        assigned_runtimes: vec!["opencode".into()],
        allow_dynamic_tools: false,
    }
}

async fn client(gw: &Gateway) -> RunningService<RoleClient, ()> {
    let secret = gw.authorization().strip_prefix("Bearer ").unwrap().to_string();
    let transport = StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(gw.url()).auth_header(secret));
    ().serve(transport).await.unwrap()
}

/// A call as the runtime makes it: `stamp` is what the plugin writes ([`Gateway::stamp`]).
async fn call(c: &RunningService<RoleClient, ()>, tool: &str, mut args: Value, stamp: &str) -> CallToolResult {
    args[SESSION_ARG] = json!(stamp);
    c.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().unwrap().clone())).await.unwrap()
}

fn text(r: &CallToolResult) -> String {
    r.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<Vec<_>>().join("\n")
}

fn grant_for(gw: &Gateway, request: &str, session: &str, servers: &[&str]) -> CapabilityToken {
    let t = gw.grant(request, GrantScope { libraries: vec![], custom_servers: servers.iter().map(|s| s.to_string()).collect(), ttl: DEFAULT_GRANT_TTL }).unwrap();
    gw.bind_session(session, request, &t).unwrap();
    t
}

use hearth_core::host::procinfo::is_running as alive;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_tools_are_proxied_only_under_a_grant_that_names_the_server() {
    let gw = Gateway::start(GatewayOptions::default()).await.unwrap();
    gw.set_custom_servers(vec![server("fx", "Fixture", FIXTURE, &[])]).await;
    let statuses = gw.wait_until_settled(SETTLE).await;
    let ServerState::Ready { tools, .. } = &statuses[0].state else { panic!("not ready: {statuses:?}") };
    assert!(tools.contains(&"create_game_blueprint".to_string()));
    assert!(!serde_json::to_string(&statuses).unwrap().contains("not-for-the-ui"));

    let c = client(&gw).await;
    let listed: Vec<String> = c.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
    assert!(listed.contains(&"fixture_create_game_blueprint".to_string()), "{listed:?}");
    assert!(listed.iter().all(|n| n.len() + "hearth_".len() <= 64));

    let a = grant_for(&gw, "req-a", "ses_a", &["fx"]);
    let _b = grant_for(&gw, "req-b", "ses_b", &[]);
    let r = call(&c, "fixture_create_game_blueprint", json!({"theme": "neon-ruins", "seed": "req-a", "targetCount": 5}), &gw.stamp("ses_a")).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    for needle in ["req-a", fixture::GAME_GLOBAL, fixture::RELAY_NAME] {
        assert!(text(&r).contains(needle), "{needle} in {}", text(&r));
    }
    // The session tag never reaches the server.
    let echoed = call(&c, "fixture_echo_args", json!({"x": 1}), &gw.stamp("ses_a")).await;
    assert_eq!(text(&echoed), r#"{"x":1}"#);
    // Another conversation of the same project, without that server in its grant: refused.
    let refused = call(&c, "fixture_create_game_blueprint", json!({"theme": "t", "seed": "req-b", "targetCount": 1}), &gw.stamp("ses_b")).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).contains("no grant for the MCP server \"Fixture\""), "{}", text(&refused));

    let calls = gw.recorded_calls();
    assert_eq!(calls.len(), 2, "only forwarded calls are recorded: {calls:?}");
    assert_eq!(calls[0].request_id, "req-a");
    assert_eq!(calls[0].token_tag, a.tag());
    assert_eq!((calls[0].server_id.as_str(), calls[0].tool.as_str()), ("fx", "create_game_blueprint"));
    assert_eq!(calls[0].args["seed"], "req-a");
    assert!(calls.iter().all(|c| c.args.get(SESSION_ARG).is_none()), "recorded after stripping");

    // Frozen list: the server adds a tool, but it is not dynamic, so the gateway does not offer it.
    let _ = call(&c, "fixture_unlock_bonus", json!({}), &gw.stamp("ses_a")).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gw.custom_server_announced_tool_change("fx") {
        assert!(Instant::now() < deadline, "the server never announced its new tool");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let listed: Vec<String> = c.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
    assert!(!listed.contains(&"fixture_bonus".to_string()), "{listed:?}");

    let pid = gw.custom_server_pid("fx").await.expect("running");
    c.cancel().await.unwrap();
    gw.dispose().await;
    assert!(!alive(pid), "the fixture process {pid} outlived dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_server_may_add_tools_later() {
    let gw = Gateway::start(GatewayOptions::default()).await.unwrap();
    gw.set_custom_servers(vec![CustomServerConfig { allow_dynamic_tools: true, ..server("dyn", "Dyn", FIXTURE, &[]) }]).await;
    gw.wait_until_settled(SETTLE).await;
    let c = client(&gw).await;
    grant_for(&gw, "req", "ses", &["dyn"]);
    assert!(text(&call(&c, "dyn_unlock_bonus", json!({}), &gw.stamp("ses")).await).contains("unlocked"));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let listed: Vec<String> = c.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
        if listed.contains(&"dyn_bonus".to_string()) {
            break;
        }
        assert!(Instant::now() < deadline, "the new tool never appeared: {listed:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(text(&call(&c, "dyn_bonus", json!({}), &gw.stamp("ses")).await), "BONUS_OK");
    gw.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_servers_get_a_clear_status_and_the_gateway_keeps_serving() {
    let limits = GatewayLimits { start_timeout: Duration::from_secs(5), ..Default::default() };
    let gw = Gateway::start(GatewayOptions { limits, ..Default::default() }).await.unwrap();
    gw.set_custom_servers(vec![
        server("missing", "Missing", "/nonexistent/hearth-no-such-server", &[]),
        server("quits", "Quits", FIXTURE, &["--exit-at-once"]),
        server("garbage", "Garbage", FIXTURE, &["--garbage"]),
        CustomServerConfig { enabled: false, ..server("off", "Off", FIXTURE, &[]) },
        server("good", "Good", FIXTURE, &[]),
    ])
    .await;
    let statuses = gw.wait_until_settled(SETTLE).await;
    let state = |id: &str| statuses.iter().find(|s| s.id == id).unwrap().state.clone();
    let failed = |id: &str| match state(id) {
        ServerState::Failed { message } => message,
        other => panic!("{id}: expected failure, got {other:?}"),
    };
    assert!(failed("missing").contains("`/nonexistent/hearth-no-such-server` was not found"), "{}", failed("missing"));
    let quits = failed("quits");
    assert!(quits.contains("exited at once") && quits.contains("exiting at once, as asked"), "{quits}");
    assert!(failed("garbage").contains("does not speak MCP on its standard output: it wrote «this is not JSON-RPC, sorry»"), "{}", failed("garbage"));
    assert_eq!(state("off"), ServerState::Disabled);
    assert!(matches!(state("good"), ServerState::Ready { .. }));

    let c = client(&gw).await;
    grant_for(&gw, "req", "ses", &["good", "missing"]);
    let r = call(&c, "good_create_game_blueprint", json!({"theme": "t", "seed": "s-1", "targetCount": 2}), &gw.stamp("ses")).await;
    assert!(text(&r).contains("s-1"), "{}", text(&r));
    gw.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_tool_errors_within_the_bound_and_huge_results_are_cut() {
    let limits = GatewayLimits { call_timeout: Duration::from_secs(1), max_result_bytes: 10_000, ..Default::default() };
    let gw = Gateway::start(GatewayOptions { limits, ..Default::default() }).await.unwrap();
    gw.set_custom_servers(vec![server("fx", "Fixture", FIXTURE, &[])]).await;
    gw.wait_until_settled(SETTLE).await;
    let c = client(&gw).await;
    grant_for(&gw, "req", "ses", &["fx"]);

    let started = Instant::now();
    let hung = call(&c, "fixture_hang", json!({}), &gw.stamp("ses")).await;
    let took = started.elapsed();
    assert_eq!(hung.is_error, Some(true));
    assert!(text(&hung).contains("did not answer within 1 s"), "{}", text(&hung));
    assert!(took < Duration::from_secs(3), "the hung call took {took:?}");

    let huge = call(&c, "fixture_huge", json!({"bytes": 1_000_000}), &gw.stamp("ses")).await;
    let t = text(&huge);
    assert!(t.len() < 10_300, "{} bytes reached the client", t.len());
    assert!(t.contains("[Hearth truncated this result: 10000 of 1000000 bytes shown"), "{}", &t[t.len().saturating_sub(200)..]);

    // The server still serves after both.
    let ok = call(&c, "fixture_create_game_blueprint", json!({"theme": "t", "seed": "after", "targetCount": 1}), &gw.stamp("ses")).await;
    assert!(text(&ok).contains("after"));
    gw.dispose().await;
}
