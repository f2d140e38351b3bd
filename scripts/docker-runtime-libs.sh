#!/usr/bin/env bash
# The image's runtime stage carries the shared libraries relserve loads, not every package they
# come from: Debian's libtorch1.13 depends on OpenCV, FFmpeg, GDAL, Qt and their data files and
# drivers (Mesa, LLVM), of which the dynamic loader maps only the libraries listed in the
# binaries' NEEDED entries, transitively. Run in the Dockerfile's build stage, after
# `cmake --install`: copies every library that `ldd` resolves for the installed ELF files into
# DEST/lib (named by the name the loader looks for), and each library's Debian copyright file
# into DEST/share/doc/PACKAGE/, leaving out the libraries of the packages the base image holds
# already (BASE_PACKAGES: one package name a line, taken in the build stage before any install).
# Fails when a library is not found.
#
#   scripts/docker-runtime-libs.sh PREFIX DEST BASE_PACKAGES
set -euo pipefail
prefix="$1"; dest="$2"; base_list="$3"
mkdir -p "$dest/lib" "$dest/share/doc"

elf_files=()
while IFS= read -r -d '' f; do
  if [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ]; then elf_files+=("$f"); fi
done < <(find "$prefix" -type f -print0)
[ "${#elf_files[@]}" -gt 0 ] || { echo "docker-runtime-libs: no ELF file under $prefix" >&2; exit 1; }

# "libfoo.so.1 => /lib/x86_64-linux-gnu/libfoo.so.1 (0x...)", once per library.
deps="$(mktemp)"
for f in "${elf_files[@]}"; do
  if ! ldd "$f" > "$deps.one" 2>&1; then
    # A static program (relserve's launcher) loads nothing.
    if grep -q 'not a dynamic executable' "$deps.one"; then continue; fi
    echo "docker-runtime-libs: ldd $f failed:" >&2; cat "$deps.one" >&2; exit 1
  fi
  if grep 'not found' "$deps.one"; then echo "docker-runtime-libs: $f: libraries not found (above)" >&2; exit 1; fi
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' "$deps.one" >> "$deps"
done
sort -u -o "$deps" "$deps"

# The Debian package that owns each library file, asked of dpkg once for all of them (dpkg
# lists /lib paths for files under /usr/lib on a merged-/usr system, and the real file for a
# symlinked name such as libblas.so.3, so each library has several candidate paths).
candidates() {
  local path="$1" real
  real="$(readlink -f "$path")"
  printf '%s\n' "$path" "$real" "${path#/usr}" "${real#/usr}" "/usr$path" "/usr$real"
}
declare -A owner_of=()
while read -r _ path; do candidates "$path"; done < "$deps" | sort -u > "$deps.paths"
xargs -a "$deps.paths" -d '\n' dpkg-query -S 2>/dev/null > "$deps.owners" || true
while IFS= read -r line; do
  case "$line" in "diversion "*) continue ;; esac
  pkg="${line%%: /*}"; file="/${line#*: /}"
  pkg="${pkg%%,*}"; pkg="${pkg%%:*}"
  owner_of[$file]="$pkg"
done < "$deps.owners"
owner() {
  local p
  while IFS= read -r p; do
    if [ -n "${owner_of[$p]:-}" ]; then echo "${owner_of[$p]}"; return; fi
  done < <(candidates "$1")
  echo "?"
}

copied=0; kept=0; bytes=0
declare -A packages=()
while read -r name path; do
  pkg="$(owner "$path")"
  if [ "$pkg" != "?" ] && grep -qx "$pkg" "$base_list"; then kept=$((kept + 1)); continue; fi
  case "$path" in "$prefix"/*) continue ;; esac   # relserve's own module: installed already
  cp -L "$path" "$dest/lib/$name"
  copied=$((copied + 1)); bytes=$((bytes + $(stat -c %s "$dest/lib/$name")))
  [ "$pkg" = "?" ] || packages[$pkg]=1
done < "$deps"
for pkg in "${!packages[@]}"; do
  if [ -f "/usr/share/doc/$pkg/copyright" ]; then
    mkdir -p "$dest/share/doc/$pkg" && cp "/usr/share/doc/$pkg/copyright" "$dest/share/doc/$pkg/"
  fi
done
printf '%s\n' "${!packages[@]}" | sort > "$dest/share/doc/relserve-runtime-packages.txt"
rm -f "$deps" "$deps.one" "$deps.paths" "$deps.owners"
echo "docker-runtime-libs: $copied libraries ($((bytes / 1048576)) MiB) from ${#packages[@]} packages copied," \
     "$kept left to the base image"
