#!/usr/bin/env bash
# Client-side load balancing: with a two-address target (ipv4:A,B, as a headless Service's
# DNS name resolves to every pod) relserve-client uses round_robin, so both servers' request
# counters grow; forced to pick_first, all calls go to one of them.
bin="$1"; root="$2"
source "$(dirname "$0")/client_test_lib.sh"

make_model embedder --sentence-transformers
start_server a.log --model "embedder=$work/embedder" --metrics-port 0
a_grpc=$grpc_port; a_metrics=$metrics_port
start_server b.log --model "embedder=$work/embedder" --metrics-port 0
b_grpc=$grpc_port; b_metrics=$metrics_port
[ -n "$a_metrics" ] && [ -n "$b_metrics" ] || { echo "FAILED: no metrics ports"; exit 1; }
target="ipv4:127.0.0.1:$a_grpc,127.0.0.1:$b_grpc"

# requests PORT: the server's relserve_requests_total, summed over its labels.
requests() {
  /usr/bin/python3 - "$1" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
print(int(sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith("relserve_requests_total{"))))
PY
}

a0=$(requests "$a_metrics"); b0=$(requests "$b_metrics")
expect_exit 0 "$client" bench --target "$target" --requests 40 --concurrency 2 --warmup 0 --lengths fixed:16 --quiet
check_json 'j["requests"] == 40' 'j["errors"] == {}' < "$work/out"
# The servers count a call once its response is on its way, so the last few may lag the client.
for _ in $(seq 1 50); do
  a1=$(requests "$a_metrics"); b1=$(requests "$b_metrics")
  [ $((a1 - a0 + b1 - b0)) -ge 40 ] && break
  sleep 0.1
done
echo "round_robin: server A $((a1 - a0)) requests, server B $((b1 - b0))"
[ $((a1 - a0)) -ge 10 ] && [ $((b1 - b0)) -ge 10 ] || { echo "FAILED: round_robin did not spread the calls"; exit 1; }
[ $((a1 - a0 + b1 - b0)) -eq 40 ] || { echo "FAILED: expected 40 requests in all"; exit 1; }

# Each one-shot call on the multi-address target works too.
expect_exit 0 "$client" embed --target "$target" "spread"
expect_exit 0 "$client" health --target "$target"

a1=$(requests "$a_metrics"); b1=$(requests "$b_metrics")
expect_exit 0 "$client" bench --target "$target" --load-balancing pick_first --requests 20 --concurrency 2 \
  --warmup 0 --lengths fixed:16 --quiet
for _ in $(seq 1 50); do
  a2=$(requests "$a_metrics"); b2=$(requests "$b_metrics")
  [ $((a2 - a1 + b2 - b1)) -ge 20 ] && break
  sleep 0.1
done
echo "pick_first: server A $((a2 - a1)) requests, server B $((b2 - b1))"
[ $((a2 - a1)) -eq 0 ] || [ $((b2 - b1)) -eq 0 ] || { echo "FAILED: pick_first used both servers"; exit 1; }
echo "relserve-client round robin: passed"
