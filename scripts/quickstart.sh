#!/usr/bin/env bash
# From a fresh Debian 12 machine: install packages, build the library,
# jaccl-run and the example (nothing else: scripts/test.sh builds the rest),
# and run a 4-rank all-reduce on this machine over the default side channel
# (TCP coordinator).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
TARGETS="jaccl jaccl-run allreduce" bash scripts/build.sh
exec "${BUILD_DIR:-build}/tools/jaccl-run" -n "${RANKS:-4}" -- "${BUILD_DIR:-build}/examples/allreduce" "$@"
