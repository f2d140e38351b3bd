#!/usr/bin/env python3
"""The attention call alone, as DeBERTa-v3-base makes it on a GPU (server/model/layers/biased_attention.cc):
scaled_dot_product_attention on [batch, 12 heads, L, 64] bfloat16 with a [batch, 12, L, L] additive bias and
scale 1. For every batch size in --batches at each length in --lengths it times the first call, the second call,
and a call on a new thread after those two (cuDNN keeps its execution plans per thread), with the SDPA backends
that --backends allows. Run once per backend setting in a fresh process, so that no earlier setting warmed a
shape. Writes one JSON line per measurement to --out as soon as it is measured, and first a line with the library
versions. Without torch (a CPU machine's rehearsal of scripts/gpu/round.sh) it writes one line saying so.
  python3 scripts/gpu/attention_probe.py --backends default --out probe.jsonl
"""
import argparse
import json
import sys
import threading
import time

SETTINGS = ("default", "no-cudnn", "no-efficient", "no-flash", "math")


def emit(out, record):
    out.write(json.dumps(record) + "\n")
    out.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", choices=SETTINGS, default="default",
                        help="default: every backend allowed; no-X: all but X; math: the math kernel only")
    parser.add_argument("--lengths", default="128,512")
    parser.add_argument("--batches", default="1-32", help="first-last, or a comma list")
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if "-" in args.batches:
        first, last = (int(x) for x in args.batches.split("-"))
        batches = list(range(first, last + 1))
    else:
        batches = [int(x) for x in args.batches.split(",")]
    lengths = [int(x) for x in args.lengths.split(",")]
    with open(args.out, "a") as out:
        try:
            import torch
        except ImportError as e:
            emit(out, {"probe": "attention", "backends": args.backends, "skipped": f"python3 has no torch ({e})"})
            return 0
        versions = {"probe": "attention", "backends": args.backends, "torch": torch.__version__,
                    "cuda": torch.version.cuda,
                    "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                    "device_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
        if args.device == "cuda" and not torch.cuda.is_available():
            versions["skipped"] = "no CUDA device"
            emit(out, versions)
            return 0
        emit(out, versions)
        from torch.nn.attention import SDPBackend, sdpa_kernel
        every = [SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]
        allowed = {"default": every,
                   "no-cudnn": [b for b in every if b != SDPBackend.CUDNN_ATTENTION],
                   "no-efficient": [b for b in every if b != SDPBackend.EFFICIENT_ATTENTION],
                   "no-flash": [b for b in every if b != SDPBackend.FLASH_ATTENTION],
                   "math": [SDPBackend.MATH]}[args.backends]
        device = torch.device(args.device)
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

        def call(q, k, v, bias):
            with sdpa_kernel(allowed):
                sync()
                t0 = time.perf_counter()
                torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1.0)
                sync()
                return round((time.perf_counter() - t0) * 1000, 3)

        for length in lengths:
            for batch in batches:
                shape = (batch, args.heads, length, args.head_dim)
                q, k, v = (torch.randn(shape, device=device, dtype=torch.bfloat16) for _ in range(3))
                bias = torch.randn(batch, args.heads, length, length, device=device, dtype=torch.bfloat16)
                record = {"probe": "attention", "backends": args.backends, "batch": batch, "length": length}
                try:
                    record["first_ms"] = call(q, k, v, bias)
                    record["second_ms"] = call(q, k, v, bias)
                    other = {}

                    def on_thread():
                        try:
                            if device.type == "cuda":
                                torch.cuda.set_device(device.index if device.index is not None else 0)
                            other["ms"] = call(q, k, v, bias)
                        except Exception as e:  # reported in the record, not lost on a thread
                            other["error"] = str(e).splitlines()[0][:300]
                    thread = threading.Thread(target=on_thread)
                    thread.start()
                    thread.join()
                    record["other_thread_ms"] = other.get("ms")
                    if "error" in other:
                        record["other_thread_error"] = other["error"]
                except RuntimeError as e:
                    record["error"] = str(e).splitlines()[0][:300]
                emit(out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
