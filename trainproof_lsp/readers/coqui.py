"""Coqui TTS Trainer text logs (`trainer_0_log.txt`), ANSI colour codes included.

Shape (colour codes stripped):

     > EPOCH: 1/1000
     > TRAINING (2026-02-11 01:08:02)
       --> TIME: 2026-02-11 01:08:34 -- STEP: 0/24940 -- GLOBAL_STEP: 0
         | > loss: 0.0626  (0.0626)          value, then the running average
         | > current_lr: 5e-06
         | > step_time: 0.2354  (0.2354)
         | > loader_time: 32.2369  (32.2369)
     > EVALUATION
      --> EVAL PERFORMANCE
         | > avg_loader_time: 0.0117 (+0)
         | > avg_loss: 4.8813 (+0)

A train block is one record (header line to its last value line); an EVAL PERFORMANCE
block is one record, placed at the last global step seen before it. `CoquiFeed` reads the
log incrementally (common.Feed): a block is returned once the next one starts, or at the
end of the file; `read_coqui_log` feeds it the whole file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..core.model import (DATA_TIME, EPOCH, EVAL_LOSS, GRAD_NORM, LOSS, LR, STEP_TIME, ReadError,
                     Run, RunMeta, Span)
from . import adjacent
from .common import Columns, TextUpToNewline, file_data, feed_all, record_spans, to_float

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STEP = re.compile(r"-->\s*TIME:.*?GLOBAL_STEP:\s*(\d+)")
_EPOCH = re.compile(r">\s*EPOCH:\s*(\d+)\s*/")
_VALUE = re.compile(r"\|\s*>\s*([A-Za-z0-9_/.\-]+):\s*([-+0-9.eEnaNifINF]+)")
_EVAL = re.compile(r"-->\s*EVAL PERFORMANCE")

# Coqui value names -> canonical series, for train blocks and eval blocks.
TRAIN_KEYS = {"loss": LOSS, "current_lr": LR, "step_time": STEP_TIME, "loader_time": DATA_TIME,
              "grad_norm": GRAD_NORM}
EVAL_KEYS = {"avg_loss": EVAL_LOSS}


def looks_like_coqui(head: bytes) -> bool:
    text = ANSI.sub("", head.decode("utf-8", "replace"))
    return bool(_STEP.search(text) or _EVAL.search(text)) and "| >" in text


@dataclass(frozen=True, slots=True)
class CoquiBlock:
    """One record: a train step's block or an EVAL PERFORMANCE block, with its points
    (series, Coqui name, step, value)."""

    span: Span
    points: tuple[tuple[str, str, int, float], ...]


@dataclass
class _Open:
    """The block being read: it grows until the next block starts."""

    start: int
    end: int
    width: int
    points: list[tuple[str, str, int, float]] = field(default_factory=list)

    def closed(self) -> CoquiBlock:
        return CoquiBlock(Span(self.start, 0, self.end, self.width), tuple(self.points))


class CoquiFeed:
    """Coqui text logs, incrementally (common.Feed; see the module doc)."""

    def __init__(self) -> None:
        self._text = TextUpToNewline("utf-8", "replace")
        self.lineno = 0  # lines taken so far
        self.mode: str | None = None  # "train" | "eval": whose values the value lines are
        self.step: int | None = None
        self.epoch: int | None = None
        self._open: _Open | None = None

    def feed(self, data: bytes) -> list[CoquiBlock]:
        return self._blocks(self._text.feed(data))

    def finish(self) -> list[CoquiBlock]:
        out = self._blocks(self._text.finish())
        if self._open is not None:
            out.append(self._open.closed())
            self._open = None
        return out

    def _start(self, lineno: int, line: str, out: list[CoquiBlock]) -> _Open:
        if self._open is not None:
            out.append(self._open.closed())
        self._open = _Open(lineno, lineno, len(line))
        return self._open

    def _blocks(self, text: str) -> list[CoquiBlock]:
        out: list[CoquiBlock] = []
        # Escape codes never hold a line break, so a piece cut at a newline strips as
        # the whole text would; splitlines() breaks lines where the whole read did.
        for line in ANSI.sub("", text).splitlines():
            lineno = self.lineno
            self.lineno += 1
            m = _STEP.search(line)
            if m:
                self.step = step = int(m.group(1))
                self.mode = "train"
                block = self._start(lineno, line, out)
                if self.epoch is not None:
                    block.points.append((EPOCH, "EPOCH", step, float(self.epoch)))
                continue
            if _EVAL.search(line):
                self.mode = "eval"
                self._start(lineno, line, out)
                continue
            m = _EPOCH.search(line)
            if m:
                self.epoch = int(m.group(1))
                self.mode = None
                continue
            m = _VALUE.search(line)
            if m and self.mode is not None and self._open is not None:
                block = self._open
                key, raw = m.group(1), m.group(2)
                series = (TRAIN_KEYS if self.mode == "train" else EVAL_KEYS).get(key)
                block.end, block.width = lineno, len(line)
                if series is None:
                    continue
                value = to_float(raw)
                if value is None:
                    continue
                block.points.append((series, key, self.step if self.step is not None else 0, value))
        return out


def read_coqui_log(path: str | Path, data: bytes | None = None) -> Run:
    p = Path(path)
    data = file_data(p, data)
    blocks = feed_all(CoquiFeed(), data)
    columns = Columns()
    for record, block in enumerate(blocks):
        for series, key, step, value in block.points:
            columns.add(series, key, step, value, record)
    found = columns.series()
    if LOSS not in found and EVAL_LOSS not in found:
        raise ReadError(f"{path}: no Coqui train steps or EVAL PERFORMANCE blocks with a loss")
    classes, config = adjacent.find_num_classes(p)
    return Run(path=str(path), format="coqui-log", series=found,
               record_spans=record_spans([b.span for b in blocks]),
               meta=RunMeta(vocab_size=classes, vocab_source=config), sources=(str(path),))
