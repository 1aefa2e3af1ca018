//! Secrets in the desktop keyring, against a REAL gnome-keyring daemon on a private session bus that
//! this test starts (and stops), and the fallback to the private file when no Secret Service answers.
//!
//! The keyring crate connects to the bus named by `DBUS_SESSION_BUS_ADDRESS` and takes no address of
//! its own, so each case runs in a child process of this binary whose environment is set from its
//! start: no test changes the environment of a running, multi-threaded process. Hence no libtest
//! harness here (`harness = false`): `main` starts the bus and the daemon, runs the cases, stops both.
//!
//! Needs `dbus-daemon`, `gnome-keyring-daemon` and `secret-tool` (`scripts/setup.sh` installs them)
//! and FAILS without them, unless the person running opted out with `HEARTH_SKIP_KEYRING_TESTS=1`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::app::runtime_config::{self, BinaryInputs, Binaries, BuiltinModel};
use hearth_core::app::{Hearth, HearthOptions, NoUpdates, ProfileSave};
use hearth_core::binaries::opencode::LocateInputs;
use hearth_core::binaries::ripgrep::RgInputs;
use hearth_core::host::paths::AppPaths;
use hearth_core::opencode::config::Authentication;
use hearth_core::store::secrets::{SecretsBackend, SecretsPlace, DATA_FOLDER_ATTRIBUTE, KEYRING_SERVICE, NAME_ATTRIBUTE, SECRETS_FILE_NAME};
use hearth_core::store::{ModelProtocol, ProfileInput};

/// Opt-out for machines that cannot run a keyring daemon.
const SKIP_ENV: &str = "HEARTH_SKIP_KEYRING_TESTS";
/// Which case a child process runs.
const CASE_ENV: &str = "HEARTH_KEYRING_TEST_CASE";
/// How long the bus and the keyring daemon may take to come up.
const START_WAIT: Duration = Duration::from_secs(20);
/// How long one case may take.
const CASE_WAIT: Duration = Duration::from_secs(120);
/// The login keyring's password (the keyring lives in a temporary folder).
const KEYRING_PASSWORD: &str = "hearth-test";

const CASES: &[(&str, fn())] = &[
    ("keys_live_in_the_desktop_keyring_and_file_keys_move_there", keys_live_in_the_desktop_keyring_and_file_keys_move_there),
    ("a_move_that_fails_half_way_loses_no_key", a_move_that_fails_half_way_loses_no_key),
    ("without_a_secret_service_keys_stay_in_the_private_file", without_a_secret_service_keys_stay_in_the_private_file),
];

fn main() {
    if let Ok(case) = std::env::var(CASE_ENV) {
        let (_, case) = CASES.iter().find(|(name, _)| *name == case).unwrap_or_else(|| panic!("no case {case}"));
        case();
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in CASES {
            println!("{name}: test");
        }
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let chosen: Vec<&str> = CASES.iter().map(|(n, _)| *n).filter(|n| filters.is_empty() || filters.iter().any(|f| n.contains(f.as_str()))).collect();
    if chosen.is_empty() {
        return;
    }
    if std::env::var_os(SKIP_ENV).is_some_and(|v| v == "1") {
        println!("keyring tests skipped ({SKIP_ENV}=1)");
        return;
    }
    for tool in ["dbus-daemon", "gnome-keyring-daemon", "secret-tool"] {
        assert!(
            Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok(),
            "`{tool}` is missing: run scripts/setup.sh (or set {SKIP_ENV}=1 to skip the keyring tests)"
        );
    }
    let desktop = PrivateDesktop::start();
    let mut failed = Vec::new();
    for name in &chosen {
        let closed = format!("unix:path={}", desktop.home.path().join("no-bus-here").display());
        let bus = if name.starts_with("without_") { closed.as_str() } else { desktop.bus.as_str() };
        let started = Instant::now();
        let mut child = desktop.command(std::env::current_exe().unwrap()).env(CASE_ENV, name).env("DBUS_SESSION_BUS_ADDRESS", bus).spawn().unwrap();
        let ok = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status.success();
            }
            if started.elapsed() > CASE_WAIT {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!("{name} did not finish within {CASE_WAIT:?}");
                break false;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        println!("test {name} ... {} ({} ms)", if ok { "ok" } else { "FAILED" }, started.elapsed().as_millis());
        if !ok {
            failed.push(*name);
        }
    }
    drop(desktop);
    assert!(failed.is_empty(), "failed: {failed:?}");
}

/// A session bus and a gnome-keyring daemon with an unlocked login keyring, all in a temporary home
/// that no real keyring shares. Dropping it stops both.
struct PrivateDesktop {
    home: tempfile::TempDir,
    bus: String,
    /// Stopped in this order: the keyring daemon, then the bus.
    children: Vec<Child>,
}

impl PrivateDesktop {
    fn start() -> Self {
        let home = tempfile::tempdir().unwrap();
        for dir in ["run", "data", "config"] {
            std::fs::create_dir(home.path().join(dir)).unwrap();
        }
        // A runtime folder is private to its user; the daemons check.
        std::fs::set_permissions(home.path().join("run"), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let socket = home.path().join("run").join("bus");
        let mut dbus = private_command(home.path(), "dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .arg(format!("--address=unix:path={}", socket.display()))
            .stdout(Stdio::piped())
            .spawn()
            .expect("dbus-daemon starts");
        let stdout = dbus.stdout.take().unwrap();
        // Owned from here on: a failed start below still stops what was started.
        let mut desktop = Self { home, bus: String::new(), children: vec![dbus] };
        // The address is printed once the bus listens.
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        desktop.bus = line.trim().to_string();
        assert!(desktop.bus.starts_with("unix:"), "dbus-daemon printed {line:?}");
        // `--unlock` reads the login keyring's password from stdin and creates the keyring unlocked.
        let mut keyring = desktop
            .command("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("gnome-keyring-daemon starts");
        let mut stdin = keyring.stdin.take().unwrap();
        desktop.children.insert(0, keyring);
        stdin.write_all(KEYRING_PASSWORD.as_bytes()).unwrap();
        drop(stdin);
        let deadline = Instant::now() + START_WAIT;
        while !desktop.secret_service_answers() {
            assert!(Instant::now() < deadline, "the keyring daemon did not come up on the private bus within {START_WAIT:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        desktop
    }

    /// `program` on this private bus, in the temporary home.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = private_command(self.home.path(), program);
        command.env("DBUS_SESSION_BUS_ADDRESS", &self.bus);
        command
    }

    fn secret_service_answers(&self) -> bool {
        let out = self
            .command("dbus-send")
            .args(["--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.secrets"])
            .output();
        out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("boolean true"))
    }
}

/// `program` with the temporary home, runtime and data folders (the keyring's files go there).
fn private_command(home: &Path, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new(program);
    command
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", home.join("run"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("GNOME_KEYRING_CONTROL");
    command
}

impl Drop for PrivateDesktop {
    fn drop(&mut self) {
        for child in &mut self.children {
            // SIGTERM first, so the daemon closes its files; then make sure.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---- the cases (each in its own process, on the bus chosen by the parent) ----

/// One runtime per case process: Hearth's background tasks live on it between calls.
fn run<F: std::future::Future>(f: F) -> F::Output {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap()).block_on(f)
}

fn open(data: &Path, secrets: SecretsBackend) -> Arc<Hearth> {
    let paths = AppPaths::under(data);
    paths.ensure().unwrap();
    let binaries = BinaryInputs { opencode: LocateInputs::default(), ripgrep: RgInputs::from_process(None, None), probe_home: paths.probe_dir.clone() };
    let options = HearthOptions { secrets, ..HearthOptions::new(paths, binaries) };
    run(Hearth::open(options, Arc::new(NoUpdates))).unwrap()
}

fn close(hearth: Arc<Hearth>) {
    run(hearth.shutdown());
}

fn profile(name: &str) -> ProfileInput {
    ProfileInput { name: name.into(), protocol: ModelProtocol::OpenAiChatCompletions, base_url: "https://api.example.com/v1".into(), model: "m".into(), image_input: false }
}

fn save_with_key(hearth: &Hearth, name: &str, key: &str) -> String {
    run(hearth.save_profile(None, ProfileSave { profile: profile(name), api_key: Some(key.into()) })).unwrap().id
}

/// The API key the runtime configuration would carry for `profile_id`.
fn configured_key(hearth: &Hearth, profile_id: &str) -> Option<String> {
    let binaries = Binaries { opencode: PathBuf::from("opencode"), rg_dir: PathBuf::new() };
    let builtin = BuiltinModel::default();
    let config = run(runtime_config::runtime_config(hearth.store(), &binaries, &builtin)).unwrap();
    let found = config.profiles.into_iter().find(|p| p.id == profile_id).expect("the profile is configured");
    match found.authentication {
        Authentication::ApiKey(key) => Some(key),
        Authentication::None => None,
    }
}

/// What `secret-tool` (libsecret, not Hearth's code) finds for a secret of the data folder.
fn secret_tool_lookup(data: &Path, name: &str) -> Option<String> {
    let folder = std::fs::canonicalize(data).unwrap();
    let out = Command::new("secret-tool")
        .args(["lookup", "service", KEYRING_SERVICE, DATA_FOLDER_ATTRIBUTE])
        .arg(&folder)
        .args([NAME_ATTRIBUTE, name])
        .output()
        .unwrap();
    out.status.success().then(|| String::from_utf8(out.stdout).unwrap())
}

fn file_text(data: &Path) -> String {
    std::fs::read_to_string(data.join(SECRETS_FILE_NAME)).unwrap_or_default()
}

fn keys_live_in_the_desktop_keyring_and_file_keys_move_there() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    const OLD: &str = "sk-kept-in-the-file-before-4b1d";
    const NEW: &str = "sk-new-in-the-keyring-77ac";

    // A key saved by a Hearth that kept secrets in the file.
    let hearth = open(&data, SecretsBackend::FileOnly);
    let old_id = save_with_key(&hearth, "Old", OLD);
    close(hearth);
    assert!(file_text(&data).contains(OLD));

    // The keyring answers: the key moves there, and the file is gone.
    let hearth = open(&data, SecretsBackend::DesktopKeyring);
    let location = hearth.secrets_location();
    assert_eq!((location.place, location.file.as_deref()), (SecretsPlace::DesktopKeyring, None), "{location:?}");
    assert_eq!(location.summary, "Secrets are kept in the desktop keyring (Secret Service).");
    assert!(!data.join(SECRETS_FILE_NAME).exists(), "the moved key left the file: {}", file_text(&data));
    assert_eq!(secret_tool_lookup(&data, &format!("profile:{old_id}")).as_deref(), Some(OLD));
    assert_eq!(configured_key(&hearth, &old_id).as_deref(), Some(OLD));

    // A new key goes to the keyring only.
    let new_id = save_with_key(&hearth, "New", NEW);
    assert!(run(hearth.list_profiles()).unwrap().iter().find(|p| p.id == new_id).unwrap().has_api_key);
    assert_eq!(secret_tool_lookup(&data, &format!("profile:{new_id}")).as_deref(), Some(NEW));
    assert!(!file_text(&data).contains(NEW));
    assert_eq!(configured_key(&hearth, &new_id).as_deref(), Some(NEW));

    // Cleared from the Models view: gone from the profile, the configuration and the keyring.
    let cleared = run(hearth.clear_profile_api_key(old_id.clone())).unwrap();
    assert!(!cleared.has_api_key);
    assert_eq!(configured_key(&hearth, &old_id), None);
    assert_eq!(secret_tool_lookup(&data, &format!("profile:{old_id}")), None);
    close(hearth);

    // A restart reads the keyring again.
    let hearth = open(&data, SecretsBackend::DesktopKeyring);
    let profiles = run(hearth.list_profiles()).unwrap();
    let flag = |id: &str| profiles.iter().find(|p| p.id == id).unwrap().has_api_key;
    assert!(flag(&new_id) && !flag(&old_id));
    assert_eq!(configured_key(&hearth, &new_id).as_deref(), Some(NEW));
    close(hearth);

    // Another data folder shares nothing with this one.
    let other = tmp.path().join("other");
    let hearth = open(&other, SecretsBackend::DesktopKeyring);
    assert!(hearth.store().profile_api_key(&new_id).unwrap().is_none());
    close(hearth);
    // No secret of this test reached a log.
    for dir in [&data, &other] {
        for entry in std::fs::read_dir(dir.join("logs")).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
            assert!(!text.contains(OLD) && !text.contains(NEW));
        }
    }
}

fn a_move_that_fails_half_way_loses_no_key() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    const FIRST: &str = "sk-moves-fine-0a";
    const SECOND: &str = "sk-cannot-move-0b";
    let hearth = open(&data, SecretsBackend::FileOnly);
    let mut keys = [(save_with_key(&hearth, "A", FIRST), FIRST), (save_with_key(&hearth, "B", SECOND), SECOND)];
    close(hearth);
    // Secrets move in name order: the first moves, the second meets the clash below.
    keys.sort();
    let [(moved_id, moved_key), (kept_id, kept_key)] = keys;
    // Two items already match the second secret (one in the session collection, one in the login
    // keyring): the keyring refuses to choose, so the move stops there — a real half-way failure.
    let folder = std::fs::canonicalize(&data).unwrap();
    let user = format!("profile:{kept_id}@{}", folder.display());
    for collection in ["session", "default"] {
        let mut store = Command::new("secret-tool")
            .args(["store", "--label=clash", "--collection", collection, "service", KEYRING_SERVICE, "username", &user, "target", "default"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        store.stdin.take().unwrap().write_all(b"someone-else").unwrap();
        assert!(store.wait().unwrap().success());
    }

    let hearth = open(&data, SecretsBackend::DesktopKeyring);
    let location = hearth.secrets_location();
    assert_eq!(location.place, SecretsPlace::DesktopKeyring);
    let file = data.join(SECRETS_FILE_NAME);
    assert_eq!(location.file.as_deref(), Some(file.to_str().unwrap()), "{location:?}");
    assert!(location.summary.contains("1 could not be moved there yet"), "{}", location.summary);
    let text = file_text(&data);
    assert!(text.contains(kept_key) && !text.contains(moved_key), "only the moved key left the file: {text}");
    assert_eq!(secret_tool_lookup(&data, &format!("profile:{moved_id}")).as_deref(), Some(moved_key));
    // Both keys still reach the runtime: the one that did not move is read from the file.
    assert_eq!(configured_key(&hearth, &moved_id).as_deref(), Some(moved_key));
    assert_eq!(configured_key(&hearth, &kept_id).as_deref(), Some(kept_key));
    close(hearth);
}

fn without_a_secret_service_keys_stay_in_the_private_file() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    const KEY: &str = "sk-file-only-5e2f";
    let started = Instant::now();
    let hearth = open(&data, SecretsBackend::DesktopKeyring);
    assert!(started.elapsed() < Duration::from_secs(10), "an absent keyring is noticed quickly: {:?}", started.elapsed());
    let file = data.join(SECRETS_FILE_NAME);
    let location = hearth.secrets_location();
    assert_eq!((location.place, location.file.as_deref()), (SecretsPlace::PrivateFile, Some(file.to_str().unwrap())));
    assert_eq!(location.summary, format!("Secrets are kept in a private file {}, because no desktop keyring answered.", file.display()));
    let id = save_with_key(&hearth, "Work", KEY);
    assert!(file_text(&data).contains(KEY));
    assert_eq!(configured_key(&hearth, &id).as_deref(), Some(KEY));
    let cleared = run(hearth.clear_profile_api_key(id.clone())).unwrap();
    assert!(!cleared.has_api_key);
    assert_eq!(configured_key(&hearth, &id), None);
    assert!(!file_text(&data).contains(KEY));
    close(hearth);
}
