#!/usr/bin/env bash
# Hearth's one test command: sets up what is missing, then runs every test — Rust unit and
# integration (real runtime binary), UI type check and unit tests, and the headless e2e suite in the
# real window. Prints each stage's duration at the end (also when a stage fails).
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

stage "setup (system packages, tauri-driver, npm ci)"
bash scripts/setup.sh

stage "UI build (Vite)"
npm run --silent ui:build

stage "UI type check and unit tests (svelte-check, Vitest)"
npm run --silent ui:check
npm run --silent test:ui

stage "Rust tests (workspace: unit, integration, bindings)"
cargo test --workspace --locked

stage "app build (debug)"
cargo build -p hearth --locked

stage "e2e (Xvfb + tauri-driver + real window)"
npm run --silent test:e2e
