#!/usr/bin/env bash
# Create (or reuse) the pinned test environment in .venv/: Python 3.12 + requirements-test.txt.
# Idempotent: a stamp holding the requirements' hash skips the install when nothing changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="${VENV:-$root/.venv}"
req="$root/requirements-test.txt"

find_python312() {
  # pyenv shims answer to `python3.12` even when 3.12 is not the selected version, so run it.
  local c
  for c in "${PYTHON312:-}" python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12; do
    [ -n "$c" ] || continue
    if "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1; then
      command -v "$c" || echo "$c"
      return 0
    fi
  done
  return 1
}

want=$(sha256sum "$req" | cut -d' ' -f1)
stamp="$venv/.requirements.sha256"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

py=$(find_python312) || {
  echo "ensure-env: no Python 3.12 found (megatron-core 0.19.2 needs >= 3.12); set PYTHON312=/path/to/python3.12" >&2
  exit 2
}
echo "ensure-env: building $venv with $py" >&2
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
# --no-cache-dir: the CUDA build of torch is several GB; a cached copy beside the installed one
# doubles what a fresh machine needs on disk (a CI run once failed with "No space left on device").
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir -r "$req"
echo "$want" >"$stamp"
