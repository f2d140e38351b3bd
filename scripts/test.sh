#!/usr/bin/env bash
# Sets up (Debian packages, the Docker engine among them), builds, installs the tests' npm packages
# (scripts/install-test-packages.sh) and runs the whole test suite,
# the Docker image built and run for real among it (tests/docker). RELSERVE_DOCKER_TESTS=skip
# leaves the image out (its tests then skip); by default (`required`) a Docker engine that cannot
# start fails those tests with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
# The npm packages of the client and deploy tests, fetched here with retries rather than inside
# a test's time limit; where that fails, those tests try once more and fail, saying why.
BUILD_DIR="$BUILD_DIR" scripts/install-test-packages.sh || echo "test: the tests' npm packages are not installed (above): real_clients_test and deploy_manifests_test will try again" >&2
export RELSERVE_DOCKER_TESTS="${RELSERVE_DOCKER_TESTS:-required}"
if [ "$RELSERVE_DOCKER_TESTS" = required ]; then
  # Started here, once, before the tests; where it cannot start, the docker tests fail saying why.
  scripts/docker-engine.sh || echo "test: no Docker engine: the tests that build and run the image will fail" >&2
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure --parallel "${JOBS:-2}" --timeout 900
