//! What the agent's tools can reach of the runtime itself, against the real runtime and a scripted
//! model. The agent is not trusted and its shell runs as the user:
//! - its shell looks for the runtime's HTTP password everywhere it can (its own environment, the
//!   environment blocks and command lines of its ancestors, every file of the runtime's private
//!   root), and none of what it finds opens the runtime's API;
//! - a project's own configuration and code stay out of the runtime (a `.opencode/plugin/*.js`, a
//!   plugin and instructions named by its `opencode.json`), while Hearth's own plugins still load
//!   and the project's `AGENTS.md` still reaches the model.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use hearth_core::opencode::launch::{CONFIG_ENV, PASSWORD_ENV, USERNAME, USERNAME_ENV};
use hearth_core::opencode::config::PluginSource;
use hearth_core::opencode::OpenCodeRuntime;
use hearth_core::runtime::*;
use hearth_core::scripted_model::{default_reply, Reply, Script, ScriptedModelServer};
use hearth_core::space::resolve_local;
use serde_json::json;
use support::{kit::Finished, run_request as request, TURN_TIMEOUT};
use tokio_util::sync::CancellationToken;

/// The prompt that makes the scripted agent run [`PROBE_SCRIPT`].
const PROBE_PROMPT: &str = "PROBE the runtime";
/// Folder (in the project) the probe writes what it found into.
const FOUND_DIR: &str = "found";
/// Most tokens taken from the runtime's files (the password is 64 hex digits; so is much else).
const MAX_FILE_TOKENS: usize = 5000;

/// The agent's shell script: everything it can find, written to files the test then tries.
const PROBE_SCRIPT: &str = r#"OUT="$PWD/found"; mkdir -p "$OUT"
env > "$OUT/env.txt"
# Every ancestor (the runtime among them): its environment block and command line.
: > "$OUT/ancestors.txt"; : > "$OUT/ancestor-environ.txt"
pid=$$
while [ "$pid" -gt 1 ]; do
  tr '\0' ' ' < /proc/$pid/cmdline >> "$OUT/ancestors.txt"; echo >> "$OUT/ancestors.txt"
  tr '\0' '\n' < /proc/$pid/environ >> "$OUT/ancestor-environ.txt" 2>/dev/null
  pid=$(awk '/^PPid:/ {print $2}' /proc/$pid/status)
done
# Every long token in every file of the runtime's private root (its HOME's parent).
ROOT=$(cd "$HOME/.." && pwd)
grep -rhoaE '[A-Za-z0-9_+/=-]{24,}' "$ROOT" 2>/dev/null | sort -u | head -n MAX_TOKENS > "$OUT/root-tokens.txt"
echo "ENV=$(wc -l < "$OUT/env.txt") ANCESTORS=$(wc -l < "$OUT/ancestors.txt") ENVIRON=$(wc -l < "$OUT/ancestor-environ.txt") TOKENS=$(wc -l < "$OUT/root-tokens.txt") ROOT=$ROOT"
"#;

fn probe_script() -> String {
    PROBE_SCRIPT.replace("MAX_TOKENS", &MAX_FILE_TOKENS.to_string())
}

fn agent() -> Script {
    Script::custom(|r| {
        if r.last_user_text().starts_with(PROBE_PROMPT) && r.tool_results_after_last_user().is_empty() {
            return Reply::tool_call("bash", json!({ "command": "bash probe.sh", "description": "Look around" }));
        }
        default_reply(r)
    })
}

async fn collect(rt: &OpenCodeRuntime, req: RunRequest) -> Finished {
    support::run_to_end(rt, req, CancellationToken::new(), TURN_TIMEOUT).await.expect("the run ended")
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).lines().map(str::to_owned).collect()
}

/// Values of `NAME=value` lines, and the lines themselves.
fn candidates_of_env(lines: &[String]) -> Vec<String> {
    lines.iter().flat_map(|l| [l.clone(), l.split_once('=').map_or(String::new(), |(_, v)| v.to_owned())]).collect()
}

/// The HTTP status the runtime answers `GET /session` with, as `opencode:<password>` (or anonymously).
async fn status_with(http: &reqwest::Client, base: &str, password: Option<&str>) -> u16 {
    let mut rb = http.get(format!("{base}/session"));
    if let Some(p) = password {
        rb = rb.basic_auth(USERNAME, Some(p));
    }
    rb.send().await.expect("the runtime answers").status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_the_agents_shell_finds_opens_the_runtimes_api() {
    let Some(found) = support::require_runtime().await else { return };
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().canonicalize().unwrap().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("probe.sh"), probe_script()).unwrap();
    let space = resolve_local(&project).unwrap();
    let model = ScriptedModelServer::start(agent()).unwrap();
    let rt = OpenCodeRuntime::new(support::scripted_config(&found, &model, false), tmp.path().join("rt"), RuntimeHost::default());

    let turn = collect(&rt, request("probe", PROBE_PROMPT, &space)).await;
    assert!(matches!(turn.end, TurnEnd::Done { .. }), "a normal turn still works: {:?}", turn.end);
    let (_, output, error) = turn.tools().into_iter().find(|(tool, ..)| tool == "bash").expect("the shell ran");
    assert!(error.is_none() && output.contains("ROOT="), "{output} {error:?}");

    let dir = project.join(FOUND_DIR);
    let env = lines(&dir.join("env.txt"));
    let environ = lines(&dir.join("ancestor-environ.txt"));
    assert!(env.iter().any(|l| l.starts_with("PATH=")) && env.iter().any(|l| l.starts_with("HOME=")), "the shell keeps an ordinary environment: {env:?}");
    for name in [PASSWORD_ENV, USERNAME_ENV, CONFIG_ENV] {
        assert!(!env.iter().any(|l| l.starts_with(&format!("{name}="))), "the shell's environment has {name}");
    }
    // The runtime's environment block was readable: a real way in.
    assert!(environ.iter().any(|l| l.starts_with(&format!("{CONFIG_ENV}="))), "the runtime's environment block was read: {environ:?}");

    // Every string found, tried as the runtime's password.
    let mut candidates: BTreeSet<String> = candidates_of_env(&env).into_iter().chain(candidates_of_env(&environ)).collect();
    for file in ["ancestors.txt", "root-tokens.txt"] {
        for line in lines(&dir.join(file)) {
            candidates.extend(line.split_whitespace().map(str::to_owned));
            candidates.insert(line);
        }
    }
    let tokens = lines(&dir.join("root-tokens.txt")).len();
    assert!(tokens > 10 && tokens < MAX_FILE_TOKENS, "the script read the runtime's files ({tokens} tokens)");
    let status = rt.status();
    let (base, pid) = (status.url.expect("running"), status.pid.expect("running"));
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    assert_eq!(status_with(&http, &base, None).await, 401, "the runtime asks for its password");
    let mut opened = Vec::new();
    for candidate in &candidates {
        if status_with(&http, &base, Some(candidate)).await != 401 {
            opened.push(candidate.clone());
        }
    }
    assert!(opened.is_empty(), "{} of {} strings the agent found open the runtime's API: {opened:?}", opened.len(), candidates.len());
    eprintln!("tried {} strings the agent's shell found; none opened the runtime's API", candidates.len());
    assert!(environ.iter().any(|l| l == &format!("{PASSWORD_ENV}=")), "the runtime's block keeps the name with no value: {environ:?}");

    // The runtime itself still has it: Hearth's client works, and so does a second turn.
    let again = collect(&rt, request("probe", "Say hello", &space)).await;
    assert!(matches!(again.end, TurnEnd::Done { .. }), "{:?}", again.end);
    assert!(support::alive(pid));
    rt.dispose().await;
    model.shutdown().await;
}

/// Source of a plugin that writes `marker` when the runtime loads it (at import, before any
/// export runs).
fn plugin_source_writing(marker: &Path) -> String {
    let marker = serde_json::to_string(&marker.to_string_lossy()).unwrap();
    format!("import {{ writeFileSync }} from \"node:fs\";\nwriteFileSync({marker}, \"loaded\");\nexport const P = async () => ({{}});\n")
}

/// A plugin file at `path` that writes `marker` when the runtime loads it.
fn plugin_writing(path: &Path, marker: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, plugin_source_writing(marker)).unwrap();
}

const AGENTS_TEXT: &str = "Answer like a lighthouse keeper (AGENTS-7731).";
const NESTED_AGENTS_TEXT: &str = "In this folder, count in fathoms (NESTED-AGENTS-5521).";
const PROJECT_CONFIG_TEXT: &str = "PROJECT-CONFIG-INSTRUCTIONS-99";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_projects_configuration_and_code_stay_out_of_the_runtime_but_its_agents_md_reaches_the_model() {
    let Some(found) = support::require_runtime().await else { return };
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (project, markers) = (base.join("project"), base.join("markers"));
    std::fs::create_dir_all(&markers).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let marker = |name: &str| -> PathBuf { markers.join(name) };
    // What a cloned repository (or an earlier turn of the agent) may hold.
    std::fs::write(project.join("AGENTS.md"), AGENTS_TEXT).unwrap();
    std::fs::create_dir(project.join("sub")).unwrap();
    std::fs::write(project.join("sub/AGENTS.md"), NESTED_AGENTS_TEXT).unwrap();
    std::fs::write(project.join("sub/notes.txt"), "PROJECT_58").unwrap();
    plugin_writing(&project.join(".opencode/plugin/evil.js"), &marker("dot-opencode-plugin"));
    plugin_writing(&project.join("tools/evil.js"), &marker("config-plugin"));
    std::fs::write(project.join("config-instructions.md"), PROJECT_CONFIG_TEXT).unwrap();
    let project_config = json!({ "plugin": [format!("file://{}", project.join("tools/evil.js").display())], "instructions": ["config-instructions.md"] });
    std::fs::write(project.join("opencode.json"), project_config.to_string()).unwrap();
    // One of Hearth's own plugins, as the gateway's is: it loads.
    let witness = PluginSource { file_name: "witness.js".into(), source: plugin_source_writing(&marker("hearth-plugin")) };

    let space = resolve_local(&project).unwrap();
    let model = ScriptedModelServer::start(agent()).unwrap();
    let mut config = support::scripted_config(&found, &model, false);
    config.plugins.push(witness);
    let rt = OpenCodeRuntime::new(config, base.join("rt"), RuntimeHost::default());

    let turn = collect(&rt, request("project", "Say hello", &space)).await;
    assert!(matches!(turn.end, TurnEnd::Done { .. }), "{:?}", turn.end);
    assert!(marker("hearth-plugin").exists(), "Hearth's own plugins load");
    for name in ["dot-opencode-plugin", "config-plugin"] {
        assert!(!marker(name).exists(), "the project's code ran inside the runtime ({name})");
    }
    let session = rt.native_session("project").expect("a native session");
    let requests = model.requests_for_session(&session);
    assert!(!requests.is_empty());
    for r in &requests {
        assert!(!r.contains_text(PROJECT_CONFIG_TEXT), "the project's opencode.json was read");
    }
    let agent_requests: Vec<_> = requests.iter().filter(|r| r.kind == hearth_core::scripted_model::RequestKind::Agent).collect();
    assert!(!agent_requests.is_empty());
    for r in agent_requests {
        let system = r.system_text();
        assert!(system.contains(AGENTS_TEXT), "AGENTS.md is not in the system prompt: {system}");
        assert!(system.contains(&format!("Instructions from: {}", project.join("AGENTS.md").display())), "{system}");
        assert!(!system.contains(NESTED_AGENTS_TEXT), "a subfolder's AGENTS.md waits until the agent reads there");
    }
    // A subfolder's AGENTS.md reaches the model with the first file the agent reads there.
    let read = collect(&rt, request("project", "Read sub/notes.txt", &space)).await;
    assert_eq!(read.done_text(), Some("PROJECT_58"), "{:?}", read.events);
    assert!(model.requests_for_session(&session).iter().any(|r| r.contains_text(NESTED_AGENTS_TEXT)), "the nested AGENTS.md never reached the model");
    rt.dispose().await;
    model.shutdown().await;
}
