#!/usr/bin/env bash
# Makes sure the Debian 12 base image the Dockerfile starts from (debian:bookworm-slim) exists
# in the local Docker engine. It is pulled from the registry when one is reachable; otherwise it
# is built from Debian's own package archive with debootstrap (minbase variant) and imported,
# which needs only deb.debian.org. Needs root and the debootstrap package.
#
#   scripts/docker-base-image.sh [IMAGE]     (default: debian:bookworm-slim)
set -euo pipefail
image="${1:-debian:bookworm-slim}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if docker image inspect "$image" > /dev/null 2>&1; then
  echo "docker-base-image: $image is present"
  exit 0
fi
if timeout 60 docker pull "$image" > /dev/null 2>&1; then
  echo "docker-base-image: pulled $image"
  exit 0
fi
command -v debootstrap > /dev/null || { echo "docker-base-image: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
echo "docker-base-image: no registry; building $image from $mirror with debootstrap"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
rm -f "$root.log"
# The same apt sources a Debian 12 image carries, and no caches.
cat > "$root/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' - "$image" > /dev/null
echo "docker-base-image: imported $image"
