"""dev/release_ast.py: each message's guarding condition, the config fields it reads and their flags.

A synthetic release (every construct once) pins the extraction; the shipped 0.19.2 index is
checked against the installed source for a few messages whose condition is read by hand from
that source (file and line quoted in each case).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "dev")]

import release_ast  # noqa: E402
from release_index import load  # noqa: E402

SRC = {
    "megatron/core/__init__.py": "",
    "megatron/core/cfg.py": '''
import logging, warnings
from dataclasses import dataclass
logger = logging.getLogger(__name__)

@dataclass
class DemoConfig:
    tp_size: int = 1
    heads: int = 1
    use_thing: bool = False

    def __post_init__(self):
        if self.heads % self.tp_size != 0:
            raise ValueError(f"heads ({self.heads}) must be a multiple of tp_size ({self.tp_size})")
        if self.use_thing:
            if not HAVE_THING:
                raise ImportError("thing is not installed")
        elif self.tp_size > 8:
            warnings.warn("large tp_size without thing")
        else:
            logger.warning("plain run")
        assert not (self.use_thing and self.tp_size == 1), "thing needs tp_size > 1"
        assert self.heads > 0, "heads must be positive"

def check(shape, want):
    msg = "unused first binding"
    if shape != want:
        msg = f"shape {shape} is not {want}"
        raise ValueError(msg)

def warn_later(n):
    note = f"n is {n}"
    if n > 3:
        warnings.warn(note)

def load():
    try:
        import thing
    except ImportError:
        raise RuntimeError("cannot import thing")
    while True:
        raise RuntimeError("never twice")
''',
    "megatron/training/arguments.py": '''
def _add(parser):
    group = parser.add_argument_group("demo")
    group.add_argument("--tp-size", type=int, default=1, dest="tp_size")
    group.add_argument("--heads", type=int, default=1)
    group.add_argument("--use-thing", action="store_true")
''',
}


@pytest.fixture(scope="module")
def messages():
    rel = release_ast.compile_release("0.12.3", SRC, "synthetic")
    return {m[2]: m for m in rel["messages"]}


@pytest.mark.parametrize("text,condition,fields,flags", [
    ("heads ({}) must be a multiple of tp_size ({})", "self.heads % self.tp_size != 0",
     ["heads", "tp_size"], ["--heads", "--tp-size"]),
    ("thing is not installed", "self.use_thing and not HAVE_THING", ["use_thing"], ["--use-thing"]),
    ("large tp_size without thing", "not self.use_thing and self.tp_size > 8", ["tp_size", "use_thing"],
     ["--tp-size", "--use-thing"]),
    ("plain run", "not self.use_thing and self.tp_size <= 8", ["tp_size", "use_thing"],
     ["--tp-size", "--use-thing"]),
    ("thing needs tp_size > 1", "self.use_thing and self.tp_size == 1", ["tp_size", "use_thing"],
     ["--tp-size", "--use-thing"]),
    ("heads must be positive", "self.heads <= 0", ["heads"], ["--heads"]),
    ("cannot import thing", "except ImportError", [], []),
    ("never twice", "True", [], []),
    # raise X(msg) after msg = f"...": the text of the function's last binding before the raise.
    ("shape {} is not {}", "shape != want", [], []),
    ("n is {}", "n > 3", [], []),
])
def test_condition_fields_and_flags(messages, text, condition, fields, flags):
    kind, exc, got_text, path, function, line, got_cond, got_fields, got_flags = messages[text]
    assert (got_cond, got_fields, got_flags) == (condition, fields, flags)
    # The first six positions are unchanged: readers of [kind, exc, text, file, function, line] keep working.
    assert path == "megatron/core/cfg.py" and isinstance(line, int) and got_text == text


def test_a_long_condition_is_cut():
    test = " and ".join(f"self.field_{i} is not None" for i in range(40))
    src = {"megatron/core/x.py": f"def f(self):\n    if {test}:\n        raise ValueError('too many fields set')\n"}
    rel = release_ast.compile_release("0.12.3", src, "synthetic")
    cond = rel["messages"][0][6]
    assert len(cond) == release_ast.MAX_CONDITION and cond.endswith("…")


def test_an_inner_or_keeps_its_parentheses():
    # `if a:` around `if b or c:` prints when a and (b or c); joined without parentheses it would
    # read (a and b) or c. The case of model_parallel_config.py's overlap_p2p_comm_warmup_flush check.
    src = {"megatron/core/x.py": "def f(self):\n    if self.a:\n        if not self.b or self.c:\n"
                                 "            raise ValueError('a needs b without c')\n"}
    cond = release_ast.compile_release("0.12.3", src, "synthetic")["messages"][0][6]
    assert cond == "self.a and (not self.b or self.c)"
    for a in (False, True):
        for b in (False, True):
            for c in (False, True):
                class S:
                    pass
                S.a, S.b, S.c = a, b, c
                assert eval(cond, {"self": S}) == (a and (not b or c))
    shipped = [x["condition"] for x in load("0.19.2").message_sites()
               if x["file"] == "megatron/core/model_parallel_config.py" and "warmup and flush" in x["text"]]
    assert shipped == ["self.overlap_p2p_comm_warmup_flush and (not self.overlap_p2p_comm or self.batch_p2p_comm)"]


def _installed(path: str) -> ast.Module:
    site = next((REPO / ".venv" / "lib").glob("python3*/site-packages"))
    return ast.parse((site / path).read_text(encoding="utf-8"))


@pytest.mark.parametrize("file,function,needle,condition", [
    # megatron/core/transformer/transformer_config.py (0.19.2): the heads check of __post_init__.
    ("megatron/core/transformer/transformer_config.py", "TransformerConfig.__post_init__",
     "must be a multiple of tensor_model_parallel_size", "self.num_attention_heads % self.tensor_model_parallel_size != 0"),
    # megatron/core/parallel_state.py (0.19.2): the data-parallel getter's assert.
    ("megatron/core/parallel_state.py", "get_data_parallel_group", "is not initialized", None),
])
def test_shipped_0192_conditions_are_the_installed_source(file, function, needle, condition):
    sites = [s for s in load("0.19.2").message_sites()
             if s["file"] == file and s["function"] == function and needle in s["text"]]
    assert sites
    tree = _installed(file)
    for s in sites:
        node = next(n for n in ast.walk(tree) if getattr(n, "lineno", None) == s["line"]
                    and isinstance(n, (ast.Raise, ast.Assert)))
        if isinstance(node, ast.Assert):  # an assert prints when its test fails
            assert s["condition"].endswith(release_ast._negated(node.test)), s
        if condition is not None:
            assert s["condition"] == condition
        assert s["fields"] == sorted(s["fields"]) and all(f.startswith("--") for f in s["flags"])


def test_a_message_bound_to_a_local_name_is_indexed_from_the_installed_source():
    # megatron/core/dist_checkpointing/strategies/torch.py (0.19.2) builds `_msg` and then
    # raises CheckpointingException(_msg): the raise site carries the assigned text.
    file = "megatron/core/dist_checkpointing/strategies/torch.py"
    site = next(s for s in load("0.19.2").message_sites() if s["file"] == file and "Global shape mismatch" in s["text"])
    assert site["text"] == "Global shape mismatch for loaded ({}) and expected ({}) tensor for key {}"
    node = next(n for n in ast.walk(_installed(file)) if getattr(n, "lineno", None) == site["line"]
                and isinstance(n, ast.Raise))
    assert isinstance(node.exc.args[0], ast.Name)
