#!/usr/bin/env bash
# From a fresh Debian 12 machine: install packages, build, and run a 4-rank
# all-reduce on this machine over the default side channel (TCP coordinator).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec build/tools/jaccl-run -n "${RANKS:-4}" -- build/examples/allreduce "$@"
