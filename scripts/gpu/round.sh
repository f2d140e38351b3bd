#!/usr/bin/env bash
# One GPU round in ONE run of at most 9 minutes (--budget), each result written into the output
# folder as soon as it is measured, as JSON lines, most important first, so that a run cut short
# still answers the first questions:
#   1. attention-probe.jsonl (in the background during the build): scaled_dot_product_attention
#      alone as DeBERTa-v3-base calls it, first, second and other-thread call per batch 1-32 at
#      128 and 512 tokens, with every SDPA backend and with each switched off; the versions.
#   2. round.jsonl {"step":"build"}: the programs only (relserve, relserve-model, relserve-client).
#   3. server.jsonl: the server on DeBERTa-v3-base bfloat16, 128 callers, lengths log-uniform
#      8-512, three points back to back on one server, with stage times; then
#      engine-yardstick.json: the engine alone over the same workload (workload_full_tps);
#      round.jsonl {"step":"server-share"}: the server's best tokens/s over it.
#   4. candidates.jsonl: the same point once per fix candidate (CANDIDATES: the attention path
#      and SDPA backend, CUDA graphs off, batch sizes not rounded, no per-worker warm-up).
#   5. engine.jsonl: the engine at 1x128, 32x128, 32x512 on both attention paths, graphs on and
#      off (off where the shape has graphs).
#   6. tests.jsonl: the GPU tests, built and run in the time that is left.
# round.jsonl also gets one line per step (rc, seconds, seconds left) and env.json the machine.
#
# Needs beside the working tree (carry): scripts/gpu/debs (the .deb files that
# scripts/gpu/fetch-debs.sh fetches here; git ignores them). Everything else is on the GPU machine
# (a CUDA PyTorch with its LibTorch, nvcc, CMake, ninja, and Python with transformers). The one command, on the device machine (whose $OUT comes back):
#   scripts/gpu/round.sh --out "$OUT"
# It writes only into --out (default $OUT, else a new folder under /tmp) and /tmp (its build,
# prefix and models), never into the working tree unless --out names a folder there.
#
# --rehearse runs every step on this CPU with the tiny DeBERTa of tests/data (float32, short
# points, the existing build folder --build, default ./build, brought up to date for the
# programs) and writes the same files: the CTest round_rehearsal_test runs it, so that the
# script cannot rot between GPU rounds.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

usage() {
  cat <<'EOF'
usage: scripts/gpu/round.sh [--rehearse] [--out DIR] [--archive FILE] [--build DIR] [--budget SECONDS]
  --out DIR         where results go (default: $OUT, else a new folder under /tmp)
  --archive FILE    also keep FILE (.tar.gz) a copy of DIR, renewed every 15 s and at the end
                    (for a place that takes back only a few files, or a run cut short)
  --build DIR       the build folder (default: /tmp/relserve-build; with --rehearse: ./build)
  --budget SECONDS  the whole round's time (default 540; steps that do not fit are skipped)
  --rehearse        every step on the CPU with a tiny model (CI)
  --help            this text
Environment: CANDIDATES (';'-separated server flag sets of step 4), JOBS (build jobs).
EOF
}

REHEARSE=0
OUT_DIR=${OUT:-}
BUILD=""
BUDGET=540
ARCHIVE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --rehearse) REHEARSE=1 ;;
    --out) [ $# -ge 2 ] || { echo "round.sh: --out needs a folder" >&2; exit 2; }; OUT_DIR=$2; shift ;;
    --archive) [ $# -ge 2 ] || { echo "round.sh: --archive needs a file" >&2; exit 2; }; ARCHIVE=$2; shift ;;
    --build) [ $# -ge 2 ] || { echo "round.sh: --build needs a folder" >&2; exit 2; }; BUILD=$2; shift ;;
    --budget)
      [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 30 ] && [ "$2" -le 3600 ] ||
        { echo "round.sh: --budget needs whole seconds in [30, 3600]" >&2; exit 2; }
      BUDGET=$2; shift ;;
    *) echo "round.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[ -n "$OUT_DIR" ] || OUT_DIR=$(mktemp -d /tmp/relserve-round.XXXXXX)
mkdir -p "$OUT_DIR" || exit 2
OUT_DIR=$(cd "$OUT_DIR" && pwd)
START=$(date +%s)
END=$((START + BUDGET))
JOBS=${JOBS:-$(nproc)}
SCRATCH=$(mktemp -d /tmp/relserve-round-work.XXXXXX)
LOGS="$OUT_DIR/logs"
mkdir -p "$LOGS"
ROUND="$OUT_DIR/round.jsonl"

# The archive: a snapshot of the output folder every 15 s (written aside, then moved into place)
# and a last one when the round ends, however it ends.
snapshot() {
  [ -n "$ARCHIVE" ] || return 0
  tar czf "$ARCHIVE.part" -C "$OUT_DIR" . 2>/dev/null && mv -f "$ARCHIVE.part" "$ARCHIVE"
}
if [ -n "$ARCHIVE" ]; then
  mkdir -p "$(dirname "$ARCHIVE")" || exit 2
  ARCHIVE=$(cd "$(dirname "$ARCHIVE")" && pwd)/$(basename "$ARCHIVE")
  case "$ARCHIVE" in "$OUT_DIR"/*) echo "round.sh: --archive must be outside --out" >&2; exit 2 ;; esac
  ( while sleep 15; do snapshot; done ) &
  snapshot_pid=$!
  trap 'kill $snapshot_pid 2>/dev/null; snapshot' EXIT
fi

left() { echo $((END - $(date +%s))); }
# step NAME RC T0 [EXTRA JSON members]: one line of round.jsonl.
step() {
  local extra=${4:+,$4}
  echo "{\"step\":\"$1\",\"rc\":$2,\"seconds\":$(( $(date +%s) - $3 )),\"left_s\":$(left)$extra}" >> "$ROUND"
}
skip() { echo "{\"step\":\"$1\",\"skipped\":\"$2\",\"left_s\":$(left)}" >> "$ROUND"; }
# cap SECONDS: the smaller of SECONDS and the time left less a reserve of RESERVE seconds.
cap() { local l=$(( $(left) - ${2:-0} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }

if [ "$REHEARSE" = 1 ]; then
  BUILD=${BUILD:-$ROOT/build}
  DEVICE=cpu; DTYPE=float32; MODEL="$ROOT/tests/data/reference/deberta_v3_cls"; VOCAB=1000
  DURATION=2; WARMUP=1; PROBE_ARGS=(--device cpu --batches 1,2 --lengths 16)
  CEILING_LENGTHS="8 32 128"; SHAPES="1x16 4x32"; SERVER_MAX=512
  PROBE_SETTINGS="default"
else
  BUILD=${BUILD:-/tmp/relserve-build}
  DEVICE=cuda; DTYPE=bfloat16; MODEL=/tmp/relserve-bench-models/deberta-v3-base; VOCAB=128100
  DURATION=6; WARMUP=2; PROBE_ARGS=(--device cuda)
  CEILING_LENGTHS="8 32 128 512"; SHAPES="1x128 32x128 32x512"; SERVER_MAX=512
  PROBE_SETTINGS="default no-cudnn no-efficient no-flash math"
fi
BIN="$BUILD/bin"
CANDIDATES=${CANDIDATES:-"--gpu-attention tables;--gpu-attention bias:auto;--gpu-attention bias:cudnn;--gpu-attention bias:efficient;--gpu-attention bias:math;--cuda-graph-tokens 0;--gpu-batch-sizes exact;--warmup-workers false"}

{
  echo "{\"round\":\"relserve\",\"rehearse\":$REHEARSE,\"budget_s\":$BUDGET,\"device\":\"$DEVICE\",\"dtype\":\"$DTYPE\"," \
       "\"commit\":\"$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)\",\"cores\":$(nproc)," \
       "\"gpu\":\"$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)\"}"
} > "$OUT_DIR/env.json"

# 1. The attention probe, in the background: one process per backend setting.
t_probe=$(date +%s)
(
  for setting in $PROBE_SETTINGS; do
    timeout "$(cap 120 60)" python3 "$ROOT/scripts/gpu/attention_probe.py" --backends "$setting" "${PROBE_ARGS[@]}" \
      --out "$OUT_DIR/attention-probe.jsonl" >> "$LOGS/attention-probe.log" 2>&1
  done
  step probe $? "$t_probe"
) &
probe_pid=$!

# 2. The build of the programs only.
t0=$(date +%s)
build_rc=0
if [ "$REHEARSE" = 1 ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || { echo "round.sh --rehearse: no build in $BUILD (run scripts/build.sh)" >&2; exit 2; }
  timeout "$(cap 120 60)" cmake --build "$BUILD" --target relserve relserve-model relserve-client > "$LOGS/build.log" 2>&1
  build_rc=$?
else
  PREFIX=/tmp/relserve-deps
  arch=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
  LIBDIR="$PREFIX/usr/lib/$arch"
  export LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$PATH:$PREFIX/usr/bin"
  export PKG_CONFIG_PATH="$LIBDIR/pkgconfig:$PREFIX/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$PREFIX"
  if ! ls "$ROOT"/scripts/gpu/debs/*.deb > /dev/null 2>&1; then
    echo "round.sh: no scripts/gpu/debs/*.deb: run scripts/gpu/fetch-debs.sh here and carry scripts/gpu/debs" >&2
    build_rc=3
  else
    rm -rf "$PREFIX" && mkdir -p "$PREFIX"
    for f in "$ROOT"/scripts/gpu/debs/*.deb; do dpkg -x "$f" "$PREFIX"; done
    # Development links to libraries the machine has itself (OpenSSL, zlib): point them there.
    find "$PREFIX" -xtype l | while read -r link; do
      name=$(basename "$(readlink "$link")"); stem=${name%%.so*}
      target=$(ls /usr/lib/"$arch"/"$stem".so.* /lib/"$arch"/"$stem".so.* 2>/dev/null | head -1)
      [ -n "$target" ] && ln -sf "$target" "$link"
    done
    TORCH_CMAKE=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
    # PyTorch 2.12 and later refuse C++17 in their headers: build as C++20 where they ask for it.
    TORCH_INCLUDE=$(python3 -c 'import torch.utils.cpp_extension as e; print(e.include_paths()[0])')
    CXX_STANDARD=17
    grep -rqs -E 'C\+\+20 or later' "$TORCH_INCLUDE/c10/macros" "$TORCH_INCLUDE/c10/util" "$TORCH_INCLUDE/ATen/ATen.h" \
      "$TORCH_INCLUDE/torch/csrc/api/include/torch/all.h" && CXX_STANDARD=20
    echo "{\"step\":\"cxx-standard\",\"standard\":$CXX_STANDARD,\"torch\":\"$(python3 -c 'import torch; print(torch.__version__)')\"}" >> "$ROUND"
    pkgconf_bin=$(command -v pkg-config || echo "$PREFIX/usr/bin/pkgconf")
    nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    cuda_compiler=(); [ -x "$nvcc_bin" ] && cuda_compiler=(-DCMAKE_CUDA_COMPILER="$nvcc_bin")
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$TORCH_CMAKE;$PREFIX/usr" -DPKG_CONFIG_EXECUTABLE="$pkgconf_bin" \
      -DCMAKE_CXX_STANDARD="$CXX_STANDARD" -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0 -DCUDAToolkit_ROOT=/usr/local/cuda \
      "${cuda_compiler[@]}" -DProtobuf_PROTOC_EXECUTABLE="$PREFIX/usr/bin/protoc" > "$LOGS/configure.log" 2>&1
    build_rc=$?
    if [ $build_rc -eq 0 ]; then
      # The server's point needs at least 90 s after the build.
      timeout "$(cap 400 90)" cmake --build "$BUILD" -j "$JOBS" --target relserve relserve-model relserve-client -- -k 0 \
        > "$SCRATCH/build.log" 2>&1
      build_rc=$?
      tail -n 200 "$SCRATCH/build.log" > "$LOGS/build.log"
      grep -E -B2 -A6 'error|FAILED' "$SCRATCH/build.log" | head -n 600 > "$LOGS/build-errors.log"
    fi
  fi
fi
errors=$(grep -c -E 'error:|Error ' "$LOGS/build.log" 2>/dev/null || true)
step build "$build_rc" "$t0" "\"errors\":${errors:-0}"
if [ "$build_rc" -ne 0 ] || [ ! -x "$BIN/relserve" ]; then
  wait "$probe_pid"
  skip server "the build failed"
  echo "== round.jsonl"; cat "$ROUND"
  echo "== build errors"; head -n 120 "$LOGS/build-errors.log" 2>/dev/null || tail -n 60 "$LOGS/build.log"
  exit 1
fi

if [ "$REHEARSE" = 0 ] && [ ! -f "$MODEL/config.json" ]; then
  "$BIN/relserve-model" create --family deberta-v3 --vocab 128100 --labels 3 --out "$MODEL" > "$LOGS/create.log" 2>&1
fi

SERVES=0
# serve JSONL POINTS [relserve flags...]: one server, POINTS points of 128 callers back to back,
# each line into JSONL as it is measured (scripts/bench-serving.sh).
serve() {
  local jsonl=$1 points=$2; shift 2
  local levels="" i
  for i in $(seq 1 "$points"); do levels="$levels 128"; done
  (cd "$ROOT" && BUILD_DIR="$BUILD" MODEL="$MODEL" DEVICE="$DEVICE" DTYPE="$DTYPE" DURATION="$DURATION" WARMUP="$WARMUP" \
     VOCAB="$VOCAB" LEVELS="$levels" SETTINGS=bucketed OUT="$jsonl" METRICS_DIR="$SCRATCH/metrics-$RANDOM" \
     LABEL="$*" SERVER_FLAGS="--max-input-length $SERVER_MAX $*" READY_WAIT_S=150 \
     timeout "$(cap $((90 + points * (DURATION + WARMUP + 5))) 10)" scripts/bench-serving.sh) >> "$LOGS/server.log" 2>&1
  local rc=$?
  # The server's own log (its warm-up time, graphs captured, warnings), each serve its own file.
  SERVES=$((SERVES + 1))
  { echo "flags: $*"; tail -n 150 "$jsonl.bucketed.log"; } > "$LOGS/serve-$SERVES.log" 2>/dev/null
  return $rc
}

# 3. The server, then the engine's yardstick on the same workload (the probe done first: it
# shares the GPU).
wait "$probe_pid"
t0=$(date +%s)
serve "$SCRATCH/server.jsonl" 3
rc=$?; cat "$SCRATCH/server.jsonl" >> "$OUT_DIR/server.jsonl" 2>/dev/null
step server "$rc" "$t0"
t0=$(date +%s)
(cd "$ROOT" && BUILD_DIR="$BUILD" MODEL="$MODEL" DEVICE="$DEVICE" DTYPE="$DTYPE" LENGTHS="$CEILING_LENGTHS" \
   timeout "$(cap 120 10)" scripts/bench-batching-ceiling.sh > "$OUT_DIR/engine-yardstick.json" 2>> "$LOGS/yardstick.log")
rc=$?
share=$(/usr/bin/env python3 - "$OUT_DIR/server.jsonl" "$OUT_DIR/engine-yardstick.json" <<'EOF' 2>/dev/null
import json, sys
points = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
full = json.load(open(sys.argv[2]))["workload_full_tps"]
best = max(p["tokens_per_second"] for p in points)
print(f'"server_tps":{best},"workload_full_tps":{full},"share":{best / full:.4f}')
EOF
)
step server-share "$rc" "$t0" "$share"

# 4. The same point with each fix candidate.
t0=$(date +%s)
IFS=';' read -r -a candidates <<< "$CANDIDATES"
for flags in "${candidates[@]}"; do
  [ "$(left)" -lt $((DURATION + WARMUP + 40)) ] && { skip "candidate $flags" time; continue; }
  : > "$SCRATCH/candidate.jsonl"
  # shellcheck disable=SC2086
  serve "$SCRATCH/candidate.jsonl" 1 $flags
  rc=$?
  # A point lost to a client that failed (seen now and then on the CPU): once more.
  if [ ! -s "$SCRATCH/candidate.jsonl" ] && [ "$(left)" -ge $((DURATION + WARMUP + 40)) ]; then
    cp "$SCRATCH/candidate.jsonl.bucketed.log" "$LOGS/candidate-retried-server.log" 2>/dev/null
    # shellcheck disable=SC2086
    serve "$SCRATCH/candidate.jsonl" 1 $flags
    rc=$?
  fi
  if [ -s "$SCRATCH/candidate.jsonl" ]; then
    cat "$SCRATCH/candidate.jsonl" >> "$OUT_DIR/candidates.jsonl"
  else
    k=$(wc -l < "$OUT_DIR/candidates.jsonl" 2>/dev/null || echo 0)
    cp "$SCRATCH/candidate.jsonl.bucketed.log" "$LOGS/candidate-$k-server.log" 2>/dev/null
    echo "{\"flags\":\"$flags\",\"rc\":$rc,\"error\":\"no point (logs/server.log, logs/candidate-$k-server.log)\"}" >> "$OUT_DIR/candidates.jsonl"
  fi
done
step candidates 0 "$t0"

# 5. The engine's shapes, each attention path, graphs on and off.
t0=$(date +%s)
for shape in $SHAPES; do
  b=${shape%x*}; l=${shape#*x}; iters=20; [ "$b" = 1 ] && iters=60
  [ "$REHEARSE" = 1 ] && iters=3
  configs="bias/4096 tables/4096"; [ $((b * l)) -le 4096 ] && configs="$configs bias/0 tables/0"
  for config in $configs; do
    [ "$(left)" -lt 30 ] && { skip "engine $shape $config" time; continue; }
    attention=${config%/*}; graphs=${config#*/}
    line=$(timeout "$(cap 60 10)" "$BIN/relserve-model" bench --model "$MODEL" --device "$DEVICE" --dtype "$DTYPE" \
           --batch "$b" --seq "$l" --iters "$iters" --warmup 3 --no-gemm --gpu-attention "$attention" \
           --cuda-graph-tokens "$graphs" 2>> "$LOGS/engine.log")
    rc=$?
    if [ $rc -eq 0 ] && [ -n "$line" ]; then
      echo "{\"attention\":\"$attention\",\"cuda_graph_tokens\":$graphs,${line#\{}" >> "$OUT_DIR/engine.jsonl"
    else
      echo "{\"attention\":\"$attention\",\"cuda_graph_tokens\":$graphs,\"shape\":\"$shape\",\"rc\":$rc}" >> "$OUT_DIR/engine.jsonl"
    fi
  done
done
step engine 0 "$t0"

# 5b. transformers on the same model directory and shapes (the engine's comparison), GPU only.
t0=$(date +%s)
if [ "$REHEARSE" = 1 ]; then
  skip transformers "GPU only"
elif [ "$(left)" -lt 60 ]; then
  skip transformers time
else
  timeout "$(cap 90 20)" python3 "$ROOT/scripts/gpu/bench_transformers.py" --model "$MODEL" --dtypes "$DTYPE" \
    --shapes "$(echo "$SHAPES" | tr ' ' ',')" >> "$OUT_DIR/transformers.jsonl" 2> "$LOGS/transformers.log"
  step transformers $? "$t0"
fi

# 6. The GPU tests, in the time that is left: built first (the build stops at the deadline), then
# run one binary at a time while time remains.
t0=$(date +%s)
# Each run: BINARY[:tables] (tables: the table path, RELSERVE_TEST_BIASED_ATTENTION=tables).
runs=(gpu_engine_test gpu_server_test table_attention_test reference_parity_test reference_parity_test:tables
      deberta_switches_test:tables engine_test deberta_switches_test)
# On the CPU only the GPU binaries (they skip without a device): the rest run in CTest anyway.
[ "$REHEARSE" = 1 ] && runs=(gpu_engine_test gpu_server_test)
targets=(); for r in "${runs[@]}"; do [[ " ${targets[*]} " == *" ${r%:*} "* ]] || targets+=("${r%:*}"); done
if [ "$(left)" -gt 40 ]; then
  timeout "$(cap 300 20)" cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" -- -k 0 > "$SCRATCH/tests-build.log" 2>&1
  step tests-build $? "$t0"
  tail -n 100 "$SCRATCH/tests-build.log" > "$LOGS/tests-build.log"
  for r in "${runs[@]}"; do
    t=${r%:*}; path=bias; [ "$r" != "$t" ] && path=${r#*:}
    [ -x "$BIN/$t" ] || { echo "{\"test\":\"$t\",\"attention\":\"$path\",\"skipped\":\"not built\"}" >> "$OUT_DIR/tests.jsonl"; continue; }
    [ "$(left)" -lt 15 ] && { echo "{\"test\":\"$t\",\"attention\":\"$path\",\"skipped\":\"time\"}" >> "$OUT_DIR/tests.jsonl"; continue; }
    envs=(); [ "$REHEARSE" = 0 ] && envs=(RELSERVE_TEST_DEVICE=cuda)
    [ "$path" = tables ] && envs+=(RELSERVE_TEST_BIASED_ATTENTION=tables)
    log="$LOGS/$t.$path.log"
    t1=$(date +%s)
    (cd "$BUILD" && env "${envs[@]}" timeout "$(cap 120 5)" "$BIN/$t" > "$log" 2>&1)
    rc=$?
    echo "{\"test\":\"$t\",\"attention\":\"$path\",\"rc\":$rc,\"seconds\":$(( $(date +%s) - t1 )),\"passed\":$(grep -c '^\[       OK \]' "$log")," \
         "\"failed\":$(grep -c '^\[  FAILED  \] [A-Za-z]' "$log"),\"skipped\":$(grep -c '^\[  SKIPPED \] [A-Za-z]' "$log")}" \
      >> "$OUT_DIR/tests.jsonl"
  done
else
  skip tests time
fi
wait "$probe_pid"
step round 0 "$START"
rm -rf "$SCRATCH"
# The results once more, in short, on standard output, for a caller that keeps only the output.
python3 "$ROOT/scripts/gpu/round_summary.py" "$OUT_DIR" 2>&1 || cat "$ROUND"
exit 0
