#!/usr/bin/env bash
# One round on a GPU machine (CUDA toolkit, a pip PyTorch with CUDA, CMake, ninja; no package
# registry): unpacks the .deb files scripts/gpu/fetch-debs.sh fetched into a prefix, configures
# relserve against the machine's own LibTorch, builds with every core, then runs the GPU tests
# and benchmarks. Logs and JSON lines go to $OUT (default gpu-out/).
# The .deb files come from scripts/gpu/fetch-debs.sh, run beforehand where Debian's registry is
# reachable (scripts/gpu/debs is ignored by git: carry it to the GPU machine). With about 15 minutes of device time, two calls on one warm machine:
#   STEPS="env deps build test" scripts/gpu/round.sh
#   STEPS="bench-engine bench-server profile" DTYPES=bfloat16 SHAPES="1x128 32x128 32x512" scripts/gpu/round.sh
# Steps: env deps build test bench-engine bench-transformers bench-server (default: all), and
# profile (nsys, where the machine has it: the engine's kernels at 32 x 512 on both attention
# paths, and the server under load).
# ATTENTIONS lists the GPU attention paths the engine benchmark runs DeBERTa through
# (RELSERVE_GPU_ATTENTION: bias, tables; default both, side by side); SERVER_ATTENTION the
# server's (default bias). Shapes of at most 4096 tokens also run without CUDA graphs
# (--cuda-graph-tokens 0), the launch-bound baseline; SERVER_GRAPH_TOKENS sets the server's
# --cuda-graph-tokens (default 4096; 0 for the server without graphs).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
LOGS=${RELSERVE_GPU_LOGS:-/tmp/relserve-logs}  # kept between calls on one machine; packed into $OUT at the end
PREFIX=${PREFIX:-/tmp/relserve-deps}
BUILD=${BUILD:-/tmp/relserve-build}
STEPS=${STEPS:-"env deps build test bench-engine bench-transformers bench-server profile"}
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
  # The table-attention kernel (server/model/kernels/cuda) needs CMake to find nvcc; without one
  # it is left out (a warning) and the rest builds.
  nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  cuda_compiler=(); [ -x "$nvcc_bin" ] && cuda_compiler=(-DCMAKE_CUDA_COMPILER="$nvcc_bin")
  start=$(date +%s)
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$TORCH_CMAKE;$PREFIX/usr" -DPKG_CONFIG_EXECUTABLE="$pkgconf_bin" \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0 -DCUDAToolkit_ROOT=/usr/local/cuda \
    "${cuda_compiler[@]}" \
    -DProtobuf_PROTOC_EXECUTABLE="$PREFIX/usr/bin/protoc" > "$LOGS/configure.log" 2>&1
  rc=$?
  note "configure rc=$rc"; tail -n 15 "$LOGS/configure.log"; grep -E "relserve:" "$LOGS/configure.log"
  if [ $rc -eq 0 ]; then
    targets=(relserve relserve-server relserve-model relserve-client gpu_engine_test reference_parity_test engine_test
             relative_attention_test table_attention_test deberta_switches_test bert_switches_test t5_switches_test
             gpu_server_test)
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
  # The table path: the CUDA kernel against its host twin and the biased path, then the
  # references and the DeBERTa and BERT switches through it on the GPU.
  (cd "$BUILD" && timeout 300 "$BIN/table_attention_test" > "$LOGS/table_attention_test.log" 2>&1)
  note "table_attention_test rc=$?"; grep -E "FAILED|PASSED|SKIPPED|Failure|actual" "$LOGS/table_attention_test.log" | head -20
  for t in reference_parity_test deberta_switches_test bert_switches_test; do
    (cd "$BUILD" && RELSERVE_TEST_DEVICE=cuda RELSERVE_GPU_ATTENTION=tables timeout 300 "$BIN/$t" > "$LOGS/$t.cuda-tables.log" 2>&1)
    note "$t on cuda, table attention rc=$?"; grep -E "FAILED|PASSED" "$LOGS/$t.cuda-tables.log" | head -20
  done
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
    attentions=${ATTENTIONS:-bias tables}; [ "$model" = t5-base ] && attentions=bias  # T5 has no table path
    for dtype in ${DTYPES:-bfloat16 float16}; do
      for shape in ${SHAPES:-1x128 32x128 32x512 8x2048}; do
        b=${shape%x*}; l=${shape#*x}; iters=20; [ "$b" = 1 ] && iters=80
        # Each attention path with CUDA graphs where the shape has them, and, where it does, the
        # bias path without them too (the launch-bound baseline).
        configs=""; for attention in $attentions; do configs="$configs $attention/4096"; done
        [ $((b * l)) -le 4096 ] && configs="$configs bias/0"
        for config in $configs; do
          attention=${config%/*}; graphs=${config#*/}
          line=$(RELSERVE_GPU_ATTENTION=$attention "$BIN/relserve-model" bench --model "$MODELS/$model" --device cuda \
                 --dtype "$dtype" --batch "$b" --seq "$l" --iters "$iters" --warmup 3 --max-length 2048 --gemm-size 8192 \
                 --threads 4 --cuda-graph-tokens "$graphs" 2>> "$LOGS/bench-engine.err")
          echo "{\"engine\":\"relserve\",\"attention\":\"$attention\",\"cuda_graph_tokens\":$graphs,\"model\":\"$model\",${line#\{}" \
            >> "$LOGS/bench-engine.jsonl"
        done
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
  # The yardstick: the engine alone over the same workload (lengths log-uniform in [8, 512]) with
  # full batches, workload_full_tps; the server's tokens/s over it is the share the issue asks for.
  (cd "$ROOT" && BUILD_DIR="$BUILD" MODEL="$MODELS/deberta-v3-base" DEVICE=cuda DTYPE=bfloat16 \
     LENGTHS="${CEILING_LENGTHS:-8 32 128 512}" timeout 200 scripts/bench-batching-ceiling.sh \
     > "$LOGS/bench-ceiling.json" 2> "$LOGS/bench-ceiling.err")
  note "engine over the serving workload rc=$?"; cut -c1-600 "$LOGS/bench-ceiling.json"
  (cd "$ROOT" && export RELSERVE_GPU_ATTENTION=${SERVER_ATTENTION:-bias} && \
     BUILD_DIR="$BUILD" MODEL="$MODELS/deberta-v3-base" DEVICE=cuda DTYPE=bfloat16 DURATION=${DURATION:-8} \
     LEVELS="${LEVELS:-4 16 64 128}" SETTINGS="${SETTINGS:-bucketed single}" OUT="$LOGS/bench-server.jsonl" \
     METRICS_DIR="$LOGS/bench-server-metrics" \
     SERVER_FLAGS="--max-input-length 512 --cuda-graph-tokens ${SERVER_GRAPH_TOKENS:-4096}" timeout 400 scripts/bench-serving.sh > "$LOGS/bench-server.log" 2>&1)
  note "bench-server rc=$?"; cut -c1-600 "$LOGS/bench-server.jsonl"; tail -3 "$LOGS/bench-server.log"
fi

if has profile; then
  make_models
  if command -v nsys > /dev/null; then
    # The engine alone at 32 x 512, each attention path: which kernels take the time.
    for attention in ${ATTENTIONS:-bias tables}; do
      RELSERVE_GPU_ATTENTION=$attention timeout 200 nsys profile --force-overwrite true --trace cuda,nvtx,osrt \
        --output "$LOGS/engine-$attention" "$BIN/relserve-model" bench --model "$MODELS/deberta-v3-base" --device cuda \
        --dtype bfloat16 --batch 32 --seq 512 --iters 10 --warmup 3 --max-length 2048 --no-gemm > /dev/null 2>&1
      nsys stats --report cuda_gpu_kern_sum --format csv --output "$LOGS/engine-$attention" "$LOGS/engine-$attention.nsys-rep" \
        > /dev/null 2>&1
      note "profile engine ($attention attention): top kernels"; head -12 "$LOGS/engine-$attention"_cuda_gpu_kern_sum.csv | cut -c1-220
    done
    # The server under load: host threads and CUDA calls as well as kernels.
    (cd "$ROOT" && export RELSERVE_GPU_ATTENTION=${SERVER_ATTENTION:-bias} && BUILD_DIR="$BUILD" \
       MODEL="$MODELS/deberta-v3-base" DEVICE=cuda DTYPE=bfloat16 DURATION=6 LEVELS=128 SETTINGS=bucketed \
       OUT="$LOGS/profile-server.jsonl" SERVER_FLAGS="--max-input-length 512 --cuda-graph-tokens ${SERVER_GRAPH_TOKENS:-4096}" \
       SERVER_WRAPPER="nsys profile --force-overwrite true --trace cuda,nvtx,osrt --output $LOGS/server" \
       timeout 300 scripts/bench-serving.sh > "$LOGS/profile-server.log" 2>&1)
    note "profile server rc=$?"
    nsys stats --report cuda_gpu_kern_sum,cuda_api_sum,osrt_sum --format csv --output "$LOGS/server" "$LOGS/server.nsys-rep" \
      > /dev/null 2>&1
    for r in cuda_gpu_kern_sum cuda_api_sum osrt_sum; do head -10 "$LOGS/server_$r.csv" 2>/dev/null | cut -c1-220; done
  else
    note "profile: no nsys on this machine; the stage times of bench-server (stage_*_ms) are the profile"
  fi
fi
