//! Headless subcommands of the `hearth` binary (usable with no display: CI, support).

use hearth_core::{doctor, paths::AppPaths};

const USAGE: &str = "usage: hearth [doctor [--json]]\n  (no arguments)  open the app window\n  doctor          check the runtime binary, ripgrep and the data folder";

/// Run a subcommand if `args` names one; `None` means: open the window.
pub fn run(args: &[String], paths: &AppPaths) -> Option<i32> {
    let (cmd, rest) = args.split_first()?;
    Some(match cmd.as_str() {
        "doctor" => doctor_cmd(rest, paths),
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

fn doctor_cmd(rest: &[String], paths: &AppPaths) -> i32 {
    let json = rest.iter().any(|a| a == "--json");
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hearth: {e}");
            return 1;
        }
    };
    let report = rt.block_on(doctor::check(&crate::state::doctor_inputs(paths, None)));
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
