#!/usr/bin/env bash
# Makes sure a Docker engine answers (`docker info`). Where none does, starts one: through
# systemd where systemd runs, else `dockerd` in the background with its log in $DOCKERD_LOG
# (default /var/log/relserve-dockerd.log), as on CI machines and containers without an init
# system. Waits up to $DOCKER_WAIT_S seconds (default 60) for the engine to answer; exits 1
# with the reason and the log's last lines when it does not. Needs root (or sudo) to start one.
# The engine itself comes from `scripts/install-deps.sh --docker` (Debian's docker.io).
#
#   scripts/docker-engine.sh
set -euo pipefail
log="${DOCKERD_LOG:-/var/log/relserve-dockerd.log}"
wait_s="${DOCKER_WAIT_S:-60}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if ! command -v docker > /dev/null; then
  echo "docker-engine: no docker command: install the engine with scripts/install-deps.sh --docker" >&2
  exit 1
fi
if docker info > /dev/null 2>&1; then
  echo "docker-engine: the Docker engine answers"
  exit 0
fi
if [ -d /run/systemd/system ] && command -v systemctl > /dev/null; then
  echo "docker-engine: starting docker.service"
  $SUDO systemctl start docker || true
else
  dockerd_bin="$(command -v dockerd || true)"
  if [ -z "$dockerd_bin" ]; then
    echo "docker-engine: no Docker daemon answers and dockerd is not installed:" \
         "scripts/install-deps.sh --docker installs it (Debian's docker.io)" >&2
    exit 1
  fi
  echo "docker-engine: no systemd; starting $dockerd_bin in the background (log: $log)"
  # setsid + nohup: the daemon outlives this script and the CI step that started it.
  $SUDO sh -c "setsid nohup '$dockerd_bin' >> '$log' 2>&1 < /dev/null &"
fi
for _ in $(seq 1 "$wait_s"); do
  if docker info > /dev/null 2>&1; then
    echo "docker-engine: the Docker engine answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
    exit 0
  fi
  sleep 1
done
echo "docker-engine: the Docker engine did not answer within ${wait_s}s" >&2
if [ -r "$log" ]; then echo "--- last lines of $log:" >&2; tail -20 "$log" >&2; fi
docker info 2>&1 | tail -3 >&2 || true
exit 1
