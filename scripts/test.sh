#!/usr/bin/env bash
# Sets up (Debian packages), builds and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure --parallel "${JOBS:-2}" --timeout 900
