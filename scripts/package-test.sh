#!/usr/bin/env bash
# The installed app, tested as a user gets it: builds the bundles, installs the .deb with dpkg,
# runs the installed `hearth doctor` and `hearth selftest --json` from where they were installed,
# drives the installed app's real window (Runtime view green from the bundled runtime, the built-in
# scripted model, a turn that reads a file, a second instance, a broken bundled runtime), checks
# the AppImage the same way headless, then removes the package and checks that nothing is left.
# Run by scripts/test.sh when HEARTH_TEST_PACKAGE=1 (CI sets it). Needs root (dpkg).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

log() { printf '[package-test] %s\n' "$*"; }
fail() { printf '[package-test] FAILED: %s\n' "$*" >&2; exit 1; }
PKG=hearth
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

if dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q 'install ok installed'; then
  fail "a $PKG package is already installed on this machine; this test installs and removes its own, so remove that one first (dpkg -r $PKG)"
fi

# HEARTH_PACKAGE_REUSE=1 tests the bundles already built (when iterating on this script).
if [ "${HEARTH_PACKAGE_REUSE:-0}" = 1 ] && ls target/release/bundle/deb/*.deb >/dev/null 2>&1; then
  log "reusing the bundles in target/release/bundle"
else
  bash scripts/package.sh
fi
deb=$(ls -t target/release/bundle/deb/*.deb | head -n1)
appimage=$(ls -t target/release/bundle/appimage/*.AppImage 2>/dev/null | head -n1 || true)

scratch=$(mktemp -d /tmp/hearth-package-test.XXXXXX)
installed_files="$scratch/installed-files"
cleanup() {
  local rc=$?
  if dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q 'install ok installed'; then
    $SUDO dpkg --purge "$PKG" >/dev/null 2>&1 || true
  fi
  rm -rf "$scratch"
  exit "$rc"
}
trap cleanup EXIT

log "installing $deb"
$SUDO dpkg -i "$deb"
dpkg -L "$PKG" | sort > "$installed_files"
bin=$(command -v hearth) || fail "the package installed no hearth command on PATH"
[ "$bin" = /usr/bin/hearth ] || fail "hearth runs from $bin, expected /usr/bin/hearth"
grep -qx '/usr/lib/Hearth/bin/opencode' "$installed_files" || fail "the package does not carry the runtime at /usr/lib/Hearth/bin/opencode"
grep -qx '/usr/lib/Hearth/bin/rg' "$installed_files" || fail "the package does not carry ripgrep at /usr/lib/Hearth/bin/rg"
grep -q '\.desktop$' "$installed_files" || fail "the package has no desktop entry"

# Run from a folder with no node_modules above it, with a clean environment: only what was installed
# can be found. HOME is a throw-away folder, so first start creates the data folder in it.
export HOME="$scratch/home"
mkdir -p "$HOME"
cd "$scratch"
# RUST_LOG: the installed app logs to its data folder as usual; the test output keeps warnings only.
run_installed() { env -i PATH=/usr/bin:/bin HOME="$HOME" RUST_LOG=warn "$@"; }

log "installed hearth doctor"
run_installed "$bin" doctor | tee "$scratch/doctor.txt"
grep -q '^runtime: ok 1.18.33 (/usr/lib/Hearth/bin/opencode)$' "$scratch/doctor.txt" || fail "the installed app does not use its bundled runtime"
grep -q '^ripgrep: ok .*(/usr/lib/Hearth/bin/rg)$' "$scratch/doctor.txt" || fail "the installed app does not use its bundled ripgrep"
data_dir="$HOME/.local/share/hearth"
[ "$(stat -c %a "$data_dir")" = 700 ] || fail "the data folder $data_dir is not private (mode $(stat -c %a "$data_dir"))"

log "installed hearth selftest --json"
run_installed "$bin" selftest --projects 2 --corpus 2 --json > "$ROOT/test-output/installed-selftest.json" \
  || fail "the installed self-test failed: see test-output/installed-selftest.json"
log "self-test passed from /usr/bin/hearth"

log "the installed app's window"
cd "$ROOT"
HEARTH_APP_BIN="$bin" HEARTH_INSTALLED_DATA_HOME="$HOME" node --test --test-concurrency=1 tests/package/

if [ -n "$appimage" ]; then
  log "AppImage: $appimage"
  chmod +x "$appimage"
  # No FUSE here: the AppImage runtime extracts itself and runs (as it does where FUSE is missing).
  run_installed env APPIMAGE_EXTRACT_AND_RUN=1 "$ROOT/$appimage" doctor | tee "$scratch/appimage-doctor.txt"
  grep -Eq '^runtime: ok 1.18.33 \(/tmp/(appimage_extracted_|\.mount_)[^/]*/usr/lib/Hearth/bin/opencode\)$' "$scratch/appimage-doctor.txt" \
    || fail "the AppImage does not use the runtime it carries"
  grep -Eq '^ripgrep: ok .*\(/tmp/(appimage_extracted_|\.mount_)[^/]*/usr/lib/Hearth/bin/rg\)$' "$scratch/appimage-doctor.txt" \
    || fail "the AppImage does not use the ripgrep it carries"
fi

log "removing the package"
$SUDO dpkg --purge "$PKG"
left=""
while read -r f; do
  # Shared folders (/usr, /usr/share/icons/…) belong to other packages too and stay.
  if [ -e "$f" ] && [ ! -d "$f" ]; then left+="$f "; fi
done < "$installed_files"
[ -z "$left" ] || fail "files left after removal: $left"
[ ! -e /usr/lib/Hearth ] || fail "/usr/lib/Hearth is left after removal"
if pgrep -f '/usr/lib/Hearth/bin/opencode' >/dev/null; then fail "a runtime from the installed app is still running"; fi
log "removed; nothing left behind"
for f in "$deb" ${appimage:+"$appimage"}; do
  log "size: $(du -h "$f" | cut -f1)  $(basename "$f")"
done
log "release build + bundling: $(cat target/release/bundle/build-seconds) s"
