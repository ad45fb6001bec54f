#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for N seconds (default 30).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
if ! command -v clang++ >/dev/null; then echo "fuzz: clang++ not installed, skipped"; exit 0; fi
[ -f build-fuzz/build.ninja ] || CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DVRDMA_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
targets=$(cmake --build build-fuzz --target help | sed -n 's/^\(fuzz_[a-z_]*\):.*/\1/p')
[ -n "$targets" ] || { echo "fuzz: no fuzz targets defined"; exit 0; }
cmake --build build-fuzz --target $targets
for t in $targets; do
  mkdir -p build-fuzz/corpus/$t
  echo "fuzz: $t for ${secs}s"
  ./build-fuzz/$(find build-fuzz -name "$t" -type f -printf '%P\n' | head -1) -max_total_time="$secs" -print_final_stats=1 build-fuzz/corpus/$t 2>&1 | tail -5
done
