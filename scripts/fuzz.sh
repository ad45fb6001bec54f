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
  # Checked-in seeds (<dir>/testing/<target>_corpus/) are read, never written.
  seeds=$(find backend vhost-rdma -type d -path "*/testing/${t}_corpus" | head -1)
  opts=()
  case $t in
    # Programs of verbs need room; a stuck input is a bug (bounded polling).
    fuzz_engine) opts=(-max_len=2048 -timeout=20) ;;
  esac
  echo "fuzz: $t for ${secs}s"
  ./build-fuzz/$(find build-fuzz -name "$t" -type f -printf '%P\n' | head -1) -max_total_time="$secs" -print_final_stats=1 "${opts[@]}" build-fuzz/corpus/$t $seeds 2>&1 | tail -5
done
