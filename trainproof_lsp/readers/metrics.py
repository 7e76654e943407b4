"""Metric logs as rows of named values: JSONL, CSV, and JSON arrays of records.

Who writes them and what they look like:
- HF/W&B exports:         {"_step": 10, "train/loss": 1.2, "train/learning_rate": 2e-5, ...}
- plain JSONL:            {"step": 5, "loss": 1.98, "lr": 0.0002, "grad_norm": 0.7}
- Lightning CSVLogger:    epoch,step,lr-AdamW,train_loss_step,train_loss_epoch,val_loss
                          rows fill only the columns logged at that step (others empty)
- Keras CSVLogger:        epoch,loss,val_loss  (one row per epoch; epoch is the step)
- long format:            epoch,phase,loss  (phase train/val: a val row's loss is the eval loss)

Columns map onto canonical series through the alias table below; the first alias
present wins. Names are matched as people write them: exactly (ignoring case) first, then
normalised (`TrainLoss`, `Train Loss`, `train-loss` and `train/loss` are all `train_loss`;
`ValLoss`, `Validation Loss`, `eval/loss` are eval losses), then by shape (`val_*_loss`,
`train_*_loss`) when exactly one column has it. A mapping the user gives
(`[tool.trainproof] columns = {loss = "MyLoss"}`, `--column loss=MyLoss`) comes before all
of that. A layout without any loss column is not judged: the reader says which columns it
saw and how to map one.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import msgspec

from ..core.model import (DATA_TIME, EPOCH, EVAL_ACCURACY, EVAL_LOSS, GRAD_NORM, LOSS, LOSS_EPOCH, LR, STEP_TIME, THROUGHPUT,
                     ReadError, RecordSpans, Run, RunMeta, Span)
from . import adjacent
from .common import Columns, decode_json, to_float, to_step
from .jsonpos import array_start, element_ranges

# Canonical series -> column names, most specific first. Matching ignores case.
ALIASES: dict[str, tuple[str, ...]] = {
    LOSS: ("train/loss", "train_loss_step", "loss_step", "train/loss_step", "loss", "train_loss",
           "training_loss", "trainer/loss", "loss/train", "train/train_loss", "train_loss_epoch"),
    EVAL_LOSS: ("eval/loss", "eval_loss", "val_loss", "val/loss", "validation_loss", "valid_loss",
                "val_loss_epoch", "loss/val", "loss/validation", "validation/loss", "test/loss",
                "loss/valid", "loss/eval", "loss/test", "evaluation_loss", "dev_loss", "test_loss"),
    LR: ("train/learning_rate", "learning_rate", "lr", "train/lr", "trainer/learning_rate"),
    GRAD_NORM: ("train/grad_norm", "grad_norm", "gradient_norm", "grad_norm_step", "train/gradient_norm",
                "grad_norm/total"),
    STEP_TIME: ("step_time", "train/step_time", "time_per_step", "iter_time", "batch_time",
                "step_time_s", "train/iter_time"),
    DATA_TIME: ("data_time", "train/data_time", "loader_time", "dataloader_time", "data_wait",
                "data_time_s", "train/loader_time"),
    THROUGHPUT: ("train/samples_per_second", "samples_per_second", "train_samples_per_second",
                 "tokens_per_second", "train/tokens_per_second", "throughput"),
    EPOCH: ("train/epoch", "epoch"),
    # The per-epoch view of the train loss beside a per-step one (trend rules judge it).
    # When it is the only train loss it is also LOSS above, and rules see one series.
    LOSS_EPOCH: ("train_loss_epoch", "loss_epoch", "train/loss_epoch"),
    EVAL_ACCURACY: ("eval/accuracy", "eval_accuracy", "val_acc", "val_accuracy", "val/acc", "val/accuracy",
                    "val_acc_epoch", "validation_accuracy", "valid_acc"),
}
# Step columns, most specific first. Keras logs only `epoch`: it becomes the step.
STEP_ALIASES: tuple[str, ...] = ("train/global_step", "global_step", "trainer/global_step", "step",
                                 "_step", "iteration", "iter", "epoch")
# Lightning's LearningRateMonitor names its column after the optimizer: lr-Adam, lr-AdamW/pg1.
_LR_MONITOR = re.compile(r"^lr-[A-Za-z0-9_]+(/pg\d+)?$")

# Every key that names a metric we read, for format detection.
KNOWN_KEYS = frozenset(k for names in ALIASES.values() for k in names) | frozenset(STEP_ALIASES)


# Names split where people split words: camelCase humps and any run of characters that
# is not a letter or digit ("TrainLoss", "Train Loss", "train-loss", "train/loss").
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NOT_WORD = re.compile(r"[^a-z0-9]+")
# Loss columns by shape, for names no alias lists ("val_nll_loss", "Training Total Loss");
# used only when exactly one column has the shape, so two candidates are never guessed
# between.
_SHAPES: dict[str, re.Pattern[str]] = {
    EVAL_LOSS: re.compile(r"^(?:eval|evaluation|val|valid|validation|dev|test)_(?:[a-z0-9]+_)*loss(?:_epoch)?$"
                          r"|^(?:[a-z0-9]+_)*loss_(?:eval|val|valid|validation|dev|test)$"),
    LOSS: re.compile(r"^(?:train|training)_(?:[a-z0-9]+_)*loss(?:_step|_epoch)?$"
                     r"|^(?:[a-z0-9]+_)*loss_(?:train|training)$"),
}
# What a mapping setting may name: the canonical series, and the step column.
MAPPABLE = (*ALIASES, "step")


def normalise_name(name: str) -> str:
    """A column/key/tag name as words joined by `_`, lower case: `TrainLoss`, `Train Loss`
    and `train/loss` are all `train_loss`; `ValLoss` is `val_loss`."""
    return _NOT_WORD.sub("_", _HUMP.sub("_", name.strip()).lower()).strip("_")


def map_columns(names: Iterable[str], mapping: Mapping[str, str] | None = None,
                exclude: frozenset[str] = frozenset()) -> tuple[dict[str, str], str | None]:
    """canonical series -> column, and the step column, for a set of column names.

    `mapping` (canonical series or "step" -> column name, from the settings) is applied
    first; `exclude` are names never mapped by alias or shape (a reader's summary keys)."""
    all_names = list(dict.fromkeys(names))
    by_lower: dict[str, str] = {}
    by_norm: dict[str, str] = {}
    for n in all_names:
        if n in exclude:
            continue
        by_lower.setdefault(n.lower(), n)
        by_norm.setdefault(normalise_name(n), n)
    chosen: dict[str, str] = {}
    taken: set[str] = set()
    step: str | None = None
    for series, want in (mapping or {}).items():
        col = want if want in all_names else by_lower.get(want.lower()) or by_norm.get(normalise_name(want))
        if col is None:
            continue
        if series == "step":
            step = col
        else:
            chosen[series] = col
        taken.add(col)

    def find(aliases: Iterable[str]) -> str | None:
        aliases = tuple(aliases)
        for table, key in ((by_lower, str.lower), (by_norm, normalise_name)):
            for a in aliases:
                col = table.get(key(a))
                if col is not None and col not in taken:
                    return col
        return None

    if step is None:
        step = find(STEP_ALIASES)
        if step is not None:
            taken.add(step)
    for series, aliases in ALIASES.items():
        if series in chosen:
            continue
        col = find(aliases)
        if col is None and series in _SHAPES:
            fits = [n for k, n in by_norm.items() if n not in taken and _SHAPES[series].match(k)]
            col = fits[0] if len(fits) == 1 else None
        if col is not None:
            chosen[series] = col
            taken.add(col)
    if LR not in chosen:
        monitor = sorted(n for n in by_lower.values() if _LR_MONITOR.match(n))
        if monitor:
            chosen[LR] = monitor[0]
    # Keras' `epoch` doubles as the step; it is then not also an epoch series.
    if step is not None and chosen.get(EPOCH) == step:
        chosen.pop(EPOCH)
    return chosen, step


# Long-format logs name the split in a column of its own ("phase,epoch,loss" with phase
# train/val): rows of an eval split carry the eval loss in the loss column.
_SPLIT_COLUMNS = frozenset({"split", "phase", "mode", "stage", "subset", "partition"})
_EVAL_SPLITS = frozenset({"val", "valid", "validation", "eval", "evaluation", "dev", "test"})


def split_column(names: Iterable[str]) -> str | None:
    """The column that says which split a row belongs to, if the log has one."""
    return next((n for n in names if normalise_name(n) in _SPLIT_COLUMNS), None)


def row_columns(chosen: Mapping[str, str], split_col: str | None,
                row: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(series, column, source name) to read from one row: every mapped column, except that
    a row of an eval split (long format) gives only its eval loss, read from the eval-loss
    column or else the loss column."""
    tag = row.get(split_col) if split_col is not None else None
    if not (isinstance(tag, str) and normalise_name(tag) in _EVAL_SPLITS):
        return [(series, col, col) for series, col in chosen.items()]
    for series in (EVAL_LOSS, LOSS):
        col = chosen.get(series)
        if col is not None and row.get(col) not in (None, ""):
            return [(EVAL_LOSS, col, col if series == EVAL_LOSS else f"{col} ({split_col} {tag})")]
    return []


def no_loss_error(path: str, names: Iterable[str], what: str = "column") -> ReadError:
    """The one-line reason for a log whose loss the reader could not find: the names it
    saw, and the setting that maps one."""
    seen = sorted(set(names))
    shown = ", ".join(seen[:30]) + (f" (and {len(seen) - 30} more)" if len(seen) > 30 else "") or "none"
    example = next((n for n in seen if "loss" in n.lower()), "NAME")
    return ReadError(f"{path}: no loss {what} to judge ({what}s seen: {shown}); map one with "
                     f'`[tool.trainproof] columns = {{loss = "{example}"}}` (or eval_loss = ...) '
                     f"or `--column loss={example}`")


def _build(path: Path, fmt: str, rows: list[dict[str, Any]], spans: RecordSpans,
           notes: list[tuple[int, str]], columns_map: Mapping[str, str] | None = None) -> Run:
    names: dict[str, None] = {}
    for r in rows:
        for k in r:
            names.setdefault(k, None)
    chosen, step_col = map_columns(names, columns_map)
    if LOSS not in chosen and EVAL_LOSS not in chosen:
        raise no_loss_error(str(path), names)
    columns = Columns()
    split_col = split_column(names)
    for i, row in enumerate(rows):
        if step_col is not None:
            raw = row.get(step_col)
            if raw is None or raw == "":
                # Lightning rows always carry a step; a row without one cannot be placed.
                if any(row.get(c) not in (None, "") for c in chosen.values()):
                    notes.append((i, f"row has metrics but no {step_col}; not used"))
                continue
            step = to_step(raw)
            if step is None:
                notes.append((i, f"{step_col} is {raw!r}, not an integer step; not used"))
                continue
        else:
            step = i
        for series, col, source in row_columns(chosen, split_col, row):
            raw = row.get(col)
            if raw is None or raw == "":
                continue
            v = to_float(raw)
            if v is None:
                notes.append((i, f"{col} is {raw!r}, not a number; not used"))
                continue
            columns.add(series, source, step, v, i)
    classes, config = adjacent.find_num_classes(path)
    used = set(chosen.values()) | ({step_col} if step_col else set())
    return Run(
        path=str(path), format=fmt, series=columns.series(), record_spans=spans,
        meta=RunMeta(checkpoint_steps=adjacent.checkpoint_steps(adjacent.run_root(path)),
                     vocab_size=classes, vocab_source=config),
        sources=(str(path),), unmapped=tuple(n for n in names if n not in used),
        notes=tuple(notes),
    )


_DECODE = msgspec.json.Decoder()


def read_metrics_jsonl(path: str | Path, data: bytes | None = None, *,
                       columns: Mapping[str, str] | None = None) -> Run:
    p = Path(path)
    if data is None:
        data = p.read_bytes()
    if not data.strip():
        raise ReadError(f"{path}: empty file")
    rows: list[dict[str, Any]] = []
    sl: list[int] = []
    sc: list[int] = []
    el: list[int] = []
    ec: list[int] = []
    notes: list[tuple[int, str]] = []
    bad = 0
    first_bad: tuple[int, str] | None = None
    for lineno, raw in enumerate(data.split(b"\n")):
        line = raw.rstrip(b"\r")
        if lineno == 0 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if not line.strip():
            continue
        try:
            obj = _DECODE.decode(line)
        except msgspec.DecodeError:
            try:
                obj = decode_json(line, str(path))  # NaN/Infinity tokens
            except ReadError as e:
                bad += 1
                first_bad = first_bad or (lineno, str(e).split(": ", 1)[-1])
                continue
        if not isinstance(obj, dict):
            bad += 1
            first_bad = first_bad or (lineno, "not a JSON object")
            continue
        rows.append(obj)
        sl.append(lineno)
        sc.append(0)
        el.append(lineno)
        ec.append(len(line.decode("utf-8", "replace")))
    if not rows:
        if first_bad is not None:
            raise ReadError(f"{path}:{first_bad[0] + 1}: no readable JSON line ({first_bad[1]})",
                            span=Span(first_bad[0], 0, first_bad[0], 0))
        raise ReadError(f"{path}: no records")
    if bad:
        notes.append((-1, f"{bad} line(s) are not JSON objects and were not used, first at line "
                          f"{first_bad[0] + 1 if first_bad else '?'}"))
    spans = RecordSpans(start_lines=tuple(sl), start_chars=tuple(sc), end_lines=tuple(el),
                        end_chars=tuple(ec))
    return _build(p, "metrics-jsonl", rows, spans, notes, columns)


def read_metrics_json_array(path: str | Path, data: bytes | None = None, *,
                            columns: Mapping[str, str] | None = None) -> Run:
    p = Path(path)
    if data is None:
        data = p.read_bytes()
    doc = decode_json(data, str(path))
    if not isinstance(doc, list) or not doc:
        raise ReadError(f"{path}: not a JSON array of records")
    notes: list[tuple[int, str]] = []
    rows = [r if isinstance(r, dict) else {} for r in doc]
    if not any(rows):
        raise ReadError(f"{path}: the array holds no objects")
    ranges = element_ranges(data, array_start(data, None), len(doc)) if all(
        isinstance(r, dict) for r in doc) else None
    spans = RecordSpans()
    if ranges is not None:
        from ..core.positions import ByteIndex

        index = ByteIndex(data)
        s = [index.span(a, b) for a, b in zip(*ranges)]
        spans = RecordSpans(start_lines=tuple(x.start_line for x in s),
                            start_chars=tuple(x.start_char for x in s),
                            end_lines=tuple(x.end_line for x in s),
                            end_chars=tuple(x.end_char for x in s))
    return _build(p, "metrics-json", rows, spans, notes, columns)


def read_metrics_csv(path: str | Path, data: bytes | None = None, *,
                     columns: Mapping[str, str] | None = None) -> Run:
    p = Path(path)
    if data is None:
        data = p.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ReadError(f"{path}: not UTF-8 text (byte {e.start})") from None
    if not text.strip():
        raise ReadError(f"{path}: empty file")
    delimiter = "\t" if p.suffix.lower() == ".tsv" else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as e:
        raise ReadError(f"{path}: no CSV header ({e})") from None
    header = [h.strip() for h in header]
    rows: list[dict[str, Any]] = []
    notes: list[tuple[int, str]] = []
    sl: list[int] = []
    el: list[int] = []
    ec: list[int] = []
    lines = text.splitlines()
    try:
        consumed = reader.line_num
        for cells in reader:
            # A quoted field can hold newlines: the record starts on the first line not
            # yet consumed and ends on the last line the reader took for it.
            first, consumed = consumed, reader.line_num
            last = consumed - 1
            if not cells or not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                notes.append((len(rows), f"line {first + 1}: {len(cells)} cells, header has {len(header)}"))
            rows.append({h: c.strip() for h, c in zip(header, cells)})
            sl.append(first)
            el.append(last)
            ec.append(len(lines[last]) if last < len(lines) else 0)
    except csv.Error as e:
        raise ReadError(f"{path}:{reader.line_num}: malformed CSV ({e})") from None
    if not rows:
        chosen, _ = map_columns(header, columns)
        if LOSS not in chosen and EVAL_LOSS not in chosen:
            raise no_loss_error(str(path), header)
        raise ReadError(f"{path}: header only, no rows")
    n = len(sl)
    spans = RecordSpans(start_lines=tuple(sl), start_chars=(0,) * n, end_lines=tuple(el),
                        end_chars=tuple(ec))
    return _build(p, "metrics-csv", rows, spans, notes, columns)
