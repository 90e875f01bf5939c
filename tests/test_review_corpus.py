"""The proof corpus: Megatron-LM's own builders and model providers at each release tag
(read from the git mirror through tests/upstream_sources.py, never copied here).

- Each release's own code against its own release (the release index's entry for that
  tag; 0.19.0's files against 0.19.2, the indexed release of that line): no error.
- Older releases' code against 0.19.2: every error is confirmed by doing what it says
  breaks with the installed 0.19.2 (the import, or the call with that keyword).
"""

from __future__ import annotations

import collections
import importlib
import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

import upstream_sources  # noqa: E402
from model_review import releases, source  # noqa: E402
from model_review.review import review_sources  # noqa: E402
import release_index  # noqa: E402

TAGS = ("core_v0.12.3", "core_v0.13.1", "core_v0.14.0", "core_v0.15.3", "core_v0.16.1",
        "core_v0.17.1", "core_v0.18.2", "core_v0.19.0")
FILES = ("gpt_builders.py", "hybrid_builders.py", "mamba_builders.py", "model_provider.py",
         "pretrain_gpt.py", "pretrain_mamba.py", "pretrain_hybrid.py")


def corpus(tag):
    if upstream_sources.mirror() is None:
        pytest.skip("corpus claims need Megatron-LM's git mirror (root-level builders are "
                    "not in the wheels)")
    out = []
    for name in FILES:
        try:
            text = upstream_sources.mirror_source_at(upstream_sources.mirror(), tag, name)
        except (upstream_sources.Unavailable, upstream_sources.UnknownVersion) as exc:
            pytest.skip(f"{tag}:{name} unavailable ({exc})")
        if text is not None:
            out.append(source.parse(text, f"{tag}:{name}"))
    return out


def review(sources, version="0.19.2"):
    findings = review_sources(sources, version, releases.View(release_index, version),
                                 release_index, has_te=True)
    return findings


@pytest.mark.parametrize("tag", TAGS)
def test_same_release_no_error(tag):
    version, _ = release_index.resolve_version(tag.removeprefix("core_v"))
    findings = review(corpus(tag), version)
    print(tag, version, dict(collections.Counter(f.rule for f in findings)))
    errors = [f for f in findings if f.severity == "error"]
    assert errors == []


def _confirm(f):
    """Do with 0.19.2 what the finding says breaks; return True when it does break."""
    if f.rule == "unresolved-import":
        line = next(l for l in f.message.split("\n"))
        module = line.split()[1] if line.startswith("module") else line.split()[0]
        name = f.message.split("no name '")[1].split("'")[0] if "no name" in f.message else None
        try:
            m = importlib.import_module(module)
        except ImportError:
            return True
        return name is not None and not hasattr(m, name)
    if f.rule in ("unknown-keyword", "removed-keyword"):
        obj_id = re.search(r"\((megatron[\w.]+:\w+)\)", f.message).group(1)
        kw = re.search(r"keyword '(\w+)'", f.message).group(1)
        module, _, name = obj_id.partition(":")
        obj = getattr(importlib.import_module(module), name)
        try:
            obj(**{kw: None})
        except TypeError as exc:
            return f"unexpected keyword argument '{kw}'" in str(exc)
        return False
    if f.rule == "removed-attribute":
        module, name = re.search(r"module '([\w.]+)' has no attribute '(\w+)'", f.message).groups()
        return not hasattr(importlib.import_module(module), name)
    if f.rule == "config-field":
        import dataclasses
        from megatron.core.transformer.transformer_config import TransformerConfig
        field = re.search(r"has no field '(\w+)'", f.message).group(1)
        return field not in {x.name for x in dataclasses.fields(TransformerConfig)}
    if f.rule == "missing-required":
        import inspect
        name, param = re.search(r"^(\w+)\(\) requires '(\w+)'", f.message).groups()
        obj = importlib.import_module(re.search(r"\((megatron[\w.]+):", f.message).group(1))
        p = inspect.signature(getattr(obj, name)).parameters[param]
        return p.default is inspect.Parameter.empty
    return False


@pytest.mark.parametrize("tag", TAGS[:-1])
def test_older_release_errors_really_break(tag):
    findings = review(corpus(tag))
    by_rule = collections.Counter(f.rule for f in findings)
    print(tag, dict(by_rule))
    for f in findings:
        if f.severity == "error":
            print("  ", f.path, f.line, f.rule, f.message[:160])
            assert _confirm(f), f


# Megatron-Bridge releases and the megatron-core release their 3rdparty/Megatron-LM pin
# belongs to (v0.4.2: core_v0.17.1~2, v0.5.1: core_v0.18.2~1, v0.6.0: core_v0.19.0~35).
BRIDGE_MIRROR = Path(os.environ.get("MEGATRON_BRIDGE_MIRROR",
                          "/work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo"))
BRIDGE = (("v0.4.2", "0.17.1"), ("v0.5.1", "0.18.2"), ("v0.6.0", "0.19.2"))


def bridge_sources(tag):
    import io
    import subprocess
    import tarfile
    if not BRIDGE_MIRROR.is_dir():
        pytest.skip("Megatron-Bridge providers reviewed against their release: needs the "
                    "Megatron-Bridge git mirror")
    blob = subprocess.run(["git", "-C", str(BRIDGE_MIRROR), "archive", tag,
                           "src/megatron/bridge/models"], capture_output=True, timeout=120).stdout
    out = []
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        for member in tar.getmembers():
            if member.name.endswith(".py"):
                text = tar.extractfile(member).read().decode("utf-8")
                out.append(source.parse(text, f"bridge {tag}:{member.name}"))
    return out


@pytest.mark.parametrize("tag,version", BRIDGE)
def test_bridge_providers_no_error_on_their_release(tag, version):
    sources = bridge_sources(tag)
    assert len(sources) > 100
    findings = review(sources, version)
    print(tag, version, len(sources), dict(collections.Counter(f.rule for f in findings)))
    assert [f for f in findings if f.severity == "error"] == []
