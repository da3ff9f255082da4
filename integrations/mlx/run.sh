#!/usr/bin/env bash
# Test driver for the MLX integration (ctest calls it; so can you).
#
#   integrations/mlx/run.sh build BUILD_DIR [--split]
#       builds MLX on this checkout's jaccl with scripts/mlx.sh from the
#       pinned sources in $JACCL_THIRD_PARTY (default ../shared/third_party
#       beside the repository), and records its environment in
#       BUILD_DIR/mlx/<variant>.env
#   integrations/mlx/run.sh run BUILD_DIR [--split] -- COMMAND...
#       runs COMMAND with that MLX (PYTHONPATH, PATH, MLX_TESTS_DIR) and
#       JACCL_BUILD_DIR set
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mode=${1:?usage: run.sh build|run BUILD_DIR [--split] [-- COMMAND...]}
build=$(cd "${2:?no build directory}" && pwd)
shift 2
split=()
variant=default
if [ "${1:-}" = "--split" ]; then
  split=(--split)
  variant=split
  shift
fi
envfile="$build/mlx/$variant.env"
case "$mode" in
  build)
    tp=${JACCL_THIRD_PARTY:-$repo/../shared/third_party}
    if [ ! -f "$tp/mlx-0.32.1.tar.gz" ]; then
      echo "run.sh: MLX's sources are missing: looked for" \
        "$tp/mlx-0.32.1.tar.gz and its dependencies (nanobind, fmt, json," \
        "gguf-tools archives) there; set JACCL_THIRD_PARTY to the folder" \
        "that holds them (see ../shared/third_party/README.md)" >&2
      exit 1
    fi
    mkdir -p "$build/mlx"
    MLX_SOURCE="$tp/mlx-0.32.1.tar.gz" MLX_THIRD_PARTY="$tp" \
      BUILD_DIR="$build" bash "$repo/scripts/mlx.sh" ${split[@]+"${split[@]}"} \
      >"$build/mlx/$variant.out"
    cp "$(tail -1 "$build/mlx/$variant.out")" "$envfile"
    echo "run.sh: MLX ($variant) ready: $envfile"
    ;;
  run)
    [ "${1:-}" = "--" ] && shift
    if [ ! -f "$envfile" ]; then
      echo "run.sh: $envfile is missing: run 'run.sh build $build" \
        "${split[*]}' (ctest's mlx_build_$variant test) first" >&2
      exit 1
    fi
    # shellcheck disable=SC1090
    . "$envfile"
    export JACCL_BUILD_DIR="$build"
    exec "$@"
    ;;
  *)
    echo "run.sh: unknown mode '$mode' (build or run)" >&2
    exit 2
    ;;
esac
