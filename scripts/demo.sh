#!/usr/bin/env bash
# The main job: set up what is missing (the plugin, the Python package with torch), build the
# `xlaprof` command, and run the demo: a PyTorch training loop on the xlaprof device under the
# profiler, its report, and where to look next (samples/torch/demo.py). The engine's own Rust
# demo is `cargo run --release -p xlaprof -- demo`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
say_as=demo
. scripts/lib.sh
spare_the_disk
bash scripts/setup.sh
bash scripts/setup_python.sh
echo "[demo] building the xlaprof command (release)"
cargo build --release --quiet -p xlaprof
exec .venv/bin/python samples/torch/demo.py "$@"
