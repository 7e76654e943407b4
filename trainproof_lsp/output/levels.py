"""The levels a finding's rule judged, placed on the points they were computed from, for
the HTML report to draw over the raw curve.

Trend rules judge robust levels (window medians), not single points, so on a noisy log a
FAIL is hard to see from the raw curve alone: the report draws each level as a
horizontal line over the steps of its window. The value comes from the finding's
evidence (`end_level`, `best_level`, `level_before`, ...); the window comes from the
evidence where it names one (`window`, `step`..`last_step`, `points_after`) and is
otherwise found by trying the window sizes the rule may have used at the place the
evidence cites. Either way a window is drawn only when the median of its points equals
the evidence's level: a level the renderer cannot place on the drawn points (a view the
chart does not show, a limit changed by the configuration to a size not tried) is left
undrawn, never drawn in the wrong place. Nothing here judges: it locates numbers a rule
already reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from ..core.model import LOSS, Finding, Series
from ..rules._stats import median, window_for

# Window sizes tried when the evidence does not name the window: the rules' windows are
# 3-20 points (window_for's clamps) and the spike rules' `before` is 10 by default;
# 200 bounds the search on a long log (a median of each size at one anchor) while
# covering any window a configuration would sensibly set.
MAX_SEARCHED_WINDOW = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelSpan:
    """A level a rule judged: `value` is the median of the points at indexes
    `lo`..`hi` (inclusive) of the series it judged, steps `first_step`..`last_step`."""

    name: str  # what the level is to the finding: "end level", "best level", "level before"
    value: float
    lo: int
    hi: int
    first_step: int
    last_step: int


Evidence = Mapping[str, object]


def _number(ev: Evidence, key: str) -> float | None:
    v = ev.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _count(ev: Evidence, key: str) -> int | None:
    v = _number(ev, key)
    return int(v) if v is not None and v == int(v) and v >= 0 else None


def _same(a: float, b: float) -> bool:
    # The evidence holds the very float the rule computed with the same median; the
    # tolerance only absorbs a value that went through a text round trip.
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


def _span(name: str, s: Series, values: Sequence[float], value: float,
          windows: Iterable[tuple[int, int]]) -> LevelSpan | None:
    """The first window (lo, hi inclusive, inside the series) whose median is `value`."""
    n = len(values)
    for lo, hi in windows:
        if 0 <= lo <= hi < n and _same(median(values[lo:hi + 1]), value):
            return LevelSpan(name=name, value=value, lo=lo, hi=hi, first_step=s.steps[lo], last_step=s.steps[hi])
    return None


def _sizes(first: int | None) -> list[int]:
    """Window sizes to try: the rule's usual size first, then every size up to the bound."""
    rest = list(range(1, MAX_SEARCHED_WINDOW + 1))
    return ([first] if first else []) + [w for w in rest if w != first]


def _index(s: Series, step: float | None) -> int | None:
    if step is None:
        return None
    try:
        return list(s.steps).index(int(step))
    except ValueError:
        return None


def _diverge(ev: Evidence, s: Series, v: Sequence[float]) -> list[LevelSpan | None]:
    # end_level: the median of the last `window` points; best_level: the lowest rolling
    # median, a window of `window` points holding the best step (its lowest point).
    n, w = len(v), _count(ev, "window")
    end, best, at = _number(ev, "end_level"), _number(ev, "best_level"), _index(s, _number(ev, "best_step"))
    out: list[LevelSpan | None] = []
    if w and end is not None:
        out.append(_span("end level", s, v, end, [(n - w, n - 1)]))
    if w and best is not None and at is not None:
        # rolling_levels' windows end at each point, the first w-1 of them shorter (from
        # the first point); of those holding the best step, the earliest with the best
        # level is the one the rule chose.
        out.append(_span("best level", s, v, best, [(max(0, hi - w + 1), hi) for hi in range(at, min(n, at + w))]))
    return out


def _dead(ev: Evidence, s: Series, v: Sequence[float]) -> list[LevelSpan | None]:
    # start_level and end_level: medians of the first and last w points, one w for both.
    n = len(v)
    start, end = _number(ev, "start_level"), _number(ev, "end_level")
    if start is None or end is None:
        return []
    for w in _sizes(window_for(n, divisor=5, lo=3, hi=20)):
        if w > n:
            continue
        a = _span("start level", s, v, start, [(0, w - 1)])
        b = _span("end level", s, v, end, [(n - w, n - 1)])
        if a is not None and b is not None:
            return [a, b]
    return []


def _from_step_to_last(ev: Evidence, s: Series, v: Sequence[float]) -> list[LevelSpan | None]:
    # TP-LOSS-ABOVE-UNIFORM, TP-AT-CHANCE: `level` is the median of steps step..last_step.
    lo, hi = _index(s, _number(ev, "step")), _index(s, _number(ev, "last_step"))
    level = _number(ev, "level")
    if lo is None or hi is None or level is None:
        return []
    return [_span("level", s, v, level, [(lo, hi)])]


def _spike(ev: Evidence, s: Series, v: Sequence[float]) -> list[LevelSpan | None]:
    # level_before: the median of up to `before` points before the spike (10 unless
    # configured); level_after: the median of the `points_after` points after it.
    at = _index(s, _number(ev, "step"))
    before, after, k = _number(ev, "level_before"), _number(ev, "level_after"), _count(ev, "points_after")
    if at is None:
        return []
    out: list[LevelSpan | None] = []
    if before is not None:
        out.append(_span("level before", s, v, before, [(max(0, at - w), at - 1) for w in _sizes(10)]))
    if after is not None and k:
        out.append(_span("level after", s, v, after, [(at + 1, at + k)]))
    return out


# rule ID -> how its levels are placed. A rule not here has no level to draw (its
# evidence holds points, counts or ratios, which the marks already show).
PLACERS: dict[str, Callable[[Evidence, Series, Sequence[float]], list[LevelSpan | None]]] = {
    "TP-DIVERGE": _diverge,
    "TP-DEAD-RUN": _dead,
    "TP-LOSS-ABOVE-UNIFORM": _from_step_to_last,
    "TP-AT-CHANCE": _from_step_to_last,
    "TP-LOSS-SPIKE": _spike,
    "TP-LOSS-SPIKE-UNRECOVERED": _spike,
}


# --- comparison rules: levels on the run's and the baseline's loss ----------------------

# The sizes tried around a cited point: a floor's window (3-20 points) holds it, and
# every size up to this is tried at every offset (some 1,300 medians at most).
MAX_AROUND_WINDOW = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    """One side of a comparison as the renderer has it: the finite loss in step order and
    the indexes `lo`..`hi` (inclusive) of its points in the common span."""

    series: Series
    lo: int
    hi: int
    head: int | None = None  # the start window's size when the defaults aligned them
    tail: int | None = None  # the end window's


def _head(name: str, side: Side, value: float | None) -> LevelSpan | None:
    if value is None:
        return None
    v = list(side.series.values)
    return _span(name, side.series, v, value, [(side.lo, side.lo + w - 1) for w in _sizes(side.head)])


def _tail(name: str, side: Side, value: float | None, size: int | None = None) -> LevelSpan | None:
    if value is None:
        return None
    v = list(side.series.values)
    return _span(name, side.series, v, value, [(side.hi - w + 1, side.hi) for w in _sizes(size or side.tail)])


def _around(name: str, side: Side, value: float | None, step: float | None) -> LevelSpan | None:
    at = _index(side.series, step)
    if value is None or at is None:
        return None
    v = list(side.series.values)
    n = side.hi - side.lo + 1
    first = window_for(n, divisor=10, lo=3, hi=20)  # the floor's window (rules/compare._floor)
    sizes = [first] + [w for w in range(1, MAX_AROUND_WINDOW + 1) if w != first]
    return _span(name, side.series, v, value, [(hi - w + 1, hi) for w in sizes for hi in range(at, at + w)
                                               if side.lo <= hi - w + 1 and hi <= side.hi])


PairSpans = list[tuple[bool, LevelSpan | None]]  # (on the baseline?, the level)


def _floor(ev: Evidence, run: Side, base: Side) -> PairSpans:
    return [(False, _around("floor", run, _number(ev, "run_floor"), _number(ev, "run_floor_step"))),
            (True, _around("floor", base, _number(ev, "baseline_floor"), _number(ev, "baseline_floor_step")))]


def _end_ratio(ev: Evidence, run: Side, base: Side) -> PairSpans:
    # The run's end window holds `points` points.
    return [(False, _tail("end level", run, _number(ev, "run_end_level"), _count(ev, "points"))),
            (True, _tail("end level", base, _number(ev, "baseline_end_level")))]


def _improvement(ev: Evidence, run: Side, base: Side) -> PairSpans:
    # The baseline's start and end levels, the improvement the run's is measured against.
    return [(True, _head("start level", base, _number(ev, "baseline_start_level"))),
            (True, _tail("end level", base, _number(ev, "baseline_end_level")))]


PAIR_PLACERS: dict[str, Callable[[Evidence, Side, Side], PairSpans]] = {
    "TP-FLOOR-RATIO": _floor,
    "TP-END-RATIO": _end_ratio,
    "TP-NEG-IMPROVE": _improvement,
    "TP-IMPROVE-DEFICIT": _improvement,
}


def pair_level_spans(f: Finding, run: Side, base: Side) -> list[tuple[bool, LevelSpan]]:
    """The levels a comparison finding judged, each on the run's or the baseline's loss."""
    placer = PAIR_PLACERS.get(f.id)
    if placer is None:
        return []
    return [(on_base, x) for on_base, x in placer(f.evidence, run, base) if x is not None]


def judged_series(f: Finding) -> str:
    """The series a level rule judged: the evidence's `series` when it names a view,
    else the train loss."""
    name = f.evidence.get("series")
    return name if isinstance(name, str) else LOSS


def level_spans(f: Finding, series: Series | None) -> list[LevelSpan]:
    """The levels of `f` placed on `series` (the series its rule judged, as logged; its
    finite points are the ones a rule reads), in the order the rule names them."""
    placer = PLACERS.get(f.id)
    if placer is None or series is None:
        return []
    s = series.finite()
    return [x for x in placer(f.evidence, s, list(s.values)) if x is not None]


__all__ = ["MAX_AROUND_WINDOW", "MAX_SEARCHED_WINDOW", "PAIR_PLACERS", "PLACERS", "LevelSpan", "Side",
           "judged_series", "level_spans", "pair_level_spans"]
