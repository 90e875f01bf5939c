"""--object as users type it, and signatures from the release index when the live one is not the answer.

Benchmark agents called ``--object GPTModel``, ``--object megatron.core.parallel_state.initialize_model_parallel``
and ``--object get_num_layers_to_build --megatron-version 0.13``: 72 of their inspector calls exited 2.
Any spelling ``release_index.find`` knows is read as its ``module:attr`` key (the choice is said on
stderr), and two cases are answered from the release index (compiled from each release's source)
instead of the live import: ``--megatron-version`` naming another release than the installed one,
and no importable megatron-core. Standard library only.
"""
from __future__ import annotations

import release_index as ri

MAX_ALTERNATIVES = 4


class UnknownObject(ValueError):
    """A spelling the index does not know, or one that names a module (the message says what to give)."""


def resolve(text: str) -> tuple[str, list[str]]:
    """(module:attr key, other keys the spelling could mean) for a name as a user types it."""
    found = ri.find(text)
    keys = [k for k in found if ":" in k]
    if not keys:
        if found:
            raise UnknownObject("%r is a module; give MODULE:ATTR (e.g. %s:NAME)" % (text, found[0]))
        sugg = ri.suggest(text)
        hint = ("; close names: " + ", ".join(sugg[:MAX_ALTERNATIVES])) if sugg else ""
        raise UnknownObject("no Megatron object named %r in releases 0.12.3 to 0.19.2%s; "
                            "give MODULE:ATTR (e.g. megatron.core.models.gpt.gpt_model:GPTModel)" % (text, hint))
    return keys[0], keys[1:1 + MAX_ALTERNATIVES]


def signatures(keys, release: str) -> dict:
    """{key: what the key is in that indexed release} (api_history's view of one release)."""
    from api_history import release_view

    return {k: release_view(k, release) for k in keys}


def render(views: dict, why: str) -> str:
    from api_history import render_release_view

    lines = ["signatures from the release index (%s):" % why]
    for key, view in views.items():
        lines.append("  " + key)
        lines += ["  " + line for line in render_release_view(view)]
    return "\n".join(lines)
