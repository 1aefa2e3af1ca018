#!/usr/bin/env bash
# Installs what Hearth's build, app and tests need and is missing. Idempotent: every step checks first,
# so re-running it on a warm machine costs a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*"; }

# System packages: the Tauri/WebKitGTK build set, Xvfb + WebKitWebDriver for headless e2e, ripgrep
# (the runtime's search tools need it), ImageMagick for screenshots of the Xvfb screen, xdotool to
# answer native file dialogs in e2e (WebDriver reaches only the web view). dbus, gnome-keyring and
# libsecret-tools (secret-tool): the keyring test starts a real Secret Service on a private session
# bus and checks with libsecret's own tool that API keys land there (tests/secrets_keyring.rs).
# git: the undo tests make a user's own git repository with git itself and check its index is
# untouched (Hearth's record of a project's files uses the libgit2 built into it, not git).
APT_PACKAGES=(
  build-essential pkg-config curl wget file ca-certificates
  libwebkit2gtk-4.1-dev libgtk-3-dev libssl-dev libxdo-dev libayatana-appindicator3-dev librsvg2-dev
  xvfb xauth webkit2gtk-driver fonts-dejavu-core ripgrep imagemagick xdotool
  dbus gnome-keyring libsecret-tools git
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing system packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  log "system packages present"
fi

# The remote-host tests (HEARTH_TEST_SETUP=1, set by scripts/test.sh) start Debian's sshd themselves
# on a free loopback port and log in as a user of their own. The package comes without starting
# its system service (policy-rc.d says no while it installs), so no ssh server is left listening.
if [ "${HEARTH_TEST_SETUP:-0}" = 1 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if ! dpkg-query -W -f='${Status}' openssh-server 2>/dev/null | grep -q 'install ok installed'; then
    log "installing openssh-server (its service is not started)"
    policy=/usr/sbin/policy-rc.d
    had_policy=0; [ -e "$policy" ] && had_policy=1
    [ "$had_policy" = 1 ] || { printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null; $SUDO chmod 755 "$policy"; }
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends openssh-server
    [ "$had_policy" = 1 ] || $SUDO rm -f "$policy"
  else
    log "openssh-server present"
  fi
  if ! id -u hearth-remote >/dev/null 2>&1; then
    log "creating the remote-host tests' user hearth-remote"
    $SUDO useradd --create-home --shell /bin/bash hearth-remote
  fi
  # A password field of '*' (no password, and no way to log in with one) rather than a locked
  # account, which sshd refuses even for key logins.
  if $SUDO getent shadow hearth-remote | cut -d: -f2 | grep -q '^!'; then
    $SUDO usermod -p '*' hearth-remote
  fi
fi

# tauri-driver bridges WebDriver to WebKitWebDriver for the e2e suite.
TAURI_DRIVER_VERSION='^2'
if ! command -v tauri-driver >/dev/null 2>&1; then
  log "installing tauri-driver"
  cargo install tauri-driver --version "$TAURI_DRIVER_VERSION" --locked
else
  log "tauri-driver present"
fi

# Node packages: the UI toolchain, the e2e driver, the pinned opencode-ai runtime and Claude Code's ACP
# adapter (@agentclientprotocol/claude-agent-acp; its SDK brings the native `claude` for this platform
# as an optional dependency), at the versions in package-lock.json; reinstall only when the lock
# changed since the last install. The adapter asks for Node >= 22 (npm warns EBADENGINE) but runs on 20.
# Not `npm ci`: opencode-ai lists every platform's binary as an optional dependency, and a registry
# that serves only some platforms (as this workplace's does) leaves those out of the lock, which
# `npm ci` then rejects as out of sync. `npm install` takes the locked versions all the same.
stamp=node_modules/.hearth-lock-stamp
if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
  log "npm install (locked versions)"
  npm install --no-audit --no-fund
  cp package-lock.json "$stamp"
else
  log "node_modules up to date"
fi
