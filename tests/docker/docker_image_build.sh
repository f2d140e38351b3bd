#!/usr/bin/env bash
# Builds the CPU image as the README does (scripts/docker-build.sh: relserve:latest, and its build
# stage tagged relserve:build-cpu), for docker_image_test and the README's quick start test (a
# CTest fixture). Only where RELSERVE_DOCKER_TESTS is `required` (scripts/test.sh, hence CI) or
# `build`: on a developer's machine a plain ctest does not spend minutes rebuilding the image, and
# the tests that use it run against the image that is there. Docker's layer cache makes a build of
# unchanged sources take seconds.
#   docker_image_build.sh SOURCE_DIR
set -Eeuo pipefail
root="$1"
. "$(dirname "$0")/docker_env.sh"
case "${RELSERVE_DOCKER_TESTS:-}" in
  required|build) ;;
  *) echo "SKIP: the image is built only with RELSERVE_DOCKER_TESTS=build or required (scripts/test.sh)"; exit 77 ;;
esac
require_docker_engine
start=$(date +%s)
"$root/scripts/docker-build.sh" cpu
echo "image build: $(( $(date +%s) - start )) s"
docker image inspect relserve:latest --format 'relserve:latest {{.Id}} {{.Size}} bytes'
