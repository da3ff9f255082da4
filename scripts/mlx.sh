#!/usr/bin/env bash
# Builds upstream MLX (CPU backend, C++ library and Python package) with its
# jaccl backend compiled from MLX's unchanged sources and linked against this
# project's jaccl, installed first into the same prefix.
#
#   scripts/mlx.sh [--split] [--prefix DIR] [--print-env]
#
#   MLX_SOURCE=dir|tarball  MLX's source (default: clone the pinned release)
#   MLX_THIRD_PARTY=dir     holds MLX's FetchContent dependencies as archives
#                           (nanobind, fmt, json, gguf-tools; see
#                           ../shared/third_party/README.md); unset: download
#   JACCL_MLX_CACHE=dir     the build cache (default ~/.cache/jaccl/mlx)
#   --split                 also apply the opt-in patch giving Group.split
#   --prefix DIR            where jaccl and the `mlx` package are installed
#                           (default: a folder of the cache, printed at the end)
#   --print-env             only print the environment file of an earlier
#                           build with the same source and options
#
# The only change to MLX is integrations/mlx/mlx-jaccl-cmake.patch (an option
# MLX_BUILD_JACCL=AUTO|ON|OFF that uses an installed jaccl::jaccl off Apple).
# MLX is built once per (source, patches) into the cache; later runs
# reinstall jaccl and let ninja rebuild only what that changed (a relink).
# The last line printed is the path of $prefix/mlx-env.sh, which a shell
# sources to use that MLX with /usr/bin/python3: it sets PYTHONPATH, PATH
# (mlx.launch) and MLX_TESTS_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
mlx_tag=v0.32.1
mlx_repo=https://github.com/ml-explore/mlx.git
py=${JACCL_PYTHON:-/usr/bin/python3}
split=0
prefix=""
print_env=0
while [ $# -gt 0 ]; do
  case "$1" in
    --split) split=1 ;;
    --print-env) print_env=1 ;;
    --prefix) prefix=$2; shift ;;
    --prefix=*) prefix=${1#--prefix=} ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "mlx.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
cache=${JACCL_MLX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jaccl/mlx}
mkdir -p "$cache"
log() { echo "mlx.sh: $*" >&2; }
hash_tree() {
  (cd "$1" && find . -type f -not -path './.git/*' -print0 | sort -z |
    xargs -0 sha256sum) | sha256sum | cut -c1-64
}

# --- where MLX's source comes from, and what identifies it
src_kind=clone
if [ -n "${MLX_SOURCE:-}" ]; then
  if [ -d "$MLX_SOURCE" ]; then
    src_kind=dir
    src_id=$(hash_tree "$MLX_SOURCE")
  elif [ -f "$MLX_SOURCE" ]; then
    src_kind=tar
    src_id=$(sha256sum "$MLX_SOURCE" | cut -c1-64)
  else
    log "MLX_SOURCE=$MLX_SOURCE is neither a directory nor a file"
    exit 2
  fi
else
  clone="$cache/clone-$mlx_tag"
  if [ ! -d "$clone/.git" ]; then
    [ "$print_env" = 0 ] || { log "no MLX built yet: run scripts/mlx.sh"; exit 1; }
    log "cloning MLX $mlx_tag from $mlx_repo"
    git clone -q --depth 1 --branch "$mlx_tag" "$mlx_repo" "$clone.tmp"
    mv "$clone.tmp" "$clone"
  fi
  src_id=$(git -C "$clone" rev-parse HEAD)
fi
patches=("$here/integrations/mlx/mlx-jaccl-cmake.patch")
[ "$split" = 1 ] && patches+=("$here/integrations/mlx/mlx-jaccl-split.patch")
key=$( (echo "$src_id"; cat "${patches[@]}") | sha256sum | cut -c1-16)
work="$cache/$key"
[ -n "$prefix" ] || prefix="$work/prefix"
if [ "$print_env" = 1 ]; then
  prefix=$(cd "$prefix" 2>/dev/null && pwd) || prefix=""
  if [ -z "$prefix" ] || [ ! -f "$prefix/mlx-env.sh" ]; then
    log "no MLX built for this source and these options yet: run" \
      "scripts/mlx.sh$([ "$split" = 1 ] && echo " --split") first"
    exit 1
  fi
  echo "$prefix/mlx-env.sh"
  exit 0
fi
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)

# --- the patched source, made once per key
if [ ! -f "$work/src/.jaccl-patched" ]; then
  rm -rf "$work/src"
  mkdir -p "$work/src"
  case "$src_kind" in
    dir) cp -a "$MLX_SOURCE/." "$work/src/" ;;
    tar) tar -xzf "$MLX_SOURCE" -C "$work/src" --strip-components=1 ;;
    clone) cp -a "$clone/." "$work/src/" ;;
  esac
  for p in "${patches[@]}"; do
    log "applying $(basename "$p")"
    patch -d "$work/src" -p1 --forward --quiet <"$p"
  done
  touch "$work/src/.jaccl-patched"
fi

# --- MLX's FetchContent dependencies from local archives, when given
fc=()
if [ -n "${MLX_THIRD_PARTY:-}" ]; then
  deps="$cache/deps"
  mkdir -p "$deps"
  for spec in NANOBIND:nanobind-2.13.0 FMT:fmt-12.1.0 JSON:json-3.11.3 \
    GGUFLIB:gguf-tools-8fa6eb6; do
    name=${spec%%:*} dir=${spec#*:}
    archive="$MLX_THIRD_PARTY/$dir.tar.gz"
    if [ ! -f "$archive" ]; then
      log "MLX_THIRD_PARTY=$MLX_THIRD_PARTY has no $dir.tar.gz"
      exit 2
    fi
    [ -d "$deps/$dir" ] || tar -xzf "$archive" -C "$deps"
    fc+=("-DFETCHCONTENT_SOURCE_DIR_$name=$deps/$dir")
  done
  fc+=(-DFETCHCONTENT_FULLY_DISCONNECTED=ON)
fi

# --- this project's jaccl, installed into the prefix
jbuild=${BUILD_DIR:-$here/build}
log "building and installing jaccl from $here into $prefix"
BUILD_DIR="$jbuild" bash "$here/scripts/build.sh" >&2
cmake --install "$jbuild" --prefix "$prefix" >/dev/null

# --- MLX: CPU only, Python bindings into $prefix/python/mlx
pkg="$prefix/python/mlx"
mkdir -p "$pkg"
gen=()  # the generator is chosen once, at the first configure
if [ ! -f "$work/build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
  gen=(-G Ninja)
fi
log "configuring MLX in $work/build"
cmake -S "$work/src" -B "$work/build" ${gen[@]+"${gen[@]}"} \
  -DCMAKE_BUILD_TYPE=Release \
  -DMLX_BUILD_METAL=OFF -DMLX_BUILD_CPU=ON -DMLX_BUILD_CUDA=OFF \
  -DMLX_BUILD_JACCL=ON -DCMAKE_PREFIX_PATH="$prefix" \
  -Djaccl_DIR="$prefix/lib/cmake/jaccl" \
  -DMLX_BUILD_TESTS=OFF -DMLX_BUILD_EXAMPLES=OFF \
  -DMLX_BUILD_PYTHON_BINDINGS=ON -DMLX_BUILD_PYTHON_STUBS=OFF \
  -DPython_EXECUTABLE="$py" -DMLX_PYTHON_BINDINGS_OUTPUT_DIRECTORY="$pkg" \
  -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON -DCMAKE_INSTALL_PREFIX="$prefix" \
  ${fc[@]+"${fc[@]}"} >"$work/configure.log" 2>&1 || {
  tail -40 "$work/configure.log" >&2
  log "MLX configure failed (full log: $work/configure.log)"
  exit 1
}
log "building MLX (a first build takes several minutes)"
start=$(date +%s)
# Paths under $work made relative, so that ccache serves another key's build
# (the --split variant differs in one file) from this one's objects.
export CCACHE_BASEDIR="$work"
cmake --build "$work/build" -j"$(nproc)" >"$work/build.log" 2>&1 || {
  grep -E "error|Error" "$work/build.log" | head -20 >&2
  log "MLX build failed (full log: $work/build.log)"
  exit 1
}
log "MLX built in $(($(date +%s) - start)) s"
cmake --install "$work/build" >/dev/null
# The pure-Python part of the package, and MLX's console scripts.
# -u: files already there unchanged are left alone (a test may be importing
# them).
cp -a -u "$work/src/python/mlx/." "$pkg/"
mkdir -p "$prefix/bin"
for entry in launch:mlx.launch config:mlx.distributed_config; do
  mod=${entry%%:*} name=${entry#*:}
  cat >"$prefix/bin/$name" <<EOF
#!$py
import sys
sys.path.insert(0, "$prefix/python")
from mlx._distributed_utils.$mod import main
sys.exit(main())
EOF
  chmod +x "$prefix/bin/$name"
done
PYTHONPATH="$prefix/python" "$py" -c '
import mlx.core as mx
assert mx.distributed.is_available(backend="jaccl"), "jaccl backend missing"
' || { log "the built mlx does not offer backend=jaccl"; exit 1; }
# For tests and shells: `. $prefix/mlx-env.sh`.
cat >"$prefix/mlx-env.sh" <<EOF
export PYTHONPATH="$prefix/python\${PYTHONPATH:+:\$PYTHONPATH}"
export PATH="$prefix/bin:\$PATH"
export MLX_TESTS_DIR="$work/src/python/tests"
export MLX_JACCL_SPLIT=$split
EOF
log "MLX with jaccl is in $prefix (python package: $pkg; bin: $prefix/bin;"
log "environment: . $prefix/mlx-env.sh)"
echo "$prefix/mlx-env.sh"
