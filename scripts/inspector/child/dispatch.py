"""The child's entry point: ``main()`` reads ``TASK PARAMS_JSON`` from argv and runs the task.

``TASKS`` maps each task name the parent may ask for to its function; the tasks live in
``default_tasks`` (every run) and ``requested_tasks`` (on request).
"""
import json
import sys

from inspector.child import default_tasks, protocol, requested_tasks

TASKS = {**default_tasks.TASKS, **requested_tasks.TASKS}


def main():
    task, params = sys.argv[1], json.loads(sys.argv[2])
    protocol.open_channel()
    try:
        TASKS[task](params)
    except BaseException as exc:
        protocol.emit("__error__", protocol.describe(exc))
    finally:
        protocol.close_channel()
