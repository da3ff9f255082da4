#!/usr/bin/env bash
# Runs the Python test suite (python/tests) under jaccl-run.
#
#   python/run_tests.sh [build-dir] [ranks ...]     (default: build, 2 and 4)
#
# Each rank runs pytest and prints its summary line; the exit status is
# non-zero if any rank of any run failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd) || exit 2
shift $(($# > 0 ? 1 : 0))
ranks=("$@")
[ ${#ranks[@]} -eq 0 ] && ranks=(2 4)

py=${JACCL_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
launcher="$build/tools/jaccl-run"
if [ ! -x "$launcher" ] || ! ls "$build"/python/jaccl*.so >/dev/null 2>&1; then
  echo "run_tests.sh: $launcher or $build/python/jaccl*.so missing: build first" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/jaccl-pytest.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
# Bound every wait, so a broken test fails instead of hanging the suite.
export JACCL_TIMEOUT=${JACCL_TIMEOUT:-20}
export JACCL_OP_TIMEOUT=${JACCL_OP_TIMEOUT:-30}

status=0
for n in "${ranks[@]}"; do
  echo "== python tests under jaccl-run -n $n"
  # Each rank writes its pytest status to status/rank<r> and exits 0 (see
  # conftest.py), so every rank gets to print its summary.
  sdir="$work/n$n/status"
  JACCL_PYTEST_DIR="$work/n$n" JACCL_PYTEST_STATUS_DIR="$sdir" \
    "$launcher" -n "$n" -- \
    "$py" -m pytest -q -p no:cacheprovider "$here/tests" || status=1
  for ((r = 0; r < n; r++)); do
    rc=$(cat "$sdir/rank$r" 2>/dev/null || echo missing)
    if [ "$rc" != 0 ]; then
      echo "== -n $n: rank $r: pytest status $rc"
      status=1
    fi
  done
done
[ $status -eq 0 ] && echo "== python tests: all passed" || echo "== python tests: FAILED"
exit $status
