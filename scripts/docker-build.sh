#!/usr/bin/env bash
# Builds relserve's Docker image: relserve:latest from Dockerfile (CPU), or relserve:cuda from
# Dockerfile.cuda with `scripts/docker-build.sh cuda`. Makes sure the Debian 12 base image exists
# first (scripts/docker-base-image.sh). JOBS sets the compile parallelism inside the build.
set -euo pipefail
cd "$(dirname "$0")/.."
variant="${1:-cpu}"
JOBS=${JOBS:-2}
scripts/docker-base-image.sh
case "$variant" in
  cpu) docker build --build-arg JOBS="$JOBS" -t relserve:latest -f Dockerfile . ;;
  cuda) docker build --build-arg JOBS="$JOBS" -t relserve:cuda -f Dockerfile.cuda . ;;
  *) echo "usage: $0 [cpu|cuda]" >&2; exit 2 ;;
esac
