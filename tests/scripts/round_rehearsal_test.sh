#!/usr/bin/env bash
# scripts/gpu/round.sh --rehearse: every step of the GPU round on this CPU with the tiny DeBERTa
# of tests/data, and the files each step writes, so that the round cannot rot between GPU rounds.
# Also: the round refuses unknown arguments, --help starts nothing, and the working tree is left
# as it was.
#   tests/scripts/round_rehearsal_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Ports of this run only (CTest runs tests side by side).
export PORT=$((20000 + ($$ % 20000))) METRICS_PORT=$((40000 + ($$ % 20000)))

if "$root/scripts/gpu/round.sh" --rehearse --no-such-flag > "$out/bad.txt" 2>&1; then
  echo "round.sh accepted an unknown argument"; exit 1
fi
grep -q "unknown argument '--no-such-flag'" "$out/bad.txt" || { cat "$out/bad.txt"; exit 1; }
"$root/scripts/gpu/round.sh" --help > "$out/help.txt"
grep -q "^usage: scripts/gpu/round.sh" "$out/help.txt" || { cat "$out/help.txt"; exit 1; }

tree_before=$(git -C "$root" status --porcelain --untracked-files=all 2>/dev/null || true)
start=$(date +%s)
"$root/scripts/gpu/round.sh" --rehearse --build "$build" --out "$out/round" --archive "$out/archive/round.tar.gz" \
  > "$out/round.txt" 2>&1 ||
  { cat "$out/round.txt"; tail -n 30 "$out/round/logs/"*.log; exit 1; }
seconds=$(( $(date +%s) - start ))
tree_after=$(git -C "$root" status --porcelain --untracked-files=all 2>/dev/null || true)
[ "$tree_before" = "$tree_after" ] || { echo "the round wrote into the working tree:"; diff <(echo "$tree_before") <(echo "$tree_after"); exit 1; }
# The summary comes last on standard output, and the archive holds the same files as --out.
grep -q '^== steps' "$out/round.txt" && grep -q '^== candidates.jsonl' "$out/round.txt" ||
  { echo "no summary at the end of the round's output:"; tail -n 20 "$out/round.txt"; exit 1; }
mkdir -p "$out/unpacked" && tar xzf "$out/archive/round.tar.gz" -C "$out/unpacked" ||
  { echo "no archive at --archive"; exit 1; }
for f in round.jsonl server.jsonl candidates.jsonl engine.jsonl tests.jsonl; do
  cmp -s "$out/round/$f" "$out/unpacked/$f" || { echo "the archive's $f differs from --out's"; exit 1; }
done

if /usr/bin/python3 - "$out/round" "$seconds" <<'PY'
import json, sys
out, seconds = sys.argv[1], int(sys.argv[2])
def lines(name):
    return [json.loads(l) for l in open(f"{out}/{name}") if l.strip()]
fails = []
def check(ok, what):
    if not ok: fails.append(what)
env = json.load(open(f"{out}/env.json"))
check(env["rehearse"] == 1 and env["device"] == "cpu", f"env.json: {env}")
steps = {r["step"]: r for r in lines("round.jsonl")}
for step in ("build", "probe", "server", "server-share", "candidates", "engine", "tests-build", "round"):
    check(step in steps and steps[step].get("rc") == 0, f"round.jsonl step {step}: {steps.get(step)}")
check(steps.get("transformers", {}).get("skipped") == "GPU only", f"round.jsonl step transformers: {steps.get('transformers')}")
check(0 < steps["server-share"].get("share", 0), f"server-share: {steps['server-share']}")
probe = lines("attention-probe.jsonl")
check(len(probe) >= 1 and all(p["probe"] == "attention" for p in probe), f"attention-probe.jsonl: {probe}")
server = lines("server.jsonl")
check(len(server) == 3, f"server.jsonl has {len(server)} points, not 3")
for p in server:  # each of the three points back to back has its own stage times
    check(p["concurrency"] == 128 and p["tokens_per_second"] > 0 and p["failed_requests"] == 0, f"server point {p}")
    check(p["stage_forward_ms"] > 0 and p["sequences_per_batch"] > 0, f"server point without stage times: {p}")
yard = json.load(open(f"{out}/engine-yardstick.json"))
check(yard["workload_full_tps"] > 0, f"engine-yardstick.json: {yard}")
candidates = lines("candidates.jsonl")
labels = [c.get("label") for c in candidates]
check(len(candidates) == 8 and all(c.get("tokens_per_second", 0) > 0 for c in candidates),
      f"candidates.jsonl: {len(candidates)} lines, labels {labels}")
check("--gpu-attention tables" in labels and "--gpu-attention bias:auto" in labels and "--cuda-graph-tokens 0" in labels and "--warmup-workers false" in labels, f"candidate labels {labels}")
engine = lines("engine.jsonl")
check(len(engine) == 8 and {e["attention"] for e in engine} == {"bias", "tables"} and
      all(e.get("tokens_per_second", 0) > 0 for e in engine), f"engine.jsonl: {len(engine)} lines")
tests = {t["test"]: t for t in lines("tests.jsonl")}
check(tests.get("gpu_engine_test", {}).get("rc") == 0 and tests.get("gpu_server_test", {}).get("rc") == 0,
      f"tests.jsonl: {tests}")
check(seconds < 300, f"the rehearsal took {seconds} s (at most 300)")
if fails:
    sys.exit("\n".join(fails + [open(f"{out}/candidates.jsonl").read()]))
print(f"rehearsal: every step and file in {seconds} s")
PY
then :; else tail -n 40 "$out/round/logs/"*.log; exit 1; fi
