"""The command to run next, with the values read from the message.

A value that names a flag of ``scripts/check_parallel_layout.py`` (its own flag table,
``parallel_layout.flags``) gives a layout check; otherwise, when the entry is raised in a class,
the inspector's ``--object`` shows that class's signature in the user's installation.
"""

from __future__ import annotations

import re

from parallel_layout.flags import FLAGS, WORLD_FLAGS

OPTION = {f.dest: f.option for f in (*FLAGS, *WORLD_FLAGS) if f.kind in ("size", "count")}
# Names messages use for a config field that the flag table spells otherwise.
SYNONYMS = {"num_moe_experts": "num_experts", "ep_size": "expert_model_parallel_size",
            "tp_size": "tensor_model_parallel_size", "pp_size": "pipeline_model_parallel_size",
            "world size": "world_size", "num_layers_in_first_pipeline_stage": "decoder_first_pipeline_num_layers",
            "num_layers_in_last_pipeline_stage": "decoder_last_pipeline_num_layers"}


def layout_flags(values: dict) -> list[str]:
    out = []
    for name, value in values.items():
        dest = SYNONYMS.get(name, name)
        if dest in OPTION and re.fullmatch(r"\d+", value) and OPTION[dest] not in out:
            out += [OPTION[dest], value]
    return out


def next_command(rec: dict, values: dict) -> str | None:
    flags = layout_flags(values)
    if flags:
        if "--world-size" not in flags:
            flags = ["--world-size", "<WORLD_SIZE>", *flags]
        return "python scripts/check_parallel_layout.py " + " ".join(flags)
    if rec.get("object"):
        return f"python scripts/inspect_core_api.py --object {rec['object']}"
    return None
