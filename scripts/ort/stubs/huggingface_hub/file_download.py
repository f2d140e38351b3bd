import re

from ._stub import placeholder

REGEX_COMMIT_HASH = re.compile(r"^[0-9a-f]{40}$")


def __getattr__(name):
    return placeholder(name)
