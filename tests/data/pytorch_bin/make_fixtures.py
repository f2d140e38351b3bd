#!/usr/bin/python3
"""Writes the pytorch_model.bin fixtures of tests/checkpoint with Python's own torch.save.

Run once, by hand, from this directory (the tests themselves never need Python or PyTorch):

    apt-get install --no-install-recommends python3-torch   # Debian 12: PyTorch 1.13.1
    /usr/bin/python3 make_fixtures.py

Every file is a few kilobytes. The values are simple formulas that tests/checkpoint repeats,
and `state_dict.json` lists every tensor of `state_dict.bin` with its dtype, shape and values
(row-major), so a test can compare the reader's bytes with what PyTorch meant.
"""

import collections
import json
import os

import torch

MARKER = "/tmp/relserve_pickle_payload_ran"  # what the malicious payloads would create


def base():
    return torch.arange(12, dtype=torch.float32) * 0.5 - 1.0


def state_dict():
    shared = base()
    sd = collections.OrderedDict()
    sd["dense.weight"] = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8
    sd["shared.all"] = shared                              # the storage itself
    sd["shared.slice"] = shared[2:8].view(2, 3)            # offset 2, contiguous
    sd["shared.transposed"] = shared.view(3, 4).t()        # strides (1, 4)
    sd["shared.every_third"] = shared[1::3]                # offset 1, stride 3
    sd["half"] = torch.tensor([[0.5, -1.5], [2.0, 65504.0]], dtype=torch.float16)
    sd["bfloat16"] = torch.tensor([1.0, -2.5, 3.0e38], dtype=torch.bfloat16)
    sd["double"] = torch.tensor([0.1, -1e300], dtype=torch.float64)
    sd["long"] = torch.tensor([-1, 5, 2**40], dtype=torch.int64)
    sd["int"] = torch.tensor([7, -8], dtype=torch.int32)
    sd["uint8"] = torch.tensor([0, 255], dtype=torch.uint8)
    sd["mask"] = torch.tensor([True, False, True, True])
    sd["scalar"] = torch.tensor(3.25)
    sd["empty"] = torch.zeros(0, 4)
    sd["param"] = torch.nn.Parameter(torch.tensor([[1.0, 2.0]]))  # _rebuild_parameter
    # What Module.state_dict() attaches; pickled as BUILD on the OrderedDict.
    sd._metadata = collections.OrderedDict({"": {"version": 1}, "dense": {"version": 1}})
    return sd


SAFETENSORS_DTYPE = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL",
}


def describe(sd):
    out = {}
    for name, t in sd.items():
        values = t.detach().reshape(-1)
        if t.dtype in (torch.float16, torch.bfloat16):
            values = values.float()  # exact: both widen to float32 without rounding
        out[name] = {"dtype": SAFETENSORS_DTYPE[t.dtype], "shape": list(t.shape), "values": values.tolist()}
    return out


class RunsShell:
    """Unpickling calls os.system (pickled as posix.system on Linux)."""

    def __reduce__(self):
        return (os.system, (f"touch {MARKER}",))


class EvalsCode:
    """Unpickling calls builtins.eval; protocol 4 names it with STACK_GLOBAL."""

    def __reduce__(self):
        return (eval, (f"__import__('os').system('touch {MARKER}')",))


def main():
    sd = state_dict()
    torch.save(sd, "state_dict.bin")
    with open("state_dict.json", "w") as f:
        json.dump(describe(sd), f, indent=1)
        f.write("\n")

    # Protocol 4: FRAME, SHORT_BINUNICODE, MEMOIZE and STACK_GLOBAL instead of GLOBAL.
    torch.save({"a": torch.tensor([1.0, 2.0]), "b": torch.tensor([[3.0], [4.0]])}, "protocol4.bin",
               pickle_protocol=4)

    # transformers' sharding (save_pretrained with max_shard_size): plain dicts and an index.
    os.makedirs("sharded", exist_ok=True)
    shards = {
        "pytorch_model-00001-of-00002.bin": {"a.weight": torch.full((2, 2), 1.0), "a.bias": torch.full((2,), 2.0)},
        "pytorch_model-00002-of-00002.bin": {"b.weight": torch.full((3,), 3.0)},
    }
    weight_map = {}
    total = 0
    for shard, tensors in shards.items():
        torch.save(tensors, os.path.join("sharded", shard))
        for name, t in tensors.items():
            weight_map[name] = shard
            total += t.numel() * t.element_size()
    with open(os.path.join("sharded", "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")

    # What relserve refuses, each for its own reason.
    torch.save({"w": torch.ones(2)}, "legacy.bin", _use_new_zipfile_serialization=False)
    torch.save({"w": torch.ones(2), "payload": RunsShell()}, "malicious_system.bin")
    torch.save({"w": torch.ones(2), "payload": EvalsCode()}, "malicious_eval_protocol4.bin", pickle_protocol=4)
    torch.save(torch.nn.Linear(2, 2), "whole_module.bin")
    torch.save({"model": {"w": torch.ones(2)}, "epoch": 3}, "nested_dict.bin")
    torch.save({"e": torch.arange(3.0).expand(2, 3)}, "expanded.bin")
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), "torchscript.pt")


if __name__ == "__main__":
    main()
