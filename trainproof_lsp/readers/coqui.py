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
block is one record, placed at the last global step seen before it.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..core.model import (DATA_TIME, EPOCH, EVAL_LOSS, GRAD_NORM, LOSS, LR, STEP_TIME, ReadError,
                     RecordSpans, Run, RunMeta)
from . import adjacent
from .common import Columns, to_float

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


def read_coqui_log(path: str | Path, data: bytes | None = None) -> Run:
    p = Path(path)
    if data is None:
        data = p.read_bytes()
    text = ANSI.sub("", data.decode("utf-8", "replace"))
    columns = Columns()
    starts: list[int] = []
    ends: list[int] = []
    widths: list[int] = []
    mode: str | None = None  # "train" | "eval"
    step: int | None = None
    epoch: int | None = None
    record = -1
    lines = text.splitlines()
    for lineno, line in enumerate(lines):
        m = _STEP.search(line)
        if m:
            step = int(m.group(1))
            mode = "train"
            record = len(starts)
            starts.append(lineno)
            ends.append(lineno)
            widths.append(len(line))
            if epoch is not None:
                columns.add(EPOCH, "EPOCH", step, float(epoch), record)
            continue
        if _EVAL.search(line):
            mode = "eval"
            record = len(starts)
            starts.append(lineno)
            ends.append(lineno)
            widths.append(len(line))
            continue
        m = _EPOCH.search(line)
        if m:
            epoch = int(m.group(1))
            mode = None
            continue
        m = _VALUE.search(line)
        if m and mode is not None:
            key, raw = m.group(1), m.group(2)
            table = TRAIN_KEYS if mode == "train" else EVAL_KEYS
            series = table.get(key)
            ends[record] = lineno
            widths[record] = len(line)
            if series is None:
                continue
            value = to_float(raw)
            if value is None:
                continue
            columns.add(series, key, step if step is not None else 0, value, record)
    series = columns.series()
    if LOSS not in series and EVAL_LOSS not in series:
        raise ReadError(f"{path}: no Coqui train steps or EVAL PERFORMANCE blocks with a loss")
    n = len(starts)
    spans = RecordSpans(start_lines=tuple(starts), start_chars=(0,) * n, end_lines=tuple(ends),
                        end_chars=tuple(widths))
    classes, config = adjacent.find_num_classes(p)
    return Run(path=str(path), format="coqui-log", series=series, record_spans=spans,
               meta=RunMeta(vocab_size=classes, vocab_source=config), sources=(str(path),))
