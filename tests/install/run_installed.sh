#!/usr/bin/env bash
# The installed tools and Python module run from their prefix alone: no
# LD_LIBRARY_PATH, and libjaccl is the prefix's copy, not the build tree's.
#
#   run_installed.sh PREFIX LIBDIR [PYDIR PYTHON]
#   (LIBDIR, PYDIR relative to PREFIX; PYDIR empty: no Python module built)
set -euo pipefail
prefix=$1 libdir=$2 pydir=${3:-} python=${4:-/usr/bin/python3}
unset LD_LIBRARY_PATH LD_PRELOAD PYTHONPATH
lib="$prefix/$libdir/libjaccl.so.0"
fail() { echo "run_installed: $*" >&2; exit 1; }
[ -e "$lib" ] || fail "$lib was not installed"
real_lib=$(readlink -f "$lib")

# The loader resolves libjaccl.so.0 to the prefix through the run path
# (jaccl-bench needs it; jaccl-run may not link it at all).
for exe in "$prefix/bin/jaccl-run" "$prefix/bin/jaccl-bench"; do
  [ -x "$exe" ] || fail "$exe was not installed"
  resolved=$(ldd "$exe" | awk '$1 == "libjaccl.so.0" { print $3 }')
  if [ -z "$resolved" ]; then
    [ "$(basename "$exe")" = jaccl-run ] && continue
    fail "$exe does not link libjaccl.so.0: $(ldd "$exe")"
  fi
  [ "$(readlink -f "$resolved")" = "$real_lib" ] ||
    fail "$exe loads $resolved, not the prefix's $lib (run path: $(readelf -d "$exe" | grep -i -E 'rpath|runpath'))"
done

# A 2-rank job from the prefix, with the correctness check on.
out=$("$prefix/bin/jaccl-run" -n 2 --timeout 120 -- "$prefix/bin/jaccl-bench" -c -e 1M 2>&1) ||
  fail "jaccl-run -n 2 -- jaccl-bench -c -e 1M failed: $out"
echo "$out" | grep -E "^\[0\] +1048576 " || fail "jaccl-bench printed no 1 MiB row: $out"

if [ -n "$pydir" ]; then
  mod_dir="$prefix/$pydir"
  # Run from / so neither the source nor the build tree is on sys.path.
  got=$(cd / && PYTHONPATH="$mod_dir" "$python" -c '
import jaccl
maps = [l.split()[-1] for l in open("/proc/self/maps") if "libjaccl.so" in l]
print(jaccl.__file__)
print(sorted(set(maps))[0] if maps else "none")
') || fail "import jaccl with PYTHONPATH=$mod_dir failed"
  mod=$(echo "$got" | sed -n 1p) loaded=$(echo "$got" | sed -n 2p)
  case "$mod" in
  "$mod_dir"/*) ;;
  *) fail "import jaccl found $mod, not the module in $mod_dir" ;;
  esac
  [ "$(readlink -f "$loaded")" = "$real_lib" ] ||
    fail "the installed module loaded $loaded, not $lib"
  echo "python: $mod with $loaded"
fi
echo "installed tools and module OK"
