"""The run never improved."""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Iterator, Sequence

from ..core.model import EVAL_LOSS, LOSS, LOSS_EPOCH, LR, Hit, Level, Run
from ._stats import mann_kendall_z, median, point_noise, window_for
from ._views import SERIES_WORDS, recent_points, trend_series
from .base import Context, METRICS, Rule, Skip, fmt

DOC = """The loss shows no downward trend from start to end: the run is not learning.

What it flags: a loss series of at least `min_points` points whose end level (median of
the last window) is less than `min_drop` below its start level (median of the first
window), and which either shows no downward trend (Mann-Kendall score above
`max_trend_z`) or fell by less than `negligible_drop` in all — a statistically real but
negligible drift, as a model stuck at a uniform guess shows. Also, whatever the levels
say, a run whose learning rate never exceeds `max_dead_lr` and whose loss shows no
significant fall (z above `resumed_fall_z`).
Why it matters: a run that does not learn in its first hundreds of steps rarely starts
later; the usual causes are a zero or tiny learning rate, frozen weights, or labels that
carry no signal.
Noisy logs: levels are window medians and the trend is a rank test over window medians,
so batch noise cannot fire it; when the log carries the train loss per step and per epoch
it judges the per-epoch series.
Short logs: it needs `min_points` points, or fewer (from 7) when the series' own noise lets
the trend test reach significance in fewer (the report says how many its noise needs);
a log too short for that whose last `constant_points` or more values are identical (within
`constant_spread`) and within `constant_uniform` of ln(C) or of ln 2 is dead all the same —
a loss frozen at a uniform guess. With fewer train points it judges the eval loss
when that has enough (then it fires when no later eval improves on the first by
`min_drop` and the later evals are `eval_worse` worse in median); with neither, it is NOT-CHECKED and the report says how many points there were.
Resumed runs: when the log starts late (first step beyond a few logging intervals) a run
at its floor need not improve, so a flat loss is not flagged — but a resumed run whose
loss rises with a significant upward trend (z of at least `resumed_rise_z`, and more than
`negligible_drop` higher at the end), or whose learning rate never exceeds `max_dead_lr`,
is still flagged.
The finding must hold without the last `recent` points too (`recent_fraction` of a shorter
log): a jump at the very end is reported by TP-LOSS-SPIKE as "recovery unknown".
What it does not mean: slow learning — any real fall of `min_drop` passes.
"""


@dataclass(frozen=True, kw_only=True)
class Limits:
    # The trend checks' minimum: a rank test on fewer points says nothing, and a level
    # (window median) of a shorter log is one or two points.
    min_points: int = 10
    # Mann-Kendall z above -1: not even a weak (one-sigma) downward trend. Healthy runs
    # in the calibration corpus score -3.4 to -3.9, zero-LR runs -0.4 to 0.0.
    max_trend_z: float = -1.0
    min_drop: float = 0.02  # 2%: a fall smaller than this is within batch noise
    # 0.5%: below this a fall is no learning even when it is a steady trend (a model
    # stuck at ln(V) drifts by ~0.1% as its output bias settles).
    negligible_drop: float = 0.005
    # A learning rate that never exceeds 1e-7 moves Adam-style weights by < 1e-7 per step:
    # hundreds of steps change nothing measurable (fine-tunes use 1e-6 to 1e-3).
    max_dead_lr: float = 1e-7
    # With such a learning rate, only a significant (95%, z <= -2) fall counts as learning.
    resumed_fall_z: float = -2.0
    # A resumed run that gets worse: a rising trend at 95% significance (z >= 2). A run
    # resumed at its floor wanders with |z| < 2.
    resumed_rise_z: float = 2.0
    # Judged on evals (train loss too short): the later evals' median must be 10% worse than
    # the first eval — a plateau from the first eval may be a run that started near its
    # floor, while eval-to-eval noise on a fixed set is a few percent.
    eval_worse: float = 0.1
    # The verdict must not hinge on the last 10 points (a quarter of a shorter log): a
    # jump there may still come back (the spike rules' recovery window).
    recent: int = 10
    recent_fraction: float = 0.25
    # A trendless series (z above max_trend_z) whose start-to-end fall is under 2 level
    # noises did not fall: its own noise (point noise over the square root of the level
    # window) moves two window medians apart by this much about 5% of the time. One low
    # eval in a noisy, trendless eval-only log is not learning.
    fall_noise: float = 2.0
    # A run whose end level is within 10% of ln(C) (C classes or vocabulary entries) and
    # fell under 3% from its start crawls at a uniform guess: the slow drift of a model
    # whose output bias settles (7.66 -> 7.62 over 11,000 steps), not learning. Real
    # learning from ln(C) falls by tens of percent.
    near_uniform: float = 0.1
    crawl_drop: float = 0.03
    # A crawl is judged over a stretch, never over a run's first points: an untrained model
    # starts at ln(C) by construction and sits there through a warm-up, so a handful of
    # points near it says nothing. Twice the trend test's usual 10 points is where a run
    # that learns has left ln(C) by tens of percent.
    crawl_min_points: int = 20
    # A log too short for the trend test (under 7 points) is still judged when its values
    # are identical at a uniform guess: five points is where the trend test could have
    # reached z 2 on a noiseless fall (a perfectly ordered series of 5 scores z 2.2), so
    # five equal values show there was none; identical means within 1e-4 of their level (a
    # loss logged to four digits); at a uniform guess within 1% of ln(C) or ln 2 (the
    # binary guess, which a constant loss of 0.6931 is whatever the config says).
    constant_points: int = 5
    constant_spread: float = 1e-4
    constant_uniform: float = 0.01


def _levels(values: Sequence[float]) -> tuple[float, float, int, int]:
    """(start level, end level, head window, level window).

    The end level is the median of the last `w` points. The start level is the higher of
    the first `w` points' median and the first `head` points' median (half as many, at
    least 3): a run that falls fast in its first points has already fallen by the middle
    of its first window, whose median then hides the fall (a run that fell 9% in its first
    five points read as "-1.9%").
    """
    w = window_for(len(values), divisor=5, lo=3, hi=20)
    head = max(3, w // 2)
    start = max(median(values[:w]), median(values[:head]))
    return start, median(values[-w:]), head, w


def _level_noise(values: Sequence[float], window: int) -> float:
    """The spread of a window median of this series: its point noise / sqrt(window) (a
    median's spread is ~1.25 that of a mean, which the limit's 2 noises leave room for)."""
    return point_noise(values) / math.sqrt(window)


def _no_fall(values: Sequence[float], limits: Limits) -> bool:
    """Start level to end level fell less than min_drop, with no downward trend or by
    less than negligible_drop; or, with no downward trend, by less than fall_noise level
    noises."""
    start, end, _, w = _levels(values)
    drop = (start - end) / abs(start) if start else 0.0
    z = mann_kendall_z(values)
    if z > limits.max_trend_z and start - end < limits.fall_noise * _level_noise(values, w):
        return True
    return drop < limits.min_drop and (z > limits.max_trend_z or drop < limits.negligible_drop)


def _no_fall_before_the_end(values: Sequence[float], limits: Limits) -> bool:
    """The same without the last few points (when enough remain): a jump there is the spike
    rules' to report (recovery unknown), not proof that the run never learned."""
    head = len(values) - recent_points(len(values), limits.recent, limits.recent_fraction)
    return head < limits.min_points or _no_fall(values[:head], limits)


def _resumed(steps: Sequence[int], logging_steps: int | None) -> bool:
    interval = logging_steps or max(1, steps[1] - steps[0])
    return steps[0] > 3 * interval + 1


def _constant_at_uniform(run: Run, limits: Limits, ctx: Context) -> Hit | None:
    """A short train loss whose values are all one number at ln(C) or ln 2, or None."""
    bounds = [(math.log(ctx.num_classes), f"ln({ctx.num_classes}) (classes from {ctx.num_classes_source})")] \
        if ctx.num_classes and ctx.num_classes >= 2 else []
    bounds.append((math.log(2), "ln 2 (a binary guess)"))
    for name in (LOSS_EPOCH, LOSS):
        series = run.get(name)
        if series is None:
            continue
        series = series.finite()
        values = series.values
        if len(values) < limits.constant_points:
            continue
        lo, hi = min(values), max(values)
        level = median(values)
        if hi - lo > limits.constant_spread * abs(level):
            continue
        for bound, label in bounds:
            if abs(level / bound - 1) <= limits.constant_uniform:
                return Hit(
                    message=(
                        f"{SERIES_WORDS[name]} is {fmt(level)} at all {len(values)} points (steps {series.steps[0]}-"
                        f"{series.steps[-1]}; spread {hi - lo:.2g}, limit {limits.constant_spread:g} of the level), "
                        f"{level / bound - 1:+.2%} from {label} = {fmt(bound)} (limit {limits.constant_uniform:.0%}): "
                        "a loss frozen at a uniform guess, too short for the trend test but not for this"
                    ),
                    evidence={"level": level, "points": len(values), "spread": hi - lo, "uniform_bound": bound,
                              "series": name},
                    location=run.location(series.records[-1]),
                )
    return None


def check(run: Run, limits: Limits, ctx: Context) -> Iterator[Hit]:
    try:
        loss = trend_series(run, limits.min_points)
    except Skip:
        frozen = _constant_at_uniform(run, limits, ctx)
        if frozen is None:
            raise
        yield frozen
        return
    what = SERIES_WORDS[loss.name]
    values = loss.values
    start, end, head, w = _levels(values)
    z = mann_kendall_z(values)
    drop = (start - end) / abs(start) if start else 0.0
    span = f"steps {loss.steps[0]}-{loss.steps[-1]}"
    evidence: dict[str, float | int | str] = {"start_level": start, "end_level": end, "drop": drop, "trend_z": z}
    if loss.name != LOSS:
        evidence["series"] = loss.name  # the view judged, when not the train loss as logged
    lr = run.get(LR)
    max_lr = max(lr.finite().values, default=None) if lr is not None else None
    tiny_lr = max_lr is not None and max_lr <= limits.max_dead_lr and z > limits.resumed_fall_z
    location = run.location(loss.records[-1])
    windows = (f"levels: start the higher median of the first {head} and first {w} points, end the median "
               f"of the last {w}")
    crawl: float | None = None
    if (ctx.num_classes and ctx.num_classes >= 2 and loss.name != EVAL_LOSS
            and len(values) >= limits.crawl_min_points):
        bound = math.log(ctx.num_classes)
        if abs(end / bound - 1) <= limits.near_uniform and drop < limits.crawl_drop:
            crawl = bound
    if loss.name == EVAL_LOSS:
        # Judged on evals because the train loss is too short: a held-out loss that never
        # improves on its first value has learned nothing that generalises.
        first, best_later, later = values[0], min(values[1:]), median(values[1:])
        if best_later > first * (1 - limits.min_drop) and later >= first * (1 + limits.eval_worse):
            yield Hit(
                message=(
                    f"eval loss never improved on its first value {fmt(first)} (step {loss.steps[0]}): the best "
                    f"of the next {len(values) - 1} evals is {fmt(best_later)} ({best_later / first - 1:+.1%}; "
                    f"limit: a fall of at least {limits.min_drop:.0%}) and their median {fmt(later)} is "
                    f"{later / first - 1:+.1%} worse (limit {limits.eval_worse:.0%}); the train loss is too short "
                    "to judge"
                ),
                evidence={**evidence, "first_eval": first, "best_later_eval": best_later,
                          "median_later_eval": later, "evals": len(values)},
                location=location,
            )
            return
    elif _resumed(loss.steps, run.meta.logging_steps):
        if drop < -limits.negligible_drop and z >= limits.resumed_rise_z:
            yield Hit(
                message=(
                    f"resumed at step {loss.steps[0]}, the {what} got worse: level {fmt(start)} -> {fmt(end)} "
                    f"over {span} ({-drop:+.1%}) with a rising trend (z {z:.2f} >= {limits.resumed_rise_z})"
                ),
                evidence=evidence,
                location=location,
            )
            return
        if not tiny_lr:
            raise Skip(
                f"the log starts at step {loss.steps[0]}: a resumed run at its floor need not improve "
                f"(its {what} does not rise and its learning rate is not too small to learn)"
            )
    elif crawl is not None:
        bound = crawl
        yield Hit(
            message=(
                f"{what} crawls at a uniform guess: level {fmt(start)} -> {fmt(end)} over {span} "
                f"({len(values)} points; {-drop:+.1%}, limit: a fall of at least {limits.crawl_drop:.0%}), ending "
                f"{end / bound - 1:+.1%} from ln({ctx.num_classes}) = {fmt(bound)} (limit {limits.near_uniform:.0%}; "
                f"classes from {ctx.num_classes_source}); {windows}"
            ),
            evidence={**evidence, "uniform_bound": bound, "num_classes": ctx.num_classes},
            location=location,
        )
        return
    elif _no_fall(values, limits) and _no_fall_before_the_end(values, limits):
        noise = _level_noise(values, w)
        if z > limits.max_trend_z and start - end < limits.fall_noise * noise and drop >= limits.min_drop:
            # noise > 0 here: the level fell (drop >= min_drop) by less than fall_noise noises
            why = (f"no downward trend (z {z:.2f} > {limits.max_trend_z}) and a fall of "
                   f"{(start - end) / noise:.2f} level noises (limit {limits.fall_noise}; "
                   f"level noise {fmt(noise)})")
        elif z > limits.max_trend_z:
            why = f"no downward trend (z {z:.2f} > {limits.max_trend_z})"
        elif drop <= 0:
            why = "the level did not fall"
        else:
            why = f"a fall under {limits.negligible_drop:.1%} is no learning"
        yield Hit(
            message=(
                f"{what} level went from {fmt(start)} to {fmt(end)} over {span} "
                f"({len(values)} points; {-drop:+.1%}; limit: a fall of at least {limits.min_drop:.0%}); "
                f"{why}; {windows}"
            ),
            evidence={**evidence, "level_noise": noise},
            location=location,
        )
        return
    if tiny_lr:
        assert max_lr is not None
        yield Hit(
            message=(
                f"learning rate never above {max_lr:.3g} (limit {limits.max_dead_lr:g}) and the {what} shows "
                f"no significant fall over {span}: level {fmt(start)} -> {fmt(end)}, z {z:.2f} > "
                f"{limits.resumed_fall_z}"
            ),
            evidence={**evidence, "max_lr": max_lr},
            location=location,
        )


RULE = Rule(id="TP-DEAD-RUN", name="no-improvement", level=Level.FAIL, doc=DOC,
            limits=Limits, check=check, needs=(LOSS,), origin="trainproof", family=METRICS)
