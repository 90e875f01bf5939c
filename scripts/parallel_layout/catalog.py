"""Every Megatron-LM flag of a release, and the flags releases renamed or removed.

The per-release flag sets come from the release index (scripts/release_index,
compiled from each release's megatron/training/arguments.py); the checker
sorts a pasted command into flags it uses, flags Megatron-LM knows but that
do not touch the layout, and flags the chosen release does not know at all
(Megatron-LM stops at argument parsing: "unrecognized arguments").

``SUCCESSORS`` is the one hand-written table: the flag that replaced a
removed one, where the released sources name it (help text, deprecation
message) or the replacement is the same option under a new name;
tests/test_layout_catalog.py checks every entry against the index (the old
flag is gone in the release named, the successor exists there).
``REMOVED_BEFORE_INDEX`` holds flags removed before 0.12 that launch scripts
still carry.
"""

from __future__ import annotations

import functools

# old flag -> (successor, where the sources say so)
SUCCESSORS = {
    "--use-custom-fsdp": ("--use-megatron-fsdp",
                          "the custom FSDP became Megatron-FSDP (help 'Use the Megatron FSDP "
                          "code path in DDP.'); --use-megatron-fsdp added in 0.14.0"),
    "--keep-fp8-transpose-cache-when-using-custom-fsdp": (
        "--keep-fp8-transpose-cache", "same option without the FSDP-specific name"),
    "--moe-extended-tp": ("--expert-tensor-parallel-size",
                          "0.16.1 help: 'Its functionality is replaced by "
                          "expert_tensor_parallel_size.'"),
    "--pipeline-model-parallel-split-rank": (None, "encoder/decoder split removed with the "
                                                   "encoder parallel sizes"),
}

# Flags deprecated but still accepted (the release warns and maps them).
DEPRECATED = {
    "--hybrid-override-pattern": ("--hybrid-layer-pattern", "0.17.1",
                                  "'--hybrid-override-pattern is deprecated. Use "
                                  "--hybrid-layer-pattern instead.'"),
}

# Removed before the first indexed release (0.12.3): (release line, successor, source)
REMOVED_BEFORE_INDEX = {
    "--DDP-impl": ("a release before 0.12", None,
                   "Megatron-LM commit 3fb3e95 (2023-09) 'Deprecate torchDDP and get rid of "
                   "args.DDP_impl'; Megatron's own DistributedDataParallel is the only DDP"),
}


@functools.lru_cache(maxsize=None)
def release_flags(version):
    """{option: info} of one indexed release (aliases included), or None."""
    from release_index import load
    flags = load(version).flags()
    if flags is None:
        return None
    out = dict(flags)
    for option, info in flags.items():
        for alias in info.get("aliases") or ():
            out.setdefault(alias, info)
    return out


def takes_value(info):
    return (info or {}).get("action") not in ("store_true", "store_false", "store_const",
                                              "count", "help", "version")


@functools.lru_cache(maxsize=None)
def history():
    """{flag: {"removed_in", "last_in", "successor", "source"}} over the index, plus
    REMOVED_BEFORE_INDEX.  'removed_in' is the first indexed release without it."""
    from release_index import RELEASES
    out = {}
    prev = None
    for version in RELEASES:
        flags = release_flags(version) or {}
        if prev is not None:
            for option in sorted(set(prev[1]) - set(flags)):
                successor, source = SUCCESSORS.get(option, (None, None))
                out[option] = {"removed_in": version, "last_in": prev[0],
                               "successor": successor, "source": source}
        prev = (version, flags)
    for option, (when, successor, source) in REMOVED_BEFORE_INDEX.items():
        out[option] = {"removed_in": when, "last_in": None, "successor": successor,
                       "source": source}
    return out


def added_in(option):
    """First indexed release that knows ``option``, or None."""
    from release_index import RELEASES
    for version in RELEASES:
        if option in (release_flags(version) or {}):
            return version
    return None


def split_flags(tokens):
    """[(option, [values])] in order; a value is every following token that is
    not itself an option (negative numbers are values)."""
    out = []
    for token in tokens:
        token = str(token)
        if token.startswith("--"):
            option, eq, value = token.partition("=")
            out.append((option, [value] if eq else []))
        elif token.startswith("-") and len(token) > 1 and not token[1].isdigit() \
                and token[1] != ".":
            out.append((token, []))
        elif out:
            out[-1][1].append(token)
        else:
            out.append((None, [token]))
    return out


def classify(tokens, version, used_options, entry_flags=()):
    """Sort the pasted arguments: ``used`` (the checker reads them),
    ``irrelevant`` (Megatron-LM or the entry script knows them; they do not
    touch the layout) and ``unknown`` (not a flag of ``version`` nor of the
    entry script's ``entry_flags``: Megatron-LM stops at parsing)."""
    flags = release_flags(version)
    if flags is not None and entry_flags:
        flags = dict(flags, **{o: {} for o in entry_flags})
    used, irrelevant, unknown = [], [], []
    for option, values in split_flags(tokens):
        if option is None:
            unknown.append({"flag": " ".join(values), "removed_in": None, "successor": None,
                            "added_in": None})
        elif option in used_options:
            used.append(option)
        elif flags is None or option in flags:
            irrelevant.append(option)
        else:
            past = history().get(option, {})
            unknown.append({"flag": option, "removed_in": past.get("removed_in"),
                            "successor": past.get("successor"),
                            "added_in": added_in(option)})
    return {"used": used, "irrelevant": irrelevant, "unknown": unknown}


def history_rows():
    """Rows of the reference's renamed-and-removed table, by release then flag."""
    rows = []
    for option, h in history().items():
        rows.append((option, h["last_in"] or "-", h["removed_in"], h["successor"] or "-"))
    for option, (successor, since, _) in DEPRECATED.items():
        rows.append((option, "still accepted", f"deprecated in {since}", successor))
    return sorted(rows, key=lambda r: (r[2].startswith("a release"), r[2], r[0]))


def history_table():
    """The Markdown table parallelism-reference.md carries (a test keeps it equal)."""
    lines = ["| Flag | Last release with it | Removed in | Successor |",
             "| --- | --- | --- | --- |"]
    lines += [f"| `{a}` | {b} | {c} | {'`' + d + '`' if d != '-' else '-'} |"
              for a, b, c, d in history_rows()]
    return "\n".join(lines)
