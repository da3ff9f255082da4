#!/usr/bin/env bash
# The Debian package, as a user gets it: cpack builds it from the configured
# (and built) tree BUILD; dpkg installs it, jaccl-run -n 2 -- jaccl-bench -c
# and /usr/bin/python3 -c "import jaccl" run from it in a clean environment,
# and dpkg removes it again.
#
#   deb_check.sh BUILD WORK
#
# dpkg runs inside a private mount namespace whose /usr, /etc and /var are
# overlays on the machine's (writes go to WORK): the real system never sees
# the package, so a failed or killed run cannot leave it installed, and the
# machine's other users (and the build tree's tests) are not affected. Needs
# root (exit 77: skipped otherwise).
set -euo pipefail
build=$(cd "$1" && pwd) work=$2
if [ "$(id -u)" -ne 0 ]; then
  echo "deb_check: needs root (dpkg, mount namespaces); skipped"
  exit 77
fi
for tool in cpack dpkg-deb dpkg-shlibdeps unshare; do
  command -v "$tool" >/dev/null || { echo "deb_check: $tool not found" >&2; exit 1; }
done
fail() { echo "deb_check: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/pkg"
trap 'rm -rf "$work/ovl"' EXIT

(cd "$build" && cpack -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log" >&2; fail "cpack -G DEB failed"; }
deb=$(ls "$work"/pkg/jaccl_*.deb)
echo "package: $deb ($(du -h "$deb" | cut -f1))"

# What it holds and what it declares.
files=$(dpkg-deb -c "$deb" | awk '{ print $NF }')
for want in ./usr/bin/jaccl-run ./usr/bin/jaccl-bench ./usr/include/jaccl/jaccl.h \
            ./usr/lib/cmake/jaccl/jacclConfig.cmake; do
  echo "$files" | grep -qx -- "$want" || fail "the package lacks $want"
done
echo "$files" | grep -q '/libjaccl\.so\.0' || fail "the package lacks libjaccl.so.0"
echo "$files" | grep -q 'dist-packages/jaccl\..*\.so$' || fail "the package lacks the Python module"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for want in libc6 libstdc++6 libnettle8 python3 python3-numpy; do
  echo "$depends" | grep -q "\b$want\b" || fail "Depends lacks $want: $depends"
done

# Install, run, remove: in a throwaway mount namespace.
mkdir -p "$work/ovl"
cat >"$work/inside.sh" <<'INSIDE'
set -euo pipefail
ovl=$1 deb=$2
for d in usr etc var; do
  mkdir -p "$ovl/$d.up" "$ovl/$d.work"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$ovl/$d.up,workdir=$ovl/$d.work" "/$d"
done
export DEBIAN_FRONTEND=noninteractive
dpkg -i "$deb"
cd /
# What a user's shell has: no LD_LIBRARY_PATH, no PYTHONPATH, no build tree.
clean=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
lib=$(ldd /usr/bin/jaccl-bench | awk '$1 == "libjaccl.so.0" { print $3 }')
lib=$(readlink -f "$lib")
case "$lib" in
/usr/lib/*) ;;
*) echo "jaccl-bench loads libjaccl.so.0 from '$lib', not the package" >&2; exit 1 ;;
esac
out=$("${clean[@]}" jaccl-run -n 2 --timeout 120 -- jaccl-bench -c -e 1M 2>&1) ||
  { echo "$out" >&2; echo "jaccl-run -n 2 -- jaccl-bench -c failed" >&2; exit 1; }
echo "$out" | grep -E '^\[0\] +1048576 ' ||
  { echo "$out" >&2; echo "jaccl-bench printed no 1 MiB row" >&2; exit 1; }
mod=$("${clean[@]}" /usr/bin/python3 -c 'import jaccl; print(jaccl.__file__)')
case "$mod" in
/usr/lib/python3*) echo "python: $mod" ;;
*) echo "import jaccl found $mod, not the package's module" >&2; exit 1 ;;
esac
dpkg -r jaccl
[ ! -e /usr/bin/jaccl-run ] || { echo "dpkg -r left /usr/bin/jaccl-run" >&2; exit 1; }
echo "installed, ran and removed"
INSIDE
had_before=no
[ -e /usr/bin/jaccl-run ] && had_before=yes
unshare --mount --propagation private bash "$work/inside.sh" "$work/ovl" "$deb"
if [ "$had_before" = no ] && [ -e /usr/bin/jaccl-run ]; then
  fail "the package leaked out of the mount namespace"
fi
echo "deb_check OK"
