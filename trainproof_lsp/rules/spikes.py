"""Sudden jumps: gradient-norm spikes and loss spikes (recovered or not)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, count, repeat
from operator import ge, gt, mul
from typing import Iterator

from ..model import GRAD_NORM, LOSS, Hit, Level, Related, Run
from ._stats import median
from .base import Context, Rule, Skip, fmt, need

GRAD_DOC = """Gradient norm spikes far above its median.

What it flags: finite gradient norms more than `max_ratio` times the median gradient
norm of the run; the finding points at the largest and counts the rest.
Why it matters: spikes this large usually come from a learning rate too high, a bad
batch, or missing clipping; they often precede divergence.
What it does not mean: a broken run on its own — healthy runs have occasional spikes
that clipping absorbs; look at the loss around them.
"""


@dataclass(frozen=True, kw_only=True)
class GradLimits:
    min_points: int = 6  # a median of fewer points is not a scale
    # 10x the median: clipped healthy runs stay within ~3x; an order of magnitude is a
    # different regime (the same number the published trainproof uses).
    max_ratio: float = 10.0


def check_grad_spike(run: Run, limits: GradLimits, ctx: Context) -> Iterator[Hit]:
    grad = need(run, GRAD_NORM, limits.min_points, "gradient norm")
    values = grad.values
    # Exact shortcut without sorting 200k points: if at least half the values reach
    # max/ratio, the median does too, so nothing can exceed ratio x median.
    top = max(values)
    if top > 0 and 2 * sum(map(ge, values, repeat(top / limits.max_ratio))) > len(values):
        return
    med = median(values)
    if med <= 0:
        raise Skip("median gradient norm is 0: no scale to measure a spike against")
    if top <= limits.max_ratio * med:
        return
    spikes = [i for i, v in enumerate(grad.values) if v > limits.max_ratio * med]
    if not spikes:
        return
    top = max(spikes, key=lambda i: grad.values[i])
    ratio = grad.values[top] / med
    yield Hit(
        message=(
            f"gradient norm {fmt(grad.values[top])} at step {grad.steps[top]} is {ratio:.4g}x the median "
            f"{fmt(med)}; {len(spikes)} point(s) above the limit {limits.max_ratio}x"
        ),
        evidence={"max_grad_norm": grad.values[top], "median": med, "ratio": ratio,
                  "step": grad.steps[top], "spikes": len(spikes)},
        location=run.location(grad.records[top]),
        related=tuple(
            Related(location=run.location(grad.records[i]),
                    message=f"gradient norm {fmt(grad.values[i])} at step {grad.steps[i]}")
            for i in spikes if i != top
        )[:5],
    )


GRAD_SPIKE_RULE = Rule(
    id="TP-GRAD-SPIKE", name="grad-norm-spike", level=Level.WARN, doc=GRAD_DOC,
    limits=GradLimits, check=check_grad_spike, needs=(GRAD_NORM,), origin="trainproof",
)


@dataclass(frozen=True, kw_only=True)
class LossLimits:
    before: int = 10  # the level before a spike is the median of this many points
    min_before: int = 3  # ...and needs at least this many, or there is no "before"
    # A loss that doubles in one logging interval is not noise: batch-to-batch noise of
    # a healthy run is a few tens of percent.
    spike_ratio: float = 2.0
    # ...and 1.5x the highest of those points: a value that noise already reached in the
    # last `before` points is not a spike, however low the median is.
    above_max: float = 1.5
    # Recovered = the median of the points after the spike returns within 1.2x of the
    # level before it, within this many logged points.
    recover_within: int = 10
    recover_ratio: float = 1.2


LOSS_DOC = """A loss spike that the run recovered from.

What it flags: a logged loss more than `spike_ratio` times the median of the `before`
points preceding it (and `above_max` times their maximum), after which the loss returns within `recover_ratio` of that level
within `recover_within` points (or the spike is at the end of the log, recovery unknown).
Why it matters: recovered spikes cost steps and hint at instability (learning rate at the
edge, bad batches); several of them are worth a look.
What it does not mean: a broken run — it recovered. Unrecovered spikes are
TP-LOSS-SPIKE-UNRECOVERED.
"""

UNRECOVERED_DOC = """A loss spike that the run never recovered from.

What it flags: a logged loss more than `spike_ratio` times the median of the `before`
points preceding it (and `above_max` times their maximum), after which the loss does not come back within `recover_ratio` of
that level in the next `recover_within` points.
Why it matters: the run jumped to a worse regime and stayed there — the weights were
damaged (too high a learning rate, an overflow, a poisoned batch).
What it does not mean: the spike's cause; look at the learning rate and gradient norm at
that step.
"""


def _loss_spikes(run: Run, limits: LossLimits) -> Iterator[tuple[int, float, float, bool | None]]:
    """(index, level before, level after, recovered?) for each spike start."""
    loss = need(run, LOSS, limits.min_before + 1, "loss")
    v = loss.values
    n = len(v)
    # Cheap necessary condition first, in C (a spike exceeds above_max x the previous
    # point, which is <= the window's max), so a 200k-point log computes medians only
    # around real jumps.
    jumps = list(compress(count(1), map(gt, v[1:], map(mul, v, repeat(limits.above_max)))))
    k = 0
    i = limits.min_before
    while k < len(jumps):
        if jumps[k] < i:
            k += 1
            continue
        i = jumps[k]
        k += 1
        window = v[max(0, i - limits.before) : i]
        before = median(window)
        if before > 0 and v[i] > limits.spike_ratio * before and v[i] > limits.above_max * max(window):
            after = v[i + 1 : i + 1 + limits.recover_within]
            if not after:
                yield i, before, v[i], None
                return
            # Recovery: any later window of up to 3 points back near the old level.
            recovered = any(
                median(after[j : j + 3]) <= limits.recover_ratio * before for j in range(len(after))
            )
            yield i, before, median(after), recovered
            # Skip the rest of this episode so one spike is one finding.
            i += 1
            while i < n and v[i] > limits.recover_ratio * before:
                i += 1
        else:
            i += 1


def _spike_hits(run: Run, limits: LossLimits, want_recovered: bool) -> Iterator[Hit]:
    loss = run.get(LOSS)
    assert loss is not None
    loss = loss.finite()
    # Both spike rules share one scan of the series (memoised on the run).
    key = ("loss-spikes", limits)
    if key not in run.memo:
        run.memo[key] = list(_loss_spikes(run, limits))
    found = [s for s in run.memo[key] if (s[3] is not False) == want_recovered]
    if not found:
        return
    i, before, after, recovered = max(found, key=lambda s: loss.values[s[0]] / s[1])
    ratio = loss.values[i] / before
    state = ("recovered" if recovered else "at the end of the log, recovery unknown") if want_recovered \
        else f"stays at {fmt(after)} over the next {limits.recover_within} points"
    yield Hit(
        message=(
            f"loss jumps to {fmt(loss.values[i])} at step {loss.steps[i]}, {ratio:.2f}x the level "
            f"{fmt(before)} before it (limit {limits.spike_ratio}x); {state}"
            + (f"; {len(found)} such spikes" if len(found) > 1 else "")
        ),
        evidence={"step": loss.steps[i], "value": loss.values[i], "level_before": before,
                  "ratio": ratio, "level_after": after, "spikes": len(found)},
        location=run.location(loss.records[i]),
        related=tuple(
            Related(location=run.location(loss.records[s[0]]),
                    message=f"loss spike to {fmt(loss.values[s[0]])} at step {loss.steps[s[0]]}")
            for s in found if s[0] != i
        )[:5],
    )


def check_loss_spike(run: Run, limits: LossLimits, ctx: Context) -> Iterator[Hit]:
    yield from _spike_hits(run, limits, want_recovered=True)


def check_loss_spike_unrecovered(run: Run, limits: LossLimits, ctx: Context) -> Iterator[Hit]:
    yield from _spike_hits(run, limits, want_recovered=False)


LOSS_SPIKE_RULE = Rule(
    id="TP-LOSS-SPIKE", name="loss-spike", level=Level.WARN, doc=LOSS_DOC,
    limits=LossLimits, check=check_loss_spike, needs=(LOSS,),
)
LOSS_SPIKE_UNRECOVERED_RULE = Rule(
    id="TP-LOSS-SPIKE-UNRECOVERED", name="loss-spike-unrecovered", level=Level.FAIL,
    doc=UNRECOVERED_DOC, limits=LossLimits, check=check_loss_spike_unrecovered, needs=(LOSS,),
)
