"""references/api-reference.md, "Running without Transformer Engine" and "Logging and warnings".

The recipes of both sections are ```python run``` fences whose output is checked by
tests/test_contract_fences.py; here: every message the no-TE table quotes is a line of its
recipe's recorded output (so the table says what the recipe proves), the source claims the two
sections make hold for the installed megatron-core, and the logging section names the logger
the installed GPTModel uses.
"""
from __future__ import annotations

import ast
import re
import sysconfig
from pathlib import Path

import mdtools

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "references" / "api-reference.md"
CORE = Path(sysconfig.get_paths()["purelib"]) / "megatron" / "core"


def section(title: str) -> str:
    text = DOC.read_text()
    assert f"\n## {title}\n" in text, title
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def recorded_output(title: str) -> list:
    fences = [f for f in mdtools.fences(DOC) if f.info.startswith("text output")]
    body = section(title)
    (fence,) = [f for f in fences if f.content.strip() and f.content.strip() in body]
    return fence.content.strip().splitlines()


def test_no_te_table_quotes_the_recipe_output():
    lines = recorded_output("Running without Transformer Engine")
    rows = [r for r in section("Running without Transformer Engine").splitlines()
            if r.startswith("| ") and not r.startswith(("| Feature", "| ---"))]
    assert len(rows) >= 10
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        seen = re.fullmatch(r"`(.+)`", cells[2])
        if seen is None:
            assert "see [" in cells[2], row  # a link to where it is shown instead
            continue
        assert any(line.endswith(seen.group(1)) for line in lines), (seen.group(1), lines)


def test_features_the_issue_names_have_rows():
    text = section("Running without Transformer Engine")
    for feature in ("sequence parallelism", "Context parallelism", "FP8", "communication overlap",
                    "Grouped GEMM", "Fused", "HybridModel"):
        assert feature in text, feature


def test_local_linear_layers_never_read_tp_comm_overlap():
    assert "tp_comm_overlap" not in (CORE / "tensor_parallel" / "layers.py").read_text()
    readers = sorted(str(p.relative_to(CORE)) for p in CORE.rglob("*.py")
                     if "tp_comm_overlap" in p.read_text(errors="replace"))
    outside = [p for p in readers if not p.startswith(("extensions/", "models/multimodal/",
                                                       "models/mimo/"))
               and p not in ("transformer/transformer_config.py", "model_parallel_config.py")]
    assert outside == [], outside
    assert "only by the multimodal models" in section("Running without Transformer Engine")


def _calls(name: str) -> list:
    found = []
    for path in CORE.rglob("*.py"):
        src = path.read_text(errors="replace")
        if name not in src:
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == name:
                found.append(str(path.relative_to(CORE)))
    return sorted(set(found))


def test_megatron_core_adds_handlers_only_to_its_nvshmem_loggers():
    assert _calls("addHandler") == ["resharding/nvshmem_copy_service/logger.py"]
    assert _calls("basicConfig") == []
    src = (CORE / "resharding" / "nvshmem_copy_service" / "logger.py").read_text()
    assert 'logger_name = f"PE_{pe_id}"' in src
    assert "`PE_<id>` loggers" in section("Logging and warnings")


def test_logging_section_names_the_installed_loggers_and_warning_sites():
    from megatron.core.models.gpt import gpt_model

    text = section("Logging and warnings")
    assert f"`{gpt_model.logger.name}`" in text
    assert f'logging.getLogger("{gpt_model.logger.name}")' in text
    assert "log_single_rank(\n            logger,\n            logging.WARNING," in \
        Path(gpt_model.__file__).read_text()
    import inspect

    from megatron.core._rank_utils import log_single_rank

    assert gpt_model.log_single_rank is log_single_rank
    assert inspect.signature(log_single_rank).parameters["rank"].default == 0
    assert "written on rank 0 only" in text
    config_src = (CORE / "transformer" / "transformer_config.py").read_text()
    assert 'warnings.warn(\n                "full scope is deprecated. "' in config_src
    assert f"GPTModel logs to: {gpt_model.logger.name}" in recorded_output("Logging and warnings")
