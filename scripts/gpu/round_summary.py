#!/usr/bin/env python3
"""The GPU round's results in short (scripts/gpu/round.sh prints this last): one line per step,
server point, candidate, engine shape, transformers shape and test binary.

  python3 scripts/gpu/round_summary.py OUT_DIR
"""
import json
import os
import sys


def lines(path):
    try:
        with open(path) as f:
            for raw in f:
                raw = raw.strip()
                if not raw:
                    continue
                try:
                    yield json.loads(raw)
                except ValueError:
                    yield {"unreadable": raw[:120]}
    except OSError:
        return


def pick(d, keys):
    return " ".join(f"{k}={d[k]}" for k in keys if k in d)


def main():
    out = sys.argv[1]
    try:
        print("env", json.dumps(json.load(open(os.path.join(out, "env.json")))))
    except (OSError, ValueError):
        pass
    print("== steps")
    for d in lines(os.path.join(out, "round.jsonl")):
        print(" ", json.dumps(d))
    serving = ["label", "ready_s", "tokens_per_second", "p50_ms", "p99_ms", "failed_requests", "sequences_per_batch",
               "forward_ms_per_batch", "stage_prepare_ms", "stage_forward_ms", "stage_results_ms", "queue_ms_per_sequence",
               "padding_ratio", "server_cpu_s", "error"]
    for name in ("server.jsonl", "candidates.jsonl"):
        print("==", name)
        for d in lines(os.path.join(out, name)):
            print(" ", pick(d, serving + ["flags", "rc"]))
    print("== engine.jsonl")
    for d in lines(os.path.join(out, "engine.jsonl")):
        print(" ", pick(d, ["attention", "cuda_graph_tokens", "batch", "seq", "shape", "rc", "ms_per_batch",
                            "ms_per_batch_median", "tokens_per_second", "model_gflops_per_second"]))
    print("== transformers.jsonl")
    for d in lines(os.path.join(out, "transformers.jsonl")):
        print(" ", pick(d, ["batch", "seq", "dtype", "ms_per_batch", "tokens_per_second", "matmul_tflops",
                            "attn_implementation", "transformers", "torch"]))
    print("== attention-probe.jsonl (lines)", sum(1 for _ in lines(os.path.join(out, "attention-probe.jsonl"))))
    print("== tests.jsonl")
    for d in lines(os.path.join(out, "tests.jsonl")):
        print(" ", json.dumps(d))


if __name__ == "__main__":
    main()
