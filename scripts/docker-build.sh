#!/usr/bin/env bash
# Builds relserve's Docker image: relserve:latest from Dockerfile (CPU), or relserve:cuda from
# Dockerfile.cuda with `scripts/docker-build.sh cuda`. Makes sure the Debian 12 base image exists
# first (scripts/docker-base-image.sh). JOBS sets the compile parallelism inside the build.
#
# The build stage is tagged too (relserve:build-cpu, relserve:build-cuda) instead of being left
# behind untagged: it is Docker's layer cache for the next build (seconds when the sources did not
# change), `docker rmi relserve:build-cpu` frees it. Older build stages and images that a rebuild
# untagged (label relserve.stage) are pruned once no container uses them.
set -euo pipefail
cd "$(dirname "$0")/.."
variant="${1:-cpu}"
JOBS=${JOBS:-2}
case "$variant" in
  cpu) dockerfile=Dockerfile; tag=relserve:latest ;;
  cuda) dockerfile=Dockerfile.cuda; tag=relserve:cuda ;;
  *) echo "usage: $0 [cpu|cuda]" >&2; exit 2 ;;
esac
scripts/docker-base-image.sh
docker build --build-arg JOBS="$JOBS" -t "$tag" -f "$dockerfile" .
# The build stage again, now all from the cache, to tag it: tagged after the image, it is the
# stage of the sources as they were for this build even where they changed since an earlier one
# (an untagged stage is pruned below, with its layers).
docker build --build-arg JOBS="$JOBS" --target build -t "relserve:build-$variant" -f "$dockerfile" .
docker image prune --force --filter label=relserve.stage > /dev/null
docker image inspect "$tag" --format "docker-build: $tag {{.Size}} bytes"
