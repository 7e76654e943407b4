"""Training stdout captured to a file (`train.log`, `nohup.out`, `slurm-<job>.out`, `*.log`).

A captured stdout is mostly other text (progress bars, warnings, model loading); the lines
below are the ones read, each one record, everything else counted and passed over:

- HF Trainer (`PrinterCallback`/`ProgressCallback` print the logs dict's repr; 5.x writes
  floats as `'%.4g'` strings, older versions as bare floats, `nan` included):

      {'loss': '2.303', 'grad_norm': '1.234', 'learning_rate': '5e-05', 'epoch': '0.1'}
      {'eval_loss': 2.25, 'eval_runtime': 0.5, 'epoch': 1.0}

  The dict holds no step (the Trainer adds `step` to `log_history` only): the x axis is
  the dict's ordinal, the Nth train-loss dict printed, and an eval dict sits at the
  ordinal of the train dict before it. The `train_runtime` summary dict is not a point.
- Megatron-LM (`training_log`):

      [2024-05-01 10:00:00] iteration       10/    1000 | consumed samples: 640 | elapsed time
      per iteration (ms): 412.3 | learning rate: 1.000E-04 | global batch size: 64 | lm loss:
      9.871E+00 | loss scale: 65536.0 | grad norm: 3.456 | number of skipped iterations: 0 | ...

  (one line), and `validation loss at iteration 100 | lm loss value: 5.1E+00 | ...`.
- nanoGPT (`train.py`): `iter 10: loss 3.1234, time 123.45ms, mfu 12.34%` and
  `step 250: train loss 2.1234, val loss 2.2345` (the val loss is the eval loss; the
  train loss there is an estimate over `eval_iters` batches, the `iter` lines are the
  train loss).
- DeepSpeed's fp16 loss scaler (`runtime/fp16/loss_scaler.py`, the ZeRO optimizers):
  `[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to
  32768`, the hysteresis variant (`..., but hysteresis is 2. Reducing hysteresis to 1`),
  and the exception `Current loss scale already at minimum - cannot decrease scale
  anymore. Exiting run.` Each overflow line gives two loss-scale points (the scale tried,
  the scale after), at the step of the last metric line before it, so a growth between
  overflows (the next line tries a larger scale) shows in the series.

Lines are matched after the last carriage return (a tqdm bar redrawn on the same line)
with ANSI colour codes removed; a line longer than _MAX_LINE is not parsed. HF dicts are
read with `ast.literal_eval` on the matched text only: a literal, never evaluated code.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from ..core.model import (EPOCH, EVAL_LOSS, GRAD_NORM, LOSS, LOSS_SCALE, LOSS_SCALE_AT_MINIMUM, LR, STEP_TIME,
                          ReadError, RecordSpans, Run, RunMeta)
from . import adjacent
from .common import Columns, PointSink, file_data, to_float

# A dict repr longer than this is not a Trainer log line (a logs dict is a few hundred
# characters; the cap bounds literal_eval's work on any line).
_MAX_LINE = 8192
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))"

_HF_DICT = re.compile(r"\{'[A-Za-z_][\w/.\-]{0,100}': .*\}")
# Older Trainers print floats bare: nan/inf are no literals, so they become strings first.
_BARE_NONFINITE = re.compile(r"(?<=: )(-?(?:nan|inf))(?=[,}])")
# Sniffing the first bytes: a Trainer dict that starts with a loss.
_HF_HEAD = re.compile(r"\{'(?:loss|eval_loss)': ")
_HF_KEYS = {"loss": LOSS, "eval_loss": EVAL_LOSS, "learning_rate": LR, "grad_norm": GRAD_NORM, "epoch": EPOCH}

_MEGATRON = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)")
_MEGATRON_VAL = re.compile(r"\bvalidation loss at (?:[\w ]*?)iteration\s+(\d+)\b[^|]*\|(.*)")
_FIELD = re.compile(r"^\s*([A-Za-z][\w ()/.\-]*?)\s*:\s*(" + _NUM + r")\s*$")
_MEGATRON_KEYS = {"learning rate": LR, "grad norm": GRAD_NORM, "loss scale": LOSS_SCALE}
_MEGATRON_MS = "elapsed time per iteration (ms)"

_NANO_ITER = re.compile(r"^iter (\d+): loss (" + _NUM + r"), time (" + _NUM + r")ms")
_NANO_STEP = re.compile(r"^step (\d+): train loss (" + _NUM + r"), val loss (" + _NUM + r")")

_DS_OVERFLOW = re.compile(r"(?i:overflow)!.*?Attempted loss scale:\s*(" + _NUM + r"),\s*reducing to\s*(" + _NUM + r")")
_DS_HYSTERESIS = re.compile(r"(?i:overflow)!.*?Attempted loss scale:\s*(" + _NUM + r"),\s*but hysteresis is")
_DS_MINIMUM = re.compile(r"Current loss scale already at minimum")

_KINDS = ("HF Trainer dict", "Megatron iteration", "Megatron validation", "nanoGPT iter", "nanoGPT step",
          "DeepSpeed overflow", "DeepSpeed minimum loss scale")
WHAT = ("HF Trainer `{'loss': ...}` dicts, Megatron `iteration N/M | ...`, nanoGPT `iter N: loss ...` / "
        "`step N: train loss ...`, DeepSpeed `OVERFLOW! ... Attempted loss scale` lines")


def _clean(raw: str) -> tuple[str, int]:
    """The part of a raw line a reader sees last (after the last CR), without colour
    codes, and the column it starts at in the raw line."""
    cut = raw.rfind("\r") + 1
    return _ANSI.sub("", raw[cut:]).rstrip(), cut


def looks_like_stdout_log(head: bytes) -> bool:
    """The first bytes hold at least one line this reader reads."""
    text = head.decode("utf-8", "replace")
    if _HF_HEAD.search(text) or _DS_OVERFLOW.search(text) or _DS_MINIMUM.search(text):
        return True
    if _MEGATRON.search(text) and ("loss" in text):
        return True
    for raw in text.splitlines():
        line, _ = _clean(raw)
        if _NANO_ITER.match(line) or _NANO_STEP.match(line):
            return True
    return False


def _hf_dict(text: str) -> dict[str, Any] | None:
    try:
        value = ast.literal_eval(_BARE_NONFINITE.sub(r"'\1'", text))
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    return value if isinstance(value, dict) else None


def _fields(rest: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in rest.split("|"):
        m = _FIELD.match(part)
        if m:
            value = to_float(m.group(2))
            if value is not None:
                out[m.group(1).lower()] = value
    return out


class StdoutLines:
    """The training-log lines of a captured stdout, one line at a time, into a point sink:
    the whole read and `watch` (which feeds each line as it is completed) read with this."""

    def __init__(self, sink: PointSink, new_record: Callable[[int, int, int], int]) -> None:
        """`new_record(line, start column, end column)` opens a record, giving its index."""
        self.add = sink.add
        self.new_record = new_record
        self.used = dict.fromkeys(_KINDS, 0)
        self.records = 0
        self.other = 0
        self.first_other: int | None = None
        self.max_steps: int | None = None
        self.hf_ordinal = 0
        self.step = 0  # the step of the last metric line: where a DeepSpeed overflow line is placed
        self.explicit_steps = False
        self.series: set[str] = set()

    def _record(self, lineno: int, col: int, width: int, kind: str) -> int:
        self.used[kind] += 1
        self.records += 1
        return self.new_record(lineno, col, col + width)

    def _put(self, series: str, source: str, step: int, value: float, record: int) -> None:
        self.series.add(series)
        self.add(series, source, step, value, record)

    def _passed_over(self, lineno: int) -> None:
        self.other += 1
        self.first_other = lineno if self.first_other is None else self.first_other

    def line(self, lineno: int, raw: str) -> None:
        """One line of the file (without its newline)."""
        if len(raw) > _MAX_LINE:
            self._passed_over(lineno)
            return
        line, col = _clean(raw)
        if not line.strip():
            return
        add, record = self._put, self._record
        m = _HF_DICT.search(line)
        if m is not None:
            found = _hf_dict(m.group(0))
            if found is not None and ("loss" in found or "eval_loss" in found):
                at = col + m.start()
                if "loss" in found:
                    self.hf_ordinal += 1
                self.step = self.hf_ordinal
                r = record(lineno, at, len(m.group(0)), "HF Trainer dict")
                for key, series in _HF_KEYS.items():
                    value = to_float(found.get(key))
                    if value is None or (series == EPOCH and "loss" not in found):
                        continue
                    add(series, key, self.step, value, r)
                return
        m = _MEGATRON.search(line)
        if m is not None:
            fields = _fields(m.group(3))
            loss_key = "lm loss" if "lm loss" in fields else next((k for k in fields if k.endswith(" loss")), None)
            if loss_key is not None or fields.keys() & _MEGATRON_KEYS.keys():
                self.step, self.max_steps, self.explicit_steps = int(m.group(1)), int(m.group(2)), True
                r = record(lineno, col, len(line), "Megatron iteration")
                if loss_key is not None:
                    add(LOSS, loss_key, self.step, fields[loss_key], r)
                for key, series in _MEGATRON_KEYS.items():
                    if key in fields:
                        add(series, key, self.step, fields[key], r)
                if _MEGATRON_MS in fields:
                    add(STEP_TIME, _MEGATRON_MS, self.step, fields[_MEGATRON_MS] / 1000.0, r)
                return
        m = _MEGATRON_VAL.search(line)
        if m is not None:
            fields = _fields(m.group(2))
            val_key = next((k for k in fields if k.endswith("loss value")), None)
            if val_key is not None:
                r = record(lineno, col, len(line), "Megatron validation")
                add(EVAL_LOSS, val_key, int(m.group(1)), fields[val_key], r)
                return
        m = _NANO_ITER.match(line)
        if m is not None:
            loss, ms = to_float(m.group(2)), to_float(m.group(3))
            self.step, self.explicit_steps = int(m.group(1)), True
            r = record(lineno, col, len(line), "nanoGPT iter")
            if loss is not None:
                add(LOSS, "loss", self.step, loss, r)
            if ms is not None and math.isfinite(ms):
                add(STEP_TIME, "time", self.step, ms / 1000.0, r)
            return
        m = _NANO_STEP.match(line)
        if m is not None:
            value = to_float(m.group(3))
            r = record(lineno, col, len(line), "nanoGPT step")
            if value is not None:
                add(EVAL_LOSS, "val loss", int(m.group(1)), value, r)
            return
        m = _DS_OVERFLOW.search(line)
        if m is not None:
            tried, after = to_float(m.group(1)), to_float(m.group(2))
            r = record(lineno, col + m.start(), len(m.group(0)), "DeepSpeed overflow")
            for value in (tried, after):
                if value is not None:
                    add(LOSS_SCALE, "loss scale", self.step, value, r)
            return
        m = _DS_HYSTERESIS.search(line)
        if m is not None:
            tried = to_float(m.group(1))
            r = record(lineno, col + m.start(), len(m.group(0)), "DeepSpeed overflow")
            if tried is not None:
                add(LOSS_SCALE, "loss scale", self.step, tried, r)
            return
        m = _DS_MINIMUM.search(line)
        if m is not None:
            r = record(lineno, col + m.start(), len(m.group(0)), "DeepSpeed minimum loss scale")
            add(LOSS_SCALE_AT_MINIMUM, "Current loss scale already at minimum", self.step, 1.0, r)
            return
        self._passed_over(lineno)

    def judgeable(self) -> bool:
        """Lines were read, and among their series one the rules judge a run by."""
        return self.records > 0 and bool(self.series & {LOSS, EVAL_LOSS, LOSS_SCALE, LOSS_SCALE_AT_MINIMUM})

    def summary(self) -> tuple[int, str]:
        """The run's note: how many lines were read (of which kinds) and passed over."""
        counts = ", ".join(f"{n} {k} line(s)" for k, n in self.used.items() if n)
        axis = ("the x axis is the Nth HF Trainer loss dict (the Trainer prints no step; `epoch` is kept as its "
                "own series)" if self.used["HF Trainer dict"] and not self.explicit_steps
                else "steps as the lines state them")
        skipped = (f"{self.other} other line(s) passed over (progress bars, warnings...), first at line "
                   f"{self.first_other + 1}" if self.other and self.first_other is not None else "no other lines")
        return (-1, f"read {self.records} training-log line(s) ({counts}); {skipped}; {axis}")


def no_lines_error(path: str | Path) -> ReadError:
    return ReadError(f"{path}: no training-log lines in it ({WHAT})")


def read_stdout_log(path: str | Path, data: bytes | None = None, *,
                    columns: Mapping[str, str] | None = None) -> Run:
    """The training-log lines of a captured stdout, as a run. `columns` (the setting that
    names a table's columns) has nothing to name here: each line's shape says its values."""
    p = Path(path)
    data = file_data(p, data)
    text = data.decode("utf-8", "replace")
    cols = Columns()
    starts: list[int] = []
    start_chars: list[int] = []
    ends: list[int] = []

    def new_record(lineno: int, col: int, end: int) -> int:
        starts.append(lineno)
        start_chars.append(col)
        ends.append(end)
        return len(starts) - 1

    lines = StdoutLines(cols, new_record)
    for lineno, raw in enumerate(text.split("\n")):
        lines.line(lineno, raw)
    if not lines.judgeable():
        raise no_lines_error(path)
    classes, config = adjacent.find_num_classes(p)
    return Run(path=str(path), format="stdout-log", series=cols.series(),
               record_spans=RecordSpans(start_lines=tuple(starts), start_chars=tuple(start_chars),
                                        end_lines=tuple(starts), end_chars=tuple(ends)),
               meta=RunMeta(max_steps=lines.max_steps, checkpoint_steps=adjacent.checkpoint_steps(adjacent.run_root(p)),
                            vocab_size=classes, vocab_source=config),
               sources=(str(path),), notes=(lines.summary(),))
