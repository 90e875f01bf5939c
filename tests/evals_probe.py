"""Child process for tests/evals_recompute.py: recompute eval facts that need megatron-core.

Reads a JSON list of recompute specs on stdin, prints one JSON list of results on stdout
(each {"value": ...} or {"error": "..."} when the probe itself failed). Run with the
interpreter that has megatron-core installed; everything heavy is imported here, never in
the pytest process.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import json
import os
import sys
import warnings
from pathlib import Path


def _obj(ref: str):
    """'pkg.mod:Name.attr' -> the object."""
    mod, _, attr = ref.partition(":")
    obj = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _kwargs(kw: dict) -> dict:
    import torch

    # JSON cannot hold a dtype: "torch.bfloat16" stands for the object.
    return {k: getattr(torch, v.split(".", 1)[1]) if isinstance(v, str) and v.startswith("torch.") else v
            for k, v in kw.items()}


def _build(spec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _obj(spec["cls"])(**_kwargs(spec.get("kwargs", {})))


def _error_text(fn) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
    except Exception as e:  # the probe's job is to report what was raised
        return f"{type(e).__name__}: {e}"
    return "OK"


def _ok(spec) -> bool:
    return _error_text(lambda: _build(spec)) == "OK"


def _installed(path: str) -> Path:
    root = Path(importlib.util.find_spec("megatron.core").origin).parent.parent
    return root / path.removeprefix("megatron/")


def _default(p: inspect.Parameter) -> str:
    return "<required>" if p.default is inspect.Parameter.empty else str(p.default)


def _field_default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return "<required>"


def _max_valid(spec):
    good = [c for c in spec["candidates"]
            if _ok({"cls": spec["cls"], "kwargs": {**spec["kwargs"], spec["vary"]: c}})]
    return max(good) if good else None


def _exec(stmt: str) -> None:
    exec(compile(stmt, "<eval-stmt>", "exec"), {})  # a fixed import statement from evals.json


def _args(value):
    """JSON arguments for a call: {"__ns__": {...}} stands for an argparse-like namespace."""
    import types

    if isinstance(value, dict) and set(value) == {"__ns__"}:
        return types.SimpleNamespace(**value["__ns__"])
    return value


def _call(spec):
    """Megatron's own function, called: obj(*args, **kwargs), then an optional attribute path."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = _obj(spec["object"])(*[_args(a) for a in spec.get("args", [])],
                                    **{k: _args(v) for k, v in spec.get("kwargs", {}).items()})
    for part in spec.get("attr", "").split(".") if spec.get("attr") else []:
        out = getattr(out, part)
    return out


def _rejected_kwargs(spec) -> list[str]:
    """The keywords a call site passes that the installed callee's signature cannot accept."""
    params = inspect.signature(_obj(spec["object"])).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return []
    return [k for k in spec["keywords"] if k not in params or params[k].kind is inspect.Parameter.POSITIONAL_ONLY]


def _param_at(spec) -> str:
    names = [n for n in inspect.signature(_obj(spec["object"])).parameters if n != "self"]
    return names[spec["index"]]


def _layers_per_rank(spec) -> list[int]:
    """Decoder layers each pipeline rank builds (get_num_layers_to_build with pp_rank, 0.19 API)."""
    from megatron.core.transformer.transformer_block import get_num_layers_to_build

    config = _build(spec)
    return [get_num_layers_to_build(config, vp_stage=None, pp_rank=r) for r in range(config.pipeline_model_parallel_size)]


def _layout_decoders(spec) -> list[int]:
    """Decoder layers per pipeline stage of a --pipeline-model-parallel-layout string, parsed by Megatron."""
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout
    from megatron.core.transformer.enums import LayerType

    layout = PipelineParallelLayerLayout(spec["layout"], spec["pp"])
    return [sum(layer == LayerType.decoder for chunk in stage for layer in chunk) for stage in layout.layout]


def _pg_fields(spec) -> list[str]:
    """Fields ProcessGroupCollection.use_mpu_process_groups() fills after a 1-rank gloo init."""
    import socket

    import torch
    from megatron.core import parallel_state
    from megatron.core.process_groups_config import ProcessGroupCollection

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parallel_state.initialize_model_parallel()
            pgs = ProcessGroupCollection.use_mpu_process_groups(**spec.get("kwargs", {}))
        names = [f.name for f in dataclasses.fields(pgs)] if dataclasses.is_dataclass(pgs) else list(vars(pgs))
        return sorted(n for n in names if getattr(pgs, n, None) is not None)
    finally:
        parallel_state.destroy_model_parallel()
        torch.distributed.destroy_process_group()


class _Group:
    """A process group of a fake world: only its ranks (what parallel_state reads back)."""

    def __init__(self, ranks, me):
        self.ranks, self.me = list(ranks), me

    def size(self):
        return len(self.ranks)

    def rank(self):
        return self.ranks.index(self.me) if self.me in self.ranks else -1


def _fake_world(spec):
    """Megatron's own initialize_model_parallel on a fake world of spec["world"] ranks seen from spec["rank"].

    torch.distributed is stood in for (world size, rank, new_group keeps the rank list) so that
    parallel_state's real validation and rank generation run; the reads are parallel_state getters
    (``"ranks": true`` returns the group's rank list). An error of initialize_model_parallel is returned as text.
    """
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    world, me = spec["world"], spec.get("rank", 0)
    saved = {n: getattr(dist, n) for n in ("is_initialized", "get_world_size", "get_rank", "new_group",
                                             "get_process_group_ranks", "barrier", "get_backend")}
    dist.is_initialized = lambda: True
    dist.get_world_size = lambda group=None: world if group is None else group.size()
    dist.get_rank = lambda group=None: me if group is None else group.rank()
    dist.new_group = lambda ranks=None, *a, **k: _Group(range(world) if ranks is None else ranks, me)
    dist.get_process_group_ranks = lambda group: list(group.ranks)
    dist.barrier = lambda *a, **k: None
    dist.get_backend = lambda group=None: "gloo"
    try:
        ps.destroy_model_parallel()
        error = _error_text(lambda: ps.initialize_model_parallel(create_gloo_process_groups=False, **spec.get("kwargs", {})))
        if error != "OK" or not spec.get("reads"):
            return error
        out = {}
        for name, read in spec["reads"].items():
            value = getattr(ps, read["getter"])(**read.get("kwargs", {}))
            out[name] = dist.get_process_group_ranks(value) if read.get("ranks") else value
        return out
    finally:
        ps.destroy_model_parallel()
        for n, f in saved.items():
            setattr(dist, n, f)


def _spec_mlp(spec) -> str:
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    mlp = get_gpt_layer_local_spec(**spec.get("kwargs", {})).submodules.mlp
    target = getattr(mlp, "module", None) or getattr(mlp, "func", mlp)
    # a partial of a bound classmethod names its class through __self__
    target = getattr(target, "__self__", target)
    return getattr(target, "__name__", repr(target))


KINDS = {
    "config": lambda s: getattr(_build(s), s["attr"]),
    "config_ok": _ok,
    "config_ok_negated": lambda s: not _ok(s),
    "config_error": lambda s: _error_text(lambda: _build(s)),
    "config_max_valid": _max_valid,
    "field_default": lambda s: _field_default({f.name: f for f in dataclasses.fields(_obj(s["cls"]))}[s["field"]]),
    "config_fields": lambda s: sorted(f.name for f in dataclasses.fields(_obj(s["cls"])) if s["contains"] in f.name),
    "signature": lambda s: _default(inspect.signature(_obj(s["object"])).parameters[s["param"]]),
    "import_ok": lambda s: _error_text(lambda: _exec(s["stmt"])) == "OK",
    "call_error": lambda s: _error_text(lambda: _obj(s["object"])(**s.get("kwargs", {}))),
    "spec_mlp": _spec_mlp,
    "installed_source": lambda s: s["contains"].replace("\\n", "\n") in _installed(s["path"]).read_text(),
    "call": _call,
    "rejected_kwargs": _rejected_kwargs,
    "param_at": _param_at,
    "layers_per_rank": _layers_per_rank,
    "layers_per_rank_error": lambda s: _error_text(lambda: _layers_per_rank(s)),
    "layout_decoders": _layout_decoders,
    "pg_fields": _pg_fields,
    "fake_world": _fake_world,
    "version": lambda s: importlib.import_module("megatron.core").__version__.split("+")[0],
}


def main() -> int:
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    specs = json.load(sys.stdin)
    out = []
    for spec in specs:
        try:
            value = KINDS[spec["kind"]](spec)
            json.dumps(value)
        except Exception as e:  # report, never crash the batch
            out.append({"error": f"{type(e).__name__}: {e}"})
            continue
        out.append({"value": value})
    sys.stdout.write(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
