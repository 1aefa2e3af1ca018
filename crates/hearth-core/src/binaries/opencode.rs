//! Locating the runtime binary and refusing any version but the pinned one.
//!
//! Order: an explicit path (`HEARTH_OPENCODE_BIN`, then the binary chosen in the Runtime view and
//! kept in settings) — used alone, so a mistake in it shows instead of being silently bypassed; then
//! the copy bundled with the installed app; then the pinned npm platform package under a
//! `node_modules` folder above any of the anchor folders.

use std::path::{Path, PathBuf};

use crate::opencode::{BIN_ENV, NPM_PACKAGE, PINNED_VERSION};
use crate::binaries::executable::{self, Candidate, ProbeEnv, ProbeError, Source, VERSION_PROBE_TIMEOUT};

/// File name of the runtime executable inside its platform package and in the app bundle.
pub const BIN_NAME: &str = if cfg!(windows) { "opencode.exe" } else { "opencode" };

/// npm platform packages that can carry this machine's binary, most specific first (the
/// `-baseline` builds are for CPUs without AVX2).
pub fn platform_packages() -> &'static [&'static str] {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    return &["opencode-linux-x64", "opencode-linux-x64-baseline", "opencode-linux-x64-musl", "opencode-linux-x64-baseline-musl"];
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    return &["opencode-linux-arm64", "opencode-linux-arm64-musl"];
    #[cfg(all(target_os = "macos", target_arch = "aarch64"))]
    return &["opencode-darwin-arm64"];
    #[cfg(all(target_os = "macos", target_arch = "x86_64"))]
    return &["opencode-darwin-x64", "opencode-darwin-x64-baseline"];
    #[cfg(all(target_os = "windows", target_arch = "x86_64"))]
    return &["opencode-windows-x64", "opencode-windows-x64-baseline"];
    #[allow(unreachable_code)]
    &[]
}

/// What the caller knows about where the binary may be. Built by the shell (env, settings,
/// resource folder, executable location) and injected here so tests can stand in for each.
#[derive(Debug, Clone, Default)]
pub struct LocateInputs {
    pub env_path: Option<PathBuf>,
    /// The binary the user chose in the Runtime view (`AppSettings::runtime_binary_override`).
    pub settings_path: Option<PathBuf>,
    pub bundled_dir: Option<PathBuf>,
    /// Folders whose ancestors are searched for `node_modules/<platform package>/bin/opencode`.
    pub anchors: Vec<PathBuf>,
}

impl LocateInputs {
    /// Inputs from this process: `HEARTH_OPENCODE_BIN`, the executable's folder and, in a
    /// development build, the working folder and the workspace this binary was built from. A
    /// release build never looks in the working folder: an installed Hearth whose bundled copy is
    /// gone must not run whatever `node_modules` the user happened to start it from.
    pub fn from_process(settings_path: Option<PathBuf>, bundled_dir: Option<PathBuf>) -> Self {
        let mut anchors = Vec::new();
        if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
            anchors.push(dir);
        }
        if cfg!(debug_assertions) {
            if let Ok(cwd) = std::env::current_dir() {
                anchors.push(cwd);
            }
            anchors.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        }
        Self {
            env_path: std::env::var_os(BIN_ENV).filter(|v| !v.is_empty()).map(PathBuf::from),
            settings_path,
            bundled_dir,
            anchors,
        }
    }

    /// Candidate paths in the order they are tried.
    pub fn candidates(&self) -> Vec<Candidate> {
        if let Some(p) = &self.env_path {
            return vec![Candidate::new(p, Source::Environment)];
        }
        if let Some(p) = &self.settings_path {
            return vec![Candidate::new(p, Source::Settings)];
        }
        let mut out = Vec::new();
        if let Some(dir) = &self.bundled_dir {
            out.push(Candidate::new(dir.join(BIN_NAME), Source::Bundled));
        }
        for anchor in &self.anchors {
            for dir in anchor.ancestors() {
                for pkg in platform_packages() {
                    let c = Candidate::new(dir.join("node_modules").join(pkg).join("bin").join(BIN_NAME), Source::NodeModules);
                    if !out.contains(&c) {
                        out.push(c);
                    }
                }
            }
        }
        out
    }
}

/// The runtime binary, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub path: PathBuf,
    pub source: Source,
    pub version: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LocateError {
    #[error("The OpenCode runtime was not found. Hearth needs {NPM_PACKAGE}@{PINNED_VERSION}: reinstall Hearth (an installed Hearth carries it), run scripts/setup.sh in a checkout, or set {BIN_ENV} to the binary. Looked in {} places, first: {}", .searched.len(), .searched.first().map(|p| p.display().to_string()).unwrap_or_default())]
    NotFound { searched: Vec<PathBuf> },
    #[error("The OpenCode runtime ({}) cannot be used: {problem}.{}", source_label(*.from), remedy(*.from))]
    Unusable { from: Source, problem: ProbeError },
    #[error("The OpenCode runtime at {path} is version {found}, but Hearth needs exactly {PINNED_VERSION}. {}", version_remedy(*.from))]
    WrongVersion { from: Source, path: PathBuf, found: String },
    #[error("{path} ({}) does not print a version: it is not the OpenCode runtime. {}", source_label(*.from), version_remedy(*.from))]
    NoVersion { from: Source, path: PathBuf },
}

impl LocateError {
    /// The path the error is about, when there is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            LocateError::NotFound { .. } => None,
            LocateError::Unusable { problem, .. } => Some(problem_path(problem)),
            LocateError::WrongVersion { path, .. } | LocateError::NoVersion { path, .. } => Some(path),
        }
    }
}

/// What to do about an unusable copy: one Hearth shipped is damaged (the user did not choose that
/// path); one chosen in the Runtime view is replaced or cleared there. Otherwise the probe's own
/// sentence says it.
fn remedy(source: Source) -> &'static str {
    match source {
        Source::Bundled => " The installed copy is damaged: reinstall Hearth.",
        Source::Settings => SETTINGS_REMEDY_SUFFIX,
        _ => "",
    }
}

const SETTINGS_REMEDY_SUFFIX: &str = " Choose another file in the Runtime view, or clear your choice there to use the copy Hearth finds itself.";

/// What to do about a binary that is not the pinned version, by where it came from.
fn version_remedy(source: Source) -> String {
    match source {
        Source::Settings => format!("Choose the binary of {NPM_PACKAGE}@{PINNED_VERSION} in the Runtime view, or clear your choice there to use the copy Hearth finds itself."),
        Source::Bundled => "The installed copy is damaged: reinstall Hearth.".into(),
        _ => format!("Install {NPM_PACKAGE}@{PINNED_VERSION} (scripts/setup.sh does) or point {BIN_ENV} at that version."),
    }
}

fn problem_path(p: &ProbeError) -> &Path {
    match p {
        ProbeError::Missing { path }
        | ProbeError::NotAFile { path }
        | ProbeError::NotExecutable { path }
        | ProbeError::Spawn { path, .. }
        | ProbeError::TimedOut { path, .. }
        | ProbeError::Failed { path, .. } => path,
    }
}

pub fn source_label(source: Source) -> String {
    match source {
        Source::Environment => format!("from {BIN_ENV}"),
        Source::Settings => "chosen in the Runtime view".into(),
        Source::Bundled => "bundled with Hearth".into(),
        Source::NodeModules => "from node_modules".into(),
        Source::SystemPath => "from PATH".into(),
    }
}

/// Find the binary and verify it is the pinned version.
pub async fn locate(inputs: &LocateInputs, env: &ProbeEnv) -> Result<Located, LocateError> {
    let candidates = inputs.candidates();
    // An explicit path is used even when it does not exist, so the user sees what is wrong with it;
    // implicit places are skipped when absent.
    let chosen = candidates
        .iter()
        .find(|c| c.source.is_explicit() || c.path.exists())
        .ok_or_else(|| LocateError::NotFound { searched: candidates.iter().map(|c| c.path.clone()).collect() })?;
    let output = executable::probe_version(&chosen.path, env, VERSION_PROBE_TIMEOUT)
        .await
        .map_err(|problem| LocateError::Unusable { from: chosen.source, problem })?;
    let (path, from) = (chosen.path.clone(), chosen.source);
    let found = parse_version(&output).ok_or_else(|| LocateError::NoVersion { from, path: path.clone() })?;
    if found != PINNED_VERSION {
        return Err(LocateError::WrongVersion { from, path, found });
    }
    Ok(Located { path, source: from, version: found })
}

/// `opencode --version` prints the bare version; take the last non-empty line so a warning printed
/// before it does not count as the version. `None` when that line is no version at all (another
/// program's `--version` text, or nothing).
fn parse_version(output: &str) -> Option<String> {
    let line = output.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    let version = line.trim_start_matches('v');
    let looks_like_one = version.starts_with(|c: char| c.is_ascii_digit()) && !version.contains(char::is_whitespace);
    looks_like_one.then(|| version.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn fake_runtime(path: &Path, version_line: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("#!/bin/sh\necho '{version_line}'\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn env(dir: &Path) -> ProbeEnv {
        ProbeEnv { scratch_home: dir.join("scratch") }
    }

    fn npm_path(root: &Path) -> PathBuf {
        root.join("node_modules").join(platform_packages()[0]).join("bin").join(BIN_NAME)
    }

    #[tokio::test]
    async fn finds_the_npm_package_above_an_anchor() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = npm_path(tmp.path());
        fake_runtime(&bin, PINNED_VERSION);
        let inputs = LocateInputs { anchors: vec![tmp.path().join("target/debug")], ..Default::default() };
        let got = locate(&inputs, &env(tmp.path())).await.unwrap();
        assert_eq!(got, Located { path: bin, source: Source::NodeModules, version: PINNED_VERSION.into() });
    }

    #[tokio::test]
    async fn bundled_copy_comes_before_node_modules() {
        let tmp = tempfile::tempdir().unwrap();
        fake_runtime(&npm_path(tmp.path()), PINNED_VERSION);
        let bundled = tmp.path().join("resources");
        fake_runtime(&bundled.join(BIN_NAME), PINNED_VERSION);
        let inputs = LocateInputs { bundled_dir: Some(bundled.clone()), anchors: vec![tmp.path().into()], ..Default::default() };
        assert_eq!(locate(&inputs, &env(tmp.path())).await.unwrap().source, Source::Bundled);
    }

    #[tokio::test]
    async fn a_damaged_bundled_copy_says_reinstall_and_is_not_bypassed() {
        let tmp = tempfile::tempdir().unwrap();
        fake_runtime(&npm_path(tmp.path()), PINNED_VERSION);
        let bundled = tmp.path().join("resources");
        std::fs::create_dir_all(&bundled).unwrap();
        // Garbage where the program should be: the kernel refuses to run it.
        std::fs::write(bundled.join(BIN_NAME), vec![0x5a; 4096]).unwrap();
        std::fs::set_permissions(bundled.join(BIN_NAME), std::fs::Permissions::from_mode(0o755)).unwrap();
        let inputs = LocateInputs { bundled_dir: Some(bundled.clone()), anchors: vec![tmp.path().into()], ..Default::default() };
        let msg = locate(&inputs, &env(tmp.path())).await.unwrap_err().to_string();
        assert!(msg.starts_with("The OpenCode runtime (bundled with Hearth) cannot be used:"), "{msg}");
        assert!(msg.ends_with("reinstall Hearth."), "{msg}");
    }

    #[tokio::test]
    async fn wrong_version_names_both_versions() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("opencode");
        fake_runtime(&bin, "1.17.0");
        let inputs = LocateInputs { env_path: Some(bin.clone()), ..Default::default() };
        let err = locate(&inputs, &env(tmp.path())).await.unwrap_err();
        assert_eq!(err, LocateError::WrongVersion { from: Source::Environment, path: bin, found: "1.17.0".into() });
        let msg = err.to_string();
        assert!(msg.contains("1.17.0") && msg.contains(PINNED_VERSION), "{msg}");
    }

    #[tokio::test]
    async fn an_explicit_path_is_never_silently_bypassed() {
        let tmp = tempfile::tempdir().unwrap();
        fake_runtime(&npm_path(tmp.path()), PINNED_VERSION);
        let inputs = LocateInputs {
            env_path: Some(tmp.path().join("missing-opencode")),
            anchors: vec![tmp.path().into()],
            ..Default::default()
        };
        let err = locate(&inputs, &env(tmp.path())).await.unwrap_err();
        assert!(matches!(&err, LocateError::Unusable { problem: ProbeError::Missing { .. }, .. }), "{err}");
        assert!(err.to_string().contains(BIN_ENV), "{err}");
    }

    #[test]
    fn the_order_is_environment_then_settings_then_bundled_then_node_modules() {
        let inputs = LocateInputs {
            env_path: Some("/env/opencode".into()),
            settings_path: Some("/chosen/opencode".into()),
            bundled_dir: Some("/app/bin".into()),
            anchors: vec!["/checkout/target".into()],
        };
        let sources = |i: &LocateInputs| i.candidates().into_iter().map(|c| c.source).collect::<Vec<_>>();
        assert_eq!(inputs.candidates(), vec![Candidate::new("/env/opencode", Source::Environment)], "an explicit path is used alone");
        let no_env = LocateInputs { env_path: None, ..inputs.clone() };
        assert_eq!(no_env.candidates(), vec![Candidate::new("/chosen/opencode", Source::Settings)]);
        let neither = LocateInputs { settings_path: None, ..no_env };
        let found = sources(&neither);
        assert_eq!(found[0], Source::Bundled);
        assert!(found.len() > 1 && found[1..].iter().all(|s| *s == Source::NodeModules), "{found:?}");
    }

    #[tokio::test]
    async fn the_chosen_binary_comes_after_the_environment_and_before_the_bundled_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let bundled = tmp.path().join("resources");
        fake_runtime(&bundled.join(BIN_NAME), PINNED_VERSION);
        let chosen = tmp.path().join("chosen/opencode");
        fake_runtime(&chosen, PINNED_VERSION);
        let from_env = tmp.path().join("env/opencode");
        fake_runtime(&from_env, PINNED_VERSION);
        let mut inputs = LocateInputs { settings_path: Some(chosen.clone()), bundled_dir: Some(bundled), ..Default::default() };
        let got = locate(&inputs, &env(tmp.path())).await.unwrap();
        assert_eq!((got.path, got.source), (chosen, Source::Settings));
        inputs.env_path = Some(from_env.clone());
        let got = locate(&inputs, &env(tmp.path())).await.unwrap();
        assert_eq!((got.path, got.source), (from_env, Source::Environment));
    }

    #[tokio::test]
    async fn a_chosen_binary_of_another_version_is_refused_not_bypassed() {
        let tmp = tempfile::tempdir().unwrap();
        let bundled = tmp.path().join("resources");
        fake_runtime(&bundled.join(BIN_NAME), PINNED_VERSION);
        let chosen = tmp.path().join("opencode-old");
        fake_runtime(&chosen, "1.17.2");
        let inputs = LocateInputs { settings_path: Some(chosen.clone()), bundled_dir: Some(bundled), ..Default::default() };
        let err = locate(&inputs, &env(tmp.path())).await.unwrap_err();
        assert_eq!(err, LocateError::WrongVersion { from: Source::Settings, path: chosen.clone(), found: "1.17.2".into() });
        assert_eq!(err.path(), Some(chosen.as_path()));
        let msg = err.to_string();
        assert!(msg.contains("is version 1.17.2, but Hearth needs exactly 1.18.33"), "{msg}");
        assert!(msg.ends_with("in the Runtime view, or clear your choice there to use the copy Hearth finds itself."), "{msg}");
    }

    #[tokio::test]
    async fn a_program_that_prints_no_version_is_not_the_runtime() {
        let tmp = tempfile::tempdir().unwrap();
        let inputs = LocateInputs { settings_path: Some("/bin/true".into()), ..Default::default() };
        let err = locate(&inputs, &env(tmp.path())).await.unwrap_err();
        assert_eq!(err, LocateError::NoVersion { from: Source::Settings, path: "/bin/true".into() });
        assert!(err.to_string().starts_with("/bin/true (chosen in the Runtime view) does not print a version: it is not the OpenCode runtime."), "{err}");
        let silent = tmp.path().join("silent");
        fake_runtime(&silent, "");
        let inputs = LocateInputs { env_path: Some(silent.clone()), ..Default::default() };
        assert_eq!(locate(&inputs, &env(tmp.path())).await.unwrap_err(), LocateError::NoVersion { from: Source::Environment, path: silent });
    }

    #[tokio::test]
    async fn non_executable_file_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("opencode");
        std::fs::write(&bin, "not a program").unwrap();
        let inputs = LocateInputs { settings_path: Some(bin), ..Default::default() };
        let msg = locate(&inputs, &env(tmp.path())).await.unwrap_err().to_string();
        assert!(msg.contains("(chosen in the Runtime view)") && msg.contains("not executable"), "{msg}");
        assert!(msg.ends_with("clear your choice there to use the copy Hearth finds itself."), "{msg}");
    }

    #[tokio::test]
    async fn nothing_found_says_how_to_fix_it() {
        let tmp = tempfile::tempdir().unwrap();
        let inputs = LocateInputs { anchors: vec![tmp.path().into()], ..Default::default() };
        let err = locate(&inputs, &env(tmp.path())).await.unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LocateError::NotFound { .. }));
        assert!(msg.contains("opencode-ai@1.18.33") && msg.contains(BIN_ENV), "{msg}");
    }

    #[test]
    fn version_is_the_last_printed_line() {
        assert_eq!(parse_version("warning: x\n1.18.33\n").as_deref(), Some("1.18.33"));
        assert_eq!(parse_version("v1.18.33").as_deref(), Some("1.18.33"));
        assert_eq!(parse_version(" \n"), None);
        assert_eq!(parse_version("true (GNU coreutils) 9.4\nWritten by Jim Meyering.\n"), None);
    }

    #[test]
    fn package_json_pins_the_same_version() {
        let pkg = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../package.json")).unwrap();
        let json: serde_json::Value = serde_json::from_str(&pkg).unwrap();
        let pinned = json["dependencies"][NPM_PACKAGE].as_str().expect("package.json depends on opencode-ai");
        assert_eq!(pinned, PINNED_VERSION, "package.json and PINNED_VERSION disagree");
    }
}
