"""Child process of ``--build MODULE:FUNCTION`` (imports torch, megatron and the user's code).

Usage: python build_child.py MODULE:FUNCTION SEARCH_DIR...  Prints one JSON object on the
last line of stdout.  Builds on CPU: a gloo world of size 1, model parallel sizes 1, and
``use_cpu_initialization=True`` forced on every config the provider creates.
"""

import collections
import dataclasses
import importlib
import inspect
import json
import os
import socket
import sys
import traceback

MARK = "MODEL_REVIEW_BUILD "
ALIASES = {"num_experts": "num_moe_experts"}  # spec parameter -> config field
SPEC_FUNCTIONS = ("get_gpt_layer_local_spec", "get_gpt_decoder_block_spec")


def emit(obj):
    print(MARK + json.dumps(obj, default=str), flush=True)


def setup():
    import torch
    from megatron.core import parallel_state
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                         rank=0, world_size=1)
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1)


def patch_configs(created, force):
    """Force CPU initialization (and, for the no-effect probe, one field to its default)
    on every ModelParallelConfig subclass the provider builds."""
    from megatron.core.model_parallel_config import ModelParallelConfig
    original = ModelParallelConfig.__post_init__

    def post_init(self):
        self.use_cpu_initialization = True
        for name, value in force.items():
            setattr(self, name, value)
        created.append(self)
        return original(self)

    ModelParallelConfig.__post_init__ = post_init
    return lambda: setattr(ModelParallelConfig, "__post_init__", original)


def call_provider(fn):
    params = inspect.signature(fn).parameters
    kwargs = {k: True for k in ("pre_process", "post_process") if k in params}
    return fn(**kwargs)


def structure(model):
    """What was built: module types (IdentityOp, a placeholder for "nothing here", left out)
    and parameter shapes."""
    mods = tuple((n, type(m).__name__) for n, m in model.named_modules()
                 if type(m).__name__ != "IdentityOp")
    params = tuple((n, tuple(p.shape)) for n, p in model.named_parameters())
    return mods, params


def counts(model):
    out = collections.Counter()
    for _, m in model.named_modules():
        out[type(m).__name__] += sum(p.numel() for p in m.parameters(recurse=False))
    return {k: v for k, v in sorted(out.items()) if v}


def paired_fields():
    """Config fields that a GPT spec builder also takes (derived from the installed release)."""
    from megatron.core.models.gpt import gpt_layer_specs
    from megatron.core.transformer.transformer_config import TransformerConfig
    fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    out = set()
    for name in SPEC_FUNCTIONS:
        fn = getattr(gpt_layer_specs, name, None)
        if fn is None:
            continue
        for p in inspect.signature(fn).parameters:
            field = ALIASES.get(p, p)
            if field in fields:
                out.add(field)
    return sorted(out)


def no_effect(fn, config, base):
    """Paired fields the config sets away from their default, whose reset to the default
    builds the same module: the setting had no effect."""
    from megatron.core.transformer.transformer_config import TransformerConfig
    defaults = {f.name: f.default for f in dataclasses.fields(TransformerConfig)
                if f.default is not dataclasses.MISSING}
    out, errors = [], {}
    for field in paired_fields():
        if field not in defaults or getattr(config, field, None) == defaults[field]:
            continue
        restore = patch_configs([], {field: defaults[field]})
        try:
            same = structure(call_provider(fn)) == base
        except Exception as exc:  # noqa: BLE001 (the reset itself may be invalid)
            errors[field] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        finally:
            restore()
        if same:
            out.append({"field": field, "value": getattr(config, field),
                        "default": defaults[field]})
    return out, errors


def main():
    target, dirs = sys.argv[1], sys.argv[2:]
    for d in reversed(dirs):
        sys.path.insert(0, d)
    module_name, _, func_name = target.partition(":")
    try:
        setup()
        fn = getattr(importlib.import_module(module_name), func_name)
        created = []
        restore = patch_configs(created, {})
        try:
            model = call_provider(fn)
        finally:
            restore()
    except BaseException:  # noqa: BLE001 (report whatever the user's code raised)
        emit({"ok": False, "traceback": traceback.format_exc()[-20000:]})
        return
    result = {"ok": True, "model": type(model).__name__,
              "parameters": sum(p.numel() for p in model.parameters()),
              "parameters_by_module": counts(model), "configs": len(created)}
    if created:
        result["no_effect"], result["no_effect_errors"] = no_effect(fn, created[0],
                                                                    structure(model))
    emit(result)


if __name__ == "__main__":
    main()
