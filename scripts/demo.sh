#!/usr/bin/env bash
# The main job: set up what is missing, build, and run `xlaprof demo`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec cargo run --release --quiet -p xlaprof -- demo "$@"
