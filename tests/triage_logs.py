"""Noisy multi-rank logs for the triage tests and the bench: a message buried in training output.

Everything here is generated from the catalogue, so entries added later are covered too.
"""

from __future__ import annotations

import random
import re

# A number not inside an identifier (a2a, fp16 and p2p keep theirs).
NUMBER = re.compile(r"(?<![A-Za-z_\d.])\d+(?![\d])")
PREFIXES = ("[rank{r}]: ", "[default{r}]:", "{r}: ", "\x1b[31m[rank{r}]: \x1b[0m",
            "2026-11-30 13:00:0{r},123 [rank{r}]: ")
NOISE = (
    " [2026-11-30 12:00:{s:02d}] iteration {i:>6}/  100000 | consumed samples: {c} | elapsed time per iteration (ms): 812.3 | learning rate: 3.0E-04 | lm loss: 2.{s}31E+00 | loss scale: 1.0 | grad norm: 0.{i}12 | number of skipped iterations:   0 | number of nan iterations:   0 |",
    "node{s:03d}:{i}:{c} [{s}] NCCL INFO Channel {s:02d}/0 : {i}[{s}] -> {c}[{s}] via P2P/IPC/read",
    " > building train, validation, and test datasets for GPT ...",
    "WARNING: Logging before flag parsing goes to stderr.",
    " [after dataloaders are built] datetime: 2026-11-30 12:00:{s:02d}",
)


def changed_numbers(text: str, seed: int = 0) -> str:
    """Every standalone number replaced by another one (never the same, never zero)."""
    rng = random.Random(seed)

    def repl(m):
        n = int(m.group(0))
        return str(n + rng.randint(1, 9) * 7 + 1)

    return NUMBER.sub(repl, text)


def noise(n: int, seed: int = 0, warning_every: int = 0) -> list[str]:
    """n lines of training output from 8 ranks; with warning_every=k, only every k-th line (about)
    is one of the non-iteration lines (a real run prints mostly iteration lines)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = rng.randrange(len(NOISE))
        if warning_every and rng.randrange(warning_every):
            kind = 0
        line = NOISE[kind].format(i=i, s=i % 60, c=i * 256)
        out.append(PREFIXES[rng.randrange(2)].format(r=i % 8) + line)
    return out


def traceback(frames: list[tuple[str, int, str]]) -> list[str]:
    out = ["Traceback (most recent call last):", '  File "/workspace/pretrain_gpt.py", line 301, in <module>',
           "    pretrain(train_valid_test_datasets_provider, model_provider)"]
    for path, line, func in frames:
        out += [f'  File "/usr/local/lib/python3.12/site-packages/{path}", line {line}, in {func}', "    ..."]
    return out


def multi_rank_log(message: str, frames: list[tuple[str, int, str]] = (), ranks=(1, 3, 6), seed: int = 0) -> str:
    """Noise, then the message (with its traceback) printed by several ranks, each with another prefix."""
    lines = noise(40, seed)
    for k, rank in enumerate(ranks):
        prefix = PREFIXES[k % len(PREFIXES)].format(r=rank)
        lines += [prefix + row for row in (traceback(list(frames)) if frames else [])]
        lines += [prefix + row for row in message.splitlines()]
        lines += noise(3, seed + k + 1)
    return "\n".join(lines) + "\n"
