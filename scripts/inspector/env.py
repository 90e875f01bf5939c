"""Environment variables worth reporting (an allow-list) and secret redaction.

Only names in EXACT or starting with a PREFIXES entry are reported.  A name that looks like a
secret is reported as REDACTED; a URL's user:password part is redacted in any value; the home
directory is shown as ``~``.  ``scrub`` applies the same redaction to any text (child error
messages included) so a secret value in the environment never reaches the output.
"""
import os
import re

PREFIXES = ("NCCL_", "NVTE_", "TORCH_", "CUDA_", "PYTORCH_", "NVIDIA_", "CUDNN_", "UCX_")
EXACT = ("CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
         "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
         "NO_VCS_VERSION", "LD_LIBRARY_PATH", "PYTHONPATH")
REDACTED = "<redacted>"
SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|PRIVATE|"
                         r"(^|_)KEY($|_)|API_?KEY|ACCESS_?KEY|SIGNATURE|CERT)", re.IGNORECASE)
URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s:]+(:[^/@\s]*)?@")
MIN_SECRET_LEN = 6  # shorter values would redact ordinary words; such secrets are weak anyway


def allowed(name):
    return name in EXACT or name.startswith(PREFIXES)


def is_secret_name(name):
    return bool(SECRET_NAME.search(name))


def secret_values(environ=None):
    """Values of every variable whose name looks secret (longest first, for replacement)."""
    environ = os.environ if environ is None else environ
    vals = {v for k, v in environ.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LEN}
    return sorted(vals, key=len, reverse=True)


def scrub(text, secrets, home=None):
    if not isinstance(text, str):
        return text
    for value in secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    text = URL_CREDENTIALS.sub(r"\1" + REDACTED + "@", text)
    home = os.path.expanduser("~") if home is None else home
    if home and home not in ("/", "") and home in text:
        text = re.sub(re.escape(home) + r"(?=/|$|[\s:;,'\")\]])", "~", text)
    return text


def scrub_tree(value, secrets, home=None):
    """Scrub every string (keys too) in a JSON-like tree."""
    if isinstance(value, str):
        return scrub(value, secrets, home)
    if isinstance(value, dict):
        return {scrub(k, secrets, home): scrub_tree(v, secrets, home) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_tree(v, secrets, home) for v in value]
    return value


def collect(environ=None):
    environ = os.environ if environ is None else environ
    out = {}
    for name in sorted(environ):
        if not allowed(name):
            continue
        out[name] = REDACTED if is_secret_name(name) else environ[name]
    return out
