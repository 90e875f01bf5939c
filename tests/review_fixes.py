"""Apply a reviewer finding's fix text to the reviewed source, mechanically (issue 20,
item 7): the fix forms the rules emit, each with one edit.  ``apply(text, finding)`` returns
the edited text (line numbers unchanged), or None for a fix with no mechanical form."""

from __future__ import annotations

import ast
import re


def _lines(text):
    return text.split("\n")


def _edit_line(text, line, fn):
    lines = _lines(text)
    new = fn(lines[line - 1])
    if new is None or new == lines[line - 1]:
        return None
    lines[line - 1] = new
    return "\n".join(lines)


def _keyword(message):
    m = re.search(r"keyword '(\w+)'", message)
    return m.group(1) if m else None


def _call_at(text, line):
    calls = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call) and n.lineno == line]
    return min(calls, key=lambda n: n.col_offset) if calls else None


def rename_keyword(text, f, new):
    kw = _keyword(f["message"])
    return _edit_line(text, f["line"], lambda s: re.sub(rf"\b{kw}(\s*=)", rf"{new}\1", s, count=1)
                      if re.search(rf"\b{kw}\s*=", s) else
                      s.replace(f'"{kw}"', f'"{new}"').replace(f"'{kw}'", f"'{new}'"))


def remove_keyword(text, f):
    kw = _keyword(f["message"])
    return _edit_line(text, f["line"], lambda s: re.sub(
        rf"""\s*(\b{kw}\s*=|["']{kw}["']\s*:)\s*[^,]*(,|$)""", "", s, count=1))


def add_keyword(text, f, name):
    call = _call_at(text, f["line"])
    if call is None or call.end_lineno != f["line"]:
        return None
    return _edit_line(text, f["line"], lambda s: s[:call.end_col_offset - 1] +
                      (", " if call.args or call.keywords else "") + f"{name}=None" +
                      s[call.end_col_offset - 1:])


def replace_import(text, f, statement):
    tree = ast.parse(text)
    stmt = next(n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                and n.lineno == f["line"])
    lines = _lines(text)
    span = stmt.end_lineno - stmt.lineno + 1
    lines[stmt.lineno - 1:stmt.end_lineno] = [statement] + [""] * (span - 1)
    return "\n".join(lines)


def replace_call(text, f, expression):
    """global-process-group: the getter call on the line becomes the collection's expression."""
    m = re.match(r"(\S+)\(\)", f["message"])
    return _edit_line(text, f["line"], lambda s: s.replace(m.group(1) + "()", expression, 1))


def replace_attribute(text, f, expression):
    m = re.match(r"([\w.]+)\.(\w+):", f["message"])
    return _edit_line(text, f["line"], lambda s: s.replace(f"{m.group(1)}.{m.group(2)}",
                                                           expression, 1))


def positional_to_keyword(text, f, kw, value):
    return _edit_line(text, f["line"], lambda s: s.replace(value, f"{kw}={value}", 1))


def rebase_subclass(text, f, base):
    """Subclass the successor: the class line's base becomes it (imported on the same line,
    so line numbers stay)."""
    module, name = base
    lines = _lines(text)
    lines[f["line"] - 1] = re.sub(r"\((.*)\):", f"({name}):", lines[f["line"] - 1], count=1)
    lines[0] = f"from {module} import {name}  # " + lines[0].lstrip("# ")
    return "\n".join(lines)


def apply(text, f):
    fix, rule = f["fix"], f["rule"]
    if rule in ("unknown-keyword", "removed-keyword", "deprecated-keyword"):
        if m := re.fullmatch(r"(\w+)=\.\.\.", fix) or re.fullmatch(r"key '(\w+)'", fix):
            return rename_keyword(text, f, m.group(1))
        if re.fullmatch(r"remove (\w+)=|remove key '(\w+)'", fix):
            return remove_keyword(text, f)
    if rule == "missing-required" and (m := re.fullmatch(r"(\w+)=\.\.\.", fix)):
        return add_keyword(text, f, m.group(1))
    if rule in ("unresolved-import", "deprecated-module") and fix.startswith(("from ", "import ")):
        return replace_import(text, f, fix)
    if rule == "unresolved-import" and fix.startswith("remove the import"):
        return replace_import(text, f, "")
    if rule == "global-process-group" and fix.startswith("use "):
        return replace_call(text, f, fix[4:])
    if rule == "config-field":
        return replace_attribute(text, f, fix)
    if rule == "removed-attribute" and fix.startswith("("):
        m = re.match(r"(\S+\(\))", f["message"])
        return _edit_line(text, f["line"], lambda s: s.replace(m.group(1), fix, 1))
    if rule == "positional-mismatch" and (m := re.fullmatch(r"(\w+)=(.+)", fix)):
        return positional_to_keyword(text, f, m.group(1), m.group(2))
    if rule == "gptmodel-deprecated" and fix.startswith("subclass HybridModel"):
        return rebase_subclass(text, f, ("megatron.core.models.hybrid.hybrid_model",
                                         "HybridModel"))
    if rule == "parallel-size-mismatch" and (m := re.fullmatch(r"(\w+)=(\S+)", fix)):
        name, value = m.groups()
        edited = _edit_line(text, f["line"], lambda s: re.sub(rf"\b{name}\s*=\s*[^,)]+",
                                                              f"{name}={value}", s, count=1))
        return edited or add_keyword(text, f, name).replace(f"{name}=None", f"{name}={value}")
    if rule == "positional-mismatch" and fix.startswith("drop it"):
        arg = re.match(r"positional argument (.+?) lands in", f["message"]).group(1)
        return _edit_line(text, f["line"], lambda s: re.sub(
            rf"\s*{re.escape(arg)}\s*,?", "", s, count=1))
    if rule == "spec-config-mismatch" and (m := re.fullmatch(r"(\w+)=(config\.\w+)", fix)):
        param, value = m.groups()
        edited = _edit_line(text, f["line"], lambda s: re.sub(rf"\b{param}\s*=\s*[^,)]+",
                                                              f"{param}={value}", s, count=1))
        return edited or add_keyword(text, f, param).replace(f"{param}=None", f"{param}={value}")
    return None


# Fixes that are advice, not one edit, and why (test_review_downstream checks every other
# rule's fix mechanically).
NOT_MECHANICAL = {
    "config-raises": "names the keywords the failing check reads; which to change is the user's choice",
    "layout": "a set of sizes to choose (the layout checker's fix), not one edit",
    "te-placeholder": "install Transformer Engine, or move to the local spec: a choice",
    "too-many-positional": "names the parameters to pass by keyword; the values are the caller's",
    "mambamodel-deprecated": "a constructor rewrite (HybridModel with hybrid_stack_spec)",
    "gptmodel-deprecated": "the call form is a constructor rewrite (HybridModel and its layer "
                           "pattern); the subclass form is applied (tests/data/review_downstream/"
                           "subclass_gptmodel.py)",
}
