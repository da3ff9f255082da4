#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined)
# straight from the sources they need, outside CMake.
#
#   scripts/build-fuzz.sh [out-dir]            # default: build-fuzz/
#   build-fuzz/fuzz_handshake -max_total_time=60 build-fuzz/corpus-handshake
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build-fuzz}
cxx=${CXX:-}
if [[ -z $cxx ]]; then
  for c in clang++-14 clang++; do
    if command -v "$c" >/dev/null; then
      cxx=$c
      break
    fi
  done
fi
if [[ -z $cxx ]]; then
  echo "build-fuzz.sh: clang++ not found (set CXX)" >&2
  exit 1
fi
mkdir -p "$out" "$out/corpus-handshake"

flags=(-std=c++20 -g -O1 -fno-omit-frame-pointer
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -Wall -Wextra -Wno-missing-field-initializers
  -I"$root/include" -I"$root/src")

"$cxx" "${flags[@]}" -o "$out/fuzz_handshake" \
  "$root/fuzz/fuzz_handshake.cpp" \
  "$root/src/common/handshake.cpp" \
  "$root/src/common/net.cpp" \
  "$root/src/common/error.cpp" \
  "$root/src/bootstrap/tcp_star_wire.cpp" \
  -lcrypto

echo "built $out/fuzz_handshake"
echo "run:  $out/fuzz_handshake -max_total_time=60 $out/corpus-handshake"
