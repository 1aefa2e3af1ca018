//! A tool call through the gateway (MCP over loopback HTTP → gateway → fixture over stdio) against
//! the same call straight to the stdio fixture. Prints p50/p90 and the p50 ratio (goal ≤ 1.2), and
//! what the caller check costs a new connection (its socket's holder looked up in /proc). rmcp's
//! HTTP client here opens a connection per call, so each gateway call above pays that check; the
//! runtime keeps one connection to the gateway, and pays it once.
//! Run: `cargo bench -p hearth-core --bench gateway`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use hearth_core::toolbox::gateway::*;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

const FIXTURE: &str = env!("CARGO_BIN_EXE_hearth-mcp-fixture");
/// Calls before measuring (connections, caches, allocator warm).
const WARMUP_CALLS: usize = 50;
/// Measured calls per path.
const MEASURED_CALLS: usize = 500;
/// The goal for gateway p50 / direct p50.
const GOAL_RATIO: f64 = 1.2;
/// Caller checks measured (each reads the socket tables and the allowed process's descriptors).
const CALLER_CHECKS: usize = 300;

fn params(seed: &str, session: Option<&str>) -> CallToolRequestParams {
    let mut args = json!({ "theme": "neon-ruins", "seed": seed, "targetCount": 5 });
    if let Some(s) = session {
        args[SESSION_ARG] = json!(s);
    }
    CallToolRequestParams::new("create_game_blueprint").with_arguments(args.as_object().unwrap().clone())
}

async fn measure(client: &RunningService<RoleClient, ()>, name: &str, session: Option<&str>) -> Vec<Duration> {
    let mut p = params("bench", session);
    p.name = name.to_string().into();
    let mut times = Vec::with_capacity(MEASURED_CALLS);
    for i in 0..WARMUP_CALLS + MEASURED_CALLS {
        let started = Instant::now();
        let r = client.call_tool(p.clone()).await.expect("call");
        let took = started.elapsed();
        assert_eq!(r.is_error, Some(false), "{r:?}");
        if i >= WARMUP_CALLS {
            times.push(took);
        }
    }
    times.sort();
    times
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        // Straight to the fixture over stdio.
        let mut child = tokio::process::Command::new(FIXTURE).stdin(Stdio::piped()).stdout(Stdio::piped()).kill_on_drop(true).spawn().unwrap();
        let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let direct = ().serve((stdout, stdin)).await.unwrap();

        // Through the gateway.
        let gw = Gateway::start(GatewayOptions::default()).await.unwrap();
        gw.set_custom_servers(vec![CustomServerConfig {
            id: "fx".into(),
            name: "Fixture".into(),
            command: FIXTURE.into(),
            args: vec![],
            env: Default::default(),
            enabled: true,
            assigned_runtimes: vec!["opencode".into()],
            allow_dynamic_tools: false,
        }])
        .await;
        gw.wait_until_settled(Duration::from_secs(20)).await;
        let token = gw.grant("bench", GrantScope { libraries: vec![], custom_servers: vec!["fx".into()], ttl: DEFAULT_GRANT_TTL }).unwrap();
        gw.bind_session("ses_bench", "bench", &token).unwrap();
        // What the runtime's plugin writes into each call.
        let stamp = gw.stamp("ses_bench");
        let secret = gw.authorization().trim_start_matches("Bearer ").to_string();
        let via = ().serve(StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(gw.url()).auth_header(secret))).await.unwrap();

        // Interleave the two paths so machine noise hits both alike.
        let mut d_all = Vec::new();
        let mut g_all = Vec::new();
        for _ in 0..2 {
            d_all.extend(measure(&direct, "create_game_blueprint", None).await);
            g_all.extend(measure(&via, "fixture_create_game_blueprint", Some(&stamp)).await);
        }
        d_all.sort();
        g_all.sort();
        let (d50, g50) = (pct(&d_all, 0.5), pct(&g_all, 0.5));
        let ratio = g50.as_secs_f64() / d50.as_secs_f64();
        println!("gateway bench: {} calls per path", d_all.len());
        println!("  direct stdio   p50 {:>8.1} µs   p90 {:>8.1} µs", d50.as_secs_f64() * 1e6, pct(&d_all, 0.9).as_secs_f64() * 1e6);
        println!("  via gateway    p50 {:>8.1} µs   p90 {:>8.1} µs", g50.as_secs_f64() * 1e6, pct(&g_all, 0.9).as_secs_f64() * 1e6);
        println!("  added by gateway p50 {:.1} µs", (g50.as_secs_f64() - d50.as_secs_f64()) * 1e6);
        println!("  p50 ratio {ratio:.2} (goal ≤ {GOAL_RATIO}) {}", if ratio <= GOAL_RATIO { "MET" } else { "NOT MET" });
        via.cancel().await.ok();
        direct.cancel().await.ok();
        gw.dispose().await;
    });
    caller_check();
}

/// The check a new connection to the gateway pays once: this process allowed, a loopback
/// connection of its own identified.
fn caller_check() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = listener.local_addr().unwrap();
    let _client = std::net::TcpStream::connect(server).unwrap();
    let (_accepted, peer) = listener.accept().unwrap();
    let callers = AllowedCallers::this_process();
    let fds = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0);
    let mut times: Vec<Duration> = (0..CALLER_CHECKS)
        .map(|_| {
            let started = Instant::now();
            let found = callers.identify(peer, server).unwrap();
            assert!(matches!(found, hearth_core::host::peer::Peer::Allowed { .. }), "{found:?}");
            started.elapsed()
        })
        .collect();
    times.sort();
    let sockets = std::fs::read_to_string("/proc/net/tcp").map(|t| t.lines().count().saturating_sub(1)).unwrap_or(0);
    println!(
        "  caller check per new connection: p50 {:.1} µs, p90 {:.1} µs ({sockets} TCP sockets on the host, {fds} descriptors in the allowed process)",
        pct(&times, 0.5).as_secs_f64() * 1e6,
        pct(&times, 0.9).as_secs_f64() * 1e6
    );
}
