"""A small reader of Megatron-LM's example launch scripts (bash), for
dev/build_launch_cases.py: it follows assignments (strings, arrays,
``$((...))`` arithmetic, ``${VAR:-default}``), ``source`` of files in the same
repository, ``if [ -z $VAR ]`` / ``[ -n ... ]`` tests on known variables
(other tests: both branches, in order, the later assignment wins) and finds
the launch line (``torchrun``/``python`` ... ``SCRIPT.py ARGS``).  Nothing is
executed.  Unresolved variables stay as ``${NAME}`` so the caller can tell.
"""

from __future__ import annotations

import re
import shlex

VAR = re.compile(r"\$\{(#?)([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(\[@\]|\[\*\])?(?::?([-=+])([^}]*))?\}|"
                 r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9])")
ARITH = re.compile(r"\$\(\(([^()]*)\)\)")


def _open_quote(text):
    try:
        shlex.split(text, comments=False)
    except ValueError:
        return True
    return False


def logical_lines(text):
    """Comment-free lines with continuations, multi-line quoted strings and
    (...) arrays joined."""
    out, buf = [], ""
    for raw in text.split("\n"):
        line = raw.rstrip()
        if line.lstrip().startswith("#") and not buf:
            continue
        if line.lstrip().startswith("#"):
            continue  # a comment line inside an array or a continued command
        if "#" in line and not _open_quote(line):
            line = re.sub(r"\s+#[^'\"]*$", "", line)
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        depth = buf.count("(") - buf.count(")") if re.search(r"=\(", buf) else 0
        if depth > 0 or _open_quote(buf.replace("$((", "").replace("))", "")):
            buf += " "
            continue
        if buf.strip():
            out.append(buf.strip())
        buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


class Shell:
    def __init__(self, read, argv=(), env=None):
        self.read = read  # path -> text or None
        self.vars = dict(env or {})
        self.arrays = {}
        for i, a in enumerate(argv, 1):
            self.vars[str(i)] = a
        self.launches = []  # (script path token, argv before, argv after)
        self.unresolved = set()

    # ---------------------------------------------------------- expansion
    def expand(self, text):
        def arith(m):
            expr = self.expand(m.group(1))
            expr = re.sub(r"\b([A-Za-z_]\w*)\b", lambda v: self.vars.get(v.group(1), "0"), expr)
            if re.fullmatch(r"[\d\s+*/()-]+", expr):
                try:
                    return str(int(eval(expr.replace("/", "//"), {"__builtins__": {}})))
                except Exception:  # noqa: BLE001 - an expression we cannot read
                    pass
            return "${ARITH}"
        text = ARITH.sub(arith, text)

        def var(m):
            name = m.group(2) or m.group(6)
            if m.group(3):
                return " ".join(shlex.quote(t) for t in self.arrays.get(name, []))
            value = self.arrays[name][0] if name in self.arrays and self.arrays[name] \
                else self.vars.get(name)
            op, default = m.group(4), m.group(5)
            if value in (None, "") and op in ("-", "="):
                value = self.expand(default or "")
                if op == "=":
                    self.vars[name] = value
            elif op == "+":
                value = self.expand(default or "") if value else ""
            if value is None:
                self.unresolved.add(name)
                return "${%s}" % name
            return value
        return VAR.sub(var, text)

    def words(self, text):
        expanded = self.expand(text)
        try:
            return shlex.split(expanded, comments=False)
        except ValueError:
            return expanded.split()

    # ---------------------------------------------------------- execution
    def condition(self, test):
        """True/False for -z/-n on a variable, None when unknown."""
        m = re.fullmatch(r"\[\[?\s*(-[zn])\s+\"?\$\{?(\w+)\}?\"?\s*\]?\]", test.strip())
        if not m:
            m2 = re.fullmatch(r"\[\[?\s*-v\s+(\w+)\s*\]?\]", test.strip())
            if m2:
                return m2.group(1) in self.vars
            return None
        value = self.vars.get(m.group(2)) or (self.arrays.get(m.group(2)) or [None])[0]
        empty = value in (None, "")
        return empty if m.group(1) == "-z" else not empty

    def run(self, text, here=""):
        lines = logical_lines(text)
        stack = []  # each: [taken_any, active, known]
        for line in lines:
            active = all(frame[1] for frame in stack)
            head = line.split(None, 1)[0] if line.split() else ""
            if head in ("if", "elif"):
                test = re.sub(r"^(el)?if\s+|;\s*then\s*$|\s+then\s*$", "", line)
                result = self.condition(test.split(";")[0])
                if head == "if":
                    stack.append([False, True, True])
                frame = stack[-1]
                if result is None:
                    frame[1], frame[2] = True, False
                else:
                    frame[1] = result and not frame[0]
                frame[0] = frame[0] or (result is True)
                continue
            if head == "else" and stack:
                frame = stack[-1]
                frame[1] = not frame[0] if frame[2] else True
                continue
            if head == "fi" and stack:
                stack.pop()
                continue
            if not active or head in ("then", "do", "done", "for", "while", "case", "esac"):
                continue
            self.statement(line, here)

    def statement(self, line, here):
        line = re.sub(r"^export\s+", "", line)
        m = re.match(r"^([A-Za-z_]\w*)=\((.*)\)\s*$", line, re.S)
        if m:
            self.arrays[m.group(1)] = self.words(m.group(2))
            return
        m = re.match(r"^([A-Za-z_]\w*)=(.*)$", line, re.S)
        if m and re.search(r"<[^<>]*>", m.group(2)):
            self.unresolved.add(m.group(1))  # the script's own "<path>" placeholder
            return
        if m and "$(" in m.group(2) and "$((" not in m.group(2):
            # command substitution: the script's own directory, else unknown
            if "dirname" in m.group(2) and "$0" in m.group(2).replace("${0}", "$0"):
                self.vars[m.group(1)] = here
            elif m.group(1) not in self.vars:
                self.unresolved.add(m.group(1))
            return
        if m and not m.group(2).startswith("("):
            words = self.words(m.group(2)) if m.group(2).strip() else [""]
            self.vars[m.group(1)] = " ".join(words) if len(words) != 1 else words[0]
            self.arrays.pop(m.group(1), None)
            return
        m = re.match(r"^(source|\.)\s+(.+)$", line)
        if m:
            path = self.expand(m.group(2)).strip().strip('"')
            text = self.read(path)
            if text is not None:
                self.run(text, path)
            return
        words = self.words(line)
        for i, w in enumerate(words):
            if w.endswith(".py") and i + 1 <= len(words) and any(
                    x in " ".join(words[:i]) for x in ("torchrun", "python", "srun", "launch")):
                self.launches.append((w, words[:i], words[i + 1:]))
                return
