"""The loss does not move at all."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from ..core.model import LOSS, Hit, Level, Run
from ._views import judged_on
from .base import Context, METRICS, Rule, Skip, fmt, need

DOC = """The loss is the same number at every logged step.

What it flags: a loss series (at least `min_points` points) whose relative spread
(standard deviation / |mean|) is below `max_rel_spread`.
Why it matters: a loss computed from changing batches and changing weights always moves;
a constant one is a constant — a logging bug, a frozen model fed the same batch, or a
loss that does not depend on the model.
What it does not mean: slow progress; a converged but noisy loss moves far more than this.
"""


@dataclass(frozen=True, kw_only=True)
class Limits:
    min_points: int = 5  # fewer points cannot tell constant from slow
    # 1e-4 relative: batch-to-batch noise of a real loss is orders of magnitude larger
    # (healthy fine-tunes move ~5% step to step), rounding to 4 decimals stays under it.
    max_rel_spread: float = 1e-4


def check(run: Run, limits: Limits, ctx: Context) -> Iterator[Hit]:
    loss = need(run, LOSS, limits.min_points, "loss")
    values = loss.values
    mean = sum(values) / len(values)
    # The spread is at least the range / sqrt(2n) (two points at the ends, the rest at the
    # mean): a range past limit x sqrt(2n) is not flat without summing the squares.
    if max(values) - min(values) > limits.max_rel_spread * abs(mean) * (2 * len(values)) ** 0.5:
        return
    if mean == 0.0:
        raise Skip("the loss is all zeros: reported by TP-ZERO-LOSS")
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) / abs(mean)
    if spread < limits.max_rel_spread:
        yield Hit(
            message=(
                f"loss stays at {fmt(mean)} over {len(values)} points (steps {loss.steps[0]}-"
                f"{loss.steps[-1]}): relative spread {spread:.2g} < limit {limits.max_rel_spread:g}; "
                + judged_on(run, loss, window="the spread is over all its points")
            ),
            evidence={"mean": mean, "relative_spread": spread, "points": len(values)},
            location=run.location(loss.records[0]),
        )


RULE = Rule(id="TP-FLAT", name="flat-loss", level=Level.FAIL, doc=DOC, limits=Limits,
            check=check, needs=(LOSS,), origin="trainproof", family=METRICS)
