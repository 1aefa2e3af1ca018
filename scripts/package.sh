#!/usr/bin/env bash
# Builds Hearth's installable bundles — a .deb and an AppImage — from a release build with the
# custom-protocol feature, carrying the pinned runtime binary and ripgrep as bundled resources.
# Prints where the bundles are and how long the release build took.
#   scripts/package.sh              both bundles
#   scripts/package.sh deb          only the .deb (HEARTH_BUNDLES=deb does the same)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[package] %s\n' "$*"; }
bundles="${1:-${HEARTH_BUNDLES:-deb,appimage}}"

bash scripts/setup.sh

# The bundled resources: the runtime from the pinned npm package (the version check still applies
# at run time) and ripgrep, which the runtime's search tools need.
res=target/bundle-resources/bin
mkdir -p "$res"
runtime=""
for pkg in opencode-linux-x64 opencode-linux-x64-baseline; do
  if [ -x "node_modules/$pkg/bin/opencode" ]; then runtime="node_modules/$pkg/bin/opencode"; break; fi
done
[ -n "$runtime" ] || { echo "[package] the pinned runtime is missing under node_modules: scripts/setup.sh installs it" >&2; exit 1; }
rg_bin=$(command -v rg) || { echo "[package] ripgrep (rg) is missing: scripts/setup.sh installs it" >&2; exit 1; }
install -m 0755 "$runtime" "$res/opencode"
install -m 0755 "$rg_bin" "$res/rg"
log "resources: $("$res/opencode" --version 2>/dev/null | tail -n1) runtime, $("$res/rg" --version | head -n1)"

# Vite rewrites every file of ui/dist, and the app's build script watches that folder: building it
# again would rebuild the app. scripts/test.sh says when it has just built it.
if [ "${HEARTH_UI_BUILT:-0}" != 1 ]; then npm run --silent ui:build; fi

# The AppImage bundler fetches its tools (linuxdeploy and plugins) on first use; this workplace
# reaches package registries only, so they come from scripts/appimage-tools.sh when it can provide them.
if [[ "$bundles" == *appimage* ]]; then
  bash scripts/appimage-tools.sh
fi

# The bundlers reuse their staging folders: a file left there by an earlier build would be packed.
rm -rf target/release/bundle
started=$(date +%s)
log "release build and the .deb"
# The same cargo command scripts/test.sh builds the tested app with, so in CI this finds it built and
# the bundles carry the binary the tests ran. (`tauri build` would rebuild the app: it hands the merged
# bundle config to the build script, which the binary does not need — its resource folder comes from
# the package name alone.)
cargo build -p hearth --locked --release --features custom-protocol
# --ci: no prompts. The bundle settings (resources, targets, desktop entry) live in their own file so
# a plain `cargo build` in a checkout does not need the resources staged.
npx tauri bundle --ci --features custom-protocol --bundles deb --config src-tauri/tauri.bundle.conf.json

if [[ "$bundles" == *appimage* ]]; then
  # linuxdeploy rewrites every ELF file under the AppDir's usr/lib with patchelf, which breaks the
  # runtime (a Bun single-file program whose code is appended to the ELF) and then aborts the
  # bundle. So the AppImage is bundled without the resources, and they are added afterwards,
  # byte for byte, by unpacking it and repacking it with appimagetool.
  log "AppImage (bundled, then the runtime and rg added unchanged)"
  npx tauri bundle --ci --bundles appimage --config src-tauri/tauri.bundle.conf.json --config src-tauri/tauri.appimage.conf.json
  image=$(ls -t target/release/bundle/appimage/*.AppImage | head -n1)
  unpack=target/release/bundle/appimage/unpacked
  rm -rf "$unpack" && mkdir -p "$unpack"
  (cd "$unpack" && "$OLDPWD/$image" --appimage-extract >/dev/null)
  dest="$unpack/squashfs-root/usr/lib/Hearth/bin"
  mkdir -p "$dest"
  install -m 0755 "$res/opencode" "$res/rg" "$dest/"
  appimagetool="${XDG_CACHE_HOME:-$HOME/.cache}/tauri/hearth-linuxdeploy/plugins/linuxdeploy-plugin-appimage/appimagetool-prefix/AppRun"
  ARCH=x86_64 "$appimagetool" --no-appstream "$unpack/squashfs-root" "$image" >/dev/null
  rm -rf "$unpack"
fi
elapsed=$(( $(date +%s) - started ))

log "release build + bundling took ${elapsed} s"
for f in target/release/bundle/deb/*.deb target/release/bundle/appimage/*.AppImage; do
  [ -f "$f" ] && log "$(du -h "$f" | cut -f1)  $f"
done
echo "$elapsed" > target/release/bundle/build-seconds
