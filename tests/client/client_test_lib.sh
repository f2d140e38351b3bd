# Shared steps of the relserve-client end-to-end tests (sourced; bin dir and source root in
# $bin and $root): a scratch folder removed on exit, small models made with relserve-model,
# servers started on kernel-chosen ports and always reaped, and JSON checks in Python.
set -Eeuo pipefail
trap 'echo "FAILED: line $LINENO of $(basename "$0"): $BASH_COMMAND"' ERR
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
client="$bin/relserve-client"
spm="$root/tests/data/reference/tokenizer/spm.model"

# make_model NAME [relserve-model create flags...]: a 2-layer DeBERTa-v3 with the bundled tokenizer.
make_model() {
  local name="$1"; shift
  "$bin/relserve-model" create --family deberta-v3 --hidden 32 --layers 2 --heads 4 --intermediate 64 \
    --vocab-file "$spm" --out "$work/$name" "$@" > /dev/null
}

# start_server LOG [relserve flags...]: starts relserve on 127.0.0.1 with a kernel-chosen gRPC
# port and waits until it serves; sets $server_pid, $grpc_port and $metrics_port (when the
# flags ask for a metrics endpoint).
start_server() {
  local log="$work/$1"; shift
  : > "$log"  # exists before the first poll, whenever the shell gets to the redirection
  "$bin/relserve" --grpc-address 127.0.0.1:0 --http-address 127.0.0.1:0 --metrics-address 127.0.0.1 --warmup false "$@" \
    > /dev/null 2> "$log" &
  server_pid=$!
  pids+=("$server_pid")
  grpc_port=""
  for _ in $(seq 1 600); do
    grpc_port=$(sed -n 's/.*serving [0-9]* model(s) on port \([0-9]*\).*/\1/p' "$log")
    [ -n "$grpc_port" ] && break
    kill -0 "$server_pid" 2> /dev/null || { echo "relserve exited:"; cat "$log"; exit 1; }
    sleep 0.1
  done
  [ -n "$grpc_port" ] || { echo "relserve did not start:"; cat "$log"; exit 1; }
  metrics_port=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$log")
}

# stop_server PID: SIGTERM, then waits for the server to exit (its exit status is not checked).
stop_server() {
  local pid="$1" status=0 watchdog
  kill -TERM "$pid" 2> /dev/null || true
  # A server still running a minute after SIGTERM is killed and fails the test, instead of
  # holding it until CTest's timeout. The watchdog's output goes nowhere, so that its sleep,
  # left behind when the watchdog is stopped, holds no pipe of the test open.
  ( exec > /dev/null 2>&1; sleep 60; kill -KILL "$pid" ) &
  watchdog=$!
  wait "$pid" || status=$?
  kill "$watchdog" 2> /dev/null || true
  wait "$watchdog" 2> /dev/null || true
  if [ "$status" = 137 ]; then
    echo "FAILED: relserve (pid $pid) was still running 60 s after SIGTERM"
    exit 1
  fi
}

# expect_exit CODE COMMAND...: runs COMMAND, fails the test unless it exits with CODE; its
# stdout and stderr are left in $work/out and $work/err.
expect_exit() {
  local want="$1"; shift
  local got=0
  "$@" > "$work/out" 2> "$work/err" || got=$?
  if [ "$got" != "$want" ]; then
    echo "FAILED: exit $got, expected $want: $*"
    echo "stdout:"; cat "$work/out"; echo "stderr:"; cat "$work/err"
    exit 1
  fi
}

# expect_no_output: the last expect_exit's command printed nothing at all.
expect_no_output() {
  if [ -s "$work/out" ] || [ -s "$work/err" ]; then
    echo "FAILED: expected no output"; cat "$work/out" "$work/err"; exit 1
  fi
}

# check_json PYTHON_EXPRESSIONS < JSON: every line of the program must hold, with the parsed
# document (or list of JSON lines) in `j`; prints the failing one.
check_json() {
  /usr/bin/python3 -c '
import json, math, sys
text = sys.stdin.read()
lines = [json.loads(l) for l in text.splitlines() if l.strip()]
j = lines[0] if len(lines) == 1 else lines
for check in sys.argv[1:]:
    ok = eval(check)
    if not ok:
        print("FAILED check:", check)
        print("on:", text[:2000])
        sys.exit(1)
' "$@"
}
