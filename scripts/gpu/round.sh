#!/usr/bin/env bash
# One round on a GPU machine (CUDA toolkit, a pip PyTorch with CUDA, CMake, ninja; no package
# registry): unpacks the .deb files scripts/gpu/fetch-debs.sh fetched into a prefix, configures
# relserve against the machine's own LibTorch, builds with every core, then runs the GPU tests
# and benchmarks. Logs and JSON lines go to $OUT (default gpu-out/).
#   STEPS="deps build test" scripts/gpu/round.sh
#   STEPS="bench" scripts/gpu/round.sh        (a later call on the same machine)
# Steps: env deps build test bench-engine bench-transformers bench-server (default: all).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
LOGS=${RELSERVE_GPU_LOGS:-/tmp/relserve-logs}  # kept between calls on one machine; packed into $OUT at the end
PREFIX=${PREFIX:-/tmp/relserve-deps}
BUILD=${BUILD:-/tmp/relserve-build}
STEPS=${STEPS:-"env deps build test bench-engine bench-transformers bench-server"}
JOBS=${JOBS:-$(nproc)}
MODELS=${MODELS:-/tmp/relserve-bench-models}
mkdir -p "$OUT" "$LOGS"
SUMMARY="$LOGS/summary.txt"
pack() {
  tar czf /tmp/relserve-logs.tgz --warning=no-file-changed -C "$LOGS" . || true
  cp /tmp/relserve-logs.tgz "$OUT/logs.tgz"; cp "$SUMMARY" "$OUT/summary.txt"
}
trap pack EXIT
note() { echo "== $*" | tee -a "$SUMMARY"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }
arch=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
LIBDIR="$PREFIX/usr/lib/$arch"
export LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:$PREFIX/usr/bin"
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig:$PREFIX/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$PREFIX"
TORCH_CMAKE=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')

if has env; then
  {
    nvidia-smi; python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "cxx11abi", torch._C._GLIBCXX_USE_CXX11_ABI, "transformers", transformers.__version__)'
    g++ --version | head -1; cmake --version | head -1; ninja --version; ldd --version | head -1
    grep PRETTY /etc/os-release; which pkg-config pkgconf || true; nvcc --version | tail -2
  } > "$LOGS/env.txt" 2>&1
  note "env"; cat "$LOGS/env.txt"
fi

if has deps; then
  rm -rf "$PREFIX" && mkdir -p "$PREFIX"
  for f in "$ROOT"/scripts/gpu/debs/*.deb; do dpkg -x "$f" "$PREFIX"; done
  # Development links to libraries the machine has itself (OpenSSL, zlib): point them there.
  find "$PREFIX" -xtype l | while read -r link; do
    name=$(basename "$(readlink "$link")"); stem=${name%%.so*}
    target=$(ls /usr/lib/"$arch"/"$stem".so.* /lib/"$arch"/"$stem".so.* 2>/dev/null | head -1)
    [ -n "$target" ] && ln -sf "$target" "$link"
  done
  note "deps: $(ls "$ROOT"/scripts/gpu/debs | wc -l) packages unpacked into $PREFIX"
fi

if has build; then
  pkgconf_bin=$(command -v pkg-config || echo "$PREFIX/usr/bin/pkgconf")
  start=$(date +%s)
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$TORCH_CMAKE;$PREFIX/usr" -DPKG_CONFIG_EXECUTABLE="$pkgconf_bin" \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0 -DCUDAToolkit_ROOT=/usr/local/cuda \
    -DProtobuf_PROTOC_EXECUTABLE="$PREFIX/usr/bin/protoc" > "$LOGS/configure.log" 2>&1
  rc=$?
  note "configure rc=$rc"; tail -n 15 "$LOGS/configure.log"
  if [ $rc -eq 0 ]; then
    targets=(relserve relserve-server relserve-model relserve-client gpu_engine_test reference_parity_test engine_test
             relative_attention_test deberta_switches_test t5_switches_test gpu_server_test)
    timeout "${BUILD_TIMEOUT:-520}" cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" -- -k 0 > "$LOGS/build.log" 2>&1
    rc=$?
    note "build rc=$rc in $(( $(date +%s) - start )) s"; grep -E "error|Error" "$LOGS/build.log" | head -40
  fi
fi

BIN="$BUILD/bin"
if has test; then
  (cd "$BUILD" && timeout 300 "$BIN/gpu_engine_test" > "$LOGS/gpu_engine_test.log" 2>&1); note "gpu_engine_test rc=$?"
  grep -E "^\[ gpu \]|FAILED|OK \]|SKIPPED" "$LOGS/gpu_engine_test.log" | head -40
  for t in reference_parity_test deberta_switches_test t5_switches_test engine_test; do
    (cd "$BUILD" && RELSERVE_TEST_DEVICE=cuda timeout 300 "$BIN/$t" > "$LOGS/$t.cuda.log" 2>&1)
    note "$t on cuda rc=$?"; grep -E "FAILED|PASSED" "$LOGS/$t.cuda.log" | head -20
  done
  [ -x "$BIN/gpu_server_test" ] && { (cd "$BUILD" && timeout 300 "$BIN/gpu_server_test" > "$LOGS/gpu_server_test.log" 2>&1); note "gpu_server_test rc=$?"; grep -E "FAILED|PASSED|SKIPPED" "$LOGS/gpu_server_test.log" | head; }
  "$BIN/relative_attention_test" > "$LOGS/relative_attention_test.log" 2>&1; note "relative_attention_test (CPU, LibTorch 2.x fused kernel) rc=$?"
fi

if has debug; then
  # Where a test crashes: a backtrace through cuda-gdb (it debugs host code too), and the same
  # run with LibTorch's own CPU allocator.
  for t in ${DEBUG_TESTS:-engine_test}; do
    (cd "$BUILD" && RELSERVE_TEST_DEVICE=${DEBUG_DEVICE:-cpu} timeout 240 cuda-gdb -q -batch -ex run -ex bt -ex "info threads" \
       --args "$BIN/$t" ${DEBUG_FILTER:+--gtest_filter=$DEBUG_FILTER} > "$LOGS/$t.gdb.log" 2>&1)
    note "$t under cuda-gdb"; grep -E "^#|signal|FAILED|PASSED" "$LOGS/$t.gdb.log" | head -30
    (cd "$BUILD" && RELSERVE_ALLOCATOR=system RELSERVE_TEST_DEVICE=${DEBUG_DEVICE:-cpu} timeout 240 "$BIN/$t" > "$LOGS/$t.system-allocator.log" 2>&1)
    note "$t with RELSERVE_ALLOCATOR=system rc=$?"
  done
fi

make_models() {
  [ -f "$MODELS/deberta-v3-base/config.json" ] || "$BIN/relserve-model" create --family deberta-v3 --vocab 128100 --labels 3 --out "$MODELS/deberta-v3-base" > /dev/null
  [ -f "$MODELS/t5-base/config.json" ] || "$BIN/relserve-model" create --family t5 --vocab 32128 --out "$MODELS/t5-base" > /dev/null
}

if has bench-engine; then
  make_models
  : > "$LOGS/bench-engine.jsonl"
  for model in deberta-v3-base t5-base; do
    for dtype in ${DTYPES:-bfloat16 float16}; do
      for shape in ${SHAPES:-1x128 32x128 32x512 8x2048}; do
        b=${shape%x*}; l=${shape#*x}; iters=20; [ "$b" = 1 ] && iters=80
        line=$("$BIN/relserve-model" bench --model "$MODELS/$model" --device cuda --dtype "$dtype" --batch "$b" --seq "$l" \
               --iters "$iters" --warmup 3 --max-length 2048 --gemm-size 8192 --threads 4 2>> "$LOGS/bench-engine.err")
        echo "{\"engine\":\"relserve\",\"model\":\"$model\",${line#\{}" >> "$LOGS/bench-engine.jsonl"
      done
    done
    "$BIN/relserve-model" accuracy --model "$MODELS/$model" --device cuda --dtype bfloat16 --batch 16 --seq 256 \
      --max-length 2048 >> "$LOGS/accuracy.jsonl" 2>&1
    "$BIN/relserve-model" accuracy --model "$MODELS/$model" --device cuda --dtype float16 --batch 16 --seq 256 \
      --max-length 2048 >> "$LOGS/accuracy.jsonl" 2>&1
  done
  note "bench-engine"; cut -c1-400 "$LOGS/bench-engine.jsonl"; cat "$LOGS/accuracy.jsonl"
fi

if has bench-transformers; then
  make_models
  PYTHONUNBUFFERED=1 timeout 400 python3 "$ROOT/scripts/gpu/bench_transformers.py" --model "$MODELS/deberta-v3-base" \
    --model "$MODELS/t5-base" --shapes "$(echo ${SHAPES:-1x128 32x128 32x512 8x2048} | tr ' ' ,)" \
    > "$LOGS/bench-transformers.jsonl" 2> "$LOGS/bench-transformers.err"
  note "bench-transformers rc=$?"; cat "$LOGS/bench-transformers.jsonl"; tail -5 "$LOGS/bench-transformers.err"
fi

if has bench-server; then
  make_models
  (cd "$ROOT" && BUILD_DIR="$BUILD" MODEL="$MODELS/deberta-v3-base" DEVICE=cuda DTYPE=bfloat16 DURATION=${DURATION:-8} \
     LEVELS="${LEVELS:-4 16 64 128}" SETTINGS="${SETTINGS:-bucketed single}" OUT="$LOGS/bench-server.jsonl" \
     METRICS_DIR="$LOGS/bench-server-metrics" \
     SERVER_FLAGS="--max-input-length 512" timeout 400 scripts/bench-serving.sh > "$LOGS/bench-server.log" 2>&1)
  note "bench-server rc=$?"; cut -c1-600 "$LOGS/bench-server.jsonl"; tail -3 "$LOGS/bench-server.log"
fi
