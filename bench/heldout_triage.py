#!/usr/bin/env python3
"""Run scripts/explain_error.py --json on every held-out report and count relevant / wrong / no answer.

The held-out set (tests/data/troubleshooting/heldout_reports.json) was frozen before any entry
was written for it: each report keeps the text its reporter pasted and, frozen with it, groups of
phrases taken from the maintainers' resolution. The first answer is what the script puts first:
the first problem's first catalogue entry, else that problem's raise site in Megatron's source
(``source``), else its name history (``name``); the sources and names answer since issue 19
items 2-3, and the frozen criteria are the same for all three. The first answer is *relevant*
when every group has one phrase in its answer fields (the user's own text is left out, so echoing
the message back cannot count), *wrong* when a first answer exists and is not relevant, and *no
answer* when the script answers nothing. Anyone can re-run this; nothing here is tuned per report.

  python bench/heldout_triage.py [--megatron-version X.Y] [--json] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "explain_error.py")
DATA = os.path.join(ROOT, "tests", "data", "troubleshooting", "heldout_reports.json")
# Fields that carry the user's own text or scoring, not the answer.
NOT_ANSWER = {"matched_line", "values", "ranks", "score", "entry_text", "versions", "query", "key",
              "chain", "other_wordings"}


def answer_text(match: dict) -> str:
    """Every answer field of one match, flattened to one lower-case string."""
    parts = []
    for key, value in match.items():
        if key in NOT_ANSWER or value is None:
            continue
        parts.append(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    return "\n".join(parts).lower()


def first_answer(out: dict) -> tuple[str | None, dict | None]:
    """(label, answer) the script puts first: a catalogue entry, else a raise site, else a name."""
    for prob in out.get("problems") or []:
        if prob.get("matches"):
            return prob["matches"][0]["id"], prob["matches"][0]
        if prob.get("source"):
            src = prob["source"]
            return f"source:{src.get('file', '?')}:{src.get('function', '?')}", src
        if prob.get("name"):
            return f"name:{prob['name'].get('key', '?')}", prob["name"]
    if out.get("matches"):  # a match outside any problem block (older output shape)
        return out["matches"][0]["id"], out["matches"][0]
    return None, None


def verdict(answer: dict | None, relevant: list[list[str]]) -> str:
    if answer is None:
        return "no answer"
    text = answer_text(answer)
    ok = all(any(p.lower() in text for p in group) for group in relevant)
    return "relevant" if ok else "wrong"


def explain(text: str, version: str | None) -> dict:
    cmd = [sys.executable, SCRIPT, "--json", "-"]
    if version:
        cmd[2:2] = ["--megatron-version", version]
    r = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=120)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"explain_error.py exited {r.returncode}: {r.stderr[-400:]}")
    return json.loads(r.stdout)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--megatron-version", help="passed through to explain_error.py")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--verbose", action="store_true", help="one line per report on stderr")
    args = p.parse_args()
    with open(DATA, encoding="utf-8") as f:
        doc = json.load(f)
    rows = []
    for rep in doc["reports"]:
        out = explain(rep["text"], args.megatron_version)
        first, answer = first_answer(out)
        v = verdict(answer, rep["relevant"])
        rows.append({"link": rep["link"], "verdict": v, "first": first})
        if args.verbose:
            print(f"{v:10s} {(first or '-')[:60]:60s} {rep['link']}", file=sys.stderr)
    counts = {k: sum(r["verdict"] == k for r in rows) for k in ("relevant", "wrong", "no answer")}
    n = len(rows)
    if args.json:
        print(json.dumps({"schema_version": 1, "frozen": doc["frozen"], "reports": n,
                          "counts": counts, "rows": rows}, indent=1))
    else:
        print(f"held-out reports: {n} (frozen {doc['frozen']})")
        for k, c in counts.items():
            print(f"  {k:10s} {c:3d}  {100 * c / n:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
