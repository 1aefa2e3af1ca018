//! Headless subcommands of the `hearth` binary (usable with no display: CI, support).

use hearth_core::{doctor, paths::AppPaths};

const USAGE: &str = "usage: hearth [doctor [--json] | mcp-fixture]\n  (no arguments)  open the app window\n  doctor          check the runtime binary, ripgrep and the data folder\n  mcp-fixture     run the built-in fixture MCP server on stdio (used by the self-test)";

/// Run a subcommand if `args` names one; `None` means: open the window.
pub fn run(args: &[String], paths: &AppPaths) -> Option<i32> {
    let (cmd, rest) = args.split_first()?;
    Some(match cmd.as_str() {
        "doctor" => doctor_cmd(rest, paths),
        "mcp-fixture" => match block_on(hearth_core::gateway::fixture::run_fixture_stdio()) {
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

fn doctor_cmd(rest: &[String], paths: &AppPaths) -> i32 {
    let json = rest.iter().any(|a| a == "--json");
    let Some(report) = block_on(doctor::check(&crate::state::doctor_inputs(paths, None))) else { return 1 };
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
