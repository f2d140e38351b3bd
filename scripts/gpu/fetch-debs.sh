#!/usr/bin/env bash
# Run on a Debian 12 machine with network access to Debian's archive. Downloads every .deb the
# relserve build needs beyond what a GPU machine with CUDA and a pip PyTorch already has (gRPC,
# protobuf, Abseil, prometheus-cpp, SentencePiece, nlohmann-json, cpp-httplib, libcurl, ICU, zlib, GoogleTest and
# their libraries) into scripts/gpu/debs (git-ignored). scripts/gpu/round.sh unpacks them
# there into a prefix.
#   scripts/gpu/fetch-debs.sh
set -euo pipefail
cd "$(dirname "$0")"
wanted=(
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libsentencepiece-dev nlohmann-json3-dev libcpp-httplib-dev
  libcurl4-openssl-dev libicu-dev zlib1g-dev
  libgtest-dev libgmock-dev pkgconf
)
# What every Linux with a C++ toolchain has, and what must come from the GPU machine itself
# (its C library and compiler runtime are newer than Debian 12's and must win).
skip='^(libc6|libc6-dev|libc-dev-bin|libgcc-s1|libstdc\+\+6|gcc-12-base|linux-libc-dev|libcrypt1|libcrypt-dev|libnsl2|libnsl-dev|libtirpc.*|rpcsvc-proto|debconf|dpkg|perl-base|tar|install-info|libselinux1|libpcre2-8-0|zlib1g|libzstd1|liblzma5|libbz2-1.0|libgssapi-krb5-2|libkrb5.*|libk5crypto3|libcom-err2|libkeyutils1|libssl3|libtinfo6|libncursesw6|libmd0|libbsd0|readline-common|libreadline8|libsqlite3-0|libffi8|libexpat1|mime-support|media-types|tzdata|python3.*|libpython3.*|libuuid1|libdb5.3|libgdbm6|libgdbm-compat4|netbase|libmpdec3|libedit2)$'
mapfile -t pkgs < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
                      --no-replaces --no-enhances --no-pre-depends "${wanted[@]}" \
                    | grep -v '^ ' | grep -v '^<' | sort -u | grep -Ev "$skip")
rm -rf debs && mkdir -p debs
(cd debs && apt-get download "${pkgs[@]}" >/dev/null)
echo "fetch-debs: $(ls debs | wc -l) packages, $(du -sh debs | cut -f1) in scripts/gpu/debs"
