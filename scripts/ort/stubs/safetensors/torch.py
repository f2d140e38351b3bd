import json
import struct

import torch

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}


def load_file(filename, device="cpu"):
    """Every tensor of a .safetensors file as a dict of torch tensors (copies, on the CPU)."""
    with open(filename, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        flat = torch.frombuffer(bytearray(data[base + start:base + end]), dtype=dtype) if end > start \
            else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(info["shape"])
    return tensors


def save_file(tensors, filename, metadata=None):
    raise NotImplementedError("safetensors stub (scripts/ort/stubs): writing is not implemented")


def storage_ptr(tensor):
    try:
        return tensor.untyped_storage().data_ptr()
    except Exception:
        return tensor.storage().data_ptr()


def storage_size(tensor):
    try:
        return tensor.untyped_storage().nbytes()
    except Exception:
        return tensor.storage().size() * tensor.element_size()
