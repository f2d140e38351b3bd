#!/usr/bin/env bash
# Compiles every CUDA source of server/model/kernels/cuda for the GPUs relserve targets (sm_80,
# sm_90), warnings as errors, so that a kernel that does not compile fails here and not on a
# GPU machine. Skipped (exit 77) where no CUDA compiler is found ($CUDACXX, nvcc on PATH, or
# CUDA's default install prefix). Nothing here runs the kernels.
set -euo pipefail
root=$1
nvcc=${CUDACXX:-$(command -v nvcc || true)}
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "no CUDA compiler: skipped"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for source in "$root"/server/model/kernels/cuda/*.cu; do
  echo "$nvcc: $(basename "$source")"
  "$nvcc" -std=c++17 -O3 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
    -Werror all-warnings -Xcompiler -Wall,-Wextra -I "$root" -c "$source" -o "$out/$(basename "$source").o"
done
echo "compiled"
