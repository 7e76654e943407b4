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
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import msgspec

from ..core import objectives as ob
from ..core.model import (DATA_TIME, EPOCH, EVAL_ACCURACY, EVAL_LOSS, GRAD_NORM, LOSS, LOSS_EPOCH, LOSS_PART, LR, STEP_TIME,
                          THROUGHPUT,
                     ReadError, RecordSpans, Run, RunMeta, Span)
from . import adjacent
from .common import (Batch, ByteLines, Columns, NotText, PointSink, TextUpToNewline, decode_json, feed_all, file_data,
                     record_spans, to_float, to_step)
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
                "step_time_s", "train/iter_time",
                # ms-swift 3+: seconds a step
                "train_speed(s/it)"),
    DATA_TIME: ("data_time", "train/data_time", "loader_time", "dataloader_time", "data_wait",
                "data_time_s", "train/loader_time"),
    THROUGHPUT: ("train/samples_per_second", "samples_per_second", "train_samples_per_second",
                 "tokens_per_second", "train/tokens_per_second", "throughput",
                 # ms-swift's steps a second; torchtune's recipes' tokens a second
                 "train_speed(iter/s)", "tokens_per_second_per_gpu"),
    EPOCH: ("train/epoch", "epoch"),
    # The per-epoch view of the train loss beside a per-step one (trend rules judge it).
    # When it is the only train loss it is also LOSS above, and rules see one series.
    LOSS_EPOCH: ("train_loss_epoch", "loss_epoch", "train/loss_epoch"),
    EVAL_ACCURACY: ("eval/accuracy", "eval_accuracy", "val_acc", "val_accuracy", "val/acc", "val/accuracy",
                    "val_acc_epoch", "validation_accuracy", "valid_acc"),
}

# Preference and RL series (core/objectives.py), under the names their writers give them,
# most specific first:
# - TRL 1.x (DPO/KTO/ORPO/GRPO/RLOO trainers) logs them bare in log_history and a metric
#   JSONL (`rewards/chosen`, `reward`, `kl`), eval ones with `eval_` (`eval_rewards/margins`);
# - HF's W&B callback rewrites those to `train/rewards/chosen` and `eval/rewards/margins`;
# - verl logs `critic/score/mean` (the task reward before any KL penalty), `actor/entropy`,
#   `actor/kl_loss` (KL from the reference), `actor/pg_clipfrac`, and `response_length/mean`,
#   `/max`, `/clip_ratio`;
# - OpenRLHF logs `reward`, `kl`, `response_length`, and for DPO `chosen_reward`/`reject_reward`;
# - older TRL PPO/RLOO logged `objective/scores`, `objective/kl`, `objective/entropy`,
#   `policy/clipfrac_avg`; TRL GRPO before 0.17 logged `completion_length` and `clip_ratio`.
def _trl(name: str, *others: str) -> tuple[str, ...]:
    """TRL's key, its W&B spelling, then other stacks' names for the same series."""
    return (f"train/{name}", name, *others)


def _trl_eval(name: str) -> tuple[str, ...]:
    return (f"eval/{name}", f"eval_{name}")


OBJECTIVE_ALIASES: dict[str, tuple[str, ...]] = {
    ob.REWARDS_CHOSEN: _trl(ob.REWARDS_CHOSEN, "chosen_reward", "train/chosen_reward"),
    ob.REWARDS_REJECTED: _trl(ob.REWARDS_REJECTED, "reject_reward", "rejected_reward", "train/reject_reward"),
    ob.REWARDS_MARGINS: _trl(ob.REWARDS_MARGINS, "reward_margin", "train/reward_margin"),
    ob.REWARDS_ACCURACIES: _trl(ob.REWARDS_ACCURACIES),
    ob.LOGPS_CHOSEN: _trl(ob.LOGPS_CHOSEN),
    ob.LOGPS_REJECTED: _trl(ob.LOGPS_REJECTED),
    **{ob.EVAL_PREFIX + s: _trl_eval(s) for s in ob.PREFERENCE_SERIES},
    ob.REWARD: _trl(ob.REWARD, "critic/score/mean", "objective/scores", "env/reward_mean"),
    ob.REWARD_STD: _trl(ob.REWARD_STD, "env/reward_std"),
    ob.FRAC_REWARD_ZERO_STD: _trl(ob.FRAC_REWARD_ZERO_STD),
    ob.KL: _trl(ob.KL, "actor/kl_loss", "objective/kl"),
    ob.ENTROPY: _trl(ob.ENTROPY, "actor/entropy", "objective/entropy", "policy/entropy_avg"),
    ob.COMPLETION_MEAN_LENGTH: _trl(ob.COMPLETION_MEAN_LENGTH, "response_length/mean", "completion_length",
                                    "train/completion_length", "response_length", "train/response_length"),
    ob.COMPLETION_MAX_LENGTH: _trl(ob.COMPLETION_MAX_LENGTH, "response_length/max"),
    ob.COMPLETION_CLIPPED_RATIO: _trl(ob.COMPLETION_CLIPPED_RATIO, "response_length/clip_ratio"),
    ob.CLIP_RATIO: _trl("clip_ratio/region_mean", "clip_ratio", "train/clip_ratio", "actor/pg_clipfrac",
                        "policy/clipfrac_avg", "ppo_clip_ratio"),
    **{ob.EVAL_PREFIX + s: _trl_eval(s) for s in (ob.REWARD, ob.REWARD_STD, ob.FRAC_REWARD_ZERO_STD, ob.KL)},
}
assert set(OBJECTIVE_ALIASES) == set(ob.OBJECTIVE_SERIES)
ALIASES.update(OBJECTIVE_ALIASES)
# The exact keys (any case) that name an objective series: a trainer_state.json that holds
# one is read through the mapped path (`names_objective_series`).
_OBJECTIVE_KEYS = frozenset(a.lower() for names in OBJECTIVE_ALIASES.values() for a in names)
_QUOTED_KEY = re.compile(rb'"([A-Za-z0-9_/()\-]{1,64})"\s*:')


def names_objective_series(head: bytes) -> bool:
    """Whether the JSON text `head` (the start of a log) has a key that names a preference or
    RL series: such a trainer_state.json is read by mapping key names, not by the typed fast
    path over HF's own keys. TRL logs these in every train entry, so the first entries show
    them."""
    return any(m.group(1).decode("ascii").lower() in _OBJECTIVE_KEYS for m in _QUOTED_KEY.finditer(head))


def objective_values(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's (an HF `on_log` dict's) preference/RL values under their canonical names: for
    each series, the first of its aliases the row holds (exact spelling, as TRL logs them)."""
    out: dict[str, Any] = {}
    for series, names in OBJECTIVE_ALIASES.items():
        for name in names:
            if name in row:
                out[series] = row[name]
                break
    return out


# Step columns, most specific first. Keras logs only `epoch`: it becomes the step.
# LLaMA-Factory's trainer_log.jsonl counts in `current_steps`; ms-swift's logging.jsonl in
# `global_step/max_steps` ("30/500": the step before the slash, see step_of).
STEP_ALIASES: tuple[str, ...] = ("train/global_step", "global_step", "trainer/global_step", "step",
                                 "_step", "iteration", "iter", "current_steps", "global_step/max_steps",
                                 "epoch")
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
# Named parts of a composite train loss: a name with the word `loss` in it that no alias
# or shape above took ("recon_loss", "train/kl_loss", "loss_ce", "lossMel", "aux_loss").
# Not parts: held-out losses (an eval split's word anywhere), the fp16 loss scale, a total,
# a smoothed copy of the loss (avg, ema, running...), and a per-epoch copy of a per-step
# part (Lightning's `x_loss_epoch` beside `x_loss_step`: the step series is the part).
_PART_NOT = frozenset({"eval", "evaluation", "val", "valid", "validation", "dev", "test", "scale", "scaler",
                       "total", "avg", "mean", "average", "running", "smooth", "smoothed", "ema", "best", "min",
                       "max", "std", "var", "ratio", "weight", "coef", "coeff", "lambda"})


# Terms that name a part of a loss without the word `loss` (`train_kld`, `kl_div`, `nll`).
_PART_TERMS = frozenset({"kl", "kld", "kldiv", "nll", "recon", "reconstruction"})


def is_loss_part(norm: str, by_norm: Mapping[str, str]) -> bool:
    """Whether the normalised column name `norm` names a part of the train loss."""
    words = norm.split("_")
    if ("loss" not in words and not _PART_TERMS.intersection(words)) or words == ["loss"] \
            or _PART_NOT.intersection(words):
        return False
    if words[-1] == "epoch" and norm[: -len("epoch")] + "step" in by_norm:
        return False
    return True


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
    for norm, col in by_norm.items():
        if col not in taken and is_loss_part(norm, by_norm):
            chosen[LOSS_PART + col] = col
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


# ms-swift writes its step as progress, "N/M" (global step / max steps).
_STEP_OF_TOTAL = re.compile(r"\s*(\d+)\s*/\s*\d+\s*")


def step_of(raw: Any) -> int | None:
    """A step column's value as a step: an integer, or the N of swift's "N/M"."""
    if isinstance(raw, str):
        m = _STEP_OF_TOTAL.fullmatch(raw)
        if m is not None:
            return int(m.group(1))
    return to_step(raw)


class RowMapping:
    """Rows of named values -> points, for one set of column names: which column is which
    series (`map_columns`), the step column, the split column (long format)."""

    def __init__(self, names: Iterable[str], columns_map: Mapping[str, str] | None = None) -> None:
        self.names: dict[str, None] = dict.fromkeys(names)
        self.chosen, self.step_col = map_columns(self.names, columns_map)
        self.split_col = split_column(self.names)

    def has_loss(self) -> bool:
        return LOSS in self.chosen or EVAL_LOSS in self.chosen

    def unmapped(self) -> tuple[str, ...]:
        used = set(self.chosen.values()) | ({self.step_col} if self.step_col else set())
        return tuple(n for n in self.names if n not in used)

    def put(self, rows: Iterable[tuple[int, Mapping[str, Any]]], sink: PointSink,
            notes: list[tuple[int, str]]) -> None:
        """The points of rows (record index, row) into `sink`; what cannot be used, into
        `notes`. (One loop over many rows: the hot path of a whole-file read.)"""
        step_col, chosen, split_col = self.step_col, self.chosen, self.split_col
        add = sink.add
        for record, row in rows:
            if step_col is not None:
                raw = row.get(step_col)
                if raw is None or raw == "":
                    # Lightning rows always carry a step; a row without one cannot be placed.
                    if any(row.get(c) not in (None, "") for c in chosen.values()):
                        notes.append((record, f"row has metrics but no {step_col}; not used"))
                    continue
                step = step_of(raw)
                if step is None:
                    notes.append((record, f"{step_col} is {raw!r}, not an integer step; not used"))
                    continue
            else:
                step = record
            for series, col, source in row_columns(chosen, split_col, row):
                raw = row.get(col)
                if raw is None or raw == "":
                    continue
                v = to_float(raw)
                if v is None:
                    notes.append((record, f"{col} is {raw!r}, not a number; not used"))
                    continue
                add(series, source, step, v, record)


class GrowingRowMapping:
    """A RowMapping for a log that grows (`watch`): computed again when a row brings a
    column name not seen before, so earlier rows keep the mapping they were read with."""

    def __init__(self, columns_map: Mapping[str, str] | None = None) -> None:
        self.columns_map = columns_map
        self.mapping = RowMapping((), columns_map)

    def put(self, rows: Sequence[tuple[int, Mapping[str, Any]]], sink: PointSink,
            notes: list[tuple[int, str]]) -> bool:
        """As RowMapping.put; True when the mapping changed (new column names)."""
        changed = False
        start = 0
        for i, (_, row) in enumerate(rows):
            names = self.mapping.names
            if any(k not in names for k in row):
                self.mapping.put(rows[start:i], sink, notes)
                self.mapping = RowMapping([*names, *row], self.columns_map)
                start, changed = i, True
        self.mapping.put(rows[start:], sink, notes)
        return changed


class Row(NamedTuple):
    """One record of a metric log: its named values as read (numbers, or CSV text), the
    lines it stands on (from column 0 of `line` to `end_char` of `end_line`), and what the
    reader noticed about it (a CSV row whose cell count is not the header's)."""

    values: dict[str, Any]
    line: int
    end_line: int
    end_char: int
    note: str | None = None

    def span(self) -> Span:
        return Span(self.line, 0, self.end_line, self.end_char)


class Rows(Batch[Row]):
    """The rows one `feed` call gives, as parallel columns (common.Batch)."""

    def __init__(self) -> None:
        self.values: list[dict[str, Any]] = []
        self.lines: list[int] = []
        self.end_lines: list[int] = []
        self.end_chars: list[int] = []
        self.notes: dict[int, str] = {}  # index of the row -> note

    def __len__(self) -> int:
        return len(self.values)

    def record(self, i: int) -> Row:
        return Row(self.values[i], self.lines[i], self.end_lines[i], self.end_chars[i], self.notes.get(i))

    def extend(self, more: Rows) -> None:
        n = len(self)
        self.notes.update((i + n, note) for i, note in more.notes.items())
        self.values.extend(more.values)
        self.lines.extend(more.lines)
        self.end_lines.extend(more.end_lines)
        self.end_chars.extend(more.end_chars)


def _joined(batches: Iterable[Sequence[Row]]) -> Rows:
    """The batches of JsonlFeed or CsvFeed (each a Rows) as one."""
    out = Rows()
    for batch in batches:
        assert isinstance(batch, Rows)
        out.extend(batch)
    return out


def _build(path: Path, fmt: str, rows: list[dict[str, Any]], spans: RecordSpans,
           notes: list[tuple[int, str]], columns_map: Mapping[str, str] | None = None) -> Run:
    names: dict[str, None] = {}
    for r in rows:
        for k in r:
            names.setdefault(k, None)
    mapping = RowMapping(names, columns_map)
    if not mapping.has_loss():
        raise no_loss_error(str(path), names)
    columns = Columns()
    mapping.put(enumerate(rows), columns, notes)
    classes, config = adjacent.find_num_classes(path)
    return Run(
        path=str(path), format=fmt, series=columns.series(), record_spans=spans,
        meta=RunMeta(checkpoint_steps=adjacent.checkpoint_steps(adjacent.run_root(path)),
                     vocab_size=classes, vocab_source=config),
        sources=(str(path),), unmapped=mapping.unmapped(), notes=tuple(notes),
    )


def _build_rows(path: Path, fmt: str, rows: Rows, notes: list[tuple[int, str]],
                columns_map: Mapping[str, str] | None) -> Run:
    """A Run from the rows a feed gave: their notes first, then the mapping's."""
    notes.extend(sorted(rows.notes.items()))
    spans = RecordSpans(start_lines=tuple(rows.lines), start_chars=(0,) * len(rows),
                        end_lines=tuple(rows.end_lines), end_chars=tuple(rows.end_chars))
    return _build(path, fmt, rows.values, spans, notes, columns_map)


_DECODE = msgspec.json.Decoder()


class JsonlFeed:
    """Metric JSONL, incrementally (common.Feed): one JSON object a line,
    `{"step": 5, "loss": 1.98, "lr": 0.0002}`. A line that is not a JSON object is
    counted (`bad`, `first_bad`) and passed over; blank lines are passed over."""

    def __init__(self, path: str) -> None:
        self.path = path  # named in the errors of lines that are not JSON
        self._lines = ByteLines()
        self.lineno = 0  # lines taken so far
        self.bad = 0
        self.first_bad: tuple[int, str] | None = None  # (line, why)
        self.blank = True  # nothing but whitespace so far

    def feed(self, data: bytes) -> Rows:
        if self.blank and data.strip():
            self.blank = False
        return self._rows(self._lines.feed(data))

    def finish(self) -> Rows:
        return self._rows(self._lines.finish())

    def _rows(self, lines: list[bytes]) -> Rows:
        rows = Rows()
        values, starts, ends, widths = rows.values, rows.lines, rows.end_lines, rows.end_chars
        first = self.lineno
        self.lineno += len(lines)
        for lineno, raw in enumerate(lines, first):
            line = raw.rstrip(b"\r")
            if lineno == 0 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if not line.strip():
                continue
            try:
                obj = _DECODE.decode(line)
            except msgspec.DecodeError:
                try:
                    obj = decode_json(line, self.path)  # NaN/Infinity tokens
                except ReadError as e:
                    self._bad(lineno, str(e).split(": ", 1)[-1])
                    continue
            if not isinstance(obj, dict):
                self._bad(lineno, "not a JSON object")
                continue
            values.append(obj)
            starts.append(lineno)
            ends.append(lineno)
            widths.append(len(line.decode("utf-8", "replace")))
        return rows

    def _bad(self, lineno: int, why: str) -> None:
        self.bad += 1
        if self.first_bad is None:
            self.first_bad = (lineno, why)

    def bad_lines_note(self) -> tuple[int, str] | None:
        """The note about the whole log that leads its notes, once a line was not used."""
        if not self.bad or self.first_bad is None:
            return None
        return (-1, f"{self.bad} line(s) are not JSON objects and were not used, first at line "
                    f"{self.first_bad[0] + 1}")


def read_metrics_jsonl(path: str | Path, data: bytes | None = None, *,
                       columns: Mapping[str, str] | None = None) -> Run:
    p = Path(path)
    data = file_data(p, data)
    feed = JsonlFeed(str(path))
    rows = _joined(feed_all(feed, data))
    if feed.blank:
        raise ReadError(f"{path}: empty file")
    if not rows:
        if feed.first_bad is not None:
            line, why = feed.first_bad
            raise ReadError(f"{path}:{line + 1}: no readable JSON line ({why})", span=Span(line, 0, line, 0))
        raise ReadError(f"{path}: no records")
    bad = feed.bad_lines_note()
    return _build_rows(p, "metrics-jsonl", rows, [bad] if bad else [], columns)


def read_metrics_json_array(path: str | Path, data: bytes | None = None, *,
                            columns: Mapping[str, str] | None = None) -> Run:
    """A JSON array of records: one document, read whole (also when it grows)."""
    p = Path(path)
    data = file_data(p, data)
    doc = decode_json(data, str(path))
    if not isinstance(doc, list) or not doc:
        raise ReadError(f"{path}: not a JSON array of records")
    rows = [r if isinstance(r, dict) else {} for r in doc]
    if not any(rows):
        raise ReadError(f"{path}: the array holds no objects")
    ranges = element_ranges(data, array_start(data, None), len(doc)) if all(
        isinstance(r, dict) for r in doc) else None
    spans = RecordSpans()
    if ranges is not None:
        from ..core.positions import ByteIndex

        index = ByteIndex(data)
        spans = record_spans([index.span(a, b) for a, b in zip(*ranges)])
    return _build(p, "metrics-json", rows, spans, [], columns)


# A line after the lines given to csv.reader: after a complete record it is a record of
# its own; a record still inside a quoted field takes it in. (No delimiter, quote or
# line break in it.)
_SENTINEL = "\uffff\n"


class CsvFeed:
    """Metric CSV/TSV, incrementally (common.Feed): a header line, then rows that fill the
    columns logged at that step. A quoted field may hold newlines: a record is returned
    once its last line is in. Lines end at CRLF, CR or LF, as csv reads a file opened
    with newline=""."""

    def __init__(self, path: str, delimiter: str = ",") -> None:
        self.path = path
        self.delimiter = delimiter
        self._text = TextUpToNewline("utf-8-sig")
        self.header: list[str] | None = None
        self.lineno = 0  # lines before `_pending`
        self._pending: list[str] = []  # the lines of a record not complete yet
        self.blank = True  # nothing but whitespace so far

    def feed(self, data: bytes) -> Rows:
        return self._rows(self._decoded(data, final=False), final=False)

    def finish(self) -> Rows:
        return self._rows(self._decoded(b"", final=True), final=True)

    def _decoded(self, data: bytes, *, final: bool) -> str:
        try:
            return self._text.finish() if final else self._text.feed(data)
        except NotText as e:
            raise ReadError(f"{self.path}: not UTF-8 text (byte {e.byte})") from None

    def _rows(self, text: str, *, final: bool) -> Rows:
        if self.blank and text.strip():
            self.blank = False
        lines = self._pending + io.StringIO(text, newline="").readlines() if text else self._pending
        n = len(lines)
        reader = csv.reader(lines if final else [*lines, _SENTINEL], delimiter=self.delimiter)
        rows = Rows()
        base = self.lineno
        done = 0  # lines of the records read
        try:
            for cells in reader:
                first, done = done, reader.line_num
                if done > n:  # the sentinel, or a record whose quoted field goes on past it
                    done = first
                    break
                if self.header is None:
                    self.header = [h.strip() for h in cells]
                    continue
                if not cells or not any(c.strip() for c in cells):
                    continue
                header = self.header
                if len(cells) != len(header):
                    rows.notes[len(rows)] = f"line {base + first + 1}: {len(cells)} cells, header has {len(header)}"
                rows.values.append({h: c.strip() for h, c in zip(header, cells)})
                rows.lines.append(base + first)
                rows.end_lines.append(base + done - 1)
                rows.end_chars.append(len(lines[done - 1].rstrip("\r\n")))
        except csv.Error as e:
            if self.header is None:
                raise ReadError(f"{self.path}: no CSV header ({e})") from None
            raise ReadError(f"{self.path}:{base + reader.line_num}: malformed CSV ({e})") from None
        self._pending = lines[done:]
        self.lineno += done
        return rows


def read_metrics_csv(path: str | Path, data: bytes | None = None, *,
                     columns: Mapping[str, str] | None = None) -> Run:
    p = Path(path)
    data = file_data(p, data)
    feed = CsvFeed(str(path), "\t" if p.suffix.lower() == ".tsv" else ",")
    rows = _joined(feed_all(feed, data))
    if feed.blank:
        raise ReadError(f"{path}: empty file")
    if feed.header is None:
        raise ReadError(f"{path}: no CSV header ()")
    if not rows:
        if not RowMapping(feed.header, columns).has_loss():
            raise no_loss_error(str(path), feed.header)
        raise ReadError(f"{path}: header only, no rows")
    return _build_rows(p, "metrics-csv", rows, [], columns)
