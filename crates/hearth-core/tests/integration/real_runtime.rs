//! Against the real runtime binary installed by `scripts/setup.sh` (the pinned `opencode-ai`
//! package). A missing binary FAILS this test unless `HEARTH_SKIP_RUNTIME_TESTS=1`.

use crate::support;

use hearth_core::binaries::doctor::{self, BinaryCheck, DoctorInputs};
use hearth_core::binaries::executable::Source;
use hearth_core::binaries::opencode::LocateInputs;
use hearth_core::opencode::PINNED_VERSION;
use hearth_core::host::paths::AppPaths;
use hearth_core::binaries::ripgrep::RgInputs;

#[tokio::test]
async fn the_pinned_runtime_and_ripgrep_are_found_and_verified() {
    if support::require_runtime().await.is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let inputs = DoctorInputs {
        paths: AppPaths::under(tmp.path()),
        opencode: LocateInputs { anchors: vec![support::workspace_root()], ..Default::default() },
        ripgrep: RgInputs::from_process(None, None),
    };
    let report = doctor::check(&inputs).await;
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
