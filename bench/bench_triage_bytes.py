#!/usr/bin/env python3
"""Bytes an agent reads to answer "what is this error and how do I fix it", with and without
scripts/explain_error.py.

The questions are the catalogue's own messages (every ``text error`` fence of
references/troubleshooting.md, as tests/test_troubleshooting.py parses it), each with its
numbers changed and pasted into a noisy three-rank log (tests/triage_logs.py), as a user would
paste it. Messages with no text of their own (a bare ``AssertionError``) come with a traceback
through the statement that raises them.

* without the script: the agent reads references/troubleshooting.md whole (a literal search
  for the pasted line is also counted: how often it finds nothing, since the numbers differ);
* with the script: its text report, plus the one entry it names first, read by its anchor
  (the entry's section: its heading to the next heading).

Needs the development environment (markdown-it-py reads the questions):
  .venv/bin/python bench/bench_triage_bytes.py
"""

import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "scripts")]

import test_troubleshooting as tt  # noqa: E402
import triage_logs  # noqa: E402
from triage import catalogue  # noqa: E402

DOC = os.path.join(ROOT, "references", "troubleshooting.md")
SCRIPT = os.path.join(ROOT, "scripts", "explain_error.py")


def sections() -> dict[str, str]:
    """Entry id -> its Markdown section (heading line to the next heading of level <= 3)."""
    lines = open(DOC, encoding="utf-8").read().splitlines(keepends=True)
    out, current = {}, None
    for line in lines:
        if line.startswith(("# ", "## ", "### ")):
            current = None
            m = tt.ID_RE.match(line[4:].strip()) if line.startswith("### ") else None
            if m:
                current = m.group(1)
                out[current] = ""
        if current:
            out[current] += line
    return out


def main() -> int:
    doc = open(DOC, encoding="utf-8").read()
    secs = sections()
    index = {e["id"]: e for e in catalogue.entries()}
    with_script, literal_misses, first_right, n = [], 0, 0, 0
    for entry in tt.ENTRIES:
        if not entry.message_fences or entry.message_fences[0][0] != "text error":
            continue
        n += 1
        message = triage_logs.changed_numbers(entry.text, seed=len(entry.text))
        frames = [(f["file"], f["lines"][0], f["function"].rsplit(".", 1)[-1])
                  for f in index[entry.id]["frames"] if f["kind"] == "statement"][:1]
        bare = tt.EXC_PREFIX.sub("", entry.text).strip() == "" or entry.text.strip().endswith("Error")
        log = triage_logs.multi_rank_log(message, frames if bare else [])
        if message.splitlines()[0] not in doc:
            literal_misses += 1
        r = subprocess.run([sys.executable, SCRIPT, "-"], input=log.encode(), capture_output=True, timeout=60)
        report = r.stdout.decode()
        named = report.split("references/troubleshooting.md#", 1)[1].split()[0] if "#" in report else ""
        first = next((eid for eid, rec in index.items() if rec["anchor"] == named), None)
        first_right += first == entry.id
        with_script.append(len(r.stdout) + len(secs.get(first, "").encode()))
    size = len(doc.encode())
    print(f"{n} questions (the catalogue's error messages, numbers changed, in a noisy 3-rank log)")
    print(f"  without the script: read references/troubleshooting.md whole: {size} bytes per question "
          f"(a literal search for the pasted line finds nothing for {literal_misses} of {n})")
    print(f"  with the script: report + the named entry: median {statistics.median(with_script):.0f} bytes, "
          f"mean {statistics.mean(with_script):.0f}, max {max(with_script)} "
          f"({size / statistics.mean(with_script):.0f}x less); first entry named is the right one for "
          f"{first_right} of {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
