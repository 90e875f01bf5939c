#!/usr/bin/env python3
"""Rebuild the JSON indexes compiled from the bundle's Markdown (needs markdown-it-py: run it
with the development environment, `make index-references`).

  .venv/bin/python dev/build_reference_index.py           # write references/index/*.json
  .venv/bin/python dev/build_reference_index.py --check   # exit 1 and name the stale files

The Markdown stays the single source people edit; the scripts read only the JSON. What is
compiled, and how, is described in dev/reference_index/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference_index import build  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="only report stale index files (exit 1 when any)")
    args = p.parse_args(argv)
    if args.check:
        bad = build.stale()
        for rel in bad:
            print(f"{rel} is stale: run `{build.REBUILD}`", file=sys.stderr)
        return 1 if bad else 0
    for rel, text in build.build().items():
        path = build.REPO / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
