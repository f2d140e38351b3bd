# Sourced by the tests that need a Docker engine (tests/docker/*.sh): decides between running,
# skipping (77) and failing. RELSERVE_DOCKER_TESTS=required (set by scripts/test.sh, hence CI)
# makes a missing engine or image a failure with the reason; unset, those tests skip, as on a
# developer's machine without Docker. scripts/docker-engine.sh starts an engine.
docker_unavailable() {
  if [ "${RELSERVE_DOCKER_TESTS:-}" = required ]; then
    echo "FAILED: $1 (RELSERVE_DOCKER_TESTS=required: the image must be built and run here;" \
         "scripts/install-deps.sh --docker installs the engine, scripts/docker-engine.sh starts it)"
    exit 1
  fi
  echo "SKIP: $1 (RELSERVE_DOCKER_TESTS=required, as scripts/test.sh sets, makes this a failure)"
  exit 77
}
require_docker_engine() {
  command -v docker > /dev/null || docker_unavailable "docker is not installed"
  local err
  err=$(docker info 2>&1 > /dev/null) || docker_unavailable "no Docker engine answers: $(echo "$err" | tail -1)"
}
