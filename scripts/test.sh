#!/usr/bin/env bash
# Installs what the tests need, builds everything (tests, tools, Python,
# benchmarks: what quickstart.sh leaves out), and runs the whole test suite.
# Extra arguments go to ctest (e.g. -L coordinator, -R Ring).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j2 --timeout 300 "$@"
