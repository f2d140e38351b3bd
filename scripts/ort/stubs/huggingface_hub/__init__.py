"""Offline stand-in for huggingface_hub (not packaged in Debian), enough for transformers 4.40.2
to import. Nothing here talks to the Hub."""
from . import constants  # noqa: F401
from ._stub import placeholder

__version__ = "0.22.2"
_CACHED_NO_EXIST = object()


def __getattr__(name):
    value = placeholder(name)
    globals()[name] = value
    return value
