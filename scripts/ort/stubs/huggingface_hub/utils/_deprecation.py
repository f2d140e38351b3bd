def _deprecate_method(*, version, message=None):
    return lambda f: f
