"""Judging a run while it is written, at a per-log cost that does not grow with its history.

The rules are the registry's (`engine.judge_run`): there is no second copy of any rule or
threshold here. What this module adds is *when* and *over what* they run.

Growing columns (`LiveRun`)
---------------------------
A run being written is a set of per-series Python lists (steps, values, record indexes)
plus the source position of every record. A new log entry appends to them: O(1) per point
(amortised list growth), never a copy of the history.

Two evaluations, one verdict
----------------------------
- **tail**: `judge_run` over the last `tail_window` points of every series. Its cost is
  bounded by the window, whatever the history length. It is a *trigger* only: its
  findings are never published, because some rules mean something else on a window
  (TP-DEAD-RUN stands down on a late-starting window; TP-ZERO-LR sees only the window).
- **full**: `judge_run` over the whole history — exactly what `trainproof-lsp epoch`
  says about the log so far. Every published verdict is a full one.

The schedule: a credit account
------------------------------
Each new record earns `budget` credits; a full evaluation of a run of n records costs n.
After each batch of new records:

1. while n <= tail_window, the whole run *is* the tail: a full evaluation every time
   (cost <= tail_window);
2. otherwise the tail is evaluated (cost <= tail_window), and a full evaluation runs when
   - credit >= n: *scheduled* — the run grew by n/budget records since the last one, a
     geometric schedule (ratio 1 + 1/budget) that still catches what only the whole
     history shows (no improvement since the start, a zero learning rate throughout); or
   - the tail's FAIL/WARN rule ids changed and credit >= 0: *triggered* — it may borrow
     one evaluation, repaid by the next n/budget records, so the first sign of trouble
     is confirmed by the whole history at once.

Every full evaluation spends n credits, and credits are only earned by records, so over a
run of N records all full evaluations together cost at most budget*N + N (the one
outstanding loan): O(1) amortised per record. The tail costs O(tail_window) per
evaluation. So the cost of a log call is O(new points + tail_window + budget), independent
of how long the run already is; `Stats` counts the work so a test can prove it
(tests/test_guardian_incremental.py) and benchmarks/bench_guardian.py times it.

A finding's latency: anything the tail window shows (NaN, a spike that does not recover,
divergence from a level inside the window, a loss above ln(V)) is published at the log
that shows it; anything only the whole history shows, later — but never by more than the
lag bound below.

The lag bound (while the run grows)
-----------------------------------
After any full evaluation at n0 records the credit is >= -n0 (a scheduled one leaves it
>= 0, a triggered one borrows at most n0, a forced one is clamped there), and each record
earns `budget`, so the next scheduled evaluation comes within 2*n0/(budget-1) records.
Hence, between two calls, the published report covers at least the first
ceil((budget-1)/(budget+1) * n) - 1 of the run's n records (60% with the default budget
4), and the whole run while n <= tail_window. `lag_bound` states it and
tests/test_guardian_property.py checks it on random schedules.

Settling (when the log is quiet)
--------------------------------
`settle` evaluates in full whenever the published report is not over every record there
is. The callers settle whenever the run is quiet — `watch` on a poll that found nothing
new, on a stall, at its end and on Ctrl-C; the callbacks at `on_train_end`, at a
checkpoint save (HF) and when the fit is interrupted (Lightning) — and before a FAIL is
confirmed. So whenever the log is quiet the live verdict is exactly `epoch`'s on the same
bytes. A settle is not charged to the credit (it is at most one full evaluation per quiet
spell, and charging it would stretch the lag bound); `Stats.settled` counts them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..core.config import Config
from ..judge.engine import judge_run, not_checked
from ..core.columns import Floats, Ints
from ..core.model import (
    EVAL_LOSS,
    LOSS,
    Finding,
    Level,
    RecordSpans,
    Report,
    Run,
    RunMeta,
    Series,
    Span,
)


class LiveRun:
    """A run's metrics as growing columns. Appends are O(1); `snapshot()` (the whole run)
    is O(n); `tail(w)` (the last w points of each series) is O(w)."""

    def __init__(self, *, path: str, format: str, meta: RunMeta | None = None,
                 sources: tuple[str, ...] = ()) -> None:
        self._reset(path=path, format=format, meta=meta, sources=sources)

    def _reset(self, *, path: str, format: str, meta: RunMeta | None, sources: tuple[str, ...]) -> None:
        self.path = path
        self.format = format
        self.meta = meta or RunMeta()
        self.sources = sources or (path,)
        self.records = 0  # records (log entries, rows, event records) so far
        # Typed columns (core/columns.py): a watched run of millions of points costs
        # 8 bytes a number, not a Python object each.
        self._steps: dict[str, Ints] = {}
        self._values: dict[str, Floats] = {}
        self._records: dict[str, Ints] = {}
        self._source: dict[str, str] = {}
        # Source positions, one per record: text spans or byte offsets (or neither, for
        # an in-process callback, whose records are its log calls).
        self._sl = Ints()
        self._sc = Ints()
        self._el = Ints()
        self._ec = Ints()
        self._offsets = Ints()
        self.notes: list[tuple[int, str]] = []
        # Notes about the whole log that lead the list, by key (e.g. a count of bad
        # lines, restated as it grows), as a reader puts them first.
        self.lead_notes: dict[str, tuple[int, str]] = {}
        self.unmapped: tuple[str, ...] = ()

    # --- growing --------------------------------------------------------------------
    def new_record(self, *, span: Span | None = None, byte_offset: int | None = None) -> int:
        """Open the next record; returns its index for `add`."""
        if span is not None:
            self._sl.append(span.start_line)
            self._sc.append(span.start_char)
            self._el.append(span.end_line)
            self._ec.append(span.end_char)
        if byte_offset is not None:
            self._offsets.append(byte_offset)
        self.records += 1
        return self.records - 1

    def add(self, name: str, source: str, step: int, value: float, record: int) -> None:
        steps = self._steps.get(name)
        if steps is None:
            steps = self._steps[name] = Ints()
            self._values[name] = Floats()
            self._records[name] = Ints()
            self._source[name] = source
        steps.append(step)
        self._values[name].append(value)
        self._records[name].append(record)

    def replace(self, run: Run) -> None:
        """Take a whole re-read run (a file its writer rewrites whole, or rewrote)."""
        self._reset(path=run.path, format=run.format, meta=run.meta, sources=run.sources)
        for name, s in run.series.items():
            # Copies: the run's columns may be shared, and these grow.
            self._steps[name], self._values[name] = Ints(s.steps), Floats(s.values)
            self._records[name], self._source[name] = Ints(s.records), s.source_name
        rs = run.record_spans
        self._sl, self._sc = Ints(rs.start_lines), Ints(rs.start_chars)
        self._el, self._ec = Ints(rs.end_lines), Ints(rs.end_chars)
        self._offsets = Ints(rs.byte_offsets)
        self.records = max(len(rs.start_lines), len(rs.byte_offsets),
                           max((r[-1] + 1 for r in self._records.values() if r), default=0))
        self.notes = list(run.notes)
        self.unmapped = run.unmapped

    # --- reading --------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return bool(self._steps.get(name))

    def last_step(self) -> int | None:
        """The largest step logged in any series (the run's progress)."""
        return max((s[-1] for s in self._steps.values() if s), default=None)

    def points(self) -> int:
        return sum(len(s) for s in self._steps.values())

    def series_names(self) -> tuple[str, ...]:
        return tuple(self._steps)

    def snapshot(self) -> Run:
        # Copies (a memcpy per column): the snapshot stays as it is while the run grows.
        series = {name: Series(name, self._source[name], Ints(self._steps[name]),
                               Floats(self._values[name]), Ints(self._records[name]))
                  for name in self._steps}
        spans = RecordSpans(start_lines=Ints(self._sl), start_chars=Ints(self._sc),
                            end_lines=Ints(self._el), end_chars=Ints(self._ec),
                            byte_offsets=Ints(self._offsets))
        return Run(path=self.path, format=self.format, series=series, record_spans=spans,
                   meta=self.meta, sources=self.sources, unmapped=self.unmapped,
                   notes=(*self.lead_notes.values(), *self.notes))

    def tail(self, window: int) -> Run:
        """The last `window` points of each series, records numbered as in the whole run.
        No source positions: tail findings are never published (see the module doc)."""
        series = {name: Series(name, self._source[name], self._steps[name][-window:],
                               self._values[name][-window:], self._records[name][-window:])
                  for name in self._steps}
        return Run(path=self.path, format=self.format, series=series, record_spans=RecordSpans(),
                   meta=self.meta, sources=self.sources)


def judge_live(run: Run, config: Config, *, extra: Iterable[Finding] = (),
               columns: Iterable[str] = ()) -> Report:
    """judge_run, except that a run with no loss (yet) is NOT-CHECKED, as the readers
    make a finished log without a loss column."""
    if run.get(LOSS) is None and run.get(EVAL_LOSS) is None:
        seen = ", ".join(sorted(set(columns))[:30]) or "none"
        return not_checked(run.path, "metrics", run.format,
                           f"{run.path}: no loss logged yet (columns seen: {seen})")
    return judge_run(run, config, extra=extra)


# (verdict, sorted (rule id, level) of its FAIL/WARN findings)
FindingKey = tuple[str, tuple[tuple[str, str], ...]]


def finding_key(report: Report) -> FindingKey:
    """What makes a verdict *change*: the verdict and the ids of its FAIL/WARN findings
    (their numbers move with every log; their ids do not)."""
    ids = sorted({(f.id, f.level.value) for f in report.findings if f.level in (Level.FAIL, Level.WARN)})
    return (report.verdict.value, tuple(ids))


def verdict_change(report: Report, said: FindingKey | None) -> tuple[FindingKey, str | None] | None:
    """None when `report` says what `said` said; else its key, to remember, and the verdict
    it changes from (None for the first one). The callbacks and `watch` announce a verdict
    only on such a change."""
    key = finding_key(report)
    if key == said:
        return None
    return key, said[0] if said else None


@dataclass(frozen=True, kw_only=True)
class Schedule:
    # Points per series in the tail evaluation: three times the widest look of any
    # registry rule (20-point level medians, 10 points before and 10 after a spike),
    # and ~0.2 ms per log (benchmarks/bench_guardian.py).
    tail_window: int = 128
    # Full-evaluation credit per new record: a full evaluation at least every time the
    # run grows by 25%, and all of them together cost at most 5x the records.
    budget: float = 4.0


@dataclass
class Stats:
    """Work done, in the units of the cost model (records for full, points for tail)."""

    logs: int = 0
    tail_evals: int = 0
    tail_points: int = 0
    full_evals: int = 0
    full_records: int = 0
    triggered: int = 0
    settled: int = 0  # full evaluations a quiet spell (or a confirmation) asked for


@dataclass
class IncrementalJudge:
    """Decides when to evaluate a LiveRun and keeps its latest full report."""

    config: Config
    schedule: Schedule = field(default_factory=Schedule)
    stats: Stats = field(default_factory=Stats)
    report: Report | None = None
    _credit: float = 0.0
    _seen: int = 0
    _pending: bool = False
    _tail_key: FindingKey | None = None
    # What the published report was evaluated over: (records, extra findings, tag), the
    # tag naming a view of the run beyond its records (see `settle`); None: nothing yet.
    judged: tuple[int, tuple[Finding, ...], int] | None = None

    def lag_bound(self, n: int) -> int:
        """The most records the published report may leave out while a run of n records
        grows (see "The lag bound" in the module doc)."""
        if n <= self.schedule.tail_window:
            return 0
        b = self.schedule.budget
        return n - max(0, math.ceil((b - 1) / (b + 1) * n) - 1)

    def settle(self, live: LiveRun, *, extra: Iterable[Finding] = (), columns: Iterable[str] = (),
               view: LiveRun | None = None, tag: int = 0) -> Report | None:
        """The run is quiet: evaluate in full if the published report is stale, so that it
        is `epoch`'s verdict on the same records. `view` (named by a nonzero `tag`) is
        judged instead of `live`: the run plus what a whole-file read adds at its end (a
        last line not ended yet), without changing `live`. Returns the new report, or
        None when the published one is already current (or there is nothing to judge)."""
        extra = tuple(extra)
        run = live if view is None else view
        if run.records == 0 and self.report is None:
            return None
        if self.report is not None and self.judged == (live.records, extra, tag):
            return None
        self.stats.settled += 1
        return self._full(run, extra, columns, charge=False, key=(live.records, extra, tag))

    def update(self, live: LiveRun, *, extra: Iterable[Finding] = (), force: bool = False,
               columns: Iterable[str] = ()) -> Report | None:
        """Account for the records added since the last call; returns a new full report
        when one was evaluated (else None: the published verdict stands)."""
        n = live.records
        new = n - self._seen
        if new <= 0 and not force:
            return None
        self._seen = n
        self._credit += self.schedule.budget * max(new, 0)
        self.stats.logs += 1
        extra = tuple(extra)
        w = self.schedule.tail_window
        if n <= w:
            return self._full(live, extra, columns, charge=False)
        if force:
            return self._full(live, extra, columns, charge=True)
        tail_run = live.tail(w)
        self.stats.tail_evals += 1
        self.stats.tail_points += sum(len(s) for s in tail_run.series.values())
        key = finding_key(judge_live(tail_run, self.config, extra=extra, columns=columns))
        if key != self._tail_key:
            self._pending = self._tail_key is not None or self.report is None
            self._tail_key = key
        if self._credit >= n:
            return self._full(live, extra, columns, charge=True)
        if self._pending and self._credit >= 0:
            self.stats.triggered += 1
            return self._full(live, extra, columns, charge=True)
        return None

    def _full(self, live: LiveRun, extra: tuple[Finding, ...], columns: Iterable[str], *,
              charge: bool, key: tuple[int, tuple[Finding, ...], int] | None = None) -> Report:
        n = live.records
        if charge:
            # Clamped at -n (a forced evaluation may come without credit): the lag
            # bound rests on the credit never being below minus the records judged.
            self._credit = max(self._credit - n, -float(n))
        self._pending = False
        self.judged = key or (n, extra, 0)
        self.stats.full_evals += 1
        self.stats.full_records += n
        self.report = judge_live(live.snapshot(), self.config, extra=extra, columns=columns)
        return self.report
