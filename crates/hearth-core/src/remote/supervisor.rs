//! The runtime's keeper on a host: a bash script Hearth runs there over the link. It starts
//! `opencode serve` in a session (process group) of its own, with a clean environment and the
//! secrets it reads from its stdin (never from its command line, which every user there can see),
//! reports the runtime's pid and memory on its stdout, and stops the runtime's whole group — the
//! agent's shells included — as soon as its stdin closes or Hearth's heartbeat stops: the link
//! dropped, or Hearth is gone. Nothing it started outlives it on the host.
//!
//! Its stdin: the password, the gateway stamp key and the configuration, one line each, then a
//! heartbeat line every [`HEARTBEAT`]. Its stdout: the runtime's own output, and Hearth's lines
//! ([`SupervisorLine`]).

use std::time::Duration;

/// How often Hearth writes a heartbeat line.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// The keeper stops the runtime when no heartbeat came for this long (a link that hangs without
/// closing).
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(20);
/// How often it reports the runtime's memory.
pub const STATS_EVERY: Duration = Duration::from_secs(10);
/// How soon it samples again while the runtime's session does not exist yet (a sample then reads
/// nothing), and for how long at most: a host whose `ps` never finds the session falls back to
/// [`STATS_EVERY`] instead of polling all day.
pub const STATS_RETRY_EVERY: Duration = Duration::from_millis(100);
pub const STATS_RETRY_FOR: Duration = Duration::from_secs(10);
/// The prefix of the keeper's own lines.
pub const LINE_PREFIX: &str = "hearth-keeper: ";

/// The keeper's source, run as `bash -c SCRIPT hearth-keeper ROOT BINARY RG_DIR GATEWAY_PORT
/// MODEL_PORT`. The offline switches are the same as a local runtime's.
pub fn script(offline_env: &[(&str, &str)]) -> String {
    let offline: String = offline_env.iter().map(|(k, v)| format!("export {k}={}\n", super::ssh::shell_quote(v))).collect();
    format!(
        r#"set -u
root=$1; bin=$2; rgdir=$3; gwport=$4; modelport=$5
say() {{ printf '{prefix}%s\n' "$*"; }}
IFS= read -r password || {{ say "exit no-input"; exit 64; }}
IFS= read -r stampkey || {{ say "exit no-input"; exit 64; }}
IFS= read -r config || {{ say "exit no-input"; exit 64; }}
umask 077
mkdir -p "$root/home" "$root/tmp" "$root/data" "$root/config" "$root/state" "$root/cache" || {{ say "exit no-root"; exit 65; }}
exec 3<&0
# A pipe nothing writes to: a timed read of it waits in the shell itself, so a stopped loop leaves
# no sleep behind holding this script's output open (its end is how Hearth sees the keeper end).
mkfifo "$root/tmp/idle" 2>/dev/null; exec 4<>"$root/tmp/idle"
pause() {{ read -r -t "$1" -u 4 _ 2>/dev/null; [ $? -gt 128 ] || sleep "$1"; }}
(
  # Only what the runtime needs, as a local runtime gets it.
  for v in $(compgen -e); do unset "$v" 2>/dev/null; done
  export PATH=${{rgdir:+$rgdir:}}/usr/local/bin:/usr/bin:/bin
  export HOME="$root/home" TMPDIR="$root/tmp" XDG_DATA_HOME="$root/data" XDG_CONFIG_HOME="$root/config" XDG_STATE_HOME="$root/state" XDG_CACHE_HOME="$root/cache"
  export OPENCODE_SERVER_PASSWORD="$password" OPENCODE_SERVER_USERNAME=opencode OPENCODE_CONFIG_CONTENT="$config" HEARTH_STAMP_KEY="$stampkey"
  export HEARTH_GATEWAY_PORT="$gwport" HEARTH_MODEL_PORT="$modelport"
{offline}  cd "$root" && exec setsid "$bin" serve --hostname 127.0.0.1 --port 0 </dev/null 2>&1 3<&- 4<&-
) &
pid=$!
unset password stampkey config
say "pid $pid"
stop() {{
  kill -TERM -- "-$pid" 2>/dev/null
  for _ in 1 2 3 4 5 6; do kill -0 -- "-$pid" 2>/dev/null || break; pause 0.5; done
  kill -KILL -- "-$pid" 2>/dev/null
  rm -rf "$root/secrets" "$root/tmp"
}}
trap 'kill ${{watchdog:-}} ${{stats:-}} 2>/dev/null; stop; say "exit stopped"; exit 0' HUP TERM INT
( while IFS= read -r -t {timeout} -u 3 _; do :; done; kill -TERM $$ ) &
watchdog=$!
# The runtime's session exists once its setsid has run: until then a sample would read 0 of 0,
# which is not a measurement, so it is taken again shortly instead of reported.
( retries={retries}
  while kill -0 "$pid" 2>/dev/null; do
    n=$(ps -o pid= -g "$pid" 2>/dev/null | wc -l)
    if [ "$n" -gt 0 ]; then
      say "stats $(ps -o rss= -g "$pid" 2>/dev/null | awk '{{s+=$1}} END {{print s+0}}') $n"
      pause {stats}
    elif [ "$retries" -gt 0 ]; then
      retries=$((retries - 1)); pause {retry}
    else
      pause {stats}
    fi
  done ) &
stats=$!
wait "$pid"; status=$?
kill "$watchdog" "$stats" 2>/dev/null
stop
say "exit $status"
"#,
        prefix = LINE_PREFIX,
        timeout = HEARTBEAT_TIMEOUT.as_secs(),
        stats = STATS_EVERY.as_secs(),
        retry = STATS_RETRY_EVERY.as_secs_f64(),
        retries = STATS_RETRY_FOR.as_millis() / STATS_RETRY_EVERY.as_millis(),
    )
}

/// One line the keeper printed about the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SupervisorLine {
    Pid(u32),
    /// Resident memory of the runtime's group, and how many processes it has.
    Stats { rss_bytes: u64, processes: u32 },
    /// The keeper stops: how the runtime ended.
    Exit(String),
}

/// What a line of the keeper's stdout is: one of its own, or the runtime's output (`None`).
pub fn parse_line(line: &str) -> Option<SupervisorLine> {
    let rest = line.strip_prefix(LINE_PREFIX)?;
    let mut words = rest.split_whitespace();
    match words.next()? {
        "pid" => words.next()?.parse().ok().map(SupervisorLine::Pid),
        "stats" => {
            let kib: u64 = words.next()?.parse().ok()?;
            let processes = words.next()?.parse().ok()?;
            Some(SupervisorLine::Stats { rss_bytes: kib * 1024, processes })
        }
        "exit" => Some(SupervisorLine::Exit(words.collect::<Vec<_>>().join(" "))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keeper_s_lines_are_told_from_the_runtime_s() {
        assert_eq!(parse_line("hearth-keeper: pid 4242"), Some(SupervisorLine::Pid(4242)));
        assert_eq!(parse_line("hearth-keeper: stats 2048 3"), Some(SupervisorLine::Stats { rss_bytes: 2048 * 1024, processes: 3 }));
        assert_eq!(parse_line("hearth-keeper: exit 137"), Some(SupervisorLine::Exit("137".into())));
        assert_eq!(parse_line("opencode server listening on http://127.0.0.1:4096"), None);
    }

    #[test]
    fn no_secret_is_on_the_command_line_and_the_runtime_starts_in_its_own_session() {
        let s = script(&[("OPENCODE_DISABLE_AUTOUPDATE", "1")]);
        assert!(s.contains("IFS= read -r password") && s.contains(r#"OPENCODE_SERVER_PASSWORD="$password""#), "secrets come from stdin");
        assert!(s.contains("exec setsid \"$bin\" serve --hostname 127.0.0.1 --port 0"));
        assert!(s.contains("export OPENCODE_DISABLE_AUTOUPDATE='1'"));
        assert!(s.contains("read -r -t 20 -u 3"), "the heartbeat bounds a hung link");
        assert!(s.contains("retries=100") && s.contains("pause 0.1"), "a missing session is sampled again, 100 times at most");
    }

    /// The keeper run here with a stand-in for the runtime (the test is about the keeper): its
    /// first memory report counts the runtime's processes, however soon after the start it comes,
    /// and closing its stdin stops the runtime's whole session and ends the keeper's output at once.
    #[test]
    fn the_first_memory_report_counts_the_runtime_and_a_closed_stdin_stops_it_at_once() {
        use std::io::{BufRead as _, Write as _};
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("runtime");
        std::fs::write(&bin, "#!/bin/sh\nsleep 60 & sleep 60\n").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = tmp.path().join("root");
        let mut keeper = std::process::Command::new("bash")
            .args(["-c", &script(&[]), "hearth-keeper"])
            .args([root.to_str().unwrap(), bin.to_str().unwrap(), "", "1", "1"])
            // A large login environment: clearing it keeps the runtime's setsid waiting, the
            // window in which an early sample found no session yet.
            .envs((0..3000).map(|i| (format!("HEARTH_TEST_FILLER_{i}"), "x")))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        keeper.stdin.as_mut().unwrap().write_all(b"password\nstampkey\n{}\n").unwrap();
        let mut lines = std::io::BufReader::new(keeper.stdout.take().unwrap()).lines();
        let mut pid = None;
        let stats = loop {
            match parse_line(&lines.next().expect("the keeper reports before it ends").unwrap()) {
                Some(SupervisorLine::Pid(p)) => pid = Some(p),
                Some(SupervisorLine::Stats { rss_bytes, processes }) => break (rss_bytes, processes),
                Some(SupervisorLine::Exit(e)) => panic!("the keeper ended first: {e}"),
                None => {}
            }
        };
        let pid = pid.expect("the pid comes before the first report");
        assert!(stats.1 >= 2 && stats.0 > 0, "the first report counts the runtime's session: {stats:?}");
        drop(keeper.stdin.take());
        // Its output ends with it: Hearth takes the end of the output for the keeper's end.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let exit = lines.map_while(Result::ok).filter_map(|l| match parse_line(&l) {
                Some(SupervisorLine::Exit(e)) => Some(e),
                _ => None,
            });
            let _ = tx.send(exit.last());
        });
        let exit = rx.recv_timeout(STATS_EVERY / 2).expect("the keeper's output ends soon after its stdin closes, not a report later");
        assert_eq!(exit.as_deref(), Some("stopped"));
        assert!(keeper.wait().unwrap().success());
        let group = std::process::Command::new("ps").args(["-o", "pid=", "-g", &pid.to_string()]).output().unwrap();
        assert!(String::from_utf8_lossy(&group.stdout).trim().is_empty(), "nothing of the runtime's session is left");
    }
}
