#!/usr/bin/env python3
"""Collect Megatron-LM's own launch configurations that set a parallel layout,
plus mutations of them, with Megatron's verdict on each, into
tests/data/launch_cases.json.gz (tests/test_layout_launch_cases.py compares the
checker with it).

Sources, read with ``git show`` at one tag of the Megatron-LM mirror:

* every functional-test ``model_config.yaml`` (MODEL_ARGS turned into flags
  as tests/functional_tests/shell_test_utils/_run_training.sh does), with the
  entry script and GPU count of the CI recipe that runs it
  (tests/test_utils/recipes/h100 first, then the others);
* every example launch script (examples/**/*.sh) whose launch line can be
  read without running it (dev/launch_shell.py); the ModelOpt scripts once
  per model configuration under examples/post_training/modelopt/conf.

A case is kept when its flags set any parallel size or split
(``LAYOUT_FLAGS``).  Each case stores the flags, the entry script, the world
size, its source (path, tag, commit) and Megatron's verdict: the installed
megatron-core's argument parser (with the entry's arguments),
``validate_args``, ``TransformerConfig``, ``initialize_model_parallel`` and
the later checks of scripts/parallel_layout/verify.py, run on CPU (gloo).
Cases the reader cannot resolve are listed under ``skipped`` with the reason.

  .venv/bin/python dev/build_launch_cases.py [--repo DIR] [--tag TAG] [--limit N]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import posixpath
import re
import subprocess
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "dev"))

from launch_shell import Shell  # noqa: E402

OUT = os.path.join(ROOT, "tests", "data", "launch_cases.json.gz")
MAX_VALUE_CHARS = 120  # longer values (prompts, long paths) are cut: they are not the layout
MIRROR = os.environ.get("MEGATRON_LM_MIRROR", "/work/.mirror/NVIDIA+Megatron-LM/repo")
TAG = "core_v0.19.0"
LAYOUT_FLAGS = (
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
    "--expert-model-parallel-size", "--expert-tensor-parallel-size",
    "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
    "--pipeline-model-parallel-layout", "--decoder-first-pipeline-num-layers",
    "--decoder-last-pipeline-num-layers", "--hybrid-layer-pattern", "--hybrid-override-pattern",
    "--use-tp-pp-dp-mapping", "--num-distributed-optimizer-instances")
PLACEHOLDER = "/tmp/placeholder"


class Repo:
    def __init__(self, path, tag):
        self.path, self.tag = path, tag
        self.commit = self.git("rev-parse", f"{tag}^{{commit}}").strip()
        self.files, self.links = [], set()
        for line in self.git("ls-tree", "-r", self.commit).split("\n"):
            if "\t" in line:
                mode, path = line.split(" ", 1)[0], line.split("\t", 1)[1]
                self.files.append(path)
                if mode == "120000":
                    self.links.add(path)

    def git(self, *args):
        return subprocess.run(["git", "-C", self.path, *args], capture_output=True, text=True,
                              check=True).stdout

    def show(self, path):
        path = posixpath.normpath(path)
        if path not in self._set():
            return None
        text = self.git("show", f"{self.commit}:{path}")
        if path in self.links:  # a symbolic link: its target, relative to its folder
            return self.show(posixpath.join(posixpath.dirname(path), text.strip()))
        return text

    def _set(self):
        if not hasattr(self, "_files"):
            self._files = set(self.files)
        return self._files


# ------------------------------------------------------------------ functional tests

def recipes(repo):
    """(model, test_case) -> (entry script, world size, recipe path)."""
    import yaml
    out = {}
    paths = sorted((p for p in repo.files if p.startswith("tests/test_utils/recipes/")
                    and p.endswith(".yaml")), key=lambda p: ("/h100/" not in p, p))
    for path in paths:
        try:
            data = yaml.safe_load(repo.show(path))
        except yaml.YAMLError:
            continue
        spec = (data or {}).get("spec") or {}
        script = re.search(r"TRAINING_SCRIPT_PATH=([^\"\s]+)", str(spec.get("script", "")))
        if not script or not spec.get("model"):
            continue
        world = int(spec.get("nodes", 1)) * int(spec.get("gpus", 8))
        for product in data.get("products") or ():
            for case in product.get("test_case") or ():
                out.setdefault((spec["model"], case), (script.group(1).lstrip("./"), world, path))
    return out


def yaml_argv(model_args):
    """MODEL_ARGS -> argv, as _run_training.sh builds it."""
    argv = []
    for key, value in model_args.items():
        if not str(key).startswith("-"):
            return None  # a NeMo-style config, not Megatron-LM flags
        if value is True:
            argv.append(key)
            continue
        if isinstance(value, list):
            argv += [key] + [str(v) for v in value]
            continue
        text = str(value).strip()
        if text == "":
            continue
        if re.fullmatch(r"\[[^]]+\]", text):  # "[a b]": brackets stripped, words split
            argv += [key] + text[1:-1].split()
            continue
        argv += [key, text]
    return [re.sub(r"\$\{?\w+\}?", PLACEHOLDER, a) if "$" in a else a for a in argv]


# The entry script of a functional-test model directory (as its CI recipes name it).
MODEL_ENTRY = {"gpt": "pretrain_gpt.py", "moe": "pretrain_gpt.py", "mixtral": "pretrain_gpt.py",
               "bert": "pretrain_bert.py", "t5": "pretrain_t5.py",
               "hybrid": "pretrain_hybrid.py", "multimodal-llava": "pretrain_vlm.py",
               "mimo": "examples/mimo/train.py"}


def smallest_world(argv):
    import math

    def size(flag, default=1):
        value = _get(argv, flag)
        return int(value) if value and value.isdigit() else default
    tp, pp, cp = (size("--tensor-model-parallel-size"), size("--pipeline-model-parallel-size"),
                  size("--context-parallel-size"))
    ep = size("--expert-model-parallel-size")
    etp = size("--expert-tensor-parallel-size", tp)
    return math.lcm(tp * pp * cp, etp * ep * pp)


def functional_cases(repo):
    import yaml
    runs = recipes(repo)
    cases, skipped = [], []
    for path in repo.files:
        m = re.match(r"tests/functional_tests/test_cases/([^/]+)/([^/]+)/model_config\.yaml$",
                     path)
        if not m:
            continue
        data = yaml.safe_load(repo.show(path)) or {}
        argv = yaml_argv(data.get("MODEL_ARGS") or {})
        if argv is None:
            skipped.append({"source": path, "reason": "MODEL_ARGS are not Megatron-LM flags"})
            continue
        if not any(f in argv for f in LAYOUT_FLAGS):
            continue
        run = runs.get((m.group(1), m.group(2)))
        if run is None:
            entry = MODEL_ENTRY.get(m.group(1))
            if entry is None:
                skipped.append({"source": path, "reason": "no CI recipe runs this test case, "
                                "and its model has no default entry script"})
                continue
            # No recipe gives the GPU count: the smallest world both grids divide.
            run = (entry, smallest_world(argv), None)
        entry, world, recipe = run
        cases.append({"id": f"functional/{m.group(1)}/{m.group(2)}", "source": path,
                      "recipe": recipe, "entry": entry, "world_size": world, "argv": argv,
                      **({} if recipe else {"world_size_assumed": "no CI recipe runs it: the "
                                            "smallest world the dense and expert grids "
                                            "divide"})})
    return cases, skipped


# ------------------------------------------------------------------ example scripts

def shell_world(before, shell):
    text = " ".join(before)
    nproc = re.search(r"--nproc[_-]per[_-]node[= ](\d+)", text)
    nnodes = re.search(r"--nnodes[= ](\d+)", text)
    if nproc:
        return int(nproc.group(1)) * (int(nnodes.group(1)) if nnodes else 1)
    gpus = shell.vars.get("GPUS_PER_NODE")
    nodes = shell.vars.get("NUM_NODES") or shell.vars.get("NNODES") or "1"
    if gpus and gpus.isdigit() and nodes.isdigit():
        return int(gpus) * int(nodes)
    return None


def run_script(repo, path, argv=()):
    here = posixpath.dirname(path)
    shell = Shell(repo.show, argv=argv, env={"SCRIPT_DIR": here, "0": path})
    shell.run(repo.show(path), here)
    return shell


def clean_args(args):
    """Unresolved paths become a placeholder; None if a layout value is unresolved."""
    out = []
    for i, token in enumerate(args):
        if "$" in token:
            if i and args[i - 1] in LAYOUT_FLAGS or token.startswith("-"):
                return None
            if not (i and args[i - 1].startswith("--")):
                continue  # an unset variable alone expands to nothing
            token = PLACEHOLDER
        out.append(token)
    return out


def example_cases(repo):
    cases, skipped = [], []
    confs = sorted(p[len("examples/post_training/modelopt/conf/"):-3] for p in repo.files
                   if p.startswith("examples/post_training/modelopt/conf/") and p.endswith(".sh")
                   and not p.endswith("arguments.sh"))
    for path in sorted(p for p in repo.files if p.startswith("examples/") and p.endswith(".sh")):
        text = repo.show(path) or ""
        variants = [((), path)]
        if "conf/arguments.sh" in text:
            if not path.endswith("/finetune.sh"):
                continue  # one ModelOpt script over every model configuration
            variants = [((conf,), f"{path} {conf}") for conf in confs]
        for argv, name in variants:
            try:
                shell = run_script(repo, path, argv)
            except Exception as exc:  # noqa: BLE001 - a script the reader cannot follow
                skipped.append({"source": name, "reason": f"reader: {type(exc).__name__}"})
                continue
            for n, (script, before, after) in enumerate(shell.launches):
                if not any(f in after for f in LAYOUT_FLAGS):
                    continue
                args = clean_args(after)
                world = shell_world(before, shell)
                if args is None or world is None:
                    skipped.append({"source": name, "reason": "a layout value or the GPU count "
                                    "comes from the environment or the command line"})
                    continue
                entry = posixpath.normpath(script.replace("${SCRIPT_DIR}", posixpath.dirname(path)))
                cases.append({"id": f"example/{name}" + (f"#{n}" if n else ""), "source": path,
                              "script_args": list(argv), "entry": entry, "world_size": world,
                              "argv": args})
    return cases, skipped


# ------------------------------------------------------------------ mutations

def _get(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) \
        else None


def _set(argv, flag, value):
    argv = list(argv)
    if flag in argv:
        i = argv.index(flag)
        if value is None:
            del argv[i:i + 2]
        else:
            argv[i + 1] = str(value)
    elif value is not None:
        argv += [flag, str(value)]
    return argv


def mutations(case):
    """Single-knob changes of a real case: each crosses one rule or stays legal."""
    a = case["argv"]
    tp = int(_get(a, "--tensor-model-parallel-size") or 1)
    pp = int(_get(a, "--pipeline-model-parallel-size") or 1)
    out = [("tp*2", _set(a, "--tensor-model-parallel-size", tp * 2), None),
           ("pp+1", _set(a, "--pipeline-model-parallel-size", pp + 1), None),
           ("cp=3", _set(a, "--context-parallel-size", 3), None),
           ("world*3/2", a, case["world_size"] * 3 // 2)]
    if _get(a, "--num-experts"):
        ep = int(_get(a, "--expert-model-parallel-size") or 1)
        out.append(("ep*2", _set(a, "--expert-model-parallel-size", ep * 2), None))
        out.append(("tp-pp-dp-mapping", a + ["--use-tp-pp-dp-mapping"], None))
        if "--disable-bias-linear" in a:
            out.append(("moe-bias", [t for t in a if t != "--disable-bias-linear"], None))
    if _get(a, "--num-query-groups") and "--group-query-attention" in a:
        heads = int(_get(a, "--num-attention-heads") or 1)
        odd = next((g for g in range(3, 64) if heads % g and g % tp == 0), None)
        if odd:
            out.append((f"query-groups={odd}", _set(a, "--num-query-groups", odd), None))
    if pp > 1 and not any(f in a for f in ("--pipeline-model-parallel-layout",
                                           "--num-layers-per-virtual-pipeline-stage",
                                           "--num-virtual-stages-per-pipeline-rank",
                                           "--hybrid-layer-pattern")):
        out.append(("vpp=3", a + ["--num-virtual-stages-per-pipeline-rank", "3"], None))
    for name, argv, world in out:
        yield dict(case, id=f"{case['id']} [{name}]", mutation=name, argv=argv,
                   world_size=world or case["world_size"])


def pick(cases, per_case):
    """A deterministic sample of each case's mutations (hash of the id)."""
    out = []
    for case in cases:
        muts = sorted(mutations(case), key=lambda c: hashlib.sha1(c["id"].encode()).hexdigest())
        out += muts[:per_case]
    return out


# ------------------------------------------------------------------ Megatron's verdict

def typed_placeholders(case):
    """A placeholder standing for an environment variable takes the type the
    option expects (--seed ${SEED} -> 1): the values are not the layout's."""
    from parallel_layout import verify
    actions = {o: a for a in verify.megatron_parser(case["entry"])._actions
               for o in a.option_strings}
    argv = []
    for i, token in enumerate(case["argv"]):
        action = actions.get(case["argv"][i - 1]) if i else None
        if token == PLACEHOLDER and action is not None:
            if action.nargs == 0:
                continue  # after a switch: an unset variable expands to nothing
            if action.type in (int, float):
                token = "1"
        argv.append(token)
    case["argv"] = argv


# Verdicts the CPU oracle cannot give: a Transformer Engine check (TE is not
# installed here) or model flags that come from a checkpoint at run time.
UNDECIDED = (
    (re.compile(r"transformer-engine|transformer_engine|\bTE\b|Transformer Engine"),
     "needs Transformer Engine, which the CPU oracle lacks"),
)


def undecided(case, v):
    """Why Megatron's CPU verdict does not decide this case, or None."""
    from parallel_layout.entries import known, resolve
    if "--use-checkpoint-args" in case["argv"] and not v["accepted"]:
        return "--use-checkpoint-args: the checkpoint supplies model flags at run time"
    if not v["accepted"] and not known(resolve(case["entry"])) \
            and (v["error"] or "").startswith("unrecognized arguments"):
        return "the entry script is not one the checker knows; its own arguments are unknown"
    for pattern, reason in UNDECIDED:
        if not v["accepted"] and pattern.search(v["error"] or ""):
            return reason
    return None


def verdict(case):
    from parallel_layout import flags, verify
    from parallel_layout.errors import BadInput
    try:
        layout, _ = flags.parse_layout(case["argv"] + ["--world-size", str(case["world_size"])])
    except BadInput as exc:
        return {"accepted": None, "stage": "checker-parse", "error": str(exc)}
    layout.entry = case["entry"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = verify.megatron_verdict(layout)
    out = {"accepted": v["accepted"], "stage": v["stage"], "error": (v["error"] or "")[:300],
           "skipped": v["skipped"]}
    reason = undecided(case, v)
    if reason:
        out.update(accepted=None, undecided=reason)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=MIRROR)
    parser.add_argument("--tag", default=TAG)
    parser.add_argument("--mutations", type=int, default=2, help="mutations per real case")
    parser.add_argument("--limit", type=int, default=0, help="stop after N cases (0: all)")
    args = parser.parse_args(argv)
    import megatron.core
    repo = Repo(args.repo, args.tag)
    real, skipped = functional_cases(repo)
    more, skipped2 = example_cases(repo)
    real += more
    cases = real + pick(real, args.mutations)
    if args.limit:
        cases = cases[:args.limit]
    for i, case in enumerate(cases):
        case["argv"] = [a if len(a) <= MAX_VALUE_CHARS else a[:40] + "..." for a in case["argv"]]
        typed_placeholders(case)
        case["megatron"] = verdict(case)
        print(f"{i + 1}/{len(cases)} {case['id']}: {case['megatron']['accepted']} "
              f"{case['megatron']['stage'] or ''} {case['megatron']['error'][:80]}",
              file=sys.stderr, flush=True)
    data = {"schema_version": 1, "repo": "NVIDIA/Megatron-LM", "tag": repo.tag,
            "commit": repo.commit, "generator": "dev/build_launch_cases.py",
            # the release (the local part after "+" follows the working directory's git HEAD)
            "megatron_core": megatron.core.__version__.split("+")[0],
            "oracle": "scripts/parallel_layout/verify.py megatron_verdict on CPU (gloo)",
            "generated": datetime.date.today().isoformat(),
            "cases": cases, "skipped": skipped + skipped2}
    import gzip
    with open(OUT, "wb") as fh:
        fh.write(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), mtime=0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
