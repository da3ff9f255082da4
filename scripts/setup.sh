#!/usr/bin/env bash
# Idempotent: installs every Debian package the build, tests and benchmarks use.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  dpkg-dev file
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev nettle-dev
  libhiredis-dev redis-server
  libopenmpi-dev openmpi-bin
  libfabric-dev libfabric-bin
  libpmix-dev slurm-wlm munge
  pybind11-dev python3-dev python3-numpy python3-pytest python3-zmq
  libzmq3-dev cppzmq-dev
  libgloo-dev iperf3 gnuplot-nox
  python3-torch libtorch-dev
  iproute2 procps
  openssh-server openssh-client
  libopenblas-dev liblapacke-dev patch ccache git
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
