"""Code that runs inside a child process (the parent's side is ``inspector/children.py``).

For the local report, only this package imports torch, megatron.core or optional kernels, and
only inside its tasks (cluster mode's phases import torch in the rank itself: ``inspector.cluster``).
Every task catches everything it can and emits facts as it goes, so a crash or a hang half-way
still leaves the facts gathered before it.

Modules
    protocol         the JSON-lines channel (``emit``, ``stage``) and helpers (``describe``, ...)
    default_tasks    tasks of every run: ``torch``, ``megatron`` (with the object table), ``kernel``
    requested_tasks  tasks run on request: ``nvml``, ``tiny_model``, ``references``
    dispatch         ``TASKS`` (name -> task) and ``main()``, the child's entry point
"""
from inspector.child.dispatch import TASKS, main  # noqa: F401
from inspector.child.protocol import describe, emit, import_status, is_mock, resolve, stage  # noqa: F401
