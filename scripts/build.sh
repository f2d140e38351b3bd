#!/usr/bin/env bash
# Configures and builds relserve (Release) into ${BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
fi
# Each file that includes LibTorch headers needs about 1 GB to compile: 2 jobs is safe on
# small machines; raise JOBS where there is memory to spare.
cmake --build "$BUILD_DIR" --parallel "${JOBS:-2}"
