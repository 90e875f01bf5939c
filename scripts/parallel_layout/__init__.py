"""parallel_layout: Megatron Core parallel-layout rules as plain Python.

Standard library only (no torch, no megatron import), so a check runs in
milliseconds.  Facts are for megatron-core 0.19.2 unless a rule's
``versions`` say otherwise; ``layout.megatron_version`` (0.12.3 to 0.19.2,
set by ``--megatron-version``) selects the release's rules and flag set
(via scripts/release_index).  Each rule names its source.

Stable public API (shared by scripts/check_parallel_layout.py and
scripts/inspector/cluster/; do not rename):

- ``parallel_layout.flags.add_layout_arguments(parser, world=True)`` adds
  every understood Megatron-LM flag, spelled and stored (dest) as
  ``megatron.training.arguments.add_megatron_arguments`` does, plus
  ``--world-size --nnodes --nproc-per-node --gpus-per-node --gpu-memory-gib``.
- ``parallel_layout.flags.parse_layout(argv) -> (LayoutInput, unknown_flags)``
  and ``parallel_layout.flags.layout_from_namespace(ns) -> LayoutInput``;
  both raise ``parallel_layout.errors.BadInput`` (one-line message) on bad
  input.  ``LayoutInput`` has one attribute per flag, named like Megatron's
  ``args`` (``tensor_model_parallel_size`` ...), and a resolved ``world_size``.
- ``parallel_layout.rules.check(layout) -> Result`` with ``valid`` (bool),
  ``violations`` (list of ``Violation(rule, message, fix, source,
  suggestions)``; suggestions are whole valid layouts as flag changes,
  ``parallel_layout.suggest``), ``warnings``
  (list of ``Warning_(rule, message)``), ``derived`` (dict) and
  ``to_dict()``.
- ``parallel_layout.ranks.rank_groups(layout, order="tp-cp-ep-dp-pp")
  -> dict[str, list[list[int]]]`` with keys ``tp pp dp cp dp-cp tp-cp tp-dp
  tp-dp-cp tp-pp ep etp edp tp-ep tp-ep-pp embedding position-embedding``,
  the same arithmetic as ``megatron.core.parallel_state.RankGenerator``
  (expert grid: etp/ep/edp are RankGenerator's tp/ep/dp tokens).
- ``parallel_layout.memory.estimate(layout) -> dict | None`` (activations
  per layer from ``parallel_layout.activations``, measured against real
  layers), ``parallel_layout.catalog`` (every Megatron-LM flag per release,
  renamed and removed flags),
  ``parallel_layout.plan.enumerate_layouts(layout) -> list`` and
  ``parallel_layout.verify.megatron_verdict(layout) -> dict`` (imports
  megatron; runs Megatron's own checks on the same flags).
- ``parallel_layout.gpus.get(name)`` (``--gpu``: datasheet peaks, HBM,
  links) and ``parallel_layout.gpus.memory_budget_gib(name)`` (the GPU's HBM
  as the memory budget); ``parallel_layout.performance.predict(layout, gpu)
  -> dict | None`` (the ``performance`` object of ``--json``).
"""

SCHEMA_VERSION = 1
MEGATRON_CORE_VERSION = "0.19.2"
