import os

HF_HOME = os.path.expanduser(os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "huggingface")))
default_cache_path = os.path.join(HF_HOME, "hub")
HF_HUB_CACHE = os.getenv("HF_HUB_CACHE", default_cache_path)
HF_HUB_OFFLINE = True
HF_HUB_DISABLE_TELEMETRY = True
ENDPOINT = "https://huggingface.co"
HUGGINGFACE_CO_URL_TEMPLATE = ENDPOINT + "/{repo_id}/resolve/{revision}/{filename}"
