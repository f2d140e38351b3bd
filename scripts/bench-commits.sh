#!/usr/bin/env bash
# Two commits' engines timed against each other, to see a regression when it lands: builds
# relserve-model of each commit in its own worktree (kept under ${WORK:-build/commits}/<sha> for
# the next run), then runs `relserve-model bench` of A and B alternately, PAIRS times per
# model x shape x dtype, on the same weights and threads. The timing noise of one run is about
# +-10% on a shared 2-core machine, so judge the pairs, not one run: each JSON line of
# ${OUT:-bench-commits.jsonl} holds every pair's B / A tokens/s ratio and their median.
#   scripts/bench-commits.sh 8746e42 HEAD
#   PAIRS=5 CASES="deberta-v3-base:1x128" DTYPES=float32 scripts/bench-commits.sh A B
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: scripts/bench-commits.sh COMMIT_A COMMIT_B}
B=${2:?usage: scripts/bench-commits.sh COMMIT_A COMMIT_B}
WORK=${WORK:-build/commits}
MODELS=${MODELS:-build/bench-models}
OUT=${OUT:-bench-commits.jsonl}
PAIRS=${PAIRS:-3}
ITERS=${ITERS:-3}
THREADS=${THREADS:-$(nproc)}
DTYPES=${DTYPES:-float32}
CASES=${CASES:-"deberta-v3-base:1x128 deberta-v3-base:8x128 t5-base:1x128 t5-base:8x128"}

build() {  # commit -> path of its relserve-model
  local sha dir
  sha=$(git rev-parse --short=12 "$1^{commit}")
  dir="$WORK/$sha"
  if [ ! -x "$dir/build/bin/relserve-model" ]; then
    [ -d "$dir/src" ] || git worktree add --detach "$dir/src" "$sha" > /dev/null
    generator=()
    if command -v ninja > /dev/null 2>&1; then generator=(-G Ninja); fi
    cmake -S "$dir/src" -B "$dir/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release > "$dir/configure.log"
    cmake --build "$dir/build" --target relserve-model --parallel "${JOBS:-2}" > "$dir/build.log"
  fi
  echo "$dir/build/bin/relserve-model"
}
BIN_A=$(build "$A")
BIN_B=$(build "$B")
[ -f "$MODELS/deberta-v3-base/config.json" ] || "$BIN_B" create --family deberta-v3 --vocab 128100 --labels 3 \
  --out "$MODELS/deberta-v3-base" > /dev/null
[ -f "$MODELS/t5-base/config.json" ] || "$BIN_B" create --family t5 --vocab 32128 --out "$MODELS/t5-base" > /dev/null
: > "$OUT"
tps() {  # binary model dtype batch length -> tokens/s
  local iters=$ITERS; [ "$4" = 1 ] && iters=$((ITERS * 5))
  "$1" bench --model "$MODELS/$2" --dtype "$3" --batch "$4" --seq "$5" --iters "$iters" --warmup 1 --no-gemm \
    --threads "$THREADS" | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["tokens_per_second"])'
}
for dtype in $DTYPES; do
  for c in $CASES; do
    model=${c%%:*}; shape=${c#*:}; b=${shape%x*}; l=${shape#*x}
    ratios=()
    for _ in $(seq "$PAIRS"); do
      ta=$(tps "$BIN_A" "$model" "$dtype" "$b" "$l")
      tb=$(tps "$BIN_B" "$model" "$dtype" "$b" "$l")
      ratios+=("$(/usr/bin/python3 -c "print(round($tb / $ta, 3))")")
    done
    list=$(IFS=,; echo "${ratios[*]}")
    median=$(/usr/bin/python3 -c "import statistics; print(statistics.median([$list]))")
    echo "{\"a\":\"$A\",\"b\":\"$B\",\"model\":\"$model\",\"dtype\":\"$dtype\",\"batch\":$b,\"seq\":$l,\"b_over_a\":[$list],\"median\":$median}" |
      tee -a "$OUT"
  done
done
