#!/usr/bin/env bash
# Compiles every CUDA source of server/model/kernels/cuda for the GPUs relserve targets (sm_80,
# sm_90), warnings as errors, so that a kernel that does not compile fails here and not on a
# GPU machine. Then, where LibTorch's headers include its CUDA ones (Debian's do, though its
# library is CPU-only), checks the C++ files whose GPU parts only a CUDA build compiles
# (RELSERVE_WITH_CUDA, RELSERVE_WITH_CUDA_KERNELS) against them. Skipped (exit 77) where no CUDA
# compiler is found ($CUDACXX, nvcc on PATH, or CUDA's default install prefix). Nothing here runs
# on a GPU.
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

# The GPU parts of the host code. LibTorch's CUDA headers include a header its build generates
# (c10/cuda/impl/cuda_cmake_macros.h), which a CPU-only LibTorch does not ship: its one line is
# written here.
torch_include=${TORCH_INCLUDE:-/usr/include}
cuda_include=$(dirname "$(dirname "$nvcc")")/include
if [ ! -f "$torch_include/ATen/cuda/CUDAGraph.h" ] || [ ! -f "$cuda_include/cuda_runtime_api.h" ]; then
  echo "no LibTorch CUDA headers or CUDA runtime headers: host code not checked"
  exit 0
fi
mkdir -p "$out/stub/c10/cuda/impl"
[ -f "$torch_include/c10/cuda/impl/cuda_cmake_macros.h" ] ||
  echo "#define C10_CUDA_BUILD_SHARED_LIBS" > "$out/stub/c10/cuda/impl/cuda_cmake_macros.h"
# /usr/include is searched already, and naming it again breaks libstdc++'s #include_next.
extra=()
[ "$torch_include" != /usr/include ] && extra=(-isystem "$torch_include")
for source in server/model/runtime/device.cc server/model/runtime/device_graph.cc server/model/layers/table_attention.cc; do
  echo "g++ (CUDA parts): $source"
  "${CXX:-g++}" -std=c++17 -fsyntax-only -Wall -Wextra -Werror -DRELSERVE_WITH_CUDA=1 -DRELSERVE_WITH_CUDA_KERNELS=1 \
    -I "$root" -I "$out/stub" "${extra[@]}" -isystem "$torch_include/torch/csrc/api/include" \
    -isystem "$cuda_include" "$root/$source"
done
echo "checked"
