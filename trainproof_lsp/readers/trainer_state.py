"""HF Trainer `trainer_state.json`.

Shape (written by `TrainerState.save_to_json`, `json.dumps(indent=2, sort_keys=True)`):

    {
      "best_global_step": 30, "best_model_checkpoint": "out/checkpoint-30", ...
      "log_history": [
        {
          "epoch": 0.03, "grad_norm": 0.77, "learning_rate": 4e-05, "loss": 1.52, "step": 5
        },
        { "epoch": 0.1, "eval_loss": 1.37, "eval_runtime": 3.1, "step": 15 },
        ...
        { "step": 300, "train_loss": 1.1, "train_runtime": 340.2, "train_samples_per_second": 7.0 }
      ],
      "logging_steps": 5, "max_steps": 300, ...
    }

Every log_history entry keeps its line range, so a finding points at the exact entry of
the step it cites. Values come from msgspec (typed, fast); a file msgspec rejects (bare
NaN/Infinity, which HF writes for non-finite losses, or odd types) is decoded by the
standard library instead.
"""

from __future__ import annotations

import re
from itertools import compress, repeat
from operator import and_, attrgetter, is_not
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import msgspec

from ..core.model import EPOCH, EVAL_ACCURACY, EVAL_LOSS, GRAD_NORM, LOSS, LR, THROUGHPUT, ReadError, RecordSpans, Run, RunMeta, Series
from . import adjacent
from .common import Columns, decode_json, to_float, to_step
from .jsonpos import array_start, element_ranges, indented_spans
from .metrics import map_columns

if TYPE_CHECKING:
    from ..core.caps import Caps


class _Entry(msgspec.Struct):
    step: int | None = None
    loss: float | None = None
    eval_loss: float | None = None
    learning_rate: float | None = None
    grad_norm: float | None = None
    epoch: float | None = None
    train_samples_per_second: float | None = None
    eval_accuracy: float | None = None


class _State(msgspec.Struct):
    log_history: list[_Entry]
    max_steps: int | None = None
    logging_steps: float | None = None
    global_step: int | None = None
    best_global_step: int | None = None
    best_model_checkpoint: str | None = None


_FAST = msgspec.json.Decoder(_State)

# (canonical series, trainer_state key)
SERIES_KEYS = ((LOSS, "loss"), (EVAL_LOSS, "eval_loss"), (LR, "learning_rate"),
         (GRAD_NORM, "grad_norm"), (EPOCH, "epoch"), (THROUGHPUT, "train_samples_per_second"),
         (EVAL_ACCURACY, "eval_accuracy"))

_CKPT_NAME = re.compile(r"checkpoint-(\d+)")
# Keys that name a loss under another spelling than HF's `loss`/`eval_loss`: an eval set
# named by the user (`eval_validation_loss`, `eval_test_loss`) or a custom logger's key.
# Seeing one sends the file through the mapped path (readers/metrics.map_columns).
# Found with one bytes.find pass (C speed over a 200k-entry file; HF's own `_loss` keys
# are rare: `train_loss` once, in the summary), not a regex scan.
_HF_LOSS_KEYS = (b'"eval_loss"', b'"train_loss"')
# The summary entry HF writes at the end (`train_loss` is the mean over the whole run, one
# number, not a curve): never mapped as a loss series.
_SUMMARY_KEYS = frozenset({"train_loss", "train_runtime", "total_flos", "train_steps_per_second"})


def check_caps(path: str | Path, data: bytes | None, caps: "Caps", *, entries: bool = False) -> None:
    """ReadError (NOT-CHECKED, with the size and the cap) for a log over the caps: its
    size before it is read (data None), and for a trainer_state.json the number of log
    entries before they are parsed (counted by their "step" keys, in C)."""
    from ..core.caps import MIB, mib

    name = str(path)
    size = Path(path).stat().st_size if data is None else len(data)
    if size > caps.max_log_mb * MIB:
        raise ReadError(f"{name}: {size} bytes ({mib(size)}), over the cap of {caps.max_log_mb} MiB "
                        "for a log (max_log_mb): not read")
    if entries and data is not None:
        n = data.count(b'"step"')
        if n > caps.max_log_entries:
            raise ReadError(f"{name}: about {n} log entries (\"step\" keys), over the cap of "
                            f"{caps.max_log_entries} (max_log_entries): not parsed")


def looks_like_trainer_state(head: bytes) -> bool:
    return b'"log_history"' in head


def _needs_mapping(data: bytes, found: Any, columns_map: Mapping[str, str] | None) -> bool:
    """The typed fast path read HF's own keys; a mapping setting, a log without them, or
    a log with another loss key (an eval set named by the user) is read by mapping names."""
    if columns_map or (LOSS not in found and EVAL_LOSS not in found):
        return True
    if EVAL_LOSS in found:
        return False
    at = data.find(b'_loss"')
    while at >= 0:
        start = data.rfind(b'"', 0, at)
        if data[start:at + 6] not in _HF_LOSS_KEYS:
            return True
        at = data.find(b'_loss"', at + 6)
    return False


def read_trainer_state(path: str | Path, data: bytes | None = None, *,
                       columns: Mapping[str, str] | None = None) -> Run:
    p = Path(path)
    if data is None:
        data = p.read_bytes()
    name = str(path)
    if not data.strip():
        raise ReadError(f"{name}: empty file")
    columns_map = columns
    columns = Columns()
    notes: list[tuple[int, str]] = []
    try:
        state: Any = _FAST.decode(data)
        entries = state.log_history
        n = len(entries)
        _fast_columns(entries, columns, notes)
        meta_src = {"max_steps": state.max_steps, "logging_steps": state.logging_steps,
                    "best_global_step": state.best_global_step,
                    "best_model_checkpoint": state.best_model_checkpoint}
        if _needs_mapping(data, columns.series(), columns_map):
            raise msgspec.ValidationError("read by mapping key names")
    except (msgspec.DecodeError, msgspec.ValidationError):
        columns = Columns()
        notes = []
        doc = decode_json(data, name)
        if not isinstance(doc, dict) or not isinstance(doc.get("log_history"), list):
            raise ReadError(f"{name}: no log_history list; not a trainer_state.json") from None
        entries = doc["log_history"]
        n = len(entries)
        seen_keys: dict[str, None] = {}
        for e in entries:
            if isinstance(e, dict):
                seen_keys.update(dict.fromkeys(k for k in e if isinstance(k, str)))
        keys = _series_keys(seen_keys, columns_map)
        for i, e in enumerate(entries):
            if not isinstance(e, dict):
                notes.append((i, "log entry is not an object; not used"))
                continue
            step = to_step(e.get("step"))
            if step is None:
                notes.append((i, "log entry without an integer step; not used"))
                continue
            for series, key in keys:
                if key in e:
                    v = to_float(e[key])
                    if v is None:
                        notes.append((i, f"{key} is {e[key]!r}, not a number; not used"))
                    else:
                        columns.add(series, key, step, v, i)
        meta_src = {k: doc.get(k) for k in ("max_steps", "logging_steps", "best_global_step",
                                            "best_model_checkpoint")}
    found = columns.series()
    if LOSS not in found and EVAL_LOSS not in found:
        keys_seen = sorted({k for e in entries for k in _keys_of(e)} - {"step"})
        mapped = ", ".join(keys_seen[:30]) or "none"
        example = next((k for k in keys_seen if "loss" in k.lower() and k not in _SUMMARY_KEYS), "NAME")
        raise ReadError(f"{name}: log_history has {n} entr{'y' if n == 1 else 'ies'} and no loss or "
                        f"eval_loss to judge (keys seen: {mapped}); map one with "
                        f'`[tool.trainproof] columns = {{loss = "{example}"}}` or `--column loss={example}`')
    spans = _entry_spans(data, n, name)
    return Run(
        path=name,
        format="hf-trainer-state",
        series=columns.series(),
        record_spans=spans,
        meta=_meta(p, meta_src),
        sources=(name,),
        notes=tuple(notes),
    )


def _keys_of(entry: Any) -> list[str]:
    if isinstance(entry, dict):
        return [k for k in entry if isinstance(k, str)]
    return [f for f in entry.__struct_fields__ if getattr(entry, f) is not None] if hasattr(
        entry, "__struct_fields__") else []


def _series_keys(keys: Mapping[str, None], columns_map: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """(canonical series, key) for the keys a log_history holds: HF's own keys, then any
    other spelling the metric alias table knows (`eval_validation_loss`, `val_loss`...),
    then the user's mapping on top."""
    chosen, _ = map_columns(keys, columns_map, exclude=_SUMMARY_KEYS - set((columns_map or {}).values()))
    out = dict((series, key) for series, key in SERIES_KEYS if key in keys)
    for series, key in chosen.items():
        if series not in out or (columns_map and series in columns_map):
            out[series] = key
    return tuple(out.items())


def _fast_columns(entries: list[_Entry], columns: Columns, notes: list[tuple[int, str]]) -> None:
    """Typed entries -> columns. The hot path of a 200k-entry file, so it runs in C
    iterators (attrgetter/compress) rather than a Python loop per entry, and series
    present in the same entries (loss, learning_rate, grad_norm of train entries) share
    one steps tuple and one records tuple."""
    n = len(entries)
    steps = list(map(attrgetter("step"), entries))
    has_step: list[bool] | None = None
    if None in steps:
        has_step = list(map(is_not, steps, repeat(None)))
        notes.extend((i, "log entry without a step; not used") for i, ok in enumerate(has_step) if not ok)
    shared: list[tuple[list[bool] | None, tuple[int, ...], tuple[int, ...]]] = []
    for series, key in SERIES_KEYS:
        values = list(map(attrgetter(key), entries))
        nones = values.count(None)
        if nones == n:
            continue
        mask: list[bool] | None = None
        if nones or has_step is not None:
            mask = list(map(is_not, values, repeat(None)))
            if has_step is not None:
                mask = list(map(and_, mask, has_step))
        for known, sel_steps, sel_records in shared:
            if known == mask:
                break
        else:
            if mask is None:
                sel_steps, sel_records = tuple(steps), tuple(range(n))
            else:
                sel_steps = tuple(compress(steps, mask))
                sel_records = tuple(compress(range(n), mask))
            shared.append((mask, sel_steps, sel_records))
        sel_values = tuple(values) if mask is None else tuple(compress(values, mask))
        columns.put(Series(series, key, sel_steps, sel_values, sel_records))


def _entry_spans(data: bytes, n: int, name: str) -> RecordSpans:
    open_pos = array_start(data, b"log_history")
    if open_pos < 0:
        return RecordSpans()
    fast = indented_spans(data, open_pos, n)
    if fast is not None:
        starts, ends, indent = fast
        return RecordSpans(start_lines=tuple(starts), start_chars=(indent,) * n,
                           end_lines=tuple(ends), end_chars=(indent + 1,) * n)
    ranges = element_ranges(data, open_pos, n)
    if ranges is None:
        # Values were decoded, so the JSON is valid; elements that are not objects make
        # the positions unknowable. Findings then point at the file, not a line.
        return RecordSpans()
    starts, ends = ranges
    count, rfind = data.count, data.rfind
    sl: list[int] = []
    sc: list[int] = []
    el: list[int] = []
    ec: list[int] = []
    line = count(b"\n", 0, starts[0]) if starts else 0
    prev = starts[0] if starts else 0
    for s, e in zip(starts, ends):
        line += count(b"\n", prev, s)
        sl.append(line)
        sc.append(_column(data, s, rfind))
        line += count(b"\n", s, e)
        el.append(line)
        ec.append(_column(data, e, rfind))
        prev = e
    return RecordSpans(start_lines=tuple(sl), start_chars=tuple(sc),
                       end_lines=tuple(el), end_chars=tuple(ec))


def _column(data: bytes, offset: int, rfind: Any) -> int:
    line_start = rfind(b"\n", 0, offset) + 1
    prefix = data[line_start:offset]
    return len(prefix) if prefix.isascii() else len(prefix.decode("utf-8", "replace"))


def _meta(path: Path, src: dict[str, Any]) -> RunMeta:
    best_ckpt = src.get("best_model_checkpoint")
    best_step = src.get("best_global_step")
    if best_step is None and isinstance(best_ckpt, str):
        m = _CKPT_NAME.search(best_ckpt)
        best_step = int(m.group(1)) if m else None
    logging = src.get("logging_steps")
    classes, config = adjacent.find_num_classes(path)
    return RunMeta(
        max_steps=to_step(src.get("max_steps")),
        logging_steps=int(logging) if isinstance(logging, (int, float)) and logging >= 1 else None,
        best_step=best_step if isinstance(best_step, int) else None,
        best_checkpoint=best_ckpt if isinstance(best_ckpt, str) else None,
        checkpoint_steps=adjacent.checkpoint_steps(adjacent.run_root(path)),
        vocab_size=classes,
        vocab_source=config,
    )
