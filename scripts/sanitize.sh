#!/usr/bin/env bash
# Builds the tests with ASan+UBSan and with TSan and runs the core suites.
# Usage: scripts/sanitize.sh [address|thread]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
kinds=("$@")
[ "${#kinds[@]}" -gt 0 ] || kinds=(address thread)
# Suites that exercise the threaded and parsing core; the slow multi-process
# suites run in the plain build only.
core='^(config|side_channel|errors|types|reduce|ring_math|collectives|shm_group|coordinator|tcp_transport)$'
for kind in "${kinds[@]}"; do
  dir="build-${kind}"
  BUILD_DIR="$dir" scripts/build.sh -DJACCL_SANITIZE="$kind" \
    -DJACCL_BUILD_EXAMPLES=OFF -DJACCL_BUILD_TOOLS=OFF -DJACCL_BUILD_PYTHON=OFF \
    -DJACCL_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  ctest --test-dir "$dir" --output-on-failure -j2 --timeout 600 -L "$core"
done
