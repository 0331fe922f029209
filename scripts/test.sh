#!/usr/bin/env bash
# The whole test suite: set up what is missing, then every test of every crate, against the real
# XLA CPU plugin. One build profile (release) for everything, shared with the demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
say_as=test
. scripts/lib.sh
spare_the_disk
bash scripts/setup.sh

# The Python side's packages (torch's 2.8 GB of wheels among them) download and install while
# cargo builds: on a fresh machine that is minutes of waiting on the network and the disk, beside
# a build that keeps the CPUs busy.
packages_log="$(mktemp)"
bash scripts/setup_python.sh --packages >"$packages_log" 2>&1 &
packages=$!
rust=0
cargo test --release --workspace "$@" || rust=$?
installed=0
wait "$packages" || installed=$?
cat "$packages_log" >&2
rm -f "$packages_log"
[ "$installed" -eq 0 ] || { say "installing the Python packages failed (above)"; df -h . >&2; exit 1; }
[ "$rust" -eq 0 ] || exit "$rust"

bash scripts/test_python.sh
