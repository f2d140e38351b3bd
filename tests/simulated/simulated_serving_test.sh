#!/usr/bin/env bash
# The worker pool against a simulated GPU (--model NAME=simulated:h100-deberta-v3-base), through
# gRPC, the real batcher and relserve-client with 128 callers, lengths log-uniform 8-512
# (scripts/bench-serving.sh):
#   1. as built (no cold costs, so no per-worker warm-up needed): the device busy at least 85%
#      of the wall time (utilisation);
#   2. a cold cost of 40 ms per new (thread, batch shape), as a per-thread library cache would
#      add, without the per-worker warm-up: utilisation falls below 60%;
#   3. the same cold cost with the per-worker warm-up (the default): back to at least 85%.
# Point 3 runs at scale 5 (not 20), so that its warm-up of every shape on both workers is short.
#   tests/simulated/simulated_serving_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Ports of this run only (CTest runs tests side by side).
base=$((20000 + ($$ % 20000)))
point() {  # NAME MODEL FLAGS
  (cd "$root" && BUILD_DIR="$build" MODEL="$2" DURATION=${DURATION:-5} WARMUP=1 LEVELS=128 SETTINGS=bucketed \
     PORT=$base METRICS_PORT=$((base + 1)) OUT="$out/$1.jsonl" SERVER_FLAGS="--max-input-length 512 $3" \
     timeout 240 scripts/bench-serving.sh > "$out/$1.out" 2>&1) || { cat "$out/$1.out" "$out/$1.jsonl.bucketed.log"; exit 1; }
  base=$((base + 2))
  cat "$out/$1.jsonl"
}
point warm simulated:h100-deberta-v3-base "--warmup-workers false"  # no cold cost: nothing to warm
point cold simulated:h100-deberta-v3-base,cold-ms=40 "--warmup-workers false"
point recovered simulated:h100-deberta-v3-base,cold-ms=40,scale=5 ""
grep -q "workers warmed up on their own threads" "$out/recovered.jsonl.bucketed.log" ||
  { echo "the log does not say the workers warmed up"; cat "$out/recovered.jsonl.bucketed.log"; exit 1; }
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
u = {}
for name in ("warm", "cold", "recovered"):
    r = json.loads(open(f"{out}/{name}.jsonl").read().splitlines()[0])
    assert r["failed_requests"] == 0, (name, r)
    u[name] = r["utilisation"]
    print(f"{name}: utilisation {r['utilisation']:.3f}, device share {r['device_share']:.3f}, "
          f"{r['tokens_per_second']} tokens/s, mean batch {r['mean_batch_size']}")
ok = u["warm"] >= 0.85 and u["cold"] < 0.6 and u["recovered"] >= 0.85
if not ok:
    sys.exit(f"expected warm >= 0.85, cold < 0.6, recovered >= 0.85; got {u}")
PY
