#!/usr/bin/env bash
# Installs every Debian 12 package relserve needs to build, test and run.
# Used by the README, .ci/run and the Dockerfile. Idempotent; needs root (or sudo).
#
#   scripts/install-deps.sh            build + test dependencies (default)
#   scripts/install-deps.sh --compile  only what compiling the binaries needs (the Docker build stage)
#   scripts/install-deps.sh --runtime  only the shared libraries the binaries need at run time
#   scripts/install-deps.sh --image    the Docker image's runtime stage: what the libraries copied
#                                      from its build stage (scripts/docker-runtime-libs.sh) lack
#   scripts/install-deps.sh --sanitize build + test dependencies and what scripts/sanitize.sh needs
#   scripts/install-deps.sh --docker   only the Docker engine and what building the image needs
#                                      (docker.io, debootstrap); scripts/docker-engine.sh starts it
#
# RELSERVE_TORCH=external leaves Debian's LibTorch (CPU) out, for builds against another
# LibTorch such as a CUDA one (Dockerfile.cuda).
set -euo pipefail

mode=build
case "${1:-}" in
  --runtime) mode=runtime ;;
  --image) mode=image ;;
  --compile) mode=compile ;;
  --sanitize) mode=sanitize ;;
  --docker) mode=docker ;;
  ""|--build) mode=build ;;
  *) echo "usage: $0 [--build|--compile|--runtime|--image|--sanitize|--docker]" >&2; exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

runtime_pkgs=(
  libtorch1.13            # LibTorch (CPU)
  libopenblas0-pthread    # fast BLAS behind LibTorch (Debian's alternatives pick it over reference BLAS)
  libsentencepiece0
  libicu72                # Unicode tables for the WordPiece and XLNet tokenizers (server/tokenizer)
  libgrpc++1.51 libgrpc29 libprotobuf32
  libabsl20220623
  libprometheus-cpp-core1.0
  libssl3                 # API keys: SHA-256 and constant-time comparison (server/auth)
  libcurl4                # Hub downloads over HTTPS (server/hub)
  zlib1g                  # CRC-32 of pytorch_model.bin entries (server/checkpoint)
  ca-certificates
)
image_pkgs=(
  ca-certificates         # Hub downloads over HTTPS (server/hub); the libraries come from the build stage
)
compile_pkgs=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev
  libopenblas0-pthread
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev
  prometheus-cpp-dev
  libsentencepiece-dev sentencepiece
  libicu-dev              # server/tokenizer: Unicode categories, case mapping, normalization
  nlohmann-json3-dev
  libcpp-httplib-dev      # tests: the fake Hub (tests/hub) and HTTP clients in tests
  libssl-dev              # API keys (server/auth), Hub download checksums (server/hub)
  libcurl4-openssl-dev    # Hub downloads over HTTPS (server/hub)
  zlib1g-dev              # pytorch_model.bin (server/checkpoint)
)
test_pkgs=(
  libgtest-dev libgmock-dev libbenchmark-dev
  prometheus              # promtool: lints the /metrics output in tests/metrics
  python3 python3-grpcio python3-protobuf   # the Python example client (client/python) and its test
  openssl                 # tests/client: certificates for the TLS and mutual-TLS tests
  python3-yaml yamllint   # tests/deploy: checks the rendered Kubernetes manifests
  python3-requests curl   # tests/http_api: the HTTP API called by real clients
  nodejs npm              # tests/clients: the official client packages from npm (Node.js >= 18; Debian's is 18)
)
# The tests build relserve's image and run it (tests/docker).
docker_pkgs=(
  docker.io               # the Docker engine (dockerd, containerd, runc) and its client
  debootstrap             # scripts/docker-base-image.sh: debian:bookworm-slim where no registry answers
)
sanitize_pkgs=(
  clang libclang-rt-14-dev  # the sanitizer builds; libclang-rt has the sanitizer and libFuzzer runtimes
  llvm                      # llvm-symbolizer: source lines in sanitizer reports
  dpkg-dev                  # apt-get source sentencepiece (rebuilt against the system libprotobuf)
)

case "$mode" in
  runtime) pkgs=("${runtime_pkgs[@]}") ;;
  image) pkgs=("${image_pkgs[@]}") ;;
  compile) pkgs=("${compile_pkgs[@]}") ;;
  build) pkgs=("${compile_pkgs[@]}" "${test_pkgs[@]}" "${docker_pkgs[@]}") ;;
  sanitize) pkgs=("${compile_pkgs[@]}" "${test_pkgs[@]}" "${sanitize_pkgs[@]}") ;;
  docker) pkgs=("${docker_pkgs[@]}") ;;
esac

if [ "${RELSERVE_TORCH:-debian}" = external ]; then
  kept=()
  for p in "${pkgs[@]}"; do
    case "$p" in libtorch1.13|libtorch-dev) ;; *) kept+=("$p") ;; esac
  done
  pkgs=("${kept[@]}")
fi

missing=()
for p in "${pkgs[@]}"; do
  # A node or npm already on the PATH (NodeSource's nodejs bundles npm and conflicts with
  # Debian's npm package) is kept.
  case "$p" in
    nodejs) command -v node > /dev/null && continue ;;
    npm) command -v npm > /dev/null && continue ;;
    # An engine installed otherwise (Docker's own docker-ce, which conflicts with docker.io) is
    # kept too.
    docker.io) command -v dockerd > /dev/null && continue ;;
  esac
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
# --no-install-recommends: libtorch-dev otherwise pulls in OpenCV, ffmpeg and python3-dev.
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
