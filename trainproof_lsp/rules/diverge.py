"""Loss ends well above its best level and stays there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..model import EVAL_LOSS, LOSS, Hit, Level, Related, Run
from ._stats import median, rolling_levels, window_for
from .base import Context, Rule, Skip, fmt, need

DOC = """Loss ends well above its best level and stays there.

What it flags: the loss level at the end of the log (median of the last window) is more
than `max_ratio` times the best level the run reached (the lowest rolling median), and
the best level is not in that last window.
Why it matters: a run that diverged and plateaued high is burning compute on a model
that got worse — typically a learning rate too high or missing gradient clipping.
What it does not mean: one noisy step (levels are medians, so single spikes cannot fire
it); and when an eval loss series exists and is at or near its best at the end, the
train curve's rise is treated as noise and the check stands down with that reason.
"""


@dataclass(frozen=True, kw_only=True)
class Limits:
    min_points: int = 6  # fewer points cannot separate a trend from noise
    # end level / best level above 1.5x is divergence: healthy runs end at or below
    # their best level plus noise; a 50% higher plateau is a different regime.
    max_ratio: float = 1.5
    # Eval overrule: the last eval within 5% of the best eval means the model is still
    # at its best on held-out data, whatever the train curve's noise says.
    eval_tolerance: float = 0.05


def check(run: Run, limits: Limits, ctx: Context) -> Iterator[Hit]:
    loss = need(run, LOSS, limits.min_points, "loss")
    values = loss.values
    n = len(values)
    w = window_for(n, divisor=10, lo=3, hi=20)
    levels = rolling_levels(values, w)
    best_idx, best = min(levels, key=lambda t: (t[1], t[0]))
    end = median(values[-w:])
    if best <= 0:
        raise Skip(f"best loss level {fmt(best)} is not positive: a ratio is meaningless")
    ratio = end / best
    if ratio <= limits.max_ratio or best_idx >= n - w:
        return
    eval_loss = run.get(EVAL_LOSS)
    if eval_loss is not None:
        ev = eval_loss.finite()
        if len(ev) >= 3:
            ebest = min(ev.values)
            if ev.values[-1] <= ebest * (1 + limits.eval_tolerance):
                raise Skip(
                    f"train loss level rose {ratio:.2f}x, but eval loss ends at {fmt(ev.values[-1])}, "
                    f"within {limits.eval_tolerance:.0%} of its best {fmt(ebest)}: the rise is train-side noise"
                )
    # The best level is a window median; cite the window's lowest point as "best step".
    lo = max(0, best_idx - w + 1)
    best_point = min(range(lo, best_idx + 1), key=lambda i: values[i])
    end_idx = n - 1
    yield Hit(
        message=(
            f"loss level {fmt(end)} at the end (step {loss.steps[end_idx]}) is {ratio:.2f}x its best "
            f"level {fmt(best)} (around step {loss.steps[best_point]}); limit {limits.max_ratio}x"
        ),
        evidence={"end_level": end, "best_level": best, "ratio": ratio,
                  "best_step": loss.steps[best_point], "end_step": loss.steps[end_idx], "window": w},
        location=run.location(loss.records[end_idx]),
        related=(Related(location=run.location(loss.records[best_point]),
                         message=f"best loss level {fmt(best)} around step {loss.steps[best_point]}"),),
    )


RULE = Rule(id="TP-DIVERGE", name="divergence", level=Level.FAIL, doc=DOC, limits=Limits,
            check=check, needs=(LOSS,), origin="trainproof")
