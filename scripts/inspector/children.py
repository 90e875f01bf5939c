"""Run probe code in child processes: one JSON line per fact, a hard timeout, concurrency.

A child is ``python -c <bootstrap> TASK PARAMS_JSON``; the bootstrap puts ``scripts/`` on
``sys.path`` and calls ``inspector.child.main``.  The child writes JSON lines to its real stdout
(``{"set": key, "value": v}`` or ``{"stage": text}``) and sends everything else, native
libraries' prints included, to stderr.  Facts emitted before a hang or a crash survive.
"""
import json
import os
import signal
import subprocess
import threading
import time

SCRIPTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The inspector's own modules are not byte-compiled (it writes nothing); packages the child
# imports keep the environment's own bytecode setting.
BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); b = sys.dont_write_bytecode; "
    "sys.dont_write_bytecode = True; from inspector import child; "
    "sys.dont_write_bytecode = b; child.main()"
)
STDERR_TAIL = 2000


def child_argv(python, task, params):
    return [python, "-c", BOOTSTRAP, SCRIPTS_DIR, task, json.dumps(params)]


def parse_lines(text):
    """Fold the child's JSON lines into (facts dict, last stage); skip anything unreadable."""
    facts, stage = {}, None
    for line in text.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict):
            continue
        if "set" in msg:
            facts[msg["set"]] = msg.get("value")
        elif "stage" in msg:
            stage = msg["stage"]
    return facts, stage


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


def run_child(python, task, params, timeout, env=None):
    """Run one child; return a dict: facts, stage, returncode, signal, timed_out, stderr, seconds."""
    start = time.monotonic()
    result = {"task": task, "facts": {}, "stage": None, "returncode": None, "signal": None,
              "timed_out": False, "stderr": "", "seconds": 0.0, "spawn_error": None}
    try:
        proc = subprocess.Popen(
            child_argv(python, task, params), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            start_new_session=True)  # its own process group, so a timeout kills grandchildren too
    except OSError as exc:
        result["spawn_error"] = "%s: %s" % (type(exc).__name__, exc)
        return result
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        result["timed_out"] = True
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
    result["seconds"] = round(time.monotonic() - start, 3)
    rc = proc.returncode
    result["returncode"] = rc
    if rc is not None and rc < 0:
        try:
            result["signal"] = signal.Signals(-rc).name
        except ValueError:
            result["signal"] = str(-rc)
    result["facts"], result["stage"] = parse_lines(out.decode("utf-8", "replace"))
    result["stderr"] = err.decode("utf-8", "replace")[-STDERR_TAIL:]
    return result


def run_children(jobs, python, timeout, env=None):
    """Run ``{name: (task, params)}`` concurrently; return ``{name: run_child result}``."""
    results = {}
    threads = []

    def work(name, task, params):
        results[name] = run_child(python, task, params, timeout, env)

    for name, (task, params) in jobs.items():
        t = threading.Thread(target=work, args=(name, task, params), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join(timeout + 15)
    return results


def failure_reason(res, timeout):
    """A one-line reason for a child that did not finish cleanly, or None when it did."""
    if res["spawn_error"]:
        return "could not start the child: " + res["spawn_error"]
    where = (" (last step: %s)" % res["stage"]) if res["stage"] else ""
    if res["timed_out"]:
        return "no answer within %g s%s" % (timeout, where)
    if res["signal"]:
        return "child killed by %s%s" % (res["signal"], where)
    if res["returncode"] not in (0, None) and "__error__" not in res["facts"]:
        tail = last_line(res["stderr"])
        return "child exited with code %s%s%s" % (res["returncode"], where,
                                                   (": " + tail) if tail else "")
    return None


def last_line(text):
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""
