"""Step timing: a slowdown cliff, a data-loader-bound run, and throughput."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..core.model import DATA_TIME, STEP_TIME, THROUGHPUT, Hit, Level, Run
from ._stats import median, window_for
from .base import Context, NoLimits, METRICS, Rule, Skip, fmt, need, times

CLIFF_DOC = """Steps became much slower part-way through and stayed slow.

What it flags: the median step time of the last window is more than `max_ratio` times
the median of the first window.
Why it matters: a run that slows down 2x will take twice the hours budgeted — thermal
throttling, memory fragmentation, a growing eval or logging cost, swapping.
What it does not mean: the first steps' compilation/warm-up (the first window is the
reference, so a slow start cannot fire it).
"""


@dataclass(frozen=True, kw_only=True)
class CliffLimits:
    min_points: int = 6  # two windows of 3: fewer cannot tell a cliff from one slow step
    # Twice as slow: well past run-to-run jitter (~10-20%), the point where the budget
    # for the run is off by the run's own length.
    max_ratio: float = 2.0


def check_cliff(run: Run, limits: CliffLimits, ctx: Context) -> Iterator[Hit]:
    st = need(run, STEP_TIME, limits.min_points, "step time")
    w = window_for(len(st), divisor=5, lo=2, hi=50)
    early, late = median(st.values[:w]), median(st.values[-w:])
    if early <= 0:
        raise Skip("early step time is not positive")
    ratio = late / early
    if ratio > limits.max_ratio:
        # Point at the first step of the slow stretch.
        # (the late median is above the limit, so half the late window is)
        first_slow = next(i for i, v in enumerate(st.values) if v > limits.max_ratio * early)
        yield Hit(
            message=(
                f"step time rose from {fmt(early)} s to {fmt(late)} s ({times(ratio)}; limit "
                f"{limits.max_ratio}x), slow from step {st.steps[first_slow]}"
            ),
            evidence={"early_step_time": early, "late_step_time": late, "ratio": ratio,
                      "slow_from_step": st.steps[first_slow]},
            location=run.location(st.records[first_slow]),
        )


STEP_CLIFF_RULE = Rule(
    id="TP-STEP-CLIFF", name="step-time-cliff", level=Level.WARN, doc=CLIFF_DOC,
    limits=CliffLimits, check=check_cliff, needs=(STEP_TIME,), origin="trainproof",
    family=METRICS,
)

LOADER_DOC = """The run spends most of each step waiting for data.

What it flags: the median of data-loading time / step time exceeds `max_fraction`.
Why it matters: the accelerator idles while the loader works; more workers, pinned
memory or pre-tokenised data make the same run faster for free.
What it does not mean: anything about the model or its convergence.
"""


@dataclass(frozen=True, kw_only=True)
class LoaderLimits:
    min_points: int = 3  # a median of fewer steps is one step's accident
    # Half of every step waiting for data (the published trainproof number): beyond it
    # the loader, not the model, sets the speed.
    max_fraction: float = 0.5


def check_loader(run: Run, limits: LoaderLimits, ctx: Context) -> Iterator[Hit]:
    st = need(run, STEP_TIME, limits.min_points, "step time")
    dt = need(run, DATA_TIME, limits.min_points, "data-loading time")
    step_time = dict(zip(st.steps, st.values))
    pairs = [(i, d / step_time[s]) for i, (s, d) in enumerate(zip(dt.steps, dt.values))
             if step_time.get(s, 0) > 0]
    if len(pairs) < limits.min_points:
        raise Skip("too few steps with both step time and data-loading time")
    frac = median([f for _, f in pairs])
    if frac > limits.max_fraction:
        worst_i = max(pairs, key=lambda t: t[1])[0]
        yield Hit(
            message=(
                f"data loading takes {frac:.0%} of the median step (limit {limits.max_fraction:.0%}); "
                f"worst at step {dt.steps[worst_i]}"
            ),
            evidence={"median_fraction": frac, "steps_compared": len(pairs)},
            location=run.location(dt.records[worst_i]),
        )


LOADER_BOUND_RULE = Rule(
    id="TP-LOADER-BOUND", name="loader-bound", level=Level.WARN, doc=LOADER_DOC,
    limits=LoaderLimits, check=check_loader, needs=(STEP_TIME, DATA_TIME), origin="trainproof",
    family=METRICS,
)

THROUGHPUT_DOC = """Throughput of the run, for the record.

What it flags: nothing wrong — it reports the median throughput the log states (samples
or tokens per second), or steps per second from step times.
Why it matters: a baseline to compare runs and spot a slow machine.
What it does not mean: a verdict; it is INFO and never changes one.
"""


def _unit(name: str | None) -> str:
    """The unit after the number: the log's name for the series, or nothing when that
    name only says "throughput"."""
    if not name or "".join(c for c in name.lower() if c.isalpha()).endswith("throughput"):
        return ""
    return f" {name}"


def check_throughput(run: Run, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    tp = run.get(THROUGHPUT)
    if tp is not None and len(tp.finite()):
        tp = tp.finite()
        med = median(tp.values)
        yield Hit(
            # The log's own name is the unit ("train_samples_per_second"), said once when it is
            # just "throughput" (never "throughput 0 throughput").
            message=f"throughput {fmt(med)}{_unit(tp.source_name)} (median of {len(tp)} point(s))",
            evidence={"throughput": med, "unit": tp.source_name, "points": len(tp)},
            location=run.location(tp.records[-1]),
        )
        return
    st = run.get(STEP_TIME)
    if st is not None and len(st.finite()):
        st = st.finite()
        med = median(st.values)
        if med > 0:
            yield Hit(
                message=f"{fmt(1.0 / med)} steps/s (median step time {fmt(med)} s over {len(st)} steps)",
                evidence={"steps_per_second": 1.0 / med, "median_step_time": med, "points": len(st)},
                location=run.location(st.records[-1]),
            )
            return
    raise Skip("no throughput or step-time values in the log")


THROUGHPUT_RULE = Rule(
    id="TP-THROUGHPUT", name="throughput", level=Level.INFO, doc=THROUGHPUT_DOC,
    check=check_throughput, origin="trainproof",
    family=METRICS,
)
