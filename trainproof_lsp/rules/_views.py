"""Which loss series a trend rule judges, and when a log is too short for any of them.

A log may carry one loss in several views: per step and per epoch (Lightning
`train_loss_step` / `train_loss_epoch`), and a held-out eval loss beside the train loss.
Trend rules (divergence, no improvement) ask for one series through `trend_series`:

1. the per-epoch train loss, when it is a separate series with enough points — it is the
   per-step loss averaged over whole epochs, so one hard batch cannot move it;
2. else the train loss as logged (per step; its levels are window medians);
3. else, when the train loss has too few points, the eval loss if it has enough: a run
   that logged its train loss five times but evaluated twenty times is judged on the twenty.

The per-step series stays what NaN and spike checks judge (they need every point).
"""

from __future__ import annotations

import math

from ..core.model import EVAL_LOSS, LOSS, LOSS_EPOCH, Run, Series
from .base import Skip

# How the judged series is named in messages.
SERIES_WORDS = {LOSS: "loss", LOSS_EPOCH: "per-epoch train loss", EVAL_LOSS: "eval loss"}


def _finite(run: Run, name: str) -> Series | None:
    series = run.get(name)
    return series.finite() if series is not None else None


def trend_series(run: Run, minimum: int) -> Series:
    """The series trend rules judge (see the module docstring), or Skip saying how many
    points there were and how many the trend checks need."""
    step = _finite(run, LOSS)
    epoch = _finite(run, LOSS_EPOCH)
    if epoch is not None and step is not None and epoch.source_name == step.source_name:
        epoch = None  # one column read under both names: a single view
    if epoch is not None and len(epoch) >= minimum:
        return epoch
    if step is not None and len(step) >= minimum:
        return step
    ev = _finite(run, EVAL_LOSS)
    if ev is not None and len(ev) >= minimum:
        return ev
    raise Skip(too_short_reason(run, minimum))


def too_short_reason(run: Run, minimum: int) -> str:
    """'5 finite loss points; the trend checks need 10' (and the eval count, if any)."""
    step = _finite(run, LOSS) or _finite(run, LOSS_EPOCH)
    ev = _finite(run, EVAL_LOSS)
    parts = []
    if step is not None:
        parts.append(f"{len(step)} finite loss point{'s' if len(step) != 1 else ''}")
    if ev is not None:
        parts.append(f"{len(ev)} finite eval loss point{'s' if len(ev) != 1 else ''}")
    if not parts:
        parts.append("no finite loss point")
    return f"{' and '.join(parts)}; the trend checks need {minimum}"


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
