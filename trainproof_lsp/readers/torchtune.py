"""torchtune's metric-logger text files (`metric_logger: torchtune.training.metric_logging.DiskLogger`).

DiskLogger (`torchtune/training/metric_logging.py`) appends to `<log_dir>/log_<unix time>.txt`
one line per `log_dict` call, or per `log` call with one value:

    Step 1 | loss:2.345 lr:2e-05 tokens_per_second_per_gpu:1532.7 peak_memory_alloc:14.2 
    Step 2 | loss:2.301

(names and values joined by `:`, pairs by a space, a space before the line end). The
recipes log `loss`, `lr`, `tokens_per_second_per_gpu`, `grad_norm` and memory. Each line is
one record; its values map onto series through the alias table (readers/metrics.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from ..core.model import ReadError, RecordSpans, Run, RunMeta
from . import adjacent
from .common import Columns, file_data
from .metrics import GrowingRowMapping, no_loss_error

_LINE = re.compile(r"Step (\d+) \| (.*)")
# A pair: a metric name (no space, no colon) and what follows the colon up to a space.
_PAIR = re.compile(r"([^\s:]+):(\S*)")
# How many of the first lines must be DiskLogger lines for a .txt/.log to be read as one.
_HEAD_LINES = 3


def looks_like_torchtune(head: bytes) -> bool:
    """The first non-blank lines of a file (up to _HEAD_LINES) are all DiskLogger lines."""
    lines = [ln for ln in head.decode("utf-8", "replace").splitlines()[:_HEAD_LINES + 1] if ln.strip()]
    if len(lines) > _HEAD_LINES:
        lines = lines[:_HEAD_LINES]
    return bool(lines) and all(_LINE.fullmatch(ln.rstrip()) is not None for ln in lines)


def parse_line(raw: str) -> dict[str, Any] | None:
    """One DiskLogger line as a row (its step and named values), None for any other line
    (the whole read and `watch` read lines with this one function)."""
    m = _LINE.fullmatch(raw.rstrip())
    if m is None:
        return None
    row: dict[str, Any] = {"step": int(m.group(1))}
    row.update((k, v) for k, v in _PAIR.findall(m.group(2)))
    return row


def other_lines_note(other: int, first_other: int) -> tuple[int, str]:
    return (-1, f"{other} line(s) are not `Step N | name:value` lines and were not used, "
                f"first at line {first_other + 1}")


def read_torchtune_log(path: str | Path, data: bytes | None = None, *,
                       columns: Mapping[str, str] | None = None) -> Run:
    p = Path(path)
    data = file_data(p, data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ReadError(f"{path}: not UTF-8 text (byte {e.start})") from None
    rows: list[tuple[int, dict[str, Any]]] = []
    starts: list[int] = []
    widths: list[int] = []
    notes: list[tuple[int, str]] = []
    other = 0
    first_other: int | None = None
    for lineno, raw in enumerate(text.splitlines()):
        if not raw.strip():
            continue
        row = parse_line(raw)
        if row is None:
            other += 1
            first_other = lineno if first_other is None else first_other
            continue
        rows.append((len(starts), row))
        starts.append(lineno)
        widths.append(len(raw.rstrip()))
    if not rows:
        raise ReadError(f"{path}: no torchtune `Step N | name:value` lines")
    if other and first_other is not None:
        notes.append(other_lines_note(other, first_other))
    # Rows mapped as they come (a new name maps the rows from it on), as `watch` maps them.
    mapping = GrowingRowMapping(columns)
    found = Columns()
    mapping.put(rows, found, notes)
    names = mapping.mapping.names
    if not mapping.mapping.has_loss():
        raise no_loss_error(str(path), names, "metric")
    classes, config = adjacent.find_num_classes(p)
    return Run(path=str(path), format="torchtune-log", series=found.series(),
               record_spans=RecordSpans(start_lines=tuple(starts), start_chars=(0,) * len(rows),
                                        end_lines=tuple(starts), end_chars=tuple(widths)),
               meta=RunMeta(checkpoint_steps=adjacent.checkpoint_steps(adjacent.run_root(p)),
                            vocab_size=classes, vocab_source=config),
               sources=(str(path),), unmapped=mapping.mapping.unmapped(), notes=tuple(notes))
