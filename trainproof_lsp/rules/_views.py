"""Which loss series a trend rule judges, and when a log is too short for any of them.

A log may carry one loss in several views: per step and per epoch (Lightning
`train_loss_step` / `train_loss_epoch`), and a held-out eval loss beside the train loss.
Trend rules (divergence, no improvement) ask for one series through `trend_series`:

1. the per-epoch train loss, when it is a separate series with enough points — it is the
   per-step loss averaged over whole epochs, so one hard batch cannot move it;
2. else the train loss as logged (per step; its levels are window medians);
3. else, when the train loss has too few points, the eval loss if it has enough: a run
   that logged its train loss five times but evaluated twenty times is judged on the twenty.

"Enough" is what the points support, not a fixed count. A series of `minimum` points (the
rules' `min_points`, 10) is always judged. A shorter one is judged when the trend test has
the power to see learning in it: from `SHORT_FLOOR` points on, when the Mann-Kendall test
would reach z `TREND_Z` at the series' own pace of fall and own noise — a fall of at least
`LEARNING_FALL` of its level, so that a flat log is judged too when its noise is small
enough for a 2% fall to have shown (see `points_needed`).

The per-step series stays what NaN and spike checks judge (they need every point).
"""

from __future__ import annotations

import math
from typing import Sequence

from ..core.model import EPOCH, EVAL_LOSS, LOSS, LOSS_EPOCH, LOSS_PART, Run, Series
from ._stats import median, point_noise
from .base import Skip

# The fewest points a trend check ever judges. The test's power depends on the series' own
# noise, measured from the MAD of its second differences (`point_noise`); the MAD of five
# differences (seven points) still holds when two of them are bent by the early fall of a
# loss curve, the MAD of four (six points) does not — below seven points the noise, and so
# the power, is unknown.
SHORT_FLOOR = 7
# The trend test's significance threshold for the power computation: Mann-Kendall z of 2
# (about 95%), the level TP-DEAD-RUN's own significance checks use.
TREND_Z = 2.0
# The smallest fall that counts as learning (TP-DEAD-RUN's `min_drop`): a flat series is
# judged only when a fall of this size over its length would have reached TREND_Z.
LEARNING_FALL = 0.02

# How the judged series is named in messages.
SERIES_WORDS = {LOSS: "loss", LOSS_EPOCH: "per-epoch train loss", EVAL_LOSS: "eval loss"}


def _finite(run: Run, name: str) -> Series | None:
    series = run.get(name)
    return series.finite() if series is not None else None


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def expected_trend_z(n: int, slope: float, noise: float) -> float:
    """The Mann-Kendall z a straight fall of `slope` per point under Gaussian noise of
    spread `noise` is expected to reach over n points: each pair i < j is in order with
    probability Phi((j - i) slope / (noise sqrt 2)), so E[S] sums 2 Phi - 1 over the pairs
    (with the test's continuity correction and its no-ties variance)."""
    if n < 3:
        return 0.0
    if noise <= 0.0:
        s = n * (n - 1) / 2.0
    else:
        scale = abs(slope) / (noise * math.sqrt(2.0))
        s = sum((n - k) * (2.0 * _phi(k * scale) - 1.0) for k in range(1, n))
    var = n * (n - 1) * (2 * n + 5) / 18.0
    return max(0.0, s - 1.0) / math.sqrt(var)


def points_needed(values: Sequence[float], minimum: int) -> tuple[int, float]:
    """(points the trend checks need to judge this series, its point noise).

    The fewest n (at least SHORT_FLOOR, at most `minimum`) at which the trend test is
    expected to reach TREND_Z for a fall at this series' own pace — its start-to-end fall
    (medians of the first and last three points) per point, or LEARNING_FALL of its level
    over its length when it fell less — under its own noise."""
    n = len(values)
    if n >= minimum or n < SHORT_FLOOR:
        return minimum, 0.0
    noise = point_noise(values)
    fall = abs(median(values[:3]) - median(values[-3:]))
    fall = max(fall, LEARNING_FALL * abs(median(values)))
    slope = fall / (n - 1)
    for k in range(SHORT_FLOOR, minimum):
        if expected_trend_z(k, slope, noise) >= TREND_Z:
            return k, noise
    return minimum, noise


def _enough(series: Series | None, minimum: int) -> bool:
    return series is not None and len(series) >= points_needed(series.values, minimum)[0]


def trend_series(run: Run, minimum: int) -> Series:
    """The series trend rules judge (see the module docstring), or Skip saying how many
    points there were and how many the trend checks need."""
    step = _finite(run, LOSS)
    epoch = _finite(run, LOSS_EPOCH)
    if epoch is not None and step is not None and epoch.source_name == step.source_name:
        epoch = None  # one column read under both names: a single view
    if epoch is not None and _enough(epoch, minimum):
        return epoch
    if step is not None and _enough(step, minimum):
        return step
    ev = _finite(run, EVAL_LOSS)
    if ev is not None and _enough(ev, minimum):
        return ev
    raise Skip(too_short_reason(run, minimum))


def too_short_reason(run: Run, minimum: int) -> str:
    """'5 finite loss points; the trend checks need at least 7, up to 10 as the loss's own
    noise requires' (and the eval count, if any); when a series has SHORT_FLOOR points or
    more, what its noise needs instead."""
    step = _finite(run, LOSS) or _finite(run, LOSS_EPOCH)
    ev = _finite(run, EVAL_LOSS)
    parts = []
    if step is not None:
        parts.append(f"{len(step)} finite loss point{'s' if len(step) != 1 else ''}")
    if ev is not None:
        parts.append(f"{len(ev)} finite eval loss point{'s' if len(ev) != 1 else ''}")
    if not parts:
        parts.append("no finite loss point")
    longest = max((s for s in (step, ev) if s is not None), key=len, default=None)
    if longest is not None and len(longest) >= SHORT_FLOOR:
        needed, noise = points_needed(longest.values, minimum)
        what = "eval loss" if longest is ev else "loss"
        return (f"{' and '.join(parts)}; at the {what}'s own noise ({noise:.3g}) the trend test reaches z "
                f"{TREND_Z:g} on a fall at its pace, or of {LEARNING_FALL:.0%}, only from {needed} points (the trend "
                f"checks judge from {SHORT_FLOOR} points when the noise allows, always from {minimum})")
    return (f"{' and '.join(parts)}; the trend checks need at least {SHORT_FLOOR}, "
            f"up to {minimum} as the loss's own noise requires")


def is_too_short(run: Run, minimum: int) -> str | None:
    """The reason a log is too short for the trend checks, or None when one series has
    enough points (only asked for logs that carry some loss)."""
    try:
        trend_series(run, minimum)
    except Skip as s:
        return str(s)
    return None


def recent_points(n: int, most: int, fraction: float) -> int:
    """How many trailing points of an n-point series are 'the last few': `most`, or
    `fraction` of a shorter log, and at least 3 (a window median)."""
    return min(most, max(3, math.ceil(fraction * n)))


def view_words(run: Run, series: Series) -> str:
    """Which view of the run a series is, for messages: 'train loss per step', 'train loss
    per epoch', 'eval loss'. A train loss is per epoch when it is the per-epoch column, or
    when the log's epoch counter advances by exactly one at each of its points; per step when
    the log carries a separate per-epoch view or a fractional epoch counter; else the log
    does not say (a Keras log's only step column is its epoch, read as the step)."""
    if series.name == LOSS_EPOCH:
        return "train loss per epoch"
    if series.name == EVAL_LOSS:
        return "eval loss"
    if series.name.startswith(LOSS_PART):
        return f"loss part {series.name[len(LOSS_PART):]} per logged step"
    if series.name != LOSS:
        return f"{series.name.replace('_', ' ')} per logged step"
    if run.get(LOSS_EPOCH) is not None:
        return "train loss per step"
    epoch = run.get(EPOCH)
    if epoch is None:
        return "train loss per logged point"
    at = dict(zip(epoch.steps, epoch.values))
    seen = [at.get(s) for s in series.steps]
    if all(e is not None and float(e).is_integer() for e in seen) and all(
            b - a == 1 for a, b in zip(seen, seen[1:]) if a is not None and b is not None):
        return "train loss per epoch"
    return "train loss per step"


def judged_on(run: Run, series: Series, first: int = 0, last: int | None = None, window: str = "") -> str:
    """'judged on the train loss per step, points 1-200 (steps 10-2000); levels: medians of 20'."""
    last = len(series) - 1 if last is None else last
    text = (f"judged on the {view_words(run, series)}, points {first + 1}-{last + 1} of {len(series)} "
            f"(steps {series.steps[first]}-{series.steps[last]})")
    return f"{text}; {window}" if window else text
