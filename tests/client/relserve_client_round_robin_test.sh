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

# count_calls A0 B0 N: sets $da and $db to the calls each server counted since A0 and B0,
# waiting for their sum to reach N: the servers count a call once its response is on its way,
# so the last few may lag the client.
count_calls() {
  for _ in $(seq 1 50); do
    da=$(( $(requests "$a_metrics") - $1 )); db=$(( $(requests "$b_metrics") - $2 ))
    [ $((da + db)) -ge "$3" ] && return
    sleep 0.1
  done
}

# round_robin sends to the subchannels that are connected: enough calls that the second
# connection is up long before the last of them, however fast the servers answer.
a0=$(requests "$a_metrics"); b0=$(requests "$b_metrics")
expect_exit 0 "$client" bench --target "$target" --requests 400 --concurrency 2 --warmup 0 --lengths fixed:16 --quiet
check_json 'j["requests"] == 400' 'j["errors"] == {}' < "$work/out"
count_calls "$a0" "$b0" 400
echo "round_robin: server A $da requests, server B $db"
[ "$da" -ge 100 ] && [ "$db" -ge 100 ] || { echo "FAILED: round_robin did not spread the calls"; exit 1; }
[ $((da + db)) -eq 400 ] || { echo "FAILED: expected 400 requests in all"; exit 1; }

# Each one-shot call on the multi-address target works too.
expect_exit 0 "$client" embed --target "$target" "spread"
expect_exit 0 "$client" health --target "$target"

a1=$(requests "$a_metrics"); b1=$(requests "$b_metrics")
expect_exit 0 "$client" bench --target "$target" --load-balancing pick_first --requests 20 --concurrency 2 \
  --warmup 0 --lengths fixed:16 --quiet
count_calls "$a1" "$b1" 20
echo "pick_first: server A $da requests, server B $db"
[ "$da" -eq 0 ] || [ "$db" -eq 0 ] || { echo "FAILED: pick_first used both servers"; exit 1; }
echo "relserve-client round robin: passed"
