from .._stub import placeholder

_progress_bars_disabled = False


def are_progress_bars_disabled(name=None):
    return _progress_bars_disabled


def disable_progress_bars(name=None):
    global _progress_bars_disabled
    _progress_bars_disabled = True


def enable_progress_bars(name=None):
    global _progress_bars_disabled
    _progress_bars_disabled = False


def __getattr__(name):
    value = placeholder(name)
    globals()[name] = value
    return value
