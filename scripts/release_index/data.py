"""Where the compiled data lives and how it is read (gzip'd JSON, one file per release + events)."""

from __future__ import annotations

import functools
import gzip
import json
import os
from pathlib import Path

SCHEMA = 1
# references/index/releases/ of this bundle; RELEASE_INDEX_DIR points elsewhere (tests, rebuilds).
DATA_DIR = Path(__file__).resolve().parent.parent.parent / "references" / "index" / "releases"


def data_dir() -> Path:
    return Path(os.environ.get("RELEASE_INDEX_DIR", DATA_DIR))


def release_file(version: str, directory: Path | None = None) -> Path:
    return (directory or data_dir()) / f"{version}.json.gz"


def events_file(directory: Path | None = None) -> Path:
    return (directory or data_dir()) / "events.json.gz"


class MissingData(RuntimeError):
    """The compiled index is not where it should be (run `make index-releases`)."""


@functools.lru_cache(maxsize=None)
def read(path: Path) -> dict:
    try:
        with gzip.open(path, "rb") as fh:
            data = json.loads(fh.read())
    except FileNotFoundError:
        raise MissingData(f"release index file missing: {path} (run `make index-releases`)") from None
    if data.get("schema") != SCHEMA:
        raise MissingData(f"{path} has schema {data.get('schema')}, this code reads {SCHEMA}")
    return data


def dumps(data: dict) -> bytes:
    """Deterministic bytes: sorted keys, no gzip timestamp or file name."""
    raw = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return gzip.compress(raw, compresslevel=9, mtime=0)
