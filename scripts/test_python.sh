#!/usr/bin/env bash
# The Python package's tests: the API against NumPy and finite differences, profiling, the widget,
# and the sample notebook run by a real Jupyter kernel and rendered by headless Chromium; then the
# scenario corpus (tests/): programs modeled on real reports, held to the findings they plant.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup_python.sh
# Two worker processes (pytest-xdist): most tests wait on XLA's compiles or a kernel, a browser or
# a subprocess part of the time, so two keep two cores busy (25 minutes with two on a cold
# machine of two cores). The slowest tests are named at the end, where time goes next.
exec .venv/bin/python -m pytest -q -n 2 --durations=15 notebook_ext/python_tests tests "$@"
