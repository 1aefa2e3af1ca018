#!/usr/bin/env bash
# Sets up what is missing, builds Hearth and opens it. Extra arguments go to the app.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npm run --silent ui:build
cargo build -p hearth --locked
exec ./target/debug/hearth "$@"
