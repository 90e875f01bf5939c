#!/usr/bin/env python3
"""Live probe of Megatron Core, PyTorch, GPUs and optional kernels; run with --help.

Standard library only in this process; everything risky runs in child processes with a
timeout (see scripts/inspector/__init__.py).
"""
import os
import sys

sys.dont_write_bytecode = True  # the inspector writes nothing, not even its own .pyc files
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _main():
    if sys.version_info < (3, 10):
        sys.stderr.write("inspect_core_api: needs Python >= 3.10, this is %s\n" % sys.version.split()[0])
        return 2
    from inspector import cli
    try:
        return cli.main()
    except KeyboardInterrupt:
        sys.stderr.write("inspect_core_api: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(_main())
