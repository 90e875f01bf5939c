"""The short text form of the report."""

# Signatures of wide constructors (TransformerBlock, GPTModel) run to about 1,500 characters.
SIGNATURE_LIMIT = 4000


def _line(label, entry, extra=""):
    status = entry.get("status", "?")
    version = entry.get("version")
    text = "%-30s %-13s" % (label, status)
    if version and isinstance(version, str):
        text += " " + version
    if extra:
        text += "  " + extra
    if status not in ("available",) and entry.get("reason"):
        text += "\n%32s%s" % ("", _short(entry["reason"]))
    return text


def _short(text, limit=160):
    text = str(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _torch_extra(t):
    if t.get("status") != "available":
        return ""
    return "cuda %s, cudnn %s, nccl %s, cuda available: %s" % (
        t.get("cuda_built"), t.get("cudnn"), t.get("nccl"), t.get("cuda_available"))


def _gpu_lines(g):
    lines = [_line("gpus", g, "count %d%s" % (g.get("count", 0), (", driver " + g["driver"])
                                               if g.get("driver") else ""))]
    for d in g.get("devices", []):
        lines.append("  gpu %s: %s, cc %s, %s MiB" % (d.get("index"), d.get("name"),
                                                     d.get("compute_capability"),
                                                     d.get("memory_total_mib")))
    if g.get("cuda_visible_devices") is not None:
        lines.append("  CUDA_VISIBLE_DEVICES=%s" % g["cuda_visible_devices"])
    return lines


def _megatron_lines(m):
    lines = [_line("megatron_core", m, m.get("path", "") if m.get("status") == "available" else "")]
    if m.get("git_commit"):
        lines.append("  git commit %s" % m["git_commit"])
    verdicts = m.get("verdicts") or {}
    if verdicts:
        lines.append("  verdicts: " + ", ".join(
            "%s=%s" % (k, v.get("value", "error")) for k, v in verdicts.items()))
    te = m.get("te_symbols") or {}
    if te.get("magicmock"):
        lines.append("  %d TE names are MagicMock placeholders (TE absent), e.g. %s"
                     % (len(te["magicmock"]), ", ".join(te["magicmock"][:3])))
    if te.get("none"):
        lines.append("  TE names set to None: " + ", ".join(te["none"]))
    if m.get("note"):
        lines.append("  note: " + m["note"])
    if m.get("probe_incomplete"):
        lines.append("  probe incomplete: " + _short(m["probe_incomplete"]))
    return lines


def _object_lines(objs):
    ok = [k for k, v in objs.items() if v.get("status") == "available"]
    lines = ["objects: %d of %d available" % (len(ok), len(objs))]
    groups = {}
    for key, v in objs.items():
        if v.get("status") != "available":
            groups.setdefault((v.get("status"), v.get("reason", "")), []).append(key)
    for (status, reason), keys in groups.items():
        if len(keys) > 3:
            lines.append("  %-13s %d objects: %s" % (status, len(keys), _short(reason, 120)))
            continue
        for key in keys:
            lines.append("  %-13s %s  %s" % (status, key, _short(reason, 100)))
    return lines


def _requested_object_lines(objs, keys):
    """One block per --object: its live signature (or why there is none), as --json carries it."""
    lines = []
    for key in dict.fromkeys(keys):
        entry = objs.get(key, {})
        if entry.get("signature"):
            lines.append("  %s%s" % (key, _short(entry["signature"], SIGNATURE_LIMIT)))
        else:
            lines.append("  %s: %s, no signature%s" % (
                key, entry.get("status", "not reported"),
                (": " + _short(entry["reason"], 160)) if entry.get("reason") else ""))
    return ["signatures (--object):"] + lines if lines else []


REFERENCES_SHOWN = 15  # facts listed in text (about 3 KB); --json has every one


def render_text(report, requested_objects=()):
    """The report as text; ``requested_objects`` (the --object keys) get their signatures printed."""
    out = ["inspect_core_api (schema %s)" % report.get("schema_version")]
    py, plat = report.get("python", {}), report.get("platform", {})
    out.append("%-30s %s %s on %s" % ("python", py.get("implementation"), py.get("version"),
                                       plat.get("platform")))
    out.append(_line("torch", report.get("torch", {}), _torch_extra(report.get("torch", {}))))
    out.extend(_gpu_lines(report.get("gpus", {})))
    out.extend(_megatron_lines(report.get("megatron_core", {})))
    out.extend(_kernel_lines(report.get("kernels", {})))
    prec = report.get("precision", {})
    if prec:
        out.append("precision: " + ", ".join("%s %s" % (k, v.get("status")) for k, v in prec.items()))
    out.extend(_object_lines(report.get("objects", {})))
    out.extend(_requested_object_lines(report.get("objects", {}), requested_objects))
    out.extend(_optional_sections(report))
    env = report.get("env", {})
    out.append("env: " + (", ".join("%s=%s" % (k, _short(v, 60)) for k, v in env.items())
                          if env else "(none of the allow-listed variables set)"))
    out.append("took %.1f s" % report.get("timing", {}).get("total_s", 0))
    return "\n".join(out)


def _kernel_lines(kernels):
    lines = ["kernels:"]
    absent = [n for n, k in kernels.items() if k.get("status") == "not_installed"]
    for name, k in kernels.items():
        if name not in absent:
            lines.append(_line("  " + name, k))
    if absent:
        lines.append("  not installed: " + ", ".join(absent))
    return lines


def _optional_sections(report):
    lines = []
    fields = report.get("config_fields")
    if isinstance(fields, list):
        lines.append("config fields (%d):" % len(fields))
        for f in fields:
            lines.append("  %-45s %-28s = %s  [%s]" % (f["name"], _short(f["type"], 28),
                                                      _short(f["default"], 40), f["defined_in"]))
    elif isinstance(fields, dict):
        lines.append("config fields: error: " + _short(fields.get("error", "")))
    tiny = report.get("tiny_model")
    if tiny:
        params = tiny.get("parameters", {})
        lines.append(_line("tiny_model", tiny, "parameters total %s" % params.get("total")
                           if params else ""))
        for name, n in params.get("by_child", {}).items():
            lines.append("  %-28s %s" % (name, n))
        if tiny.get("cuda_forward"):
            lines.append("  cuda forward: %s" % tiny["cuda_forward"])
    refs = report.get("references")
    if refs:
        summary = ("%s of %s facts do not hold here, %s could not be checked" % (
            refs.get("does_not_hold_count"), refs.get("checked"), refs.get("could_not_check_count"))
            if refs.get("status") == "available" else "")
        lines.append(_line("references", refs, summary))
        listed = refs.get("does_not_hold", [])
        for r in listed[:REFERENCES_SHOWN]:
            lines.append("  - %s %s [%s]: %s" % (r.get("status"), r.get("id"), r.get("source"),
                                                 _short(r.get("detail", ""), 160)))
        if len(listed) > REFERENCES_SHOWN:
            lines.append("  ... %d more (--json lists all)" % (len(listed) - REFERENCES_SHOWN))
    return lines
