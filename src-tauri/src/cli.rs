//! Headless subcommands of the `hearth` binary (usable with no display: CI, support).

use std::path::PathBuf;

use hearth_core::binaries::doctor;
use hearth_core::host::paths::AppPaths;
use hearth_core::diagnostics::choice::checkable;
use hearth_core::runtime::RuntimeChoice;
use hearth_core::store::peek_runtime_binary_override;

const USAGE: &str = "usage: hearth [doctor [--json] | selftest [--projects 2|10] [--corpus 0|2|8|32] [--runtimes LIST] [--host HOST] [--json] | mcp-fixture]
  (no arguments)  open the app window
  doctor          check the runtime binary, ripgrep and the data folder
  selftest        run the reuse and isolation checks against the real runtime in a sandbox, for each
                  runtime in LIST (comma-separated: opencode, acp:opencode, acp:claude-code; default:
                  every one installed here); with --host, the projects are on HOST (anything ssh
                  takes), run by OpenCode's server there; exit status 0 only when every check passed
  mcp-fixture     run the built-in fixture MCP server on stdio (used by the self-test)
  mcp-bridge      Hearth's stdio bridge to its gateway (started by agents Hearth runs)";

/// The fixture MCP server as the installed app runs it: this binary's `mcp-fixture` subcommand.
pub fn fixture_command() -> Vec<String> {
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "hearth".into());
    vec![exe, "mcp-fixture".into()]
}

/// Hearth's stdio bridge to its gateway as the installed app runs it: this binary's `mcp-bridge`
/// subcommand, which agents that take MCP servers over stdio only start for each session.
pub fn bridge_command() -> Vec<String> {
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "hearth".into());
    vec![exe, hearth_core::toolbox::gateway::bridge::BRIDGE_SUBCOMMAND.into()]
}

/// An ssh configuration of Hearth's own, used instead of the user's (tests; a user who keeps one
/// apart): `HEARTH_SSH_CONFIG`.
pub fn ssh_config() -> Option<PathBuf> {
    std::env::var_os("HEARTH_SSH_CONFIG").filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Run a subcommand if `args` names one; `None` means: open the window.
/// `resource_dir` is the installed app's resource folder (its bundled binaries), when there is one.
pub fn run(args: &[String], paths: &AppPaths, resource_dir: Option<PathBuf>) -> Option<i32> {
    let (cmd, rest) = args.split_first()?;
    Some(match cmd.as_str() {
        "doctor" => doctor_cmd(rest, paths, resource_dir),
        "selftest" => selftest_cmd(rest, paths, resource_dir),
        "mcp-bridge" => match block_on(hearth_core::toolbox::gateway::bridge::run_stdio_bridge()) {
            Some(Ok(())) => 0,
            Some(Err(e)) => {
                eprintln!("hearth mcp-bridge: {e}");
                1
            }
            None => 1,
        },
        "mcp-fixture" => match block_on(hearth_core::toolbox::gateway::fixture::run_fixture_stdio()) {
            Some(Ok(())) => 0,
            Some(Err(e)) => {
                eprintln!("hearth: the fixture MCP server failed: {e}");
                1
            }
            None => 1,
        },
        "--help" | "-h" | "help" => {
            println!("{USAGE}");
            0
        }
        other => {
            eprintln!("hearth: unknown command `{other}`\n{USAGE}");
            2
        }
    })
}

/// Run a future on a fresh runtime; `None` (after a message) when no runtime can be made.
fn block_on<F: std::future::Future>(f: F) -> Option<F::Output> {
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => Some(rt.block_on(f)),
        Err(e) => {
            eprintln!("hearth: {e}");
            None
        }
    }
}

fn doctor_cmd(rest: &[String], paths: &AppPaths, resource_dir: Option<PathBuf>) -> i32 {
    let json = rest.iter().any(|a| a == "--json");
    let mut inputs = crate::state::doctor_inputs(paths, resource_dir);
    // The binary the app would use: the one chosen in the Runtime view has its place in the order.
    inputs.opencode.settings_path = peek_runtime_binary_override(&paths.data_dir);
    let Some(report) = block_on(doctor::check(&inputs)) else { return 1 };
    if json {
        println!("{}", serde_json::to_string_pretty(&report).expect("report serialises"));
    } else {
        for (name, check) in [("runtime", &report.opencode), ("ripgrep", &report.ripgrep)] {
            match check {
                doctor::BinaryCheck::Ready { path, version, .. } => println!("{name}: ok {version} ({path})"),
                doctor::BinaryCheck::Problem { message, .. } => println!("{name}: PROBLEM {message}"),
            }
        }
        println!("data folder: {}\nlogs: {}", report.data_dir, report.log_dir);
    }
    if report.is_ready() { 0 } else { 1 }
}

/// A numeric option given wrong on the command line; the Display is what the user is told.
#[derive(Debug, thiserror::Error)]
enum OptionError {
    #[error("{0} needs a value")]
    MissingValue(String),
    #[error("{name} takes a number, got `{value}`")]
    NotANumber { name: String, value: String },
    #[error("{name} takes one of {allowed:?}, got {value}")]
    NotAllowed { name: String, value: u32, allowed: Vec<u32> },
    #[error("--runtimes takes a comma-separated list of {known}, got `{value}`")]
    UnknownRuntime { value: String, known: String },
    #[error("--host takes a host as ssh takes it (an alias or user@host), got `{0}`")]
    BadHost(String),
}

/// `--host HOST`: where the checks' projects go; `None` when not given.
fn host_option(rest: &[String]) -> Result<Option<String>, OptionError> {
    let Some(i) = rest.iter().position(|a| a == "--host") else { return Ok(None) };
    let value = rest.get(i + 1).ok_or_else(|| OptionError::MissingValue("--host".into()))?;
    // A leading dash would be read as an option, even though ssh gets the host after `--`.
    if value.trim().is_empty() || value.starts_with('-') {
        return Err(OptionError::BadHost(value.clone()));
    }
    Ok(Some(value.trim().to_string()))
}

/// `--runtimes a,b` as runtime choices; `None` when the option is not given.
fn runtimes_option(rest: &[String]) -> Result<Option<Vec<RuntimeChoice>>, OptionError> {
    let Some(i) = rest.iter().position(|a| a == "--runtimes") else { return Ok(None) };
    let value = rest.get(i + 1).ok_or_else(|| OptionError::MissingValue("--runtimes".into()))?;
    let known = checkable();
    let names = known.iter().map(RuntimeChoice::as_stored).collect::<Vec<_>>().join(", ");
    value
        .split(',')
        .map(|name| known.iter().find(|c| c.as_stored() == name.trim()).cloned().ok_or_else(|| OptionError::UnknownRuntime { value: name.into(), known: names.clone() }))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `--name value` of a numeric option, or the default; `Err` names the bad value.
fn numeric_option(rest: &[String], name: &str, default: u32, allowed: &[u32]) -> Result<u32, OptionError> {
    let Some(i) = rest.iter().position(|a| a == name) else { return Ok(default) };
    let value = rest.get(i + 1).ok_or_else(|| OptionError::MissingValue(name.into()))?;
    let n: u32 = value.parse().map_err(|_| OptionError::NotANumber { name: name.into(), value: value.clone() })?;
    if allowed.contains(&n) { Ok(n) } else { Err(OptionError::NotAllowed { name: name.into(), value: n, allowed: allowed.to_vec() }) }
}

fn selftest_cmd(rest: &[String], paths: &AppPaths, resource_dir: Option<PathBuf>) -> i32 {
    use hearth_core::app::runtime_config::locate_binaries;
    use hearth_core::diagnostics::selftest::{run_selftest, SelftestOptions};
    use hearth_core::acp::AgentSearch;
    use hearth_core::diagnostics::choice::unavailable;
    use hearth_core::diagnostics::remote_sandbox::RemoteTarget;
    use hearth_core::diagnostics::ProgressSink;
    use hearth_core::remote::ssh::SshOptions;

    let json = rest.iter().any(|a| a == "--json");
    let options = (numeric_option(rest, "--projects", 2, &[2, 10]), numeric_option(rest, "--corpus", 0, &[0, 2, 8, 32]), runtimes_option(rest), host_option(rest));
    let (projects, corpus, runtimes, host) = match options {
        (Ok(p), Ok(c), Ok(r), Ok(h)) => (p, c, r, h),
        (Err(e), _, _, _) | (_, Err(e), _, _) | (_, _, Err(e), _) | (_, _, _, Err(e)) => {
            eprintln!("hearth selftest: {e}\n{USAGE}");
            return 2;
        }
    };
    let outcome = block_on(async {
        let mut inputs = crate::state::binary_inputs(paths, resource_dir);
        inputs.opencode.settings_path = peek_runtime_binary_override(&paths.data_dir);
        let binaries = locate_binaries(&inputs).await.map_err(|e| e.to_string())?;
        let cancel = tokio_util::sync::CancellationToken::new();
        let on_signal = cancel.clone();
        tokio::spawn(async move {
            // Ctrl-C cancels the run; the sandbox and every process it started are cleaned up.
            if tokio::signal::ctrl_c().await.is_ok() {
                on_signal.cancel();
            }
        });
        let progress = if json { ProgressSink::silent() } else { ProgressSink::new(|p| eprintln!("  {} — {}", p.step, p.detail)) };
        let agents = AgentSearch::from_process(inputs.opencode.anchors.clone());
        // Without a list: every runtime that can be checked here (an agent not installed is left
        // out, not failed).
        // On another host: OpenCode's server, the one runtime remote projects run.
        let runtimes = runtimes.unwrap_or_else(|| match host {
            Some(_) => vec![RuntimeChoice::OpenCode],
            None => checkable().into_iter().filter(|c| unavailable(c, &agents).is_none()).collect(),
        });
        let remote = host.map(|host| RemoteTarget { host, ssh: SshOptions::for_data_dir(&paths.data_dir, ssh_config()) });
        let options = SelftestOptions {
            projects: projects as usize,
            corpus_mib: corpus,
            runtime_binary: binaries.opencode,
            rg_dir: Some(binaries.rg_dir),
            fixture_command: fixture_command(),
            bridge_command: Some(bridge_command()),
            sandbox_parent: None,
            runtimes,
            agents,
            remote,
        };
        run_selftest(options, progress, cancel).await.map_err(|e| e.to_string())
    });
    match outcome {
        Some(Ok(report)) => {
            if json {
                println!("{}", serde_json::to_string_pretty(&report).expect("report serialises"));
            } else {
                println!("{}", report.to_text());
            }
            if report.passed { 0 } else { 1 }
        }
        Some(Err(e)) => {
            eprintln!("hearth selftest: {e}");
            1
        }
        None => 1,
    }
}
