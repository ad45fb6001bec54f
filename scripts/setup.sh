#!/usr/bin/env bash
# Installs every build and test dependency from Debian bookworm's archive and
# builds the project into build/. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev libdpdk-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libyaml-cpp-dev
  libibverbs-dev ibverbs-providers linux-libc-dev python3-matplotlib
  libxml2-dev libvirt-dev libcivetweb-dev libsystemd-dev
  debhelper dh-dkms help2man lintian  # the Debian packages (tests/pkg/run-pkg.sh)
  valgrind  # bench/micro/layer_callgrind.sh
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build
