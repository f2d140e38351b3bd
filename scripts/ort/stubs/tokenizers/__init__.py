"""Stand-in for the Rust `tokenizers` package (not in Debian): importable, so that modules which
import it at the top (transformers' convert_slow_tokenizer, reached through models/mt5) load, but
with no distribution metadata, so transformers still reports fast tokenizers as unavailable.
The export never tokenizes text."""


class _Unavailable:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("tokenizers is a stub here (scripts/ort/stubs)")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    value = type(name, (_Unavailable,), {})
    globals()[name] = value
    return value
