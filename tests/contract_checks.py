"""The bundle's contract, as checks over a bundle root.

Each check takes a root directory and returns a list of problems (strings naming file and line); an empty list
means the contract holds. tests/test_contract_bundle.py runs every check on the real bundle, and
tests/test_contract_fixtures.py runs each on a deliberately broken bundle under tests/fixtures/contract/ to prove
that it can fail.
"""

from __future__ import annotations

import ast
import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

import mdtools

INSTALL_NAME = "core-models-and-parallelism"

# The Agent Skills frontmatter keys, plus the documented extension `disable-model-invocation`.
ALLOWED_FRONTMATTER_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
EXTENSION_KEYS = {"disable-model-invocation"}
REQUIRED_FRONTMATTER = {
    "name": INSTALL_NAME,
    "metadata": {"disco-role": "operating"},
    "disable-model-invocation": True,
}

# The only links allowed to leave the bundle: SKILL.md's routes to its sibling sub-skills in the larger bundle.
SIBLING_ROUTES = (
    "../training-cli-and-data/SKILL.md",
    "../checkpointing-and-conversion/SKILL.md",
    "../inference-and-serving/SKILL.md",
)

# SPDX id -> phrases that identify the license text in LICENSE.
LICENSE_MARKERS = {
    "Apache-2.0": ("Apache License", "Version 2.0, January 2004"),
    "MIT": ("Permission is hereby granted, free of charge",),
}

SKILL_MAX_LINES = 500
SKILL_MAX_CHARS = 6000  # the 1,500-token budget at about 4 characters per token
TOC_REQUIRED_OVER_LINES = 100

SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh"}
SHELL_OPERATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1", "1>&2", "&>", ")"}


def _rel(root: Path, p: Path) -> str:
    try:
        return str(p.relative_to(root))
    except ValueError:
        return str(p)


# ---------------------------------------------------------------- frontmatter


def check_frontmatter(root: Path) -> list[str]:
    skill = root / "SKILL.md"
    if not skill.is_file():
        return ["SKILL.md is missing"]
    raw, _, _ = mdtools.split_frontmatter(skill.read_text(encoding="utf-8"))
    if raw is None:
        return ["SKILL.md has no frontmatter between '---' lines"]
    try:
        fm = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        return [f"SKILL.md frontmatter is not YAML: {exc}"]
    if not isinstance(fm, dict):
        return ["SKILL.md frontmatter is not a mapping"]
    problems = []
    for key in sorted(set(fm) - ALLOWED_FRONTMATTER_KEYS - EXTENSION_KEYS):
        problems.append(f"SKILL.md: frontmatter key {key!r} is neither an Agent Skills key nor a known extension")
    problems += _name_problems(fm.get("name"))
    problems += _description_problems(fm.get("description"), raw)
    for key, want in REQUIRED_FRONTMATTER.items():
        got = fm.get(key)
        if isinstance(want, dict):
            got = got if isinstance(got, dict) else {}
            for k, v in want.items():
                if got.get(k) != v:
                    problems.append(f"SKILL.md: {key}.{k} must be {v!r}, found {got.get(k)!r}")
        elif got != want:
            problems.append(f"SKILL.md: {key} must be {want!r}, found {got!r}")
    metadata = fm.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            problems.append("SKILL.md: metadata must be a mapping")
        else:
            for k, v in metadata.items():
                if not isinstance(v, str):
                    problems.append(f"SKILL.md: metadata.{k} must be a string, found {type(v).__name__}")
    problems += _license_problems(root, fm.get("license"))
    return problems


def _name_problems(name) -> list[str]:
    if not isinstance(name, str) or not name:
        return ["SKILL.md: name is missing"]
    out = []
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name):
        out.append(f"SKILL.md: name {name!r} must be lowercase letters and digits joined by single hyphens")
    if len(name) > 64:
        out.append(f"SKILL.md: name is {len(name)} characters, at most 64")
    if name != INSTALL_NAME:
        out.append(f"SKILL.md: name {name!r} must equal the install folder name {INSTALL_NAME!r}")
    return out


def _description_problems(desc, raw: str) -> list[str]:
    if not isinstance(desc, str) or not desc.strip():
        return ["SKILL.md: description is missing or empty"]
    out = []
    if len(desc) > 1024:
        out.append(f"SKILL.md: description is {len(desc)} characters, at most 1024")
    if "<" in desc or ">" in desc:
        out.append("SKILL.md: description must not contain '<' or '>'")
    if not any(line.startswith('description: "') for line in raw.splitlines()):
        out.append("SKILL.md: description must be a double-quoted string")
    return out


def _license_problems(root: Path, spdx) -> list[str]:
    lic = root / "LICENSE"
    if not lic.is_file():
        return ["LICENSE is missing"]
    text = lic.read_text(encoding="utf-8", errors="replace")
    found = [k for k, markers in LICENSE_MARKERS.items() if all(m in text for m in markers)]
    if spdx not in found:
        return [f"SKILL.md: license {spdx!r} does not match LICENSE (which reads as {found or 'unknown'})"]
    return []


# ---------------------------------------------------------------- links and anchors


def link_report(root: Path) -> tuple[list[str], int, int]:
    """(problems, links checked, anchors checked) over every Markdown file of the bundle."""
    problems, n_links, n_anchors = [], 0, 0
    root = root.resolve()
    used_routes: list[str] = []
    for md in mdtools.bundle_markdown(root):
        for link in mdtools.links(md):
            target = link.target
            if not target or mdtools.is_external(target):
                continue
            where = f"{_rel(root, md)}:{link.line}"
            path_part, _, anchor = target.partition("#")
            path_part = path_part.split("?", 1)[0]
            n_links += 1
            if md.name == "SKILL.md" and md.parent == root and path_part in SIBLING_ROUTES:
                used_routes.append(path_part)
                continue
            dest = (md.parent / path_part).resolve() if path_part else md.resolve()
            if root not in dest.parents and dest != root:
                problems.append(f"{where}: link {target!r} leaves the bundle")
                continue
            if not dest.exists():
                problems.append(f"{where}: link {target!r} points to a missing file")
                continue
            if anchor:
                n_anchors += 1
                if dest.suffix != ".md":
                    problems.append(f"{where}: anchor in {target!r} points into a non-Markdown file")
                elif anchor not in mdtools.anchors(dest):
                    problems.append(f"{where}: anchor #{anchor} does not exist in {_rel(root, dest)}")
    for route in SIBLING_ROUTES:
        count = used_routes.count(route)
        if count != 1:
            problems.append(f"SKILL.md: the sibling route {route} must be linked exactly once, found {count}")
    return problems, n_links, n_anchors


def check_links(root: Path) -> list[str]:
    return link_report(root)[0]


# ---------------------------------------------------------------- reachability


def _md_link_targets(root: Path, md: Path) -> set[Path]:
    out = set()
    for link in mdtools.links(md):
        path_part = link.target.partition("#")[0]
        if not path_part or mdtools.is_external(link.target):
            continue
        dest = (md.parent / path_part).resolve()
        if dest.exists():
            out.add(dest)
    return out


def _py_import_targets(root: Path, py: Path) -> set[Path]:
    """Bundled modules a script imports: scripts/ is on sys.path when a script runs."""
    scripts = (root / "scripts").resolve()
    try:
        tree = ast.parse(py.read_text(encoding="utf-8"))
    except SyntaxError:
        return set()
    names = []
    nodes = list(ast.walk(tree))
    for node in list(nodes):
        # Code handed to a child interpreter as a string (python -c BOOTSTRAP) imports modules too.
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import" in node.value:
            try:
                nodes += list(ast.walk(ast.parse(node.value)))
            except SyntaxError:
                pass
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = py.parent
                for _ in range(node.level - 1):
                    base = base.parent
                prefix = ".".join(base.relative_to(scripts).parts) if scripts in base.parents or base == scripts else ""
                mod = ".".join(x for x in (prefix, node.module or "") if x)
            else:
                mod = node.module or ""
            names.append(mod)
            names += [f"{mod}.{a.name}" if mod else a.name for a in node.names]
    out = set()
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # a package import also loads each parent's __init__.py
            stem = scripts.joinpath(*parts[:i])
            for cand in (stem.with_suffix(".py"), stem / "__init__.py"):
                if cand.is_file():
                    out.add(cand.resolve())
    return out


def check_reachability(root: Path) -> list[str]:
    root = root.resolve()
    start = root / "SKILL.md"
    if not start.is_file():
        return ["SKILL.md is missing"]
    seen, todo = set(), [start.resolve()]
    while todo:
        cur = todo.pop()
        if cur in seen:
            continue
        seen.add(cur)
        if cur.suffix == ".md":
            todo += _md_link_targets(root, cur)
        elif cur.suffix == ".py":
            todo += _py_import_targets(root, cur)
    problems = []
    # Compiled indexes (references/index/*.json) are read by the scripts, generated from the
    # reachable Markdown and checked for staleness by tests/test_reference_index.py.
    compiled = (root / "references" / "index").resolve()
    for folder in ("references", "scripts"):
        for f in sorted((root / folder).rglob("*")):
            if f.resolve().parent == compiled and f.suffix == ".json":
                continue
            if f.is_file() and "__pycache__" not in f.parts and f.resolve() not in seen:
                problems.append(f"{_rel(root, f)} is not reachable from SKILL.md (by links, then imports)")
    return problems


# ---------------------------------------------------------------- size and tables of contents


def check_toc(root: Path) -> list[str]:
    problems = []
    for md in sorted((root / "references").glob("*.md")):
        n_lines = len(md.read_text(encoding="utf-8").splitlines())
        if n_lines <= TOC_REQUIRED_OVER_LINES:
            continue
        toc = set(mdtools.toc_links(md))
        h2 = [(line, mdtools.github_slug(text)) for level, line, text in mdtools.heading_texts(md) if level == 2]
        missing = [slug for _, slug in h2 if slug not in toc and slug not in mdtools.TOC_HEADINGS]
        if not toc:
            problems.append(f"{_rel(root, md)}: {n_lines} lines and no table of contents before its first section")
        elif missing:
            problems.append(f"{_rel(root, md)}: table of contents misses sections {missing}")
    return problems


def skill_size(root: Path) -> tuple[int, int]:
    text = (root / "SKILL.md").read_text(encoding="utf-8")
    return len(text.splitlines()), len(text)


def check_budget(root: Path) -> list[str]:
    lines, chars = skill_size(root)
    problems = []
    if lines > SKILL_MAX_LINES:
        problems.append(f"SKILL.md has {lines} lines, budget {SKILL_MAX_LINES}")
    if chars > SKILL_MAX_CHARS:
        problems.append(f"SKILL.md has {chars} characters (about {chars // 4} tokens), budget {SKILL_MAX_CHARS}")
    return problems


# ---------------------------------------------------------------- code fences


def check_python_fences(root: Path) -> list[str]:
    problems = []
    for md in mdtools.bundle_markdown(root):
        for fence in mdtools.fences(md):
            if fence.lang in ("python", "py", "python3"):
                try:
                    ast.parse(fence.content)
                except SyntaxError as exc:
                    problems.append(f"{_rel(root, md)}:{fence.line}: python fence does not parse: {exc.msg} (line {exc.lineno})")
    return problems


def runnable_fences(root: Path) -> list[tuple[mdtools.Fence, mdtools.Fence | None]]:
    """Each ```python run``` fence with the ```text output``` fence right after it, if any."""
    out = []
    for md in mdtools.bundle_markdown(root):
        fs = mdtools.fences(md)
        for i, fence in enumerate(fs):
            if fence.lang == "python" and "run" in fence.words:
                nxt = fs[i + 1] if i + 1 < len(fs) else None
                expected = nxt if nxt is not None and nxt.info.split() == ["text", "output"] else None
                out.append((fence, expected))
    return out


def _normalize_output(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


def run_fence(fence: mdtools.Fence, expected: mdtools.Fence | None, workdir: Path, env: dict) -> list[str]:
    timeout = float(fence.option("timeout", "300"))
    where = f"{fence.path.name}:{fence.line}"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", fence.content], cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return [f"{where}: recipe did not finish in {timeout:.0f} s"]
    if proc.returncode != 0:
        return [f"{where}: recipe exited {proc.returncode}:\n{proc.stderr[-3000:]}"]
    if expected is not None and _normalize_output(proc.stdout) != _normalize_output(expected.content):
        return [f"{where}: stdout differs from the text output fence at line {expected.line}:\n"
                f"--- documented\n{expected.content}--- actual\n{proc.stdout}"]
    return []


# ---------------------------------------------------------------- commands that run bundled scripts

# How a documented command names a bundled script: a path, or a make target that forwards ARGS to one.
MAKE_TARGETS = {"inspect": "scripts/inspect_core_api.py"}


@functools.lru_cache(maxsize=None)
def help_flags(script: Path) -> frozenset[str]:
    """The long and short options a script's --help prints (argparse prints each one it accepts)."""
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return frozenset()
    return frozenset(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", proc.stdout))


def _shell_words(text: str) -> list[list[str]]:
    """Split shell text into commands (one per logical line), tolerating prompts and continuations."""
    text = text.replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        if not line or line.startswith("#"):
            continue
        try:
            out.append(shlex.split(line, comments=True))
        except ValueError:
            out.append(line.split())
    return out


LAUNCHERS = {"torchrun", "srun", "mpirun", "uv", "exec"}


def _is_launcher(word: str) -> bool:
    base = word.rsplit("/", 1)[-1]
    return base.startswith("python") or base in LAUNCHERS


def _is_bundled_script(root: Path, word: str) -> bool:
    rel = word.removeprefix("./")
    return rel.startswith("scripts/") and rel.endswith(".py") and (root / rel).is_file()


def _script_invocations(root: Path, words: list[str]) -> list[tuple[str, list[str]]]:
    """(script path, its arguments) for each bundled script the command line runs."""
    out = []
    for i, w in enumerate(words):
        script = None
        if _is_bundled_script(root, w) and (i == 0 or any(_is_launcher(x) for x in words[:i])):
            script, args = w.removeprefix("./"), words[i + 1 :]
        elif w == "make" and i + 1 < len(words) and words[i + 1] in MAKE_TARGETS:
            script = MAKE_TARGETS[words[i + 1]]
            args = []
            for extra in words[i + 2 :]:
                if extra.startswith("ARGS="):
                    args = shlex.split(extra[len("ARGS="):])
        if script:
            cut = next((j for j, a in enumerate(args) if a in SHELL_OPERATORS), len(args))
            out.append((script, args[:cut]))
    return out


def documented_commands(root: Path) -> list[tuple[str, str, list[str]]]:
    """(place, script, args) for every command in the bundle's Markdown that runs a bundled script."""
    out = []
    for md in mdtools.bundle_markdown(root):
        texts = [(f.line, f.content) for f in mdtools.fences(md) if f.lang in SHELL_LANGS]
        texts += [(c.line, c.text) for c in mdtools.code_spans(md)]
        for line, text in texts:
            for words in _shell_words(text):
                for script, args in _script_invocations(root, words):
                    out.append((f"{_rel(root, md)}:{line}", script, args))
    return out


def check_command_flags(root: Path) -> list[str]:
    problems = []
    for place, script, args in documented_commands(root):
        accepted = help_flags((root / script).resolve())
        if not accepted:
            problems.append(f"{place}: {script} --help failed or printed no options")
            continue
        for arg in args:
            if arg.startswith("-") and arg != "-" and not re.fullmatch(r"-\d+(\.\d+)?", arg):
                flag = arg.split("=", 1)[0]
                if flag not in accepted:
                    problems.append(f"{place}: {script} does not accept {flag} (not in its --help)")
    return problems


CHECKS = {
    "frontmatter": check_frontmatter,
    "links": check_links,
    "reachability": check_reachability,
    "toc": check_toc,
    "budget": check_budget,
    "python_fences": check_python_fences,
    "command_flags": check_command_flags,
}
