"""Placeholders for the parts of huggingface_hub that transformers 4.40.2 imports but the export
never calls: names ending in Error are exception classes, everything else a class that fails
when called (usable as a base class, a decorator target or a value)."""


class _Unavailable:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("huggingface_hub is a stub here: no Hub access (scripts/ort/stubs)")


def placeholder(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name.endswith("Error") or name.endswith("Exception"):
        return type(name, (Exception,), {})
    return type(name, (_Unavailable,), {})
