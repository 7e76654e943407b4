"""Exact zeros where a training run never has them: loss and gradient norm."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..core.model import GRAD_NORM, LOSS, Hit, Level, Run
from ._stats import mann_kendall_z, median, window_for
from .base import Context, NoLimits, METRICS, Rule, Skip, all_zero, fmt, need, whole_series_hit

ZERO_LOSS_DOC = """Every logged loss is exactly zero.

What it flags: a loss series (at least 3 points) in which every value is 0.0.
Why it matters: a cross-entropy of exactly zero means nothing is being scored — usually
every label is masked (-100), the loss is detached, or the wrong key is logged.
What it does not mean: a loss that is merely small; only exact zeros count.
"""


def check_zero_loss(run: Run, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    loss = need(run, LOSS, 3, "loss")
    if all_zero(loss):
        yield whole_series_hit(run, loss, "all {points} logged losses are exactly 0 (steps {first_step}-{last_step})")


ZERO_LOSS_RULE = Rule(
    id="TP-ZERO-LOSS", name="zero-loss", level=Level.FAIL, doc=ZERO_LOSS_DOC,
    check=check_zero_loss, needs=(LOSS,), origin="trainproof",
    family=METRICS,
)


@dataclass(frozen=True, kw_only=True)
class OnsetLimits:
    # Zeros must fill the end of the log for this many points: one rounded 0.0 in an
    # overfitting run is not an onset, a tail of them is.
    min_tail: int = 3


ZERO_ONSET_DOC = """The loss drops to exactly zero part-way through and stays there.

What it flags: a run whose loss was non-zero and then is exactly 0.0 for every logged
point from some step to the end (at least `min_tail` points).
Why it matters: the same causes as TP-ZERO-LOSS, arriving mid-run — often a data shard
whose labels are all masked, or an overflow that zeroes the loss.
What it does not mean: a loss that became small; only exact zeros count.
"""


def check_zero_onset(run: Run, limits: OnsetLimits, ctx: Context) -> Iterator[Hit]:
    loss = need(run, LOSS, limits.min_tail + 1, "loss")
    values = loss.values
    tail = 0
    for v in reversed(values):
        if v != 0.0:
            break
        tail += 1
    if tail == len(values):
        raise Skip("every loss is zero: reported by TP-ZERO-LOSS")
    if tail >= limits.min_tail:
        onset = len(values) - tail
        yield Hit(
            message=(
                f"loss is exactly 0 from step {loss.steps[onset]} to the end ({tail} points; "
                f"limit {limits.min_tail}); it was {fmt(values[onset - 1])} at step {loss.steps[onset - 1]}"
            ),
            evidence={"onset_step": loss.steps[onset], "zero_points": tail,
                      "last_nonzero": values[onset - 1]},
            location=run.location(loss.records[onset]),
        )


ZERO_ONSET_RULE = Rule(
    id="TP-ZERO-LOSS-ONSET", name="zero-loss-onset", level=Level.FAIL, doc=ZERO_ONSET_DOC,
    limits=OnsetLimits, check=check_zero_onset, needs=(LOSS,), origin="trainproof",
    family=METRICS,
)


@dataclass(frozen=True, kw_only=True)
class ZeroGradLimits:
    # The loss "clearly improved" when its trend is falling at |z| > 3 (Mann-Kendall)
    # and its end level is at least 10% below its start: a run cannot both learn that
    # much and receive no gradient, so the logged norm is not the one the optimizer used.
    improved_z: float = -3.0
    improved_drop: float = 0.10


ZERO_GRAD_DOC = """Every logged gradient norm is exactly zero.

What it flags: a gradient-norm series (at least 3 points) that is 0.0 throughout.
Why it matters: no gradient reaches the weights — frozen parameters, a detached graph,
or every label masked — so the run cannot learn.
What it does not mean: when the loss clearly fell, the check stands down (recorded as
skipped with its reason): a run cannot both learn and get no gradient, so the logged
value is not the real one (some sharded/offloaded setups log 0).
"""


def check_zero_grad(run: Run, limits: ZeroGradLimits, ctx: Context) -> Iterator[Hit]:
    grad = need(run, GRAD_NORM, 3, "gradient norm")
    if not all_zero(grad):
        return
    loss = run.get(LOSS)
    if loss is not None:
        finite = loss.finite().values
        if len(finite) >= 6:
            w = window_for(len(finite), divisor=5, lo=2, hi=20)
            start, end = median(finite[:w]), median(finite[-w:])
            z = mann_kendall_z(finite)
            if z < limits.improved_z and start > 0 and end < start * (1 - limits.improved_drop):
                raise Skip(
                    f"gradient norms are all 0 but the loss fell from {fmt(start)} to {fmt(end)} "
                    f"(trend z {z:.2f}): the logged norm is not the gradient the optimizer used"
                )
    yield whole_series_hit(run, grad, "all {points} logged gradient norms are exactly 0 "
                                      "(steps {first_step}-{last_step})")


ZERO_GRAD_RULE = Rule(
    id="TP-ZERO-GRAD", name="zero-grad-norm", level=Level.FAIL, doc=ZERO_GRAD_DOC,
    limits=ZeroGradLimits, check=check_zero_grad, needs=(GRAD_NORM,), origin="trainproof",
    family=METRICS,
)
