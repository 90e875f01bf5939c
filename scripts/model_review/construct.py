"""Would TransformerConfig(**literal keywords) raise in a release?  Megatron's own checks, evaluated.

The release index records every raise and assert of ``ModelParallelConfig.__post_init__`` and
``TransformerConfig.__post_init__`` with the condition that prints it (source text, the enclosing
``if`` tests joined) and every dataclass field with its default and whether ``__post_init__``
assigns it. A condition is evaluated on the call's literal keywords and the fields' literal
defaults, three-valued: a name it reads that is not known (a local variable, a call, a field that
the ``__post_init__`` chain assigns anywhere, ``post_init_assigns`` of the index) makes it unknown,
and only a condition that is certainly true is reported. Standard library only.
"""

from __future__ import annotations

import ast
import operator

UNKNOWN = object()
_MPC = ("megatron/core/model_parallel_config.py", "ModelParallelConfig.__post_init__")
_TC = "megatron/core/transformer/transformer_config.py"
# config class -> (its index key, the (file, function) of each __post_init__ that runs, super() first)
CLASSES = {
    "ModelParallelConfig": ("megatron.core.model_parallel_config:ModelParallelConfig", (_MPC,)),
    "TransformerConfig": ("megatron.core.transformer.transformer_config:TransformerConfig",
                          (_MPC, (_TC, "TransformerConfig.__post_init__"))),
    "MLATransformerConfig": ("megatron.core.transformer.transformer_config:MLATransformerConfig",
                             (_MPC, (_TC, "TransformerConfig.__post_init__"),
                              (_TC, "MLATransformerConfig.__post_init__"))),
}
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


def values(fields: list[dict], kwargs: dict, assigned: dict) -> dict:
    """Field -> value where it is known when the checks run; absent means unknown. ``assigned``:
    the fields the __post_init__ chain may assign; only a value the caller gave to a field that is
    filled when None ("if_none") is still known."""
    out = {}
    for f in fields:
        name = f["name"]
        default = _literal(f["default"])
        if name in assigned:
            if assigned[name] == "if_none" and kwargs.get(name) is not None:
                out[name] = kwargs[name]
            continue
        if name in kwargs:
            out[name] = kwargs[name]
        elif default is not UNKNOWN:
            out[name] = default
    return out


def _literal(text):
    if text is None:
        return UNKNOWN
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return UNKNOWN


def holds(condition: str, known: dict):
    """True, False or UNKNOWN: the condition on ``self.<field>`` values."""
    try:
        tree = ast.parse(condition, mode="eval").body
    except SyntaxError:
        return UNKNOWN  # "except ValueError": a handler, not a test
    try:
        return _truth(_eval(tree, known))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError):
        return UNKNOWN


def _truth(v):
    return UNKNOWN if v is UNKNOWN else bool(v)


def _eval(node, known):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return known.get(node.attr, UNKNOWN)
    if isinstance(node, ast.BoolOp):
        seen_unknown = False
        for v in node.values:
            t = _truth(_eval(v, known))
            if t is UNKNOWN:
                seen_unknown = True
            elif t is (not isinstance(node.op, ast.And)):  # a False operand of `and`, a True one of `or`
                return t
        return UNKNOWN if seen_unknown else isinstance(node.op, ast.And)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, known)
        if v is UNKNOWN:
            return UNKNOWN
        if isinstance(node.op, ast.Not):
            return not v
        if isinstance(node.op, ast.USub):
            return -v
        return UNKNOWN
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        a, b = _eval(node.left, known), _eval(node.right, known)
        return UNKNOWN if UNKNOWN in (a, b) else _BIN[type(node.op)](a, b)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, known)
        result = True
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, known)
            if type(op) not in _CMP or UNKNOWN in (left, right):
                return UNKNOWN
            if not _CMP[type(op)](left, right):
                result = False
            left = right
        return result
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_eval(e, known) for e in node.elts]
        return UNKNOWN if any(i is UNKNOWN for i in items) else tuple(items)
    return UNKNOWN  # a call, a subscript, a local name: not decided from the keywords


def verdicts(release, cls: str, kwargs: dict, unknown=()) -> list[tuple[dict, object]]:
    """Every raise/assert of the __post_init__ chain in the order it runs, each with True, False
    or UNKNOWN for these keywords ([] when the index cannot tell: not a config class, old data)."""
    if cls not in CLASSES:
        return []
    owner, order = CLASSES[cls]
    fields, assigned = release.fields(owner), release.post_init_assigns(owner)
    if fields is None or assigned is None:
        return []
    known = values(fields, kwargs, assigned)
    for name in unknown:  # keywords the caller set to something not literal
        known.pop(name, None)
    sites = [s for s in release.message_sites() if (s["file"], s["function"]) in order
             and s["kind"] in ("raise", "assert") and s["condition"]]
    sites.sort(key=lambda s: (order.index((s["file"], s["function"])), s["line"]))
    return [(s, holds(s["condition"], known)) for s in sites]


def raises(release, cls: str, kwargs: dict, unknown=()) -> list[dict]:
    """The checks of ``cls.__post_init__`` (and its bases') certain to fail for these keywords, in
    the order they run. The constructor raises the first of them, unless an earlier check these
    keywords do not decide (or a helper __post_init__ calls) fails first: either way it raises.
    ``unknown``: keywords given a value that is not a literal (their field is unknown, not its default)."""
    return [s for s, v in verdicts(release, cls, kwargs, unknown) if v is True]
