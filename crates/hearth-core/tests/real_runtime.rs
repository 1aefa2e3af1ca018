//! Against the real runtime binary installed by `npm ci` (the pinned `opencode-ai` package).
//! In CI a missing binary FAILS this test; on a developer machine it says so loudly and returns.

use hearth_core::binaries::doctor::{self, BinaryCheck, DoctorInputs};
use hearth_core::binaries::executable::Source;
use hearth_core::binaries::opencode::LocateInputs;
use hearth_core::opencode::PINNED_VERSION;
use hearth_core::host::paths::AppPaths;
use hearth_core::binaries::ripgrep::RgInputs;

fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[tokio::test]
async fn the_pinned_runtime_and_ripgrep_are_found_and_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = DoctorInputs {
        paths: AppPaths::under(tmp.path()),
        opencode: LocateInputs { anchors: vec![workspace_root()], ..Default::default() },
        ripgrep: RgInputs::from_process(None, None),
    };
    let report = doctor::check(&inputs).await;
    if !report.is_ready() && std::env::var_os("CI").is_none() {
        eprintln!("NOT RUN (no CI): runtime or rg missing; run scripts/setup.sh. Report: {report:?}");
        return;
    }
    match &report.opencode {
        BinaryCheck::Ready { version, source, path } => {
            assert_eq!(version, PINNED_VERSION);
            assert_eq!(*source, Source::NodeModules);
            assert!(path.ends_with("/bin/opencode"), "{path}");
        }
        problem => panic!("runtime binary not usable: {problem:?}"),
    }
    assert!(report.ripgrep.is_ready(), "rg not usable: {:?}", report.ripgrep);
}
