"""Loss ends well above its best level and stays there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..core.model import EVAL_LOSS, LOSS, Hit, Level, Related, Run
from ._stats import median, rolling_levels, window_for
from ._views import SERIES_WORDS, judged_on, recent_points, trend_series
from .base import Context, METRICS, Rule, Skip, fmt, times

DOC = """Loss ends well above its best level and stays there.

What it flags: the loss level at the end of the log (median of the last window) is more
than `max_ratio` times the best level the run reached (the lowest rolling median), and
the best level is not in that last window.
Why it matters: a run that diverged and plateaued high is burning compute on a model
that got worse — typically a learning rate too high or missing gradient clipping.
Noisy logs: levels are window medians, so single spikes cannot fire it, and a rise that
stays within the run's own noise near its floor is not divergence: the end level must
also be at least `min_regain` of the way back from the best level to the start level
(a loss that fell from 2.0 to 0.03 and wanders to 0.06 has given back 1.5% of its fall).
When the log carries the train loss per step and per epoch, it judges the per-epoch series.
The rise must have lasted `min_stay` points (`min_stay_fraction` of a shorter log): a jump in the last few points is "recovery
unknown" (TP-LOSS-SPIKE, a WARN), never a divergence FAIL.
When an eval loss series exists and is at or near its best at the end, the train curve's
rise is treated as noise and the check stands down with that reason.
Short logs: it needs `min_points` points; with fewer train points it judges the eval loss
when that has enough; with neither, it is NOT-CHECKED and the report says how many points
there were.
Resumed runs: judged like any other — a resumed run that climbs 1.5x above its best
level has diverged, wherever it started.
What it does not mean: one noisy step, or a run that is merely slower than hoped.
"""


@dataclass(frozen=True, kw_only=True)
class Limits:
    # The trend checks' minimum (shared with TP-DEAD-RUN): a level (window median) of a
    # shorter log is one or two points, and a best level among a handful is chance.
    min_points: int = 10
    # end level / best level above 1.5x is divergence: healthy runs end at or below
    # their best level plus noise; a 50% higher plateau is a different regime.
    max_ratio: float = 1.5
    # ...and the end level has given back at least 10% of the fall from the start level
    # to the best level: near the floor the loss is a small number whose noise alone
    # doubles it (a loss of 0.03 wandering to 0.06 after falling from 2.0), while a run
    # that diverged loses a real part of what it learned.
    min_regain: float = 0.1
    # ...and it has stayed up for 10 logged points (the spike rules' recovery window), or a
    # quarter of a shorter log (at least 3 points: 3 of 12 epochs is a trend, 2 of 23 steps
    # is a jump): a jump in the last few points may still come back, and is TP-LOSS-SPIKE's
    # to report.
    min_stay: int = 10
    min_stay_fraction: float = 0.25
    # Eval overrule: the last eval within 5% of the best eval means the model is still
    # at its best on held-out data, whatever the train curve's noise says.
    eval_tolerance: float = 0.05


def check(run: Run, limits: Limits, ctx: Context) -> Iterator[Hit]:
    loss = trend_series(run, limits.min_points)
    what = SERIES_WORDS[loss.name]
    values = loss.values
    n = len(values)
    w = window_for(n, divisor=10, lo=3, hi=20)
    levels = rolling_levels(values, w)
    best_idx, best = min(levels, key=lambda t: (t[1], t[0]))
    end = median(values[-w:])
    start = max(lv for i, lv in levels if i <= best_idx)  # the highest level before the best
    if best <= 0:
        raise Skip(f"best {what} level {fmt(best)} is not positive: a ratio is meaningless")
    ratio = end / best
    if ratio <= limits.max_ratio or best_idx >= n - w:
        return
    regain = (end - best) / (start - best) if start > best else 1.0
    if regain < limits.min_regain:
        return
    # How long the loss has stayed up: the trailing levels above the limit, each placed at
    # the centre of its window (a median lags its window's end by half a window).
    limit = limits.max_ratio * best
    stay_from = n - 1
    for i, lv in reversed(levels):
        if lv <= limit:
            break
        stay_from = max(0, i - (w - 1) // 2)
    if n - stay_from < recent_points(n, limits.min_stay, limits.min_stay_fraction):
        return  # a jump in the last few points: recovery unknown (TP-LOSS-SPIKE says so)
    eval_loss = run.get(EVAL_LOSS)
    if eval_loss is not None and loss.name != EVAL_LOSS:
        ev = eval_loss.finite()
        if len(ev) >= 3:
            ebest = min(ev.values)
            if ev.values[-1] <= ebest * (1 + limits.eval_tolerance):
                raise Skip(
                    f"train loss level rose {times(ratio)}, but eval loss ends at {fmt(ev.values[-1])}, "
                    f"within {limits.eval_tolerance:.0%} of its best {fmt(ebest)}: the rise is train-side noise"
                )
    # The best level is a window median; cite the window's lowest point as "best step".
    lo = max(0, best_idx - w + 1)
    best_point = min(range(lo, best_idx + 1), key=lambda i: values[i])
    end_idx = n - 1
    evidence: dict[str, float | int | str] = {
        "end_level": end, "best_level": best, "ratio": ratio, "best_step": loss.steps[best_point],
        "end_step": loss.steps[end_idx], "window": w}
    if loss.name != LOSS:
        evidence["series"] = loss.name  # the view judged, when not the train loss as logged
    yield Hit(
        message=(
            f"{what} level {fmt(end)} at the end (step {loss.steps[end_idx]}) is {times(ratio)} its best "
            f"level {fmt(best)} (around step {loss.steps[best_point]}); limit {limits.max_ratio}x; "
            + judged_on(run, loss, window=f"levels: rolling medians of {w} points, the end level the last {w}")
        ),
        evidence=evidence,
        location=run.location(loss.records[end_idx]),
        related=(Related(location=run.location(loss.records[best_point]),
                         message=f"best {what} level {fmt(best)} around step {loss.steps[best_point]}"),),
    )


RULE = Rule(id="TP-DIVERGE", name="divergence", level=Level.FAIL, doc=DOC, limits=Limits,
            check=check, needs=(LOSS,), origin="trainproof", family=METRICS)
