"""Read a job's log as a stream and turn it into distinct events (standard library only).

A 50 MB log is mostly training output. Lines are not split one by one in Python: each chunk
is lower-cased once and searched with ``bytes.find`` for a few markers that every problem
line carries (an exception type, ``warn``, a traceback frame, a py-spy frame, NCCL's
watchdog); only those lines are decoded and cleaned. Small inputs (a pasted snippet) are read
line by line in full, since a bare message carries no marker.

Events:

* ``message``: an exception, warning or log line, with the traceback frames printed before it
  by the same rank, the lines after it (multi-line messages), and the exception chain it is in;
* ``stack``: frames with no exception after them (a ``py-spy dump``, a faulthandler dump, a
  stack printed at a timeout): hang candidates; or a Python traceback pasted without its last
  line, whose innermost code line (``assert ...``) still says where it raised.

In a pasted snippet, a message quoted inside a sentence (in backticks or quotes) is an event of
its own. The same event from many ranks is kept once, with the ranks that printed it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

CHUNK = 8 << 20
SMALL = 1 << 20  # inputs up to this size are read whole; their lines are all looked at
LOOSE_LINES = 200  # an input this short is a pasted snippet: even lines without a marker are candidates
MAX_EVENTS = 5000  # distinct events kept; a log with more is summarized by the first ones
FOLLOWING = 4  # lines kept after a message line (multi-line messages)
FAST_LINES = 20000  # distinct raw message lines remembered for the repeat fast path

# Each marker costs one pass of bytes.find over the chunk, so the list is short: exception lines
# carry "error"/"exception", warnings "warn", traceback, py-spy and warnings.warn frames ".py",
# dump headers "thread ", NCCL time-outs "watchdog".
MARKERS = (b"error", b"warn", b"exception", b".py", b"thread ", b"watchdog")
_MARKER_TEXT = tuple(m.decode() for m in MARKERS)
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# Prefixes a launcher or a logger puts before the line, tried in a loop; a group captures a rank.
_PREFIXES = (
    re.compile(r"^\[(?:rank|default)(\d+)\]:\s?"),                         # torchrun --tee / log prefix
    re.compile(r"^\[\d+,(\d+)\]<std(?:out|err)>:\s?"),                     # mpirun --tag-output
    re.compile(r"^(\d{1,5}):\s"),                                           # srun --label
    re.compile(r"^\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?\s*"),
    re.compile(r"^\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s+"),
    re.compile(r"^\[[EWIF]\d{4} [\d:.]+ \d+ [\w.]+:\d+\]\s*"),           # glog (c10d / ProcessGroupNCCL)
    re.compile(r"^[\w.-]+:\d+:\d+ \[\d+\] NCCL WARN "),  # NCCL: host:pid:tid [cuda device] (not a rank)
    re.compile(r"^\[Rank (\d+)\]\s*"),
    # A title tag right before an exception type ("[Bug] RuntimeError: ..."): an issue title pasted.
    re.compile(r"^\[[^\[\]\n]{1,40}\]\s*(?=(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning):)"),
)
_NCCL = re.compile(r"^[\w.-]+:\d+:\d+ \[\d+\] (NCCL (?:WARN|INFO) .*)$")
TRACEBACK_HEAD = re.compile(r"^Traceback \(most recent call last\):")
CHAIN = re.compile(r"^(During handling of the above exception|The above exception was the direct cause)")
PY_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+),? in (?P<func>\S+)')
SPY_FRAME = re.compile(r"^\s*(?P<func>[\w<>.\[\]]+) \((?P<path>[^()\s]+\.py):(?P<line>\d+)\)")
THREAD_HEAD = re.compile(r"^(?:Thread (?:0x[0-9a-fA-F]+|\d+) \(|Current thread 0x|Process \d+: )")
WARNING_PREFIX = re.compile(r"^(?P<path>\S+\.py):(?P<line>\d+): (?=\w*Warning\b)")
EXCEPTION = re.compile(r"^(?:[a-z_][\w]*\.)*(?P<type>(?:[A-Z]\w*)?(?:Error|Exception|Warning|Exit|Interrupt|Failure|StopIteration))"
                       r"(?::\s?(?P<msg>.*))?$")
ELASTIC_FIELD = re.compile(r"^\s*(rank|exitcode|host|error_file)\s*:\s*(.*?)\s*$")
ELASTIC_END = re.compile(r"^={20,}")
# A quoted span inside a pasted sentence: backticks, double quotes, or single quotes that do not
# sit inside a word ("it's", "Megatron's" are not quotes).
QUOTED = re.compile(r"`([^`\n]+)`|\"([^\"\n]+)\"|(?<![\w])'([^'\n]+)'(?![\w])")
QUOTE_MIN = 16  # characters of a quoted span kept as a message (shorter ones are names and flags)
# build_module (megatron/core/transformer/spec_utils.py) re-raises any exception of a module's
# constructor as "<message> when instantiating <Module>", once per nesting level. A wrapped paste
# puts the suffix on lines of its own: they continue the message above, never start one.
BUILD_SUFFIX = re.compile(r"(?:\s*\bwhen instantiating [\w.]+)+\s*$", re.IGNORECASE)


@dataclass
class Event:
    kind: str  # "message" or "stack"
    line: str  # the cleaned line (message) or the innermost frame (stack)
    frames: tuple = ()  # ((path, line, function), ...) innermost last
    following: tuple = ()
    chain: tuple = ()  # the exception lines of the same chain, in order, this one included
    ranks: set = field(default_factory=set)
    count: int = 0
    code: str = ""  # the source line printed under the innermost frame
    cut: bool = False  # a message the log lost (a traceback cut before its last line), from the raise site


@dataclass
class _Source:
    """Per-rank state: the frames printed since the last exception, and the exception chain."""
    frames: list = field(default_factory=list)
    spy: bool = False  # frames come from a py-spy / faulthandler dump (innermost first)
    chain: list = field(default_factory=list)
    chained: bool = False
    code: str = ""  # the source line under the last frame


class BadInput(Exception):
    """Input the scanner cannot read: one line for the user, exit 2."""


@functools.lru_cache(maxsize=8192)  # logs repeat lines: clean each distinct one once
def clean(raw: str) -> tuple[str, str | None]:
    """(line without ANSI colours, timestamps and launcher prefixes, the rank they named or None)."""
    line = ANSI.sub("", raw).rstrip("\r\n")
    rank = None
    for _ in range(6):
        for rx in _PREFIXES:
            m = rx.match(line)
            if m:
                if m.groups() and m.group(1) is not None and rank is None:
                    rank = m.group(1)
                nccl = rx.pattern.endswith("NCCL WARN ")
                line = ("NCCL WARN " + line[m.end():]) if nccl else line[m.end():]
                break
        else:
            break
    return line, rank


_DIGITS = re.compile(r"\d+")


@functools.lru_cache(maxsize=8192)
def _digitless(line: str) -> str:
    return _DIGITS.sub("#", line.strip())


def _dedup_key(kind: str, line: str, frames: tuple) -> tuple:
    # Digits differ between ranks (rank numbers, sequence numbers, pids): one key for all of them.
    return kind, _digitless(line), tuple((p.rsplit("/", 1)[-1], f) for p, _, f in frames)


class Scanner:
    def __init__(self) -> None:
        self.events: dict[tuple, Event] = {}
        self.sources: dict[str, _Source] = {}
        self.elastic: list[dict] = []
        self.lines = 0
        self.bytes = 0
        self.candidates = 0
        self.overflow = 0
        self.loose = False
        self._fast: dict[bytes, tuple] = {}

    # -- input ---------------------------------------------------------------------------------
    def feed_stream(self, stream) -> None:
        """Read a binary stream to its end."""
        first = stream.read(SMALL + 1)
        if not first:
            raise BadInput("the input is empty")
        if b"\x00" in first[:65536]:
            raise BadInput("the input is binary data, not a text log")
        if len(first) <= SMALL:
            self._feed_all(first)
            return
        carry = b""
        chunk = first
        while chunk:
            chunk = carry + chunk
            cut = chunk.rfind(b"\n") + 1
            if cut == 0:
                carry = chunk
            else:
                self._feed_chunk(chunk[:cut])
                carry = chunk[cut:]
            chunk = stream.read(CHUNK)
        if carry:
            self._feed_chunk(carry + b"\n")

    def _feed_all(self, data: bytes) -> None:
        self.bytes += len(data)
        lines = data.decode("utf-8", "replace").splitlines()
        self.lines += len(lines)
        if not any(line.strip() for line in lines):
            raise BadInput("the input has no text (only blank lines)")
        self.loose = len(lines) <= LOOSE_LINES
        for i, raw in enumerate(lines):
            self._line(raw, lambda k, i=i: lines[i + 1:i + 1 + k])

    def _feed_chunk(self, chunk: bytes) -> None:
        self.bytes += len(chunk)  # (lines are not counted here: one more pass over every byte)
        self.lines = None
        low = chunk.lower()
        starts: set[int] = set()
        for marker in MARKERS:
            pos = low.find(marker)
            while pos >= 0:
                start = low.rfind(b"\n", 0, pos) + 1
                starts.add(start)
                end = low.find(b"\n", pos)
                pos = low.find(marker, end)
        for start in sorted(starts):
            end = chunk.find(b"\n", start)
            raw = chunk[start:end]
            if self._repeat(raw):
                continue

            def following(k: int, end: int = end) -> list[str]:
                out, pos = [], end + 1
                for _ in range(k):
                    nxt = chunk.find(b"\n", pos)
                    if nxt < 0:
                        break
                    out.append(chunk[pos:nxt].decode("utf-8", "replace"))
                    pos = nxt + 1
                return out

            self._line(raw.decode("utf-8", "replace"), following, raw)

    # -- one candidate line --------------------------------------------------------------------
    def _line(self, raw: str, following, raw_bytes: bytes | None = None) -> None:
        line, rank = clean(raw)
        text = line.strip()
        if not text:
            return
        self.candidates += 1
        src = self.sources.setdefault(rank or "", _Source())
        if self._elastic(text, rank, following):
            return
        if TRACEBACK_HEAD.match(text):
            self._flush_stack(src, rank)
            src.frames, src.spy = [], False
            return
        if CHAIN.match(text):
            src.chained = True
            return
        if THREAD_HEAD.match(text):
            self._flush_stack(src, rank)
            src.frames, src.spy = [], True
            return
        m = PY_FRAME.match(line) or SPY_FRAME.match(line)
        if m:
            src.frames.append((m.group("path"), int(m.group("line")), m.group("func")))
            if m.re is SPY_FRAME:
                src.spy = True
            else:
                nxt = following(1) if callable(following) else following[:1]
                src.code = clean(nxt[0])[0].strip() if nxt else ""
            return
        frames: tuple = ()
        warning = WARNING_PREFIX.match(text)
        if warning:  # warnings.warn's "path.py:12: UserWarning: ..." names the warning's frame
            frames = ((warning.group("path"), int(warning.group("line")), "?"),)
            text = text[warning.end():]
        nccl = _NCCL.match(text)
        if nccl:
            text = nccl.group(1)
        exc = EXCEPTION.match(text)
        if exc or text.startswith(("NCCL WARN", "WARNING")) or "Watchdog caught" in text:
            code = ""
            if src.frames and not src.spy:
                frames, code = tuple(src.frames), src.code
                src.frames, src.code = [], ""
            # An exception continues the chain only after "During handling ..." / "The above exception ...".
            src.chain = [*src.chain, text] if src.chained else [text]
            chained, src.chained = src.chained, False
            key = self._add("message", text, frames, lambda: tuple(clean(f)[0] for f in following(FOLLOWING)),
                            tuple(src.chain), rank, code)
            if key and not frames and not chained and raw_bytes is not None and len(self._fast) < FAST_LINES:
                self._fast[raw_bytes] = (rank, key, text)
            return
        # Any other line that carries a marker: kept as a message only when it is not a frame's
        # source line (tracebacks print the code under each frame).
        if src.frames and not src.spy:
            return
        if BUILD_SUFFIX.fullmatch(text):
            return
        if self.loose or any(m in text.lower() for m in _MARKER_TEXT):
            self._add("message", text, (), (), (), rank)
        if self.loose:
            # A pasted sentence that quotes the message ("... raises `X is not supported`"): the
            # quote is a message of its own.
            for q in QUOTED.finditer(text):
                span = next(g for g in q.groups() if g is not None).strip()
                if len(span) >= QUOTE_MIN and " " in span and span != text:
                    self._add("message", span, (), (), (), rank)

    def _elastic(self, text: str, rank: str | None, following) -> bool:
        """torch elastic's ChildFailedError summary: failed ranks, exit codes, hosts."""
        if "ChildFailedError" not in text and not text.startswith("Root Cause (first observed failure)"):
            return False
        current: dict | None = None
        pending: dict = {}  # fields of a failure block printed before its "rank :" line
        for raw in following(200):
            line = clean(raw)[0].strip()
            if ELASTIC_END.match(line):
                if current is not None:
                    break
                continue
            if re.fullmatch(r"\[\d+\]:", line):  # "[0]:" opens one failure's block
                current, pending = None, {}
                continue
            m = ELASTIC_FIELD.match(line)
            if m and m.group(1) == "rank":
                r = re.match(r"(\d+)", m.group(2))
                rank_id = int(r.group(1)) if r else m.group(2)
                current = next((f for f in self.elastic if f["rank"] == rank_id), None)
                if current is None:
                    current = {"rank": rank_id}
                    self.elastic.append(current)
                current.update(pending)
            elif m:
                (current if current is not None else pending)[m.group(1)] = m.group(2)
        return True

    def _flush_stack(self, src: _Source, rank: str | None) -> None:
        if src.frames:
            frames = tuple(src.frames)
            if src.spy:  # py-spy and faulthandler print the innermost frame first
                frames = frames[::-1]
            path, line, func = frames[-1]
            # A Python traceback's code line is kept: a paste cut before its exception line still
            # shows the statement that raised (``assert ...``, ``raise ...``).
            self._add("stack", f"{func} ({path}:{line})", frames, (), (), rank, "" if src.spy else src.code)
        src.frames, src.code = [], ""

    def _repeat(self, raw: bytes) -> bool:
        """A message line seen before, byte for byte, on a rank with no traceback pending: count it."""
        seen = self._fast.get(raw)
        if seen is None:
            return False
        rank, key, text = seen
        src = self.sources.get(rank or "")
        if src is None or src.frames or src.chained:
            return False
        src.chain = [text]
        self.candidates += 1
        event = self.events[key]
        event.count += 1
        return True

    def _add(self, kind, text, frames, following, chain, rank, code: str = "") -> tuple | None:
        key = _dedup_key(kind, text, frames)
        event = self.events.get(key)
        if event is None:
            if len(self.events) >= MAX_EVENTS:
                self.overflow += 1
                return None
            # The lines after a message are read only for its first occurrence.
            event = self.events[key] = Event(kind, text, frames, following() if callable(following) else following,
                                             chain, code=code)
        event.count += 1
        if rank is not None:
            event.ranks.add(int(rank))
        return key

    def finish(self) -> list[Event]:
        for rank, src in self.sources.items():
            self._flush_stack(src, rank or None)
        return list(self.events.values())
