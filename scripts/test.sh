#!/usr/bin/env bash
# Installs what the tests need, builds everything (tests, tools, Python,
# benchmarks: what quickstart.sh leaves out), and runs the whole test suite.
# Extra arguments go to ctest (e.g. -L coordinator, -R Ring).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# A tree configured here has line tables only (-g1): a backtrace still names
# file and line, and a fresh machine compiles it ~25 % faster than at -g.
args=()
[ -f "${BUILD_DIR:-build}/CMakeCache.txt" ] ||
  args=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
bash scripts/build.sh "${args[@]}"
# MLX on this jaccl (label mlx) before the suites, with every core: a first
# build takes ~8 minutes on 2 cores, later runs only relink. ctest's
# mlx_build_* tests redo this check in seconds (and fail, saying where the
# sources were looked for, when they are missing).
if [ -f "${JACCL_THIRD_PARTY:-../shared/third_party}/mlx-0.32.1.tar.gz" ]; then
  for variant in "" --split; do
    bash integrations/mlx/run.sh build "${BUILD_DIR:-build}" $variant
  done
fi
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j2 --timeout 300 "$@"
