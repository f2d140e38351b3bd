#!/usr/bin/env python3
"""transformers' encoder on the GPU, for docs/PERFORMANCE.md: tokens/s of the same model
directories relserve's engine benchmark loads (made by `relserve-model create`), at the same
batch x length shapes and dtypes, with the GPU's matrix-product rate measured in the same run.
Prints one JSON line per point.

  python3 scripts/gpu/bench_transformers.py --model DIR [--model DIR ...] --shapes 1x128,32x512
"""
import argparse
import json
import time

import torch
import transformers


def matmul_flops(dtype, n=8192, seconds=2.0):
    a = torch.randn(n, n, device="cuda", dtype=dtype)  # random data: zeros run faster
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    iters, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        iters += 20
    return 2.0 * n ** 3 * iters / (time.perf_counter() - start)


def load(path, dtype):
    config = transformers.AutoConfig.from_pretrained(path)
    if config.model_type in ("t5", "mt5"):
        cls = transformers.T5EncoderModel
    else:
        cls = transformers.AutoModel
    try:
        model = cls.from_pretrained(path, dtype=dtype)
    except TypeError:
        model = cls.from_pretrained(path, torch_dtype=dtype)
    return model.to("cuda").eval(), config


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", action="append", required=True)
    p.add_argument("--dtypes", default="bfloat16,float16")
    p.add_argument("--shapes", default="1x128,32x128,32x512,8x2048")
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        ceiling = matmul_flops(dtype)
        for path in args.model:
            model, config = load(path, dtype)
            vocab = config.vocab_size
            for shape in args.shapes.split(","):
                b, l = (int(x) for x in shape.split("x"))
                ids = torch.randint(5, vocab, (b, l), device="cuda")
                mask = torch.ones_like(ids)
                iters = args.iters * (4 if b == 1 else 1)
                with torch.inference_mode():
                    for _ in range(3):
                        model(input_ids=ids, attention_mask=mask)
                    torch.cuda.synchronize()
                    times = []
                    for _ in range(iters):
                        t0 = time.perf_counter()
                        out = model(input_ids=ids, attention_mask=mask)
                        # Mean-pooled embeddings back to the host, as relserve's engine benchmark does.
                        h = out.last_hidden_state.float()
                        (h * mask.unsqueeze(-1)).sum(1).div(mask.sum(1, keepdim=True)).cpu()
                        times.append(time.perf_counter() - t0)
                times.sort()
                mean = sum(times) / len(times)
                print(json.dumps({
                    "engine": "transformers", "transformers": transformers.__version__, "torch": torch.__version__,
                    "model": path.rstrip("/").split("/")[-1], "model_type": config.model_type, "dtype": dtype_name,
                    "batch": b, "seq": l, "ms_per_batch": mean * 1e3, "ms_per_batch_median": times[len(times) // 2] * 1e3,
                    "tokens_per_second": b * l / mean, "matmul_tflops": ceiling / 1e12,
                    "attn_implementation": getattr(config, "_attn_implementation", None),
                }), flush=True)
            del model
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
