"""The run never improved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..model import LOSS, Hit, Level, Run
from ._stats import mann_kendall_z, median, window_for
from .base import Context, Rule, Skip, fmt, need

DOC = """The loss shows no downward trend from start to end: the run is not learning.

What it flags: a loss series of at least `min_points` points whose end level (median of
the last window) is less than `min_drop` below its start level (median of the first
window), and which either shows no downward trend (Mann-Kendall score above
`max_trend_z`) or fell by less than `negligible_drop` in all — a statistically real but
negligible drift, as a model stuck at a uniform guess shows.
Why it matters: a run that does not learn in its first hundreds of steps rarely starts
later; the usual causes are a zero or tiny learning rate, frozen weights, or labels that
carry no signal.
What it does not mean: a run resumed at its convergence floor need not improve — when
the log starts late (first step beyond a few logging intervals) the check stands down.
"""


@dataclass(frozen=True, kw_only=True)
class Limits:
    min_points: int = 10  # a trend test on fewer points says nothing
    # Mann-Kendall z above -1: not even a weak (one-sigma) downward trend. Healthy runs
    # in the calibration corpus score -3.4 to -3.9, zero-LR runs -0.4 to 0.0.
    max_trend_z: float = -1.0
    min_drop: float = 0.02  # 2%: a fall smaller than this is within batch noise
    # 0.5%: below this a fall is no learning even when it is a steady trend (a model
    # stuck at ln(V) drifts by ~0.1% as its output bias settles).
    negligible_drop: float = 0.005


def check(run: Run, limits: Limits, ctx: Context) -> Iterator[Hit]:
    loss = need(run, LOSS, limits.min_points, "loss")
    values = loss.values
    interval = run.meta.logging_steps or max(1, loss.steps[1] - loss.steps[0])
    if loss.steps[0] > 3 * interval + 1:
        raise Skip(
            f"the log starts at step {loss.steps[0]}: a resumed run at its floor need not improve"
        )
    w = window_for(len(values), divisor=5, lo=3, hi=20)
    start, end = median(values[:w]), median(values[-w:])
    z = mann_kendall_z(values)
    drop = (start - end) / abs(start) if start else 0.0
    if drop < limits.min_drop and (z > limits.max_trend_z or drop < limits.negligible_drop):
        yield Hit(
            message=(
                f"loss level went from {fmt(start)} to {fmt(end)} over steps {loss.steps[0]}-"
                f"{loss.steps[-1]} ({-drop:+.1%}; limit: a fall of at least {limits.min_drop:.0%}); "
                + (f"no downward trend (z {z:.2f} > {limits.max_trend_z})" if z > limits.max_trend_z
                   else f"a fall under {limits.negligible_drop:.1%} is no learning")
            ),
            evidence={"start_level": start, "end_level": end, "drop": drop, "trend_z": z},
            location=run.location(loss.records[-1]),
        )


RULE = Rule(id="TP-DEAD-RUN", name="no-improvement", level=Level.FAIL, doc=DOC,
            limits=Limits, check=check, needs=(LOSS,), origin="trainproof")
