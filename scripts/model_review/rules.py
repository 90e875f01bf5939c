"""The review rules, as a table.

Each ``Rule`` is a record: ``id``, ``severity`` (``error``: breaks on the chosen release;
``warning``: works but is deprecated, silently different or fragile; ``info``),
``versions`` (the releases it applies to, in words; a finding may narrow it), ``reference``
(the section of the bundle's references that explains it) and ``check(ctx)``, which
yields ``Finding`` objects.  The check functions live in small modules named for what they
read; every rule reads the release index through ``ctx.view``.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from . import checks_imports, checks_layout, checks_models, checks_pairs, checks_signatures
from . import checks_attributes, checks_construct, checks_groups, checks_parallel

API = "references/api-reference.md"
PAR = "references/parallelism-reference.md"


class Rule(NamedTuple):
    id: str
    severity: str
    versions: str
    reference: str
    check: Callable


ALL = "0.12-0.19 (every indexed release)"

RULES = (
    Rule("unknown-keyword", "error", ALL, f"{API}#configuration-modelparallelconfig-and-transformerconfig",
         checks_signatures.unknown_keywords),
    Rule("removed-keyword", "error", ALL, f"{API}#version-notes-016-to-main",
         checks_signatures.removed_keywords),
    Rule("deprecated-keyword", "warning", ALL, f"{API}#version-notes-016-to-main",
         checks_signatures.deprecated_keywords),
    Rule("missing-required", "error", ALL, f"{API}#models-gptmodel-hybridmodel-mambamodel",
         checks_signatures.missing_required),
    Rule("too-many-positional", "error", ALL, f"{API}#specs-modulespec-build_module-layer-and-block-specs",
         checks_signatures.too_many_positional),
    Rule("positional-mismatch", "warning", ALL,
         f"{API}#specs-modulespec-build_module-layer-and-block-specs",
         checks_signatures.positional_mismatch),
    Rule("removed-attribute", "error", ALL, f"{API}#parallel-state-and-process-groups",
         checks_attributes.removed_attributes),
    Rule("config-field", "error", ALL,
         f"{API}#configuration-modelparallelconfig-and-transformerconfig",
         checks_attributes.config_fields),
    Rule("unresolved-import", "error", ALL, f"{API}#hybridmodel",
         checks_imports.unresolved_imports),
    Rule("deprecated-module", "warning", "0.12-0.16 (custom_layers.transformer_engine; "
         "every module whose file warns at import)", f"{API}#version-notes-016-to-main",
         checks_imports.deprecated_modules),
    Rule("te-placeholder", "warning", "0.13-0.19 (te is a MagicMock without TE from 0.13.1 "
         "on; the failures are reproduced on 0.19.2)",
         f"{API}#hybridmodel", checks_imports.te_placeholders),
    Rule("layout", "error", "as the layout checker's rule says",
         f"{PAR}#rule-table", checks_layout.literal_sizes),
    Rule("config-raises", "error", ALL, f"{API}#configuration-modelparallelconfig-and-transformerconfig",
         checks_construct.config_raises),
    Rule("global-process-group", "warning", "releases whose constructors take pg_collection",
         f"{API}#parallel-state-and-process-groups", checks_groups.global_groups),
    Rule("gptmodel-deprecated", "warning", "0.19", f"{API}#gptmodel",
         checks_models.gptmodel_deprecated),
    Rule("mambamodel-deprecated", "warning", "0.18-0.19", f"{API}#mambamodel",
         checks_models.mambamodel_deprecated),
    Rule("parallel-size-mismatch", "warning", ALL, f"{PAR}#rule-table",
         checks_parallel.parallel_size_mismatch),
    Rule("spec-config-mismatch", "error", "pairs derived from each release's index; built "
         "both ways on 0.19.2",
         f"{API}#specs-modulespec-build_module-layer-and-block-specs",
         checks_pairs.spec_config_mismatch),
)

RULES_BY_ID = {r.id: r for r in RULES}
