#!/usr/bin/env python3
"""Compile Megatron-Bridge's published LLM training measurements into tests/data/perf_published.json.

Source: NVIDIA-NeMo/Megatron-Bridge at a pinned commit, docs/performance-summary.md (the newest
container) and docs/performance-summary-archive.md (older containers), read with `git show` from the
mirror (`fetch github:NVIDIA-NeMo/Megatron-Bridge`).  Every table row becomes one record with its
release, section, system and the source line.  A cell "a (b)" keeps a (the table's primary value;
the parenthesised one is another quantization granularity, per the table's note).  The 25.09 tables
do not state the precision and are left out (listed in "skipped").

  .venv/bin/python dev/extract_perf_tables.py --mirror DIR   (or $MEGATRON_BRIDGE_MIRROR)
"""

import argparse
import json
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = "NVIDIA-NeMo/Megatron-Bridge"
COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"
PATHS = ("docs/performance-summary.md", "docs/performance-summary-archive.md")
OUT = os.path.join(ROOT, "tests", "data", "perf_published.json")

COLUMNS = {"System": "system", "Model": "model", "#-GPUs": "gpus", "Precision": "precision",
           "GBS": "gbs", "MBS": "mbs", "Sequence Length": "seq_length", "FSDP": "fsdp", "TP": "tp",
           "PP": "pp", "CP": "cp", "VP": "vp", "EP": "ep", "GA": "ga",
           "Tokens / sec / GPU": "tokens_per_sec_per_gpu",
           "Model TFLOP / sec / GPU": "model_tflops_per_gpu"}
INTS = {"gpus", "gbs", "mbs", "seq_length", "fsdp", "tp", "pp", "cp", "vp", "ep", "ga"}
FLOATS = {"tokens_per_sec_per_gpu", "model_tflops_per_gpu"}
PRECISIONS = {"FP8-CS": "FP8", "FP8-MX": "MXFP8"}  # 25.11's spelling of the later labels


def cell(key, text):
    text = re.sub(r"\[\^[^\]]*\]", "", text).strip()  # footnote marks
    primary = text.split("(")[0].strip()
    if key == "model":  # "DeepSeekV3 (w/o MTP)": the name, and the note kept as model_note
        return primary
    if key in INTS:
        return None if primary in ("n/a", "") else int(primary)
    if key in FLOATS:
        return float(primary)
    if key == "precision":
        return PRECISIONS.get(primary, primary)
    return primary


def rows_of(text, path):
    release = section = system = model = None
    header = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if m := re.match(r"## (\S+) NeMo Container", line):
            release, header = m.group(1), None
        elif m := re.match(r"### (.+) Performance", line):
            section = {"Pre-Training": "pretrain", "SFT": "sft", "LoRA": "lora"}[m.group(1)]
        elif m := re.match(r"#### System: (.+)", line):
            system = m.group(1).strip()
        elif m := re.match(r"#### Model: (.+)", line):
            model = m.group(1).strip()
        elif line.startswith("| System") or line.startswith("| Model"):
            header = [COLUMNS[c.strip()] for c in line.strip().strip("|").split("|")]
        elif line.startswith("|") and header and not line.startswith("|--"):
            cells = [c for c in line.strip().strip("|").split("|")]
            row = {"release": release, "section": section, "system": system, "model": model}
            row.update({k: cell(k, c) for k, c in zip(header, cells)})
            marks = re.findall(r"\[\^([^\]]*)\]", line)
            if marks:  # the table's footnotes on this row (e.g. a known regression)
                row["footnotes"] = marks
            note = re.search(r"\(([^)]*)\)", dict(zip(header, cells)).get("model", "") or "")
            if note:
                row["model_note"] = note.group(1)
            row["model"] = row["model"].strip()
            row["source"] = {"repo": REPO, "commit": COMMIT, "path": path, "line": lineno}
            yield row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", default=os.environ.get("MEGATRON_BRIDGE_MIRROR"),
                        help="git directory of NVIDIA-NeMo/Megatron-Bridge holding COMMIT "
                             "(default: $MEGATRON_BRIDGE_MIRROR)")
    args = parser.parse_args()
    if not args.mirror:
        parser.error("give --mirror DIR or set $MEGATRON_BRIDGE_MIRROR")
    rows, skipped, notes = [], [], {}
    for path in PATHS:
        text = subprocess.run(["git", "-C", args.mirror, "show", f"{COMMIT}:{path}"], check=True,
                              capture_output=True, text=True).stdout
        notes.update(dict(re.findall(r"^\[\^([^\]]+)\]:\s*(.+)$", text, re.M)))
        for row in rows_of(text, path):
            if "precision" not in row:
                skipped.append({"release": row["release"], "model": row["model"],
                                "system": row["system"], "line": row["source"]["line"],
                                "why": "the table does not state the precision"})
                continue
            rows.append(row)
    for i, row in enumerate(rows):
        row["id"] = "{release}/{section}/{model}/{system}/{precision}/{gpus}/{gbs}".format(**row)
    ids = [r["id"] for r in rows]
    dup = {i for i in ids if ids.count(i) > 1}
    for row in rows:  # the same setting published twice in a release (e.g. two GBS runs differ)
        if row["id"] in dup:
            row["id"] += f"/L{row['source']['line']}"
    out = {"source": {"repo": REPO, "commit": COMMIT, "paths": list(PATHS),
                      "compiled_by": "dev/extract_perf_tables.py"},
           "note": "Megatron-Bridge performance summary and archive: measured tokens/s/GPU and "
                   "model TFLOP/s/GPU per container release. MoE rows force-balance tokens "
                   "across experts (the tables' footnote).",
           "rows": rows, "skipped": skipped, "footnotes": notes}
    with open(OUT, "w") as fh:  # one row per line: reviewable diffs
        fh.write('{\n"source": %s,\n"note": %s,\n"rows": [\n'
                 % (json.dumps(out["source"]), json.dumps(out["note"])))
        fh.write(",\n".join(json.dumps(r) for r in rows))
        fh.write('\n],\n"skipped": [\n' + ",\n".join(json.dumps(r) for r in skipped) + "\n],\n")
        fh.write('"footnotes": %s\n}\n' % json.dumps(notes, indent=1))
    print(f"{len(rows)} rows, {len(skipped)} skipped -> {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
