#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang, -DJACCL_FUZZ=ON) in
# ${FUZZ_BUILD_DIR:-build-fuzz} and runs each for FUZZ_SECONDS (default 30)
# from its seed corpus in fuzz/corpus/. A finding fails the run and leaves
# the input in build-fuzz/fuzz/artifacts/ (replay: build-fuzz/fuzz/fuzz_X FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${FUZZ_BUILD_DIR:-build-fuzz}
cxx=${CXX:-}
if [ -z "$cxx" ]; then
  for c in clang++ clang++-14; do
    if command -v "$c" >/dev/null; then
      cxx=$c
      break
    fi
  done
fi
[ -n "$cxx" ] || { echo "fuzz.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
[ -f "$dir/CMakeCache.txt" ] || cmake -S . -B "$dir" "${gen[@]}" "${launcher[@]}" \
  -DCMAKE_CXX_COMPILER="$cxx" -DJACCL_FUZZ=ON \
  -DJACCL_BUILD_TESTS=OFF -DJACCL_BUILD_TOOLS=OFF -DJACCL_BUILD_EXAMPLES=OFF \
  -DJACCL_BUILD_PYTHON=OFF -DJACCL_BUILD_BENCH=OFF
cmake -S . -B "$dir" -DJACCL_FUZZ_SECONDS="${FUZZ_SECONDS:-30}" >/dev/null
cmake --build "$dir" -j"$(nproc)" --target jaccl_fuzzers
ctest --test-dir "$dir" -L fuzz --output-on-failure -j2
