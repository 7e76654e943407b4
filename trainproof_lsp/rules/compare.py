"""Comparison rules: a run judged against a known-good baseline run of the same task.

Loss curves alone cannot tell a run that learns from one that memorises noise: a run
trained on shuffled labels still cuts its loss by half and looks healthy on its own
curve. Beside a healthy run of the same task, its loss floor is several times higher.

Everything here works on an aligned pair (`align`): the two runs are put on a common
axis (the optimizer step, or the fraction of the schedule when their steps do not
overlap), cut to the span both logs cover, and judged on robust levels — medians of
windows at the same steps — never on whole-run extremes or single points. Where both
runs logged the same steps (or the baseline can be interpolated at the run's steps),
start and end are read as the median of the matched run/baseline ratios, so the
batch-to-batch difficulty two runs with the same data order share cancels out.

The alignment's own numbers (how many points, which windows) are the limits of
TP-CMP-UNCOMPARABLE, the rule that says when two runs cannot be aligned at all. Rules
never read files: the engine (trainproof_lsp/judge/compare.py) builds the pair.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from itertools import pairwise
from typing import Iterator, Sequence

from ..core.model import EVAL_LOSS, GRAD_NORM, LOSS, Hit, Level, Location, Related, Report, Run, Series, Verdict
from ._stats import median, rolling_levels, window_for
from .base import Context, Family, NoLimits, Rule, Skip, fmt, times


class Uncomparable(Exception):
    """The two runs cannot be put on a common loss scale; the message says why (one
    line). `side` is "run" or "baseline", the one at fault (for the finding's location)."""

    def __init__(self, message: str, *, side: str = "run") -> None:
        super().__init__(message)
        self.side = side


# --- alignment ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class AlignLimits:
    # Loss points each run needs inside the common span: a start window and an end window
    # of `min_window_points` each, not overlapping.
    min_points: int = 6
    # The level before learning is read from the first 5% of the common span: the
    # calibration gallery's healthy fine-tunes lose a quarter of their loss by step 15 of
    # 300, so a wider start window would average the learning into "start".
    start_fraction: float = 0.05
    # Where the runs landed: the last tenth of the common span (TP-DIVERGE's window size).
    end_fraction: float = 0.10
    # A window holds at least 3 points, widened past its fraction if need be: the median
    # of fewer points is one batch's noise.
    min_window_points: int = 3
    # A side whose loss goes on past the common span by more than 5% of the span has steps
    # the comparison never saw (a run that turned NaN, a longer schedule): the report says
    # so. Less is a logging offset (one run logs at 990, the other at 1000).
    tail_fraction: float = 0.05


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    """One run's finite loss points inside the common span, with their axis positions."""

    run: Run
    loss: Series
    pos: tuple[float, ...]
    length: float  # the schedule length used by the fraction axis

    def position(self, step: int, axis: str) -> float:
        return float(step) if axis == "step" else step / self.length

    def location(self, i: int) -> Location:
        return self.run.location(self.loss.records[i])


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """Indices [lo, hi) of a side's points in a start or end window."""

    lo: int
    hi: int

    def values(self, side: Side) -> list[float]:
        return list(side.loss.values[self.lo:self.hi])


@dataclass(frozen=True, kw_only=True)
class Pair:
    """A run and its baseline, aligned; every level the rules judge is measured here."""

    run: Side
    base: Side
    axis: str  # "step" or "fraction"
    lo: float  # common span on the axis
    hi: float
    limits: AlignLimits
    baseline_report: Report | None  # the baseline's own single-run judgement
    run_start: Window
    run_end: Window
    base_start: Window
    base_end: Window
    base_start_level: float
    base_end_level: float
    run_start_level: float
    run_end_level: float
    start_ratio: float  # median of matched run/baseline ratios over the start window
    end_ratio: float  # ... over the end window

    @property
    def base_improvement(self) -> float:
        return 1.0 - self.base_end_level / self.base_start_level

    @property
    def run_improvement(self) -> float:
        # The run's end/start, read through the baseline: (E_b * end_ratio) / (S_b *
        # start_ratio). Exact for noise-free levels; with shared batch order the matched
        # ratios cancel batch difficulty that the run's own medians would keep.
        return 1.0 - (1.0 - self.base_improvement) * self.end_ratio / self.start_ratio

    def span_text(self, lo: float | None = None, hi: float | None = None) -> str:
        a = self.lo if lo is None else lo
        b = self.hi if hi is None else hi
        if self.axis == "step":
            return f"steps {a:.0f}-{b:.0f}"
        return f"{a:.0%}-{b:.0%} of the schedule"

    def window_text(self, w: Window) -> str:
        return self.span_text(self.run.pos[w.lo], self.run.pos[w.hi - 1])

    def base_at(self, x: float) -> float | None:
        """The baseline's loss at axis position x, linearly interpolated between its
        logged points (None outside them)."""
        return interpolate(self.base.pos, self.base.loss.values, x)

    def summary(self) -> dict[str, float | int | str | None]:
        """The numbers a ranking table shows; rules judge the same numbers."""
        run_floor, base_floor = _floor(self.run)[0], _floor(self.base)[0]
        return {
            "axis": self.axis,
            "common_from": _num(self.lo),
            "common_to": _num(self.hi),
            "run_start_level": self.run_start_level,
            "run_end_level": self.run_end_level,
            "baseline_start_level": self.base_start_level,
            "baseline_end_level": self.base_end_level,
            "start_ratio": self.start_ratio,
            "end_ratio": self.end_ratio,
            "run_improvement": self.run_improvement,
            "baseline_improvement": self.base_improvement,
            "run_floor": run_floor,
            "baseline_floor": base_floor,
            "floor_ratio": run_floor / base_floor,
            **_eval_summary(self),
            **self.coverage(),
        }

    def coverage(self) -> dict[str, float | int | str | None]:
        """Where each side's loss log ends, and — when the common span ends before either
        run does — a sentence saying what the comparison did not see (`common_note`)."""
        out: dict[str, float | int | str | None] = {}
        parts = []
        for who, side in (("run", self.run), ("baseline", self.base)):
            full = side.run.get(LOSS)
            if full is None or not len(full):
                continue
            last = max(full.steps)
            out[f"{who}_last_step"] = last
            beyond = [(st, v) for st, v in zip(full.steps, full.values) if side.position(st, self.axis) > self.hi]
            if side.position(last, self.axis) - self.hi <= self.limits.tail_fraction * (self.hi - self.lo):
                continue
            bad = [st for st, v in beyond if not math.isfinite(v)]
            text = f"the {who}'s loss goes on to step {last}"
            if bad and len(bad) == len(beyond):
                text += f" but is not finite from step {min(bad)} on"
            elif bad:
                text += f" ({len(bad)} of its {len(beyond)} points after the span are not finite)"
            parts.append(text)
        out["common_note"] = (f"compared over {self.span_text()} only: " + "; ".join(parts)) if parts else None
        return out


# Every rule here judges one run against its baseline, aligned (a Pair).
COMPARISON: Family[Pair, Context] = Family("comparison")


def _num(x: float) -> float | int:
    return int(x) if x == int(x) else x


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float | None:
    i = bisect.bisect_left(xs, x)
    if i < len(xs) and xs[i] == x:
        return ys[i]
    if i == 0 or i == len(xs):
        return None
    # bisect_left leaves xs[i-1] < x < xs[i] whatever the order of xs (it moves its low end
    # only past points below x, its high end only onto points at or above it), so x1 > x0.
    x0, x1 = xs[i - 1], xs[i]
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0)


def schedule_length(run: Run) -> float:
    """The run's planned length in steps (max_steps when the log states it and the run did
    not go past it, else its last logged step): the denominator of the `fraction` axis."""
    last = max((s.steps[-1] for s in run.series.values() if len(s)), default=1)
    if run.meta.max_steps and run.meta.max_steps >= last:
        return float(run.meta.max_steps)
    return float(max(1, last))


def in_step_order(series: Series) -> Series:
    """The series sorted by step (stable). Logs whose steps go backwards (a resumed run
    appended to its log; TP-STEP-ORDER reports it) are compared in step order."""
    steps = series.steps
    if all(a <= b for a, b in pairwise(steps)):
        return series
    order = sorted(range(len(steps)), key=lambda i: steps[i])
    return Series(series.name, series.source_name, tuple(steps[i] for i in order),
                  tuple(series.values[i] for i in order), tuple(series.records[i] for i in order))


def _finite_loss(run: Run, who: str) -> Series:
    loss = run.get(LOSS)
    if loss is None:
        raise Uncomparable(f"the {who} logs no loss", side=who)
    return in_step_order(loss.finite())


def _side(run: Run, loss: Series, axis: str, lo: float, hi: float, length: float) -> Side:
    pos_all = [float(s) if axis == "step" else s / length for s in loss.steps]
    a = bisect.bisect_left(pos_all, lo)
    b = bisect.bisect_right(pos_all, hi)
    cut = Series(loss.name, loss.source_name, loss.steps[a:b], loss.values[a:b], loss.records[a:b])
    return Side(run=run, loss=cut, pos=tuple(pos_all[a:b]), length=length)


def _span(a: Series, b: Series, axis: str, la: float, lb: float) -> tuple[float, float]:
    def p(s: int, length: float) -> float:
        return float(s) if axis == "step" else s / length
    return max(p(a.steps[0], la), p(b.steps[0], lb)), min(p(a.steps[-1], la), p(b.steps[-1], lb))


def _count(loss: Series, axis: str, length: float, lo: float, hi: float) -> int:
    return sum(1 for s in loss.steps if lo <= (s if axis == "step" else s / length) <= hi)


def _start_window(side: Side, upto: float, k: int) -> Window:
    hi = bisect.bisect_right(side.pos, upto)
    return Window(lo=0, hi=max(hi, min(k, len(side.pos))))


def _end_window(side: Side, start: float, k: int) -> Window:
    lo = bisect.bisect_left(side.pos, start)
    n = len(side.pos)
    return Window(lo=min(lo, max(0, n - k)), hi=n)


def _matched_ratio(pair_base: Side, run: Side, w: Window) -> float | None:
    ratios = []
    for x, v in zip(run.pos[w.lo:w.hi], run.loss.values[w.lo:w.hi]):
        b = interpolate(pair_base.pos, pair_base.loss.values, x)
        if b is not None and b > 0:
            ratios.append(v / b)
    return median(ratios) if ratios else None


def align(run: Run, baseline: Run, limits: AlignLimits, *, baseline_report: Report | None = None) -> Pair:
    """Put a run and its baseline on a common axis and measure their levels.

    The axis is the optimizer step when the two logs share at least `min_points` loss
    points each; otherwise the fraction of each run's schedule (max_steps, or the last
    logged step). Raises Uncomparable with a one-line reason when neither works.
    """
    rl, bl = _finite_loss(run, "run"), _finite_loss(baseline, "baseline")
    for who, s in (("run", rl), ("baseline", bl)):
        if len(s) < limits.min_points:
            raise Uncomparable(f"the {who} has {len(s)} finite loss point(s); a comparison needs "
                               f"at least {limits.min_points}", side=who)
    lr_, lb = schedule_length(run), schedule_length(baseline)
    chosen = None
    for axis in ("step", "fraction"):
        lo, hi = _span(rl, bl, axis, lr_, lb)
        if hi > lo and min(_count(rl, axis, lr_, lo, hi), _count(bl, axis, lb, lo, hi)) >= limits.min_points:
            chosen = (axis, lo, hi)
            break
    if chosen is None:
        raise Uncomparable(
            f"the logs share too little: run loss at steps {rl.steps[0]}-{rl.steps[-1]}, baseline at "
            f"{bl.steps[0]}-{bl.steps[-1]}; {limits.min_points} points each must fall in a common span "
            "of steps or of schedule fractions")
    axis, lo, hi = chosen
    r, b = _side(run, rl, axis, lo, hi, lr_), _side(baseline, bl, axis, lo, hi, lb)
    for who, side in (("run", r), ("baseline", b)):
        bad = [v for v in side.loss.values if v <= 0]
        if bad:
            raise Uncomparable(f"the {who} logs a loss of {fmt(bad[0])} in the common span: ratios of "
                               "non-positive losses mean nothing", side=who)
    k = limits.min_window_points
    start_upto = lo + limits.start_fraction * (hi - lo)
    end_from = hi - limits.end_fraction * (hi - lo)
    rs, re_ = _start_window(r, start_upto, k), _end_window(r, end_from, k)
    bs, be = _start_window(b, start_upto, k), _end_window(b, end_from, k)
    start_ratio, end_ratio = _matched_ratio(b, r, rs), _matched_ratio(b, r, re_)
    base_start, base_end = median(bs.values(b)), median(be.values(b))
    run_start, run_end = median(rs.values(r)), median(re_.values(r))
    # Without matched points (no baseline point to interpolate from at the run's window),
    # the ratio of the two windows' medians stands in.
    return Pair(
        run=r, base=b, axis=axis, lo=lo, hi=hi, limits=limits, baseline_report=baseline_report,
        run_start=rs, run_end=re_, base_start=bs, base_end=be,
        base_start_level=base_start, base_end_level=base_end,
        run_start_level=run_start, run_end_level=run_end,
        start_ratio=start_ratio if start_ratio is not None else run_start / base_start,
        end_ratio=end_ratio if end_ratio is not None else run_end / base_end,
    )


# --- the rules -------------------------------------------------------------------------

def _floor(side: Side) -> tuple[float, int]:
    """Lowest rolling-median level and the index of its lowest point."""
    values = side.loss.values
    w = window_for(len(values), divisor=10, lo=3, hi=20)
    end_idx, level = min(rolling_levels(values, w, head=False), key=lambda t: (t[1], t[0]))
    lo = max(0, end_idx - w + 1)
    return level, min(range(lo, end_idx + 1), key=lambda i: values[i])


def _last(side: Side) -> int:
    return len(side.loss) - 1


FLOOR_DOC = """The run's loss floor is far above the baseline's over the same steps.

What it flags: the lowest loss level the run reaches inside the span both logs cover
(lowest rolling median, window a tenth of the points, 3 to 20) is more than `max_ratio`
times the baseline's lowest level over the same span.
Why it matters: two runs of the same task and model should reach similar floors; a floor
several times higher means the run cannot learn what the baseline learnt — shuffled or
misaligned labels, a wrong tokenizer or chat template, a frozen model. Such a run can
still cut its own loss by half and look healthy on its own curve.
What it does not mean: a better floor is never flagged, and a run longer than its
baseline is judged only on the steps the baseline also covers.
"""


@dataclass(frozen=True, kw_only=True)
class FloorLimits:
    # Twice the baseline's floor (the published trainproof number): seeds of one healthy
    # run in the calibration gallery land within 5% of each other, shuffled labels 5.3-5.6x.
    max_ratio: float = 2.0


def check_floor(pair: Pair, limits: FloorLimits, ctx: Context) -> Iterator[Hit]:
    run_floor, ri = _floor(pair.run)
    base_floor, bi = _floor(pair.base)
    ratio = run_floor / base_floor
    if ratio <= limits.max_ratio:
        return
    rs, bs = pair.run.loss.steps[ri], pair.base.loss.steps[bi]
    yield Hit(
        message=(f"loss floor {fmt(run_floor)} (around step {rs}) is {times(ratio)} the baseline's floor "
                 f"{fmt(base_floor)} (around step {bs}) over {pair.span_text()}; limit {limits.max_ratio}x"),
        evidence={"run_floor": run_floor, "baseline_floor": base_floor, "ratio": ratio,
                  "run_floor_step": rs, "baseline_floor_step": bs},
        location=pair.run.location(ri),
        related=(Related(location=pair.base.location(bi),
                         message=f"baseline floor {fmt(base_floor)} around step {bs}"),),
    )


FLOOR_RULE = Rule(id="TP-FLOOR-RATIO", name="floor-ratio", level=Level.FAIL, doc=FLOOR_DOC,
                  limits=FloorLimits, check=check_floor, family=COMPARISON, origin="trainproof")


END_DOC = """The run ends far above where the baseline ended, at the same steps.

What it flags: over the last tenth of the span both logs cover, the median of the run's
loss divided by the baseline's at the same steps is more than `max_ratio`.
Why it matters: this judges where the run landed, whatever happened on the way: a run that
diverged, or one whose start was corrupted (which makes its own improvement look fine),
still ends far above a healthy run.
What it does not mean: that the run is worse everywhere — only at the end of the common
span; a run stopped early is judged at its own last steps against the baseline's.
"""


@dataclass(frozen=True, kw_only=True)
class EndLimits:
    # Twice the baseline's level at the same steps (the published trainproof number):
    # healthy seeds in the calibration gallery end within 4% of each other, shuffled
    # labels at 5.3-5.4x.
    max_ratio: float = 2.0


def check_end(pair: Pair, limits: EndLimits, ctx: Context) -> Iterator[Hit]:
    ratio = pair.end_ratio
    if ratio <= limits.max_ratio:
        return
    w = pair.run_end
    last = _last(pair.run)
    yield Hit(
        message=(f"loss over {pair.window_text(w)} is {times(ratio)} the baseline's at the same steps "
                 f"(median of matched ratios; levels {fmt(pair.run_end_level)} vs "
                 f"{fmt(pair.base_end_level)}); limit {limits.max_ratio}x"),
        evidence={"ratio": ratio, "run_end_level": pair.run_end_level,
                  "baseline_end_level": pair.base_end_level, "points": w.hi - w.lo,
                  "end_step": pair.run.loss.steps[last]},
        location=pair.run.location(last),
        related=(Related(location=pair.base.location(_last(pair.base)),
                         message=f"baseline loss level {fmt(pair.base_end_level)} at the end of the common span"),),
    )


END_RULE = Rule(id="TP-END-RATIO", name="end-ratio", level=Level.FAIL, doc=END_DOC,
                limits=EndLimits, check=check_end, family=COMPARISON, origin="trainproof")


def _moved(improvement: float) -> str:
    """A relative improvement in words: "fell 3.1%" / "rose 0.4%"."""
    return f"fell {improvement:.1%}" if improvement >= 0 else f"rose {-improvement:.1%}"


def _improvement_text(pair: Pair) -> str:
    return (f"at matched steps its loss went from {times(pair.start_ratio)} the baseline's "
            f"({pair.window_text(pair.run_start)}) to {times(pair.end_ratio)} ({pair.window_text(pair.run_end)})")


def _improvement_evidence(pair: Pair) -> dict[str, float | int | str | bool | None]:
    return {"run_improvement": pair.run_improvement, "baseline_improvement": pair.base_improvement,
            "start_ratio": pair.start_ratio, "end_ratio": pair.end_ratio,
            "baseline_start_level": pair.base_start_level, "baseline_end_level": pair.base_end_level}


NEG_DOC = """The run's loss got worse over the span where the baseline's was measured.

What it flags: the run's loss level at the end of the common span is higher than at its
start by more than `tolerance` (a relative rise). Start is the first 5% of the span,
end the last 10% (TP-CMP-UNCOMPARABLE's windows); both are read against the baseline at
matched steps, so batch difficulty the two runs share cancels.
Why it matters: training made the model worse on its own objective — a diverged run, a
learning rate far too high, or a broken resume.
What it does not mean: a rise within `tolerance` is batch noise; a run that merely
improves less than the baseline is TP-IMPROVE-DEFICIT's business.
"""


@dataclass(frozen=True, kw_only=True)
class NegLimits:
    # A rise under 2% of the start level is within batch noise (TP-DEAD-RUN's min_drop).
    tolerance: float = 0.02


def check_neg(pair: Pair, limits: NegLimits, ctx: Context) -> Iterator[Hit]:
    imp = pair.run_improvement
    if imp >= -limits.tolerance:
        return
    yield Hit(
        message=(f"loss {_moved(imp)} over {pair.span_text()} while the baseline's "
                 f"{_moved(pair.base_improvement)} ({fmt(pair.base_start_level)} -> {fmt(pair.base_end_level)}); "
                 f"{_improvement_text(pair)}; limit: a rise of at most {limits.tolerance:.0%}"),
        evidence=_improvement_evidence(pair),
        location=pair.run.location(_last(pair.run)),
        related=(Related(location=pair.run.location(pair.run_start.lo),
                         message="start of the common span"),),
    )


NEG_RULE = Rule(id="TP-NEG-IMPROVE", name="negative-improvement", level=Level.FAIL, doc=NEG_DOC,
                limits=NegLimits, check=check_neg, family=COMPARISON, origin="trainproof")


DEFICIT_DOC = """The run improved far less than the baseline over the same steps.

What it flags: the run's relative improvement over the common span (start = first 5%,
end = last 10%, read against the baseline at matched steps) is less than `min_fraction`
of the baseline's, when the baseline itself improved by at least
`min_baseline_improvement`. A run whose loss rose also gets TP-NEG-IMPROVE.
Why it matters: a zero or tiny learning rate, frozen weights or an optimizer that never
steps leave the loss where it started, moving only with batch difficulty; beside a run
that learnt, that is plain. Matched ratios are what make it plain: with the same data
order the batch-to-batch noise is shared and cancels.
What it does not mean: a run that starts lower (resumed, or a better initialisation)
and so has less to gain can show a deficit without being broken — check TP-FLOOR-RATIO
and TP-END-RATIO, which would stay quiet for such a run.
"""


@dataclass(frozen=True, kw_only=True)
class DeficitLimits:
    # A quarter of the baseline's improvement (the published trainproof number). In the
    # calibration gallery healthy seed pairs reach 0.92-1.08 of each other's improvement
    # and zero-learning-rate runs 0.16 at most.
    min_fraction: float = 0.25
    # A baseline that improved less than 5% gives no scale: a fraction of almost nothing
    # is noise.
    min_baseline_improvement: float = 0.05


def check_deficit(pair: Pair, limits: DeficitLimits, ctx: Context) -> Iterator[Hit]:
    base, run = pair.base_improvement, pair.run_improvement
    if base < limits.min_baseline_improvement:
        raise Skip(f"the baseline improved only {base:.1%} over {pair.span_text()}; a deficit needs "
                   f"a baseline that improved at least {limits.min_baseline_improvement:.0%}")
    fraction = run / base
    if fraction >= limits.min_fraction:
        return
    yield Hit(
        message=(f"loss {_moved(run)} over {pair.span_text()} while the baseline's {_moved(base)} "
                 f"({fmt(pair.base_start_level)} -> {fmt(pair.base_end_level)}): {times(fraction)} the "
                 f"baseline's improvement, limit {limits.min_fraction}x; {_improvement_text(pair)}"),
        evidence={**_improvement_evidence(pair), "fraction": fraction},
        location=pair.run.location(_last(pair.run)),
        related=(Related(location=pair.run.location(pair.run_start.lo),
                         message="start of the common span"),),
    )


DEFICIT_RULE = Rule(id="TP-IMPROVE-DEFICIT", name="improvement-deficit", level=Level.FAIL, doc=DEFICIT_DOC,
                    limits=DeficitLimits, check=check_deficit, family=COMPARISON, origin="trainproof")


GRADNORM_DOC = """The run's typical gradient norm is many times the baseline's.

What it flags: the median gradient norm over the common span is more than `max_ratio`
times the baseline's median over the same span (at least `min_points` finite values on
each side).
Why it matters: the same model on the same task sees similar gradients; far larger ones
point at a learning rate too high, missing gradient clipping, fp16 overflow or labels
the model cannot fit.
What it does not mean: a spike — medians ignore single steps (TP-GRAD-SPIKE judges
those); a different model or loss scaling changes gradient norms legitimately.
"""


@dataclass(frozen=True, kw_only=True)
class GradnormLimits:
    # Five times the baseline's median (the published trainproof number): healthy seeds
    # in the calibration gallery are within 2% of each other, shuffled labels at ~3x.
    max_ratio: float = 5.0
    min_points: int = 6  # a median of fewer gradient norms is a handful of batches


def _grad_in_span(pair: Pair, side: Side, who: str, minimum: int) -> list[float]:
    g = side.run.get(GRAD_NORM)
    if g is None:
        raise Skip(f"the {who}'s log has no grad_norm series")
    g = g.finite()
    vals = [v for s, v in zip(g.steps, g.values) if pair.lo <= side.position(s, pair.axis) <= pair.hi]
    if len(vals) < minimum:
        raise Skip(f"the {who} has {len(vals)} finite grad_norm point(s) in {pair.span_text()}; "
                   f"this check needs at least {minimum}")
    return vals


def check_gradnorm(pair: Pair, limits: GradnormLimits, ctx: Context) -> Iterator[Hit]:
    run_g = median(_grad_in_span(pair, pair.run, "run", limits.min_points))
    base_g = median(_grad_in_span(pair, pair.base, "baseline", limits.min_points))
    if base_g <= 0:
        raise Skip(f"the baseline's median gradient norm is {fmt(base_g)}: a ratio is meaningless")
    ratio = run_g / base_g
    if ratio <= limits.max_ratio:
        return
    yield Hit(
        message=(f"median gradient norm {fmt(run_g)} over {pair.span_text()} is {times(ratio)} the "
                 f"baseline's {fmt(base_g)}; limit {limits.max_ratio}x"),
        evidence={"run_median": run_g, "baseline_median": base_g, "ratio": ratio},
        location=pair.run.location(_last(pair.run)),
    )


GRADNORM_RULE = Rule(id="TP-GRADNORM-RATIO", name="gradnorm-ratio", level=Level.WARN, doc=GRADNORM_DOC,
                     limits=GradnormLimits, check=check_gradnorm, family=COMPARISON, origin="trainproof")


# --- eval-aware rules ----------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class _Evals:
    side: Side
    series: Series
    pos: tuple[float, ...]


def _evals(pair: Pair, side: Side, who: str, minimum: int) -> _Evals:
    ev = side.run.get(EVAL_LOSS)
    if ev is None:
        raise Skip(f"the {who} logs no eval loss")
    ev = in_step_order(ev.finite())
    if len(ev) < minimum:
        raise Skip(f"the {who} has {len(ev)} finite eval loss point(s); this check needs at least {minimum}")
    if min(ev.values) <= 0:
        raise Skip(f"the {who} logs a non-positive eval loss: ratios mean nothing")
    return _Evals(side=side, series=ev, pos=tuple(side.position(s, pair.axis) for s in ev.steps))


def _common_evals(pair: Pair, minimum: int) -> tuple[_Evals, _Evals, float, float]:
    r = _evals(pair, pair.run, "run", minimum)
    b = _evals(pair, pair.base, "baseline", minimum)
    lo, hi = max(r.pos[0], b.pos[0]), min(r.pos[-1], b.pos[-1])
    n_r = sum(1 for p in r.pos if lo <= p <= hi)
    n_b = sum(1 for p in b.pos if lo <= p <= hi)
    if hi < lo or min(n_r, n_b) < minimum:
        raise Skip(f"the two eval series share too little: run evals at steps {r.series.steps[0]}-"
                   f"{r.series.steps[-1]}, baseline at {b.series.steps[0]}-{b.series.steps[-1]}")
    return r, b, lo, hi


def _best_in(e: _Evals, lo: float, hi: float) -> int:
    idx = [i for i, p in enumerate(e.pos) if lo <= p <= hi]
    return min(idx, key=lambda i: (e.series.values[i], i))


def _eval_summary(pair: Pair) -> dict[str, float | int | str | None]:
    """Best and last eval against the baseline's, for the ranking table (None without
    evals on both sides)."""
    try:
        r, b, lo, hi = _common_evals(pair, 2)
    except Skip:
        return {"eval_best_ratio": None, "eval_end_ratio": None}
    best = r.series.values[_best_in(r, lo, hi)] / b.series.values[_best_in(b, lo, hi)]
    ri = max(i for i, p in enumerate(r.pos) if lo <= p <= hi)
    at = interpolate(b.pos, b.series.values, r.pos[ri])
    return {"eval_best_ratio": best, "eval_end_ratio": r.series.values[ri] / at if at else None}


EVAL_BEST_DOC = """The run's best eval loss is far above the baseline's best.

What it flags: the lowest eval loss the run logged inside the span both eval series
cover is more than `max_ratio` times the baseline's lowest eval loss over that span.
Why it matters: the best checkpoint of the run is worse on held-out data than the
baseline's by a wide margin — the run never generalised as well; keeping its best
checkpoint does not rescue it.
What it does not mean: a train-side problem (TP-FLOOR-RATIO judges the train loss); it
needs eval loss in both logs and the same eval set on both sides — a different eval set
makes the numbers incomparable.
"""


@dataclass(frozen=True, kw_only=True)
class EvalBestLimits:
    # 1.5x, tighter than the train floor's 2x: an eval loss averages a whole fixed eval
    # set, so it carries no batch-to-batch noise and a 50% gap is a real difference.
    max_ratio: float = 1.5
    min_evals: int = 2  # per side in the common span: one eval is one point, not a best


def check_eval_best(pair: Pair, limits: EvalBestLimits, ctx: Context) -> Iterator[Hit]:
    r, b, lo, hi = _common_evals(pair, limits.min_evals)
    ri, bi = _best_in(r, lo, hi), _best_in(b, lo, hi)
    run_best, base_best = r.series.values[ri], b.series.values[bi]
    ratio = run_best / base_best
    if ratio <= limits.max_ratio:
        return
    rs, bs = r.series.steps[ri], b.series.steps[bi]
    yield Hit(
        message=(f"best eval loss {fmt(run_best)} (step {rs}) is {times(ratio)} the baseline's best "
                 f"{fmt(base_best)} (step {bs}) over {pair.span_text(lo, hi)}; limit {limits.max_ratio}x"),
        evidence={"run_best_eval": run_best, "baseline_best_eval": base_best, "ratio": ratio,
                  "run_best_step": rs, "baseline_best_step": bs},
        location=r.side.run.location(r.series.records[ri]),
        related=(Related(location=b.side.run.location(b.series.records[bi]),
                         message=f"baseline best eval loss {fmt(base_best)} at step {bs}"),),
    )


EVAL_BEST_RULE = Rule(id="TP-EVAL-BEST-RATIO", name="eval-best-ratio", level=Level.FAIL, doc=EVAL_BEST_DOC,
                      limits=EvalBestLimits, check=check_eval_best, family=COMPARISON)


EVAL_END_DOC = """The run's last eval loss is far above the baseline's at the same step.

What it flags: the run's last eval loss inside the span both eval series cover is more
than `max_ratio` times the baseline's eval loss at the same step (interpolated between
its evals when they were taken at other steps).
Why it matters: the model the run ends with is much worse on held-out data than the
baseline's at that point — it overfitted or degraded late; unless an earlier checkpoint
is kept, that is the model that ships.
What it does not mean: that the run never was good — its best eval may still match the
baseline's (TP-EVAL-BEST-RATIO fails the run when it did not).
"""


@dataclass(frozen=True, kw_only=True)
class EvalEndLimits:
    # 1.5x, as TP-EVAL-BEST-RATIO: eval losses carry no batch noise, a 50% gap is real.
    max_ratio: float = 1.5
    min_evals: int = 2  # per side in the common span: the end needs a point before it


def check_eval_end(pair: Pair, limits: EvalEndLimits, ctx: Context) -> Iterator[Hit]:
    r, b, lo, hi = _common_evals(pair, limits.min_evals)
    ri = max(i for i, p in enumerate(r.pos) if lo <= p <= hi)
    base_at = interpolate(b.pos, b.series.values, r.pos[ri])
    if base_at is None or base_at <= 0:  # cannot happen inside the common span; kept for safety
        raise Skip("no baseline eval at the run's last eval step")
    run_last = r.series.values[ri]
    ratio = run_last / base_at
    if ratio <= limits.max_ratio:
        return
    rs = r.series.steps[ri]
    bj = min(range(len(b.pos)), key=lambda j: (abs(b.pos[j] - r.pos[ri]), j))
    run_best_i = _best_in(r, lo, hi)
    yield Hit(
        message=(f"last eval loss {fmt(run_last)} (step {rs}) is {times(ratio)} the baseline's eval loss "
                 f"{fmt(base_at)} at the same step; limit {limits.max_ratio}x (the run's own best was "
                 f"{fmt(r.series.values[run_best_i])} at step {r.series.steps[run_best_i]})"),
        evidence={"run_last_eval": run_last, "baseline_eval": base_at, "ratio": ratio, "step": rs,
                  "run_best_eval": r.series.values[run_best_i], "run_best_step": r.series.steps[run_best_i]},
        location=r.side.run.location(r.series.records[ri]),
        related=(Related(location=b.side.run.location(b.series.records[bj]),
                         message=f"baseline eval loss {fmt(b.series.values[bj])} at step {b.series.steps[bj]}"),),
    )


EVAL_END_RULE = Rule(id="TP-EVAL-END-RATIO", name="eval-end-ratio", level=Level.WARN, doc=EVAL_END_DOC,
                     limits=EvalEndLimits, check=check_eval_end, family=COMPARISON)


OVERFIT_DOC = """The run's eval loss rose from its best while the baseline's loss did not.

What it flags: the run's eval loss rose by more than `min_rise` from its best (not among
its last two evals, both of which stay above it) to its last eval, and that rise is more
than `max_ratio` times whatever the baseline's loss did over the same steps — its eval
loss where it logged evals at both ends, else its train loss level (median of the
nearest tenth of the span).
Why it matters: overfitting relative to a known-good run: the baseline kept improving (or
held) over the stretch where the run got worse on held-out data, so the cause is the
run's setup (too little data, too many epochs, too little regularisation), not the task.
The checkpoint to keep is the one from the run's best eval step.
What it does not mean: a baseline that overfits the same way leaves this quiet (the rise
is then the task's, and TP-OVERFIT judges it alone). With only train loss on the
baseline side, a baseline that overfitted unseen cannot be told apart.
"""


@dataclass(frozen=True, kw_only=True)
class OverfitLimits:
    # The run's rise 20% beyond the baseline's over the same steps: TP-OVERFIT's 1.2x,
    # applied to the rise relative to the baseline instead of to the run's own best.
    max_ratio: float = 1.2
    min_rise: float = 0.05  # the run's own eval rose at least 5%: a flat eval is no overfit
    min_evals: int = 4  # fewer evals cannot show a minimum followed by a sustained rise


def _baseline_level_at(pair: Pair, x: float) -> tuple[float, int]:
    """Median of the baseline's train loss around axis position x (a tenth of the common
    span wide, widened to `min_window_points`), and the index nearest x."""
    b = pair.base
    half = pair.limits.end_fraction * (pair.hi - pair.lo) / 2
    idx = [i for i, p in enumerate(b.pos) if x - half <= p <= x + half]
    if len(idx) < pair.limits.min_window_points:
        idx = sorted(range(len(b.pos)), key=lambda i: (abs(b.pos[i] - x), i))[: pair.limits.min_window_points]
    nearest = min(idx, key=lambda i: (abs(b.pos[i] - x), i))
    return median([b.loss.values[i] for i in idx]), nearest


_REF_TEXT = {"eval_loss": "eval loss", "loss": "train loss level (it logs no eval loss at those steps)"}


def _baseline_reference(pair: Pair, x0: float, x1: float
                        ) -> tuple[str, tuple[float, Location], tuple[float, Location]]:
    """What the baseline's loss was at axis positions x0 and x1: its eval loss when its
    evals cover both, else its train loss level there."""
    base = pair.base
    ev = base.run.get(EVAL_LOSS)
    if ev is not None:
        ev = in_step_order(ev.finite())
        pos = tuple(base.position(s, pair.axis) for s in ev.steps)
        at = [interpolate(pos, ev.values, x) for x in (x0, x1)]
        if len(ev) >= 2 and min(ev.values) > 0 and None not in at:
            def near(x: float) -> Location:
                j = min(range(len(pos)), key=lambda j: (abs(pos[j] - x), j))
                return base.run.location(ev.records[j])
            return "eval_loss", (at[0] or 0.0, near(x0)), (at[1] or 0.0, near(x1))
    (l0, k0), (l1, k1) = _baseline_level_at(pair, x0), _baseline_level_at(pair, x1)
    return "loss", (l0, base.location(k0)), (l1, base.location(k1))


def check_overfit(pair: Pair, limits: OverfitLimits, ctx: Context) -> Iterator[Hit]:
    r = _evals(pair, pair.run, "run", limits.min_evals)
    # Only evals the baseline can be read at: inside the common span of the train losses.
    idx = [i for i, p in enumerate(r.pos) if pair.lo <= p <= pair.hi]
    if len(idx) < limits.min_evals:
        raise Skip(f"the run has {len(idx)} eval(s) in {pair.span_text()}; this check needs at least "
                   f"{limits.min_evals}")
    vals = r.series.values
    best_i = min(idx, key=lambda i: (vals[i], i))
    last_i = idx[-1]
    if best_i in idx[-2:]:
        return
    best, last = vals[best_i], vals[last_i]
    rise = last / best
    if rise <= 1 + limits.min_rise or not all(vals[i] > best * (1 + limits.min_rise) for i in idx[-2:]):
        return
    x0, x1 = r.pos[best_i], r.pos[last_i]
    ref, (a0, loc0), (a1, loc1) = _baseline_reference(pair, x0, x1)
    base_change = a1 / a0
    relative = rise / base_change
    if relative <= limits.max_ratio:
        return
    bs, ls = r.series.steps[best_i], r.series.steps[last_i]
    yield Hit(
        message=(f"eval loss rose {times(rise)} from its best {fmt(best)} (step {bs}) to {fmt(last)} "
                 f"(step {ls}) while the baseline's {_REF_TEXT[ref]} went {times(base_change)} over the same steps "
                 f"({fmt(a0)} -> {fmt(a1)}): {times(relative)} the baseline's change; limit {limits.max_ratio}x"),
        evidence={"run_best_eval": best, "run_best_step": bs, "run_last_eval": last, "run_last_step": ls,
                  "run_rise": rise, "baseline_change": base_change, "relative": relative,
                  "baseline_reference": ref,
                  "baseline_at_best": a0, "baseline_at_last": a1},
        location=pair.run.run.location(r.series.records[last_i]),
        related=(Related(location=pair.run.run.location(r.series.records[best_i]),
                         message=f"best eval loss {fmt(best)} at step {bs}"),
                 Related(location=loc0, message=f"baseline {ref} {fmt(a0)} near step {bs}"),
                 Related(location=loc1, message=f"baseline {ref} {fmt(a1)} near step {ls}")),
    )


OVERFIT_RULE = Rule(id="TP-OVERFIT-VS-BASELINE", name="overfit-vs-baseline", level=Level.WARN, doc=OVERFIT_DOC,
                    limits=OverfitLimits, check=check_overfit, family=COMPARISON)


BAD_BASELINE_DOC = """The baseline itself fails its single-run checks.

What it flags: the baseline, judged alone with the same rules and settings, has at least
one FAIL finding; the finding points at the baseline's first failure and lists the rule IDs.
Why it matters: a comparison is only as good as its reference — against a broken
baseline a broken run can look fine and a healthy one can look better than it is.
What it does not mean: that the run is broken; the comparison findings still stand on
their own numbers, but read them with care.
"""


def check_bad_baseline(pair: Pair, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    report = pair.baseline_report
    if report is None:
        raise Skip("the baseline was not judged on its own")
    if report.verdict is not Verdict.FAIL:
        return
    fails = [f for f in report.findings if f.level is Level.FAIL]
    ids = sorted({f.id for f in fails})
    yield Hit(
        message=(f"the baseline {report.artefact.path} fails its own checks ({', '.join(ids)}): "
                 "the comparison may be meaningless"),
        evidence={"baseline_fail_count": len(fails), "baseline_fail_ids": ",".join(ids)},
        location=fails[0].location,
        related=tuple(Related(location=f.location, message=f"{f.id}: {f.message}") for f in fails[:3]),
    )


BAD_BASELINE_RULE = Rule(id="TP-BAD-BASELINE", name="bad-baseline", level=Level.WARN, doc=BAD_BASELINE_DOC,
                         check=check_bad_baseline, family=COMPARISON, origin="trainproof")


UNCOMPARABLE_DOC = """The run and its baseline cannot be put on a common loss scale.

What it flags: one side logs no loss or fewer than `min_points` finite loss points in the
span both cover; the two logs share no span of steps (nor of schedule fractions) holding
`min_points` points each; or a loss in that span is zero or negative, where ratios mean
nothing. The message says which side and why. Its limits also set the alignment every
comparison rule uses: the start window (`start_fraction` of the common span), the end
window (`end_fraction`), the fewest points a window holds (`min_window_points`), and how
far a side's loss may go on past the common span (`tail_fraction` of it) before the report
states what was not compared (`comparison.common_note`: a run that turned NaN, a longer
schedule).
Why it matters: nothing was compared, so nothing can be said about the run against the
baseline. Per CONTRACTS.md this is NOT-CHECKED (exit 2) — never a pass, never a failure;
the published trainproof reports this ID as a FAIL.
What it does not mean: that either run is broken; judge each on its own with `doctor`.
"""

UNCOMPARABLE_RULE = Rule(id="TP-CMP-UNCOMPARABLE", name="uncomparable", level=Level.NOT_CHECKED,
                         doc=UNCOMPARABLE_DOC, limits=AlignLimits, family=COMPARISON, origin="trainproof")


CMP_ERROR_DOC = """The baseline comparison could not be run: the baseline is unreadable.

What it flags: the baseline given (`compare BASELINE`, `doctor --baseline`, or `baseline`
in `[tool.trainproof]`) is missing, unreadable, not a training log, or a folder without
exactly one log; the message is the reader's one-line reason.
Why it matters: the comparison that was asked for did not happen, so the run was judged
on its own only (by `doctor`) or not at all (by `compare`). NOT-CHECKED, exit 2; the
published trainproof reports this ID as a WARN.
What it does not mean: anything about the run.
"""

CMP_ERROR_RULE = Rule(id="TP-CMP-ERROR", name="comparison-error", level=Level.NOT_CHECKED,
                      doc=CMP_ERROR_DOC, family=COMPARISON, origin="trainproof")

