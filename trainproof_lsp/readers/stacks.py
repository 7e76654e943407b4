"""Metric JSONL logs that fine-tuning stacks write beside HF's trainer_state.json, read as
the metric JSONL they are (readers/metrics.py), named by the stack that wrote them.

LLaMA-Factory (`llamafactory/train/callbacks.py`, LogCallback.on_log) appends one line to
`<output_dir>/trainer_log.jsonl` per Trainer log, None values dropped:

    {"current_steps": 10, "total_steps": 866, "loss": 1.93, "lr": 2e-05, "epoch": 0.03,
     "percentage": 1.15, "elapsed_time": "0:00:42", "remaining_time": "1:00:12"}

(`eval_loss`, `predict_loss`, `reward`, `accuracy`, `throughput`, `total_tokens`,
`vram_allocated` when the run has them; releases before 0.9 wrote `learning_rate`.)

ms-swift (`swift/trainers/patcher.py`, add_train_message and the on_log of its printer and
progress callbacks) appends the Trainer's logs to `<output_dir>/logging.jsonl` with its
progress and resources:

    {"loss": 1.21, "grad_norm": 2.9, "learning_rate": 9.9e-05, "memory(GiB)": 17.6,
     "train_speed(iter/s)": 0.42, "epoch": 0.1, "global_step/max_steps": "5/500",
     "percentage": "1.00%", "elapsed_time": "12s", "remaining_time": "19m 48s"}

(releases 3+ write `train_speed(s/it)`, seconds a step, instead.) Both map onto series
through the alias table (`current_steps` and `global_step/max_steps` are step columns);
what they add here is their format name, and that a LLaMA-Factory log is its folder's run.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Mapping

from ..core.model import Run
from .common import file_data
from .metrics import read_metrics_jsonl

# The step keys that tell the two logs apart from other metric JSONL (read from the first
# records by readers/detect.py).
LLAMAFACTORY_STEP_KEY = "current_steps"
SWIFT_STEP_KEY = "global_step/max_steps"
# LLaMA-Factory's log name (extras/constants.py TRAINER_LOG): one file per output_dir.
LLAMAFACTORY_LOG = "trainer_log.jsonl"


# The planned steps each log states on every line: LLaMA-Factory's `total_steps`, the M of
# ms-swift's "N/M" (compare aligns runs of different lengths on the fraction of it).
_SWIFT_TOTAL = re.compile(r"\s*\d+\s*/\s*(\d+)\s*")
# The first line is read for it; a line longer than this is not a log record.
_FIRST_LINE_BYTES = 64 * 1024


def planned_steps(data: bytes, fmt: str) -> int | None:
    """The run's planned steps from the log's first record, when it states them."""
    first = next((ln for ln in data[:_FIRST_LINE_BYTES].split(b"\n") if ln.strip()), b"")
    try:
        row = json.loads(first)
    except (ValueError, RecursionError):
        return None
    if not isinstance(row, dict):
        return None
    value: Any = row.get("total_steps") if fmt == "llamafactory-log" else None
    if fmt == "swift-log" and isinstance(row.get(SWIFT_STEP_KEY), str):
        m = _SWIFT_TOTAL.fullmatch(row[SWIFT_STEP_KEY])
        value = int(m.group(1)) if m else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _stack_run(path: str | Path, data: bytes | None, columns: Mapping[str, str] | None, fmt: str) -> Run:
    data = file_data(Path(path), data)
    run = read_metrics_jsonl(path, data, columns=columns)
    meta = run.meta if run.meta.max_steps else dataclasses.replace(run.meta, max_steps=planned_steps(data, fmt))
    return dataclasses.replace(run, format=fmt, meta=meta)


def read_llamafactory_log(path: str | Path, data: bytes | None = None, *,
                          columns: Mapping[str, str] | None = None) -> Run:
    """LLaMA-Factory's trainer_log.jsonl."""
    return _stack_run(path, data, columns, "llamafactory-log")


def read_swift_log(path: str | Path, data: bytes | None = None, *,
                   columns: Mapping[str, str] | None = None) -> Run:
    """ms-swift's logging.jsonl."""
    return _stack_run(path, data, columns, "swift-log")
