#!/usr/bin/env bash
# Hearth's one test command: sets up what is missing, then runs every test — Rust unit and
# integration (real runtime binary), UI type check and unit tests, and the headless e2e suite in the
# real window; with HEARTH_TEST_PACKAGE=1 (CI sets it) also the installed app: build the .deb and the
# AppImage, install, self-test and drive the installed window, remove (scripts/package-test.sh, root).
# Prints each stage's duration at the end (also when a stage fails).
set -euo pipefail
cd "$(dirname "$0")/.."

declare -a STAGES=()
current=""; started=0
stage() {
  finish_stage
  current="$1"; started=$(date +%s)
  printf '\n==> %s\n' "$current"
}
finish_stage() {
  if [ -n "$current" ]; then STAGES+=("$(printf '%5ss  %s' "$(( $(date +%s) - started ))" "$current")"); fi
  current=""
}
report() {
  local rc=$?
  finish_stage
  printf '\n==> stage durations\n'
  printf '%s\n' "${STAGES[@]}"
  [ "$rc" -eq 0 ] && echo "all stages passed" || echo "FAILED (exit $rc)"
}
trap report EXIT

stage "setup (system packages, tauri-driver, npm packages; sshd and a user for the remote-host tests)"
HEARTH_TEST_SETUP=1 bash scripts/setup.sh

stage "UI build (Vite)"
npm run --silent ui:build
# The bundle stage reuses this build (and so the app built from it) instead of building it again.
export HEARTH_UI_BUILT=1

stage "UI type check and unit tests (svelte-check, Vitest)"
npm run --silent ui:check
npm run --silent test:ui

# One release build serves every stage: the tests, the app the self-test and the window tests run,
# and (with HEARTH_TEST_PACKAGE=1) the bundles, whose build reuses it. Tests and app share every
# dependency's build because no feature differs between them (see the workspace Cargo.toml).
CARGO_FLAGS=(--locked --release)
stage "Rust tests (workspace: unit, integration, bindings; release build)"
cargo test --workspace "${CARGO_FLAGS[@]}" --features hearth/custom-protocol

stage "app build (release, the UI embedded as in the bundles)"
cargo build -p hearth "${CARGO_FLAGS[@]}" --features custom-protocol
APP_BIN=target/release/hearth
# A bundle build copies its resources (the runtime, rg) beside the binary, where the app takes them
# for its bundled copy; the tests want the app as built here, finding the runtime in node_modules.
rm -rf target/release/bin

stage "CLI self-test (reuse + isolation, real runtimes: OpenCode's server and opencode acp with 2 projects and a 32 MiB corpus, then 10 projects and 8 MiB; Claude Code with 2 projects and 2 MiB)"
mkdir -p test-output
selftest_data=$(mktemp -d)
selftest() { HEARTH_DATA_DIR="$selftest_data" "$APP_BIN" selftest --json "$@"; }
selftest --projects 2 --corpus 32 --runtimes opencode,acp:opencode > test-output/selftest-2-projects.json
selftest --projects 10 --corpus 8 --runtimes opencode,acp:opencode > test-output/selftest-10-projects.json
# Claude Code takes its whole prompt in one message: 2 MiB of context, not 32.
if [ "${HEARTH_SKIP_AGENT_TESTS:-0}" = 1 ]; then
  echo "NOT RUN (HEARTH_SKIP_AGENT_TESTS=1): the self-test on Claude Code"
else
  selftest --projects 2 --corpus 2 --runtimes acp:claude-code > test-output/selftest-claude-code.json
fi
rm -rf "$selftest_data"
echo "self-test passed: reports in test-output/selftest-*.json"

stage "e2e (Xvfb + tauri-driver + real window)"
HEARTH_APP_BIN="$APP_BIN" npm run --silent test:e2e

if [ "${HEARTH_TEST_PACKAGE:-0}" = 1 ]; then
  stage "installed app (release bundles, dpkg -i, installed self-test and window, removal)"
  bash scripts/package-test.sh
fi
