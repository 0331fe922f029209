#!/usr/bin/env bash
# The Python package's tests: the API against NumPy and finite differences, profiling, the widget,
# and the sample notebook run by a real Jupyter kernel and rendered by headless Chromium; then the
# scenario corpus (tests/): programs modeled on real reports, held to the findings they plant.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup_python.sh
exec .venv/bin/python -m pytest -q notebook_ext/python_tests tests "$@"
