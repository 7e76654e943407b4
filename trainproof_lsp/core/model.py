"""The records that cross module boundaries.

Readers produce them, rules read them, the engine turns rule hits into findings and
reports, renderers print them. Everything here is frozen: once a reader has said what a
file holds, nobody downstream changes it.

Metric series are columnar (`steps`, `values`, `records` as parallel typed arrays,
core/columns.py) because a 200k-entry trainer_state.json must be read and judged in about
the time a plain `json.load` takes, and a run of tens of millions of scalars must fit in
memory; one object per point would cost more than the parse, and 5x the bytes. A point's source
position is found through its record index (`Run.span_of(record)`), so spans are only
materialised for the handful of points a finding cites.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from enum import Enum
from itertools import compress
from typing import Any, Iterable, Mapping

from .columns import Floats, Ints, floats, ints


class Level(str, Enum):
    """A finding's weight. Only FAIL and WARN change a verdict."""

    FAIL = "FAIL"
    WARN = "WARN"
    INFO = "INFO"
    NOT_CHECKED = "NOT-CHECKED"


# The one order of finding levels, most severe first, as the verdicts' (CONTRACTS.md:
# FAIL > WARN > NOT-CHECKED): a report lists its findings in it and the editor sorts
# a file's diagnostics by it. INFO never changes a verdict, so it comes last.
LEVEL_ORDER: tuple[Level, ...] = (Level.FAIL, Level.WARN, Level.NOT_CHECKED, Level.INFO)
LEVEL_RANK: Mapping[Level, int] = {level: i for i, level in enumerate(LEVEL_ORDER)}


class Verdict(str, Enum):
    """A report's outcome. Severity order: FAIL > WARN > NOT-CHECKED > PASS."""

    FAIL = "FAIL"
    WARN = "WARN"
    NOT_CHECKED = "NOT-CHECKED"
    PASS = "PASS"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]


_SEVERITY = {Verdict.PASS: 0, Verdict.NOT_CHECKED: 1, Verdict.WARN: 2, Verdict.FAIL: 3}


def worst(verdicts: "list[Verdict] | tuple[Verdict, ...]") -> Verdict:
    """The most severe verdict; PASS for none."""
    return max(verdicts, key=_SEVERITY.__getitem__, default=Verdict.PASS)


@dataclass(frozen=True, slots=True)
class Span:
    """A 0-based range in a text file; characters are code points (see positions.py)."""

    start_line: int
    start_char: int
    end_line: int
    end_char: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Location:
    """Where a finding points: a text range, or a byte offset / record of a binary file."""

    path: str
    span: Span | None = None
    byte_offset: int | None = None
    record: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Related:
    """The other end of a finding's evidence (the best step, the first duplicate)."""

    location: Location
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Edit:
    """Replace the text at `span` of the finding's file with `new_text` (an empty span
    inserts)."""

    span: Span
    new_text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Fix:
    """A mechanical fix of a finding: the editor offers it as a quick fix, the CLI prints
    it. `safe`: applying it cannot change what the run was meant to do (a renamed
    keyword), so it may be applied without review (`source.fixAll`)."""

    title: str
    edits: tuple[Edit, ...]
    safe: bool = False


# --- metric runs -----------------------------------------------------------------------

# Canonical series names. Readers map their formats' column/tag names onto these.
LOSS = "loss"
EVAL_LOSS = "eval_loss"
LR = "lr"
GRAD_NORM = "grad_norm"
STEP_TIME = "step_time"  # seconds per optimizer step
DATA_TIME = "data_time"  # seconds per step spent waiting for the data loader
THROUGHPUT = "throughput"  # samples (or tokens) per second, as the log states it
EPOCH = "epoch"
# The same train loss averaged per epoch, when the log also carries it per step (Lightning
# `train_loss_epoch` beside `train_loss_step`): the smoother view trend rules judge.
LOSS_EPOCH = "loss_epoch"
# Held-out accuracy (a fraction in [0, 1]): near 1/C it corroborates a classifier at chance.
EVAL_ACCURACY = "eval_accuracy"

# fp16 dynamic loss scaling, as a text log states it (DeepSpeed's overflow lines, Megatron's
# `loss scale:`): the scale in effect, and each point where the scaler said it could go no
# lower. Read by rules/loss_scale.py; not mappable from a metric table's columns.
LOSS_SCALE = "loss_scale"
LOSS_SCALE_AT_MINIMUM = "loss_scale_at_minimum"

SERIES_NAMES = (LOSS, EVAL_LOSS, LR, GRAD_NORM, STEP_TIME, DATA_TIME, THROUGHPUT, EPOCH, LOSS_EPOCH,
                EVAL_ACCURACY)

# Named parts of a composite train loss (`recon_loss`, `kl_loss`, `loss_ce`, `aux_loss`...),
# each a series of its own named LOSS_PART + the column it was read from. Read from metric
# tables and trainer_state.json (readers/metrics.map_columns); judged by rules/loss_parts.py.
LOSS_PART = "loss_part:"


def loss_parts(series: Mapping[str, "Series"]) -> list[str]:
    """The names of a run's loss-part series, in a stable order."""
    return sorted(n for n in series if n.startswith(LOSS_PART))


@dataclass(frozen=True, init=False, eq=True)
class Series:
    """One metric over steps: parallel typed columns (core/columns.py); `records[i]`
    indexes `Run.record_spans`. Built from any iterables (tuples, lists, arrays); an
    `Ints`/`Floats` column is kept as it is, without a copy.

    Not slotted: `finite()` is cached on the instance, because a dozen rules ask for it
    and a 200k-point series should be filtered once, not a dozen times.
    """

    name: str
    source_name: str  # the column / key / tag it was read from, e.g. "train/loss"
    steps: Ints
    values: Floats
    records: Ints

    def __init__(self, name: str, source_name: str, steps: Iterable[int], values: Iterable[float],
                 records: Iterable[int]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "source_name", source_name)
        object.__setattr__(self, "steps", ints(steps))
        object.__setattr__(self, "values", floats(values))
        object.__setattr__(self, "records", ints(records))

    __hash__ = None  # type: ignore[assignment]  # columns are arrays

    def __len__(self) -> int:
        return len(self.values)

    @cached_property
    def all_finite(self) -> bool:
        # sum() runs in C; NaN/Inf poison it. A finite sum proves every value finite; an
        # infinite one can also be overflow, so that case is checked value by value.
        if math.isfinite(sum(self.values)):
            return True
        return all(map(math.isfinite, self.values))

    @cached_property
    def _finite(self) -> "Series":
        if self.all_finite:
            return self
        keep = [math.isfinite(v) for v in self.values]
        return Series(
            self.name,
            self.source_name,
            compress(self.steps, keep),
            compress(self.values, keep),
            compress(self.records, keep),
        )

    def finite(self) -> "Series":
        """The same series without NaN/Inf points."""
        return self._finite


@dataclass(frozen=True, slots=True, init=False)
class RecordSpans:
    """Source range of every record (log entry, JSONL line, CSV row) of a run.

    Stored as parallel typed columns rather than Span objects, for speed and memory;
    `span(i)` builds the Span for the one record a finding needs. Built from any
    iterables, keyword-only.
    """

    start_lines: Ints
    start_chars: Ints
    end_lines: Ints
    end_chars: Ints
    # For runs read from several files (MLflow metric files, merged event shards): the
    # index into Run.sources of the file each record came from. Empty: all from Run.path.
    files: Ints
    # For binary sources: the byte offset of each record (event files); else empty.
    byte_offsets: Ints

    def __init__(self, *, start_lines: Iterable[int] = (), start_chars: Iterable[int] = (),
                 end_lines: Iterable[int] = (), end_chars: Iterable[int] = (),
                 files: Iterable[int] = (), byte_offsets: Iterable[int] = ()) -> None:
        object.__setattr__(self, "start_lines", ints(start_lines))
        object.__setattr__(self, "start_chars", ints(start_chars))
        object.__setattr__(self, "end_lines", ints(end_lines))
        object.__setattr__(self, "end_chars", ints(end_chars))
        object.__setattr__(self, "files", ints(files))
        object.__setattr__(self, "byte_offsets", ints(byte_offsets))

    __hash__ = None  # type: ignore[assignment]

    def span(self, record: int) -> Span | None:
        if 0 <= record < len(self.start_lines):
            return Span(
                self.start_lines[record],
                self.start_chars[record],
                self.end_lines[record],
                self.end_chars[record],
            )
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunMeta:
    """What a log says about its run besides the metric series."""

    max_steps: int | None = None
    logging_steps: int | None = None
    best_step: int | None = None
    best_checkpoint: str | None = None  # as the log names it
    # Steps for which a checkpoint folder exists next to the log (checkpoint-<step>/).
    checkpoint_steps: tuple[int, ...] = ()
    vocab_size: int | None = None  # from an adjacent config.json, if any
    vocab_source: str | None = None  # where vocab_size came from


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """A training run's metrics, as one or more files recorded them."""

    path: str  # the main source file; findings without a span point here
    format: str  # e.g. "hf-trainer-state", "metrics-jsonl", "metrics-csv"
    series: Mapping[str, Series]
    record_spans: RecordSpans
    meta: RunMeta = field(default_factory=RunMeta)
    sources: tuple[str, ...] = ()
    # Columns/keys the reader saw but did not map (kept for messages, never judged).
    unmapped: tuple[str, ...] = ()
    # Problems the reader met but could read past (a bad row, a duplicate step...):
    # (record index, message).
    notes: tuple[tuple[int, str], ...] = ()
    # Derived values rules share while judging this run (e.g. one spike scan for the two
    # spike rules). Not part of the run's identity.
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def get(self, name: str) -> Series | None:
        s = self.series.get(name)
        return s if s is not None and len(s) else None

    def location(self, record: int | None) -> Location:
        rs = self.record_spans
        path = self.path
        if record is not None and 0 <= record < len(rs.files) and rs.files[record] < len(self.sources):
            path = self.sources[rs.files[record]]
        if record is not None and 0 <= record < len(rs.byte_offsets):
            return Location(path=path, byte_offset=rs.byte_offsets[record], record=record)
        span = rs.span(record) if record is not None else None
        return Location(path=path, span=span, record=record if span is None else None)


# --- what rules give back and reports carry ---------------------------------------------

Number = float | int | str | bool | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    """A rule firing: the message states the numbers, the evidence carries them."""

    message: str
    evidence: Mapping[str, Number]
    location: Location
    related: tuple[Related, ...] = ()
    fix: Fix | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    id: str
    level: Level
    message: str
    evidence: Mapping[str, Number]
    location: Location
    related: tuple[Related, ...] = ()
    limits: Mapping[str, Number] = field(default_factory=dict)
    fix: Fix | None = None  # edits in location.path's text


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """A check group and whether it ran; `reason` says why it did not."""

    group: str
    ran: bool
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Artefact:
    path: str
    kind: str  # "metrics", "dataset", "checkpoint", ...
    format: str
    sources: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """One run of a log that holds several runs appended one after another (the step goes
    back to the start): judged on its own, as a sub-report of the file's report. Lines are
    0-based, as in locations; `findings` are the ids of the report's findings from it."""

    index: int  # 1-based: run 1 of N
    first_line: int | None
    last_line: int | None
    first_step: int
    last_step: int
    points: int  # loss points (eval points when the log has no train loss)
    verdict: Verdict
    findings: tuple[str, ...]
    checks: tuple[Check, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    artefact: Artefact
    verdict: Verdict
    findings: tuple[Finding, ...]
    checks: tuple[Check, ...]
    # One line, set when the artefact could not be judged at all (verdict NOT-CHECKED).
    reason: str = ""
    # A run judged against a baseline (compare.py): the baseline, and the aligned numbers
    # (JSON `baseline` and `comparison`, CONTRACTS.md §5). None / empty otherwise.
    baseline: Artefact | None = None
    comparison: Mapping[str, Number] = field(default_factory=dict, hash=False)
    # A log of several appended runs: each run's sub-report (JSON `segments`). Empty for
    # a log of one run.
    segments: tuple[Segment, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class NotJudged:
    """A file that looked like something to judge but was not, and why."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """Everything one CLI invocation produced."""

    reports: tuple[Report, ...]
    not_judged: tuple[NotJudged, ...] = ()
    # Files recognised as ordinary residents of a run folder that need no judgement
    # (e.g. training_args.bin, a pickled TrainingArguments): listed, never opened.
    passed_over: tuple[NotJudged, ...] = ()
    error: str = ""

    @property
    def worst_verdict(self) -> Verdict:
        verdicts = [r.verdict for r in self.reports]
        if self.not_judged or self.error:
            verdicts.append(Verdict.NOT_CHECKED)
        return worst(verdicts)


class ReadError(Exception):
    """A file could not be read as what it claims to be. The message is one line and
    names the file position when there is one; it becomes a NOT-CHECKED reason."""

    def __init__(self, message: str, *, span: Span | None = None) -> None:
        super().__init__(message)
        self.span = span


Evidence = dict[str, Any]
