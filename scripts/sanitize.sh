#!/usr/bin/env bash
# Builds the core test suites with ASan+UBSan and with TSan and runs them.
# Usage: [SANITIZE_SUITES="s1 s2"] scripts/sanitize.sh [address|thread]...
# (default: both kinds, every suite below)
set -euo pipefail
cd "$(dirname "$0")/.."
kinds=("$@")
[ "${#kinds[@]}" -gt 0 ] || kinds=(address thread)
# Suites that exercise the threaded, parsing and failure-handling core; the
# slow whole-job suites (conformance, faults, python, side channels) run in
# the plain build only.
suites=(config side_channel errors types reduce ring_math all_to_all_math
        op_runner collectives all_to_all shm_group coordinator tcp_transport hier
        ofi_layer ofi_group split rdma_devices elastic host_load)
# SANITIZE_SUITES="a b" builds and runs only those suites (a quick re-run).
if [ -n "${SANITIZE_SUITES:-}" ]; then
  read -ra suites <<< "$SANITIZE_SUITES"
fi
label="^($(IFS='|'; echo "${suites[*]}"))\$"
targets=()
for s in "${suites[@]}"; do targets+=("test_$s"); done
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 and line tables only, as the sanitizers' own documentation suggests:
# a report still names file and line, and the two trees compile in ~40 %
# less time than at -O2 -g (a fresh CI machine builds both from nothing).
for kind in "${kinds[@]}"; do
  dir="build-${kind}"
  [ -f "$dir/CMakeCache.txt" ] || cmake -S . -B "$dir" "${gen[@]}" \
    -DJACCL_SANITIZE="$kind" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DJACCL_BUILD_EXAMPLES=OFF -DJACCL_BUILD_TOOLS=OFF \
    -DJACCL_BUILD_PYTHON=OFF -DJACCL_BUILD_BENCH=OFF
  cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp"
  ctest --test-dir "$dir" --output-on-failure -j2 --timeout 600 -L "$label"
done
