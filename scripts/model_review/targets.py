"""The Megatron Core objects whose constructor or call keywords the review checks.

Ids are the defining module and name, as the release index names them; re-exports
(``megatron.core.models.gpt:GPTModel``) are followed through the index.
"""

from __future__ import annotations

import re

TC = "megatron.core.transformer.transformer_config:TransformerConfig"
MLA = "megatron.core.transformer.transformer_config:MLATransformerConfig"
MPC = "megatron.core.model_parallel_config:ModelParallelConfig"
GPT = "megatron.core.models.gpt.gpt_model:GPTModel"
HYBRID = "megatron.core.models.hybrid.hybrid_model:HybridModel"
MAMBA = "megatron.core.models.mamba.mamba_model:MambaModel"
PGC = "megatron.core.process_groups_config:ProcessGroupCollection"

CONFIGS = (TC, MLA, MPC)
CLASSES = CONFIGS + (GPT, HYBRID, MAMBA, PGC)

# A constructor whose signature ends in **kwargs that it hands on: the keywords it accepts
# are its own plus the target's (MambaModel is a HybridModel subclass from 0.18 on).
FORWARDS = {MAMBA: HYBRID}

# The layer-spec functions: every get_* function of the models' spec modules.
SPEC_MODULE = re.compile(r"^megatron\.core\.models\.[\w.]+_specs?$")


API = "references/api-reference.md"
SECTIONS = {
    TC: "configuration-modelparallelconfig-and-transformerconfig",
    MLA: "configuration-modelparallelconfig-and-transformerconfig",
    MPC: "configuration-modelparallelconfig-and-transformerconfig",
    GPT: "gptmodel", HYBRID: "hybridmodel", MAMBA: "mambamodel",
    PGC: "parallel-state-and-process-groups",
}


def reference(obj_id):
    """The api-reference section that documents obj_id (spec functions: the specs section)."""
    return f"{API}#{SECTIONS.get(obj_id, 'specs-modulespec-build_module-layer-and-block-specs')}"


def is_spec_function(obj_id):
    module, _, name = obj_id.partition(":")
    return bool(SPEC_MODULE.match(module)) and name.startswith("get_")


def is_checked(obj_id, view=None):
    """Every megatron callable the release index has a signature for (without a view: the
    classes above and the spec functions)."""
    if obj_id in CLASSES or is_spec_function(obj_id):
        return True
    return view is not None and obj_id.startswith("megatron.") and \
        view.signature(obj_id) is not None


def short(obj_id):
    return obj_id.rpartition(":")[2]
