"""Pure-Python stand-in for safetensors (not packaged in Debian): the file format is an 8-byte
little-endian header length, a JSON header (name -> dtype, shape, data_offsets) and the raw
little-endian tensor data. Only reading into torch tensors is implemented."""
__version__ = "0.4.3"


def safe_open(*args, **kwargs):
    raise NotImplementedError("safetensors stub (scripts/ort/stubs): use safetensors.torch.load_file")
