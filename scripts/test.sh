#!/usr/bin/env bash
# The whole test suite: set up what is missing, then every test of every crate, against the real
# XLA CPU plugin. One build profile (release) for everything, shared with the demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
cargo test --release --workspace "$@"
bash scripts/test_python.sh
