#!/usr/bin/env bash
# Runs the whole test suite: builds (incrementally) and runs ctest.
#   scripts/test.sh            the normal build, in build/
#   scripts/test.sh --asan     the ASan+UBSan build, in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build; extra=()
if [ "${1:-}" = "--asan" ]; then
  # -g1: line tables only, enough for the sanitizers' reports, and an
  # eighth less compile time than -g (no variables' debug info).
  dir=build-asan; extra=(-DVRDMA_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
                         -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1)
fi
[ -f "$dir/build.ninja" ] || cmake -S . -B "$dir" -G Ninja "${extra[@]}"
cmake --build "$dir"
ctest --test-dir "$dir" --output-on-failure -j2 --timeout 600
