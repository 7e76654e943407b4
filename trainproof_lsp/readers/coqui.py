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
from pathlib import Path
from typing import NamedTuple

from ..core.model import (DATA_TIME, EPOCH, EVAL_LOSS, GRAD_NORM, LOSS, LR, STEP_TIME, ReadError,
                     RecordSpans, Run, RunMeta, Span)
from . import adjacent
from .common import Batch, Columns, TextUpToNewline, feed_all, file_data, to_float

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


Point = tuple[str, str, int, float]  # series, Coqui name, step, value


class CoquiBlock(NamedTuple):
    """One record: a train step's block or an EVAL PERFORMANCE block (lines `start` to
    `end`, `width` characters on its last line), with its points."""

    start: int
    end: int
    width: int
    points: tuple[Point, ...]

    def span(self) -> Span:
        return Span(self.start, 0, self.end, self.width)


class Blocks(Batch[CoquiBlock]):
    """The blocks one `feed` call gives, as parallel columns (common.Batch); `points` of
    all blocks in order, `point_block` the index of each one's block."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.widths: list[int] = []
        self.points: list[Point] = []
        self.point_block: list[int] = []

    def __len__(self) -> int:
        return len(self.starts)

    def record(self, i: int) -> CoquiBlock:
        return CoquiBlock(self.starts[i], self.ends[i], self.widths[i],
                          tuple(p for p, b in zip(self.points, self.point_block) if b == i))

    def close(self, start: int, end: int, width: int, points: list[Point]) -> None:
        self.point_block.extend([len(self.starts)] * len(points))
        self.points.extend(points)
        self.starts.append(start)
        self.ends.append(end)
        self.widths.append(width)


class CoquiFeed:
    """Coqui text logs, incrementally (common.Feed; see the module doc)."""

    def __init__(self) -> None:
        self._text = TextUpToNewline("utf-8", "replace")
        self.lineno = 0  # lines taken so far
        self.mode: str | None = None  # "train" | "eval": whose values the value lines are
        self.step: int | None = None
        self.epoch: int | None = None
        # The block being read (start, end, width, points): it grows until the next starts.
        self._open: tuple[int, int, int, list[Point]] | None = None

    def feed(self, data: bytes) -> Blocks:
        return self._blocks(self._text.feed(data))

    def finish(self) -> Blocks:
        out = self._blocks(self._text.finish())
        if self._open is not None:
            out.close(*self._open)
            self._open = None
        return out

    def _blocks(self, text: str) -> Blocks:
        out = Blocks()
        # Escape codes never hold a line break, so a piece cut at a newline strips as
        # the whole text would; splitlines() breaks lines where the whole read did.
        lines = ANSI.sub("", text).splitlines()
        first = self.lineno
        self.lineno += len(lines)
        mode, step, epoch = self.mode, self.step, self.epoch
        start, end, width, points = self._open if self._open is not None else (-1, -1, 0, [])
        for lineno, line in enumerate(lines, first):
            m = _STEP.search(line)
            if m or _EVAL.search(line):
                if start >= 0:
                    out.close(start, end, width, points)
                start, end, width, points = lineno, lineno, len(line), []
                if m:
                    step = int(m.group(1))
                    mode = "train"
                    if epoch is not None:
                        points.append((EPOCH, "EPOCH", step, float(epoch)))
                else:
                    mode = "eval"
                continue
            m = _EPOCH.search(line)
            if m:
                epoch = int(m.group(1))
                mode = None
                continue
            m = _VALUE.search(line)
            if m and mode is not None:
                key, raw = m.group(1), m.group(2)
                series = (TRAIN_KEYS if mode == "train" else EVAL_KEYS).get(key)
                end, width = lineno, len(line)
                if series is None:
                    continue
                value = to_float(raw)
                if value is None:
                    continue
                points.append((series, key, step if step is not None else 0, value))
        self.mode, self.step, self.epoch = mode, step, epoch
        self._open = (start, end, width, points) if start >= 0 else None
        return out


def read_coqui_log(path: str | Path, data: bytes | None = None) -> Run:
    p = Path(path)
    data = file_data(p, data)
    columns = Columns()
    add = columns.add
    blocks = Blocks()
    for batch in feed_all(CoquiFeed(), data):
        assert isinstance(batch, Blocks)
        first = len(blocks)
        for (series, key, step, value), block in zip(batch.points, batch.point_block):
            add(series, key, step, value, first + block)
        blocks.starts.extend(batch.starts)
        blocks.ends.extend(batch.ends)
        blocks.widths.extend(batch.widths)
    found = columns.series()
    if LOSS not in found and EVAL_LOSS not in found:
        raise ReadError(f"{path}: no Coqui train steps or EVAL PERFORMANCE blocks with a loss")
    classes, config = adjacent.find_num_classes(p)
    return Run(path=str(path), format="coqui-log", series=found,
               record_spans=RecordSpans(start_lines=tuple(blocks.starts), start_chars=(0,) * len(blocks),
                                        end_lines=tuple(blocks.ends), end_chars=tuple(blocks.widths)),
               meta=RunMeta(vocab_size=classes, vocab_source=config), sources=(str(path),))
