#!/usr/bin/env bash
# Installs the Debian 12 packages kolo needs to build and test, skipping those already present.
# With --ci, also what .ci/run's extra checks need: clang-14 with its sanitizer runtimes (the
# ASan+UBSan build, -Wthread-safety) and clang-format-14. Uses sudo when not run as root.
# Touches nothing else.
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev catch2
  iproute2  # ip netns and tc, for kolorun's simulated multi-host test
  openmpi-bin mpich  # the launcher tests run kolo under mpirun and mpiexec
  libssl-dev openssl
)
if [ "${1:-}" = "--ci" ]; then
  packages+=(clang-14 libclang-rt-14-dev clang-format-14)
elif [ $# -ne 0 ]; then
  echo "usage: tools/install-deps.sh [--ci]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
