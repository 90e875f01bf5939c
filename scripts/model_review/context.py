"""What every check receives (``Ctx``) and what it yields (``Finding``)."""

from __future__ import annotations

import dataclasses
import importlib.util


@dataclasses.dataclass
class Finding:
    rule: str
    path: str
    line: int
    severity: str
    message: str
    fix: str
    versions: str
    reference: str

    def to_dict(self):
        return dataclasses.asdict(self)


def te_installed():
    """Whether Transformer Engine can be imported here, without importing it."""
    try:
        return importlib.util.find_spec("transformer_engine") is not None
    except (ImportError, ValueError):
        return False


class Ctx:
    """One file under review, the chosen release and its index view (None without an index)."""

    def __init__(self, source, version, view=None, index=None, has_te=None, target_te=None):
        self.source = source
        self.version = version
        self.view = view
        self.index = index
        # target_te: what the user declared about the machine the code runs on (True: TE
        # installed, False: absent, None: not declared).  A declaration wins over this
        # machine; has_te (tests) stands for this machine.
        self.target_te = target_te
        if target_te is not None:
            self.has_te = target_te
        else:
            self.has_te = te_installed() if has_te is None else has_te
        self.rule = None  # set by the runner before each check

    def finding(self, line, message, fix="", versions=None, severity=None, rule_id=None,
                reference=None):
        r = self.rule
        return Finding(rule_id or r.id, self.source.path, line, severity or r.severity, message,
                       fix, versions or r.versions, reference or r.reference)

    def resolve_call(self, call):
        """The release's definition a call reaches ('module:Name'), or None."""
        if call.target is None or not call.target.startswith("megatron."):
            return None
        if self.view is None:
            return call.target
        return self.view.resolve(call.target) or None
