//! How the window's web view paints. WebKitGTK composites a page with OpenGL; on a machine without a
//! GPU (a virtual machine, a remote desktop, Xvfb) that OpenGL is Mesa's software rasteriser, and
//! compositing through it costs more than painting without it. Measured with the render benchmark
//! (`node tests/bench/render.mjs`) under Xvfb on two cores: scrolling a 5,000-message conversation,
//! frame interval p95 66 → 21 ms on first sight, 58 → 17 ms again; a 200 KB reply streaming in,
//! p50 75 → 19 ms (idle 16 ms both ways); send → first text on screen, warm, 232 → 89 ms.
//! So where the machine has no GPU render node, Hearth turns WebKit's compositing off, unless the
//! user chose for themselves.

use std::ffi::OsStr;
use std::path::Path;

/// WebKitGTK's own switch: set (to anything but "0"), pages are painted without compositing.
pub const DISABLE_COMPOSITING_ENV: &str = "WEBKIT_DISABLE_COMPOSITING_MODE";
/// Where the kernel lists GPU devices; a render node (`renderD128`, …) is what a GPU's OpenGL uses.
pub const GPU_DEVICES_DIR: &str = "/dev/dri";
const RENDER_NODE_PREFIX: &str = "renderD";

/// How the web view paints, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebViewPainting {
    /// The user set [`DISABLE_COMPOSITING_ENV`] themselves: left as they chose.
    UserChoice,
    /// A GPU render node is there: WebKit composites with it, as it would anyway.
    Gpu,
    /// No GPU render node: compositing off, so WebKit paints in software without OpenGL.
    Software,
}

impl WebViewPainting {
    /// The choice for a machine whose environment has `user_setting` for the switch and whose
    /// `gpu_devices` folder is as it is.
    pub fn choose(user_setting: Option<&OsStr>, gpu_devices: &Path) -> Self {
        if user_setting.is_some() {
            return Self::UserChoice;
        }
        let has_render_node = std::fs::read_dir(gpu_devices)
            .map(|entries| entries.flatten().any(|e| e.file_name().to_string_lossy().starts_with(RENDER_NODE_PREFIX)))
            .unwrap_or(false);
        if has_render_node {
            Self::Gpu
        } else {
            Self::Software
        }
    }

    /// Choose for this machine and set WebKit's switch accordingly. Call it first thing in `main`,
    /// before any thread starts (it changes the process environment) and before the web view's
    /// processes start (they inherit it).
    pub fn apply() -> Self {
        let choice = Self::choose(std::env::var_os(DISABLE_COMPOSITING_ENV).as_deref(), Path::new(GPU_DEVICES_DIR));
        if choice == Self::Software {
            // While the process has one thread (see above): nothing reads the environment meanwhile.
            std::env::set_var(DISABLE_COMPOSITING_ENV, "1");
        }
        choice
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_without_a_render_node_paints_without_compositing() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(WebViewPainting::choose(None, dir.path()), WebViewPainting::Software);
        assert_eq!(WebViewPainting::choose(None, &dir.path().join("missing")), WebViewPainting::Software);
        // A display card alone (card0, no render node) has no OpenGL to composite with either.
        std::fs::write(dir.path().join("card0"), "").unwrap();
        assert_eq!(WebViewPainting::choose(None, dir.path()), WebViewPainting::Software);
    }

    #[test]
    fn a_render_node_keeps_compositing_and_the_users_own_setting_wins() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("renderD128"), "").unwrap();
        assert_eq!(WebViewPainting::choose(None, dir.path()), WebViewPainting::Gpu);
        assert_eq!(WebViewPainting::choose(Some(OsStr::new("0")), dir.path()), WebViewPainting::UserChoice);
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(WebViewPainting::choose(Some(OsStr::new("1")), empty.path()), WebViewPainting::UserChoice);
    }
}
