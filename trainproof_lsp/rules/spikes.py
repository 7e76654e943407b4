"""Sudden jumps: gradient-norm spikes and loss spikes (recovered or not)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import compress, count, repeat
from operator import ge, gt, mul
from typing import Iterable, Iterator, Sequence

from ..core.model import GRAD_NORM, LOSS, Hit, Level, Related, Run
from ._stats import median, point_noise
from ._views import judged_on
from .base import Context, METRICS, Rule, Skip, fmt, need, times

GRAD_DOC = """Gradient norm spikes far above its median and its recent level.

What it flags: finite gradient norms more than `max_ratio` times the median gradient
norm of the run and `max_ratio` times the median of the `before` norms just before them,
after the run's start-up phase; the finding points at the largest and counts the rest. A
lone spike counts only when it is at least `lone_ratio` times the median: one isolated
norm that clipping absorbed is not a pattern. A single-step peak (the norms just before and
after it below the limit) while the loss does not move — the loss logged from the peak to
the next norm stays within `quiet_sigmas` of its own point noise above its level before
(the median of the `quiet_before` losses before it, or the last one when lower) — is not
counted at all: the batch did not matter.
Why it matters: spikes this large usually come from a learning rate too high, a bad
batch, or missing clipping; they often precede divergence.
Noisy and early logs: gradient norms are large in the first steps of every run — while the
learning rate warms up and before the loss has fallen — and then settle; those steps are
the run's starting scale, not spikes. A norm is measured against its recent level, so
norms that are high through a warm-up, or shrink as the loss falls, are not spikes; and
the check starts once the loss level has made `fallen` of its fall from start to floor
(at most the first `max_startup` of the logged norms are skipped that way).
Short logs: it needs `min_points` norms; fewer make it NOT-CHECKED with the count.
Resumed runs: judged like any other (a resumed log has no start-up phase to skip).
What it does not mean: a broken run on its own — healthy runs have occasional spikes
that clipping absorbs; look at the loss around them.
"""


@dataclass(frozen=True, kw_only=True)
class GradLimits:
    min_points: int = 6  # a median of fewer points is not a scale
    # 10x the median: clipped healthy runs stay within ~3x; an order of magnitude is a
    # different regime (the same number the published trainproof uses).
    max_ratio: float = 10.0
    before: int = 10  # the recent level of a norm is the median of this many before it
    # One isolated spike must be two orders of magnitude to matter on its own: real runs
    # show single 10-20x norms that the loss never notices (one hard batch, clipped).
    lone_ratio: float = 100.0
    # Start-up phase: until the loss level (median of 3) has made half of its fall from
    # start to floor — where every run has its largest norms — but never more than the
    # first 10% of the logged norms (warm-up is 3-10% of a run in common recipes), so a
    # slowly falling run is still watched for most of its length.
    fallen: float = 0.5
    max_startup: float = 0.1
    # A single-step peak (the norms logged just before and after it are below the limit)
    # while the loss does not move is not a spike: the loss logged from the peak's step to
    # the next norm stays within 3 of the loss's own point noises (robust sigma, from second
    # differences) above its level before (the median of the `quiet_before` losses before
    # it, or the last of them when lower). A batch that
    # mattered moves the loss; 3 sigmas is where its own noise stops (~0.1% one-sided).
    quiet_sigmas: float = 3.0
    quiet_before: int = 5


def _startup_end(run: Run, grad_steps: Sequence[int], limits: GradLimits) -> int:
    """The last step of the run's start-up phase (see GRAD_DOC)."""
    cap = grad_steps[min(len(grad_steps) - 1, int(limits.max_startup * len(grad_steps)))]
    loss = run.get(LOSS)
    if loss is None:
        return grad_steps[0]
    values, steps = loss.finite().values, loss.finite().steps
    if len(values) < 3:
        return grad_steps[0]
    levels = [median(values[max(0, i - 2) : i + 1]) for i in range(len(values))]
    start, floor = levels[0], min(levels)
    mark = start - limits.fallen * (start - floor)
    fallen_at = next(steps[i] for i, lv in enumerate(levels) if lv <= mark)
    return max(grad_steps[0], min(fallen_at, cap))


def _loss_did_not_move(run: Run, step: int, next_step: int | None, limits: GradLimits) -> bool:
    """The loss logged from `step` up to `next_step` (or the first one logged at or after
    `step`) stays within quiet_sigmas point noises of its level before `step`; False when
    the log has no loss around the step to tell."""
    loss = run.get(LOSS)
    if loss is None:
        return False
    loss = loss.finite()
    steps, values = loss.steps, loss.values
    before = [v for s, v in zip(steps, values) if s < step][-limits.quiet_before:]
    after = [v for s, v in zip(steps, values) if s >= step and (next_step is None or s < next_step)]
    if not after:
        after = [v for s, v in zip(steps, values) if s >= step][:1]
    if len(before) < 3 or not after:
        return False
    # The level before: the median of the last few, or the last one when lower (a falling
    # loss is below the median of its recent past).
    level = min(median(before), before[-1])
    return max(after) - level <= limits.quiet_sigmas * point_noise(values)


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
    startup = _startup_end(run, grad.steps, limits)
    spikes = []
    for i, v in enumerate(values):
        if v <= limits.max_ratio * med or grad.steps[i] <= startup or i < 3:
            continue
        if v > limits.max_ratio * median(values[max(0, i - limits.before) : i]):
            spikes.append(i)
    if not spikes:
        return
    limit = limits.max_ratio * med
    quiet = [i for i in spikes
             if values[i - 1] <= limit and (i + 1 >= len(values) or values[i + 1] <= limit)
             and _loss_did_not_move(run, grad.steps[i], grad.steps[i + 1] if i + 1 < len(values) else None, limits)]
    spikes = [i for i in spikes if i not in quiet]
    if not spikes:
        return
    top = max(spikes, key=lambda i: values[i])
    ratio = values[top] / med
    if len(spikes) == 1 and ratio < limits.lone_ratio:
        return
    yield Hit(
        message=(
            f"gradient norm {fmt(values[top])} at step {grad.steps[top]} is {times(ratio)} the median "
            f"{fmt(med)}; {len(spikes)} point(s) above the limit {limits.max_ratio}x after the start-up "
            f"phase (to step {startup})"
            + (f"; {len(quiet)} single-step peak(s) the loss did not notice left out" if quiet else "") + "; "
            + judged_on(run, grad, window=f"each norm also against the median of the {limits.before} before it")
        ),
        evidence={"max_grad_norm": values[top], "median": med, "ratio": ratio,
                  "step": grad.steps[top], "spikes": len(spikes), "startup_end_step": startup,
                  "quiet_peaks": len(quiet)},
        location=run.location(grad.records[top]),
        related=tuple(
            Related(location=run.location(grad.records[i]),
                    message=f"gradient norm {fmt(values[i])} at step {grad.steps[i]}")
            for i in spikes if i != top
        )[:5],
    )


GRAD_SPIKE_RULE = Rule(
    id="TP-GRAD-SPIKE", name="grad-norm-spike", level=Level.WARN, doc=GRAD_DOC,
    limits=GradLimits, check=check_grad_spike, needs=(GRAD_NORM,), origin="trainproof",
    family=METRICS,
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
    # ...and 6 robust standard deviations of the run's own noise up to the jump (log of
    # each point over the median before it): a per-step loss at batch size 2, or a loss near its floor
    # (0.0013), routinely jumps 5-30x in one point — 3-5 of its own sigmas in real healthy
    # runs — while a blow-up (hot learning rate, fp16 overflow) is 10+ sigmas. Under
    # Gaussian noise a 6-sigma point is a one-in-a-billion event.
    noise_sigmas: float = 6.0
    # Recovered = the median of the points after the spike returns within 1.2x of the
    # level before it, within this many logged points.
    recover_within: int = 10
    recover_ratio: float = 1.2


LOSS_DOC = """A loss spike that the run recovered from (or whose recovery is unknown).

What it flags: a logged loss more than `spike_ratio` times the median of the `before`
points preceding it, `above_max` times their maximum and `noise_sigmas` robust standard
deviations of the run's own point-to-level noise up to that point, after which the loss returns within
`recover_ratio` of that level within `recover_within` points — or the log ends before
`recover_within` points came and they did not return (recovery unknown; the message says
how many points there were).
Why it matters: recovered spikes cost steps and hint at instability (learning rate at the
edge, bad batches); several of them are worth a look.
Noisy logs: a jump is measured against the run's own scale — a per-step loss at a small
batch size, or a loss at its floor where 0.001 -> 0.04 is one hard batch, jumps that far
all the time, so such jumps are not spikes; the last point of a noisy log is judged the
same way, never on its own.
Short logs: it needs `min_before` + 1 points; fewer make it NOT-CHECKED with the count.
Resumed runs: judged like any other.
What it does not mean: a broken run — it recovered. Unrecovered spikes are
TP-LOSS-SPIKE-UNRECOVERED.
"""

UNRECOVERED_DOC = """A loss spike that the run never recovered from.

What it flags: a logged loss more than `spike_ratio` times the median of the `before`
points preceding it (`above_max` times their maximum, `noise_sigmas` robust standard
deviations of the run's own noise), after which the loss does not come back within
`recover_ratio` of that level in the next `recover_within` points.
Why it matters: the run jumped to a worse regime and stayed there — the weights were
damaged (too high a learning rate, an overflow, a poisoned batch).
Noisy logs: as for TP-LOSS-SPIKE — jumps within the run's own noise are not spikes, and
"stayed there" is a median of the points after the jump, never one point.
Short logs and the end of a log: it needs all `recover_within` points after the jump; a
jump closer to the end than that is "recovery unknown" and reported by TP-LOSS-SPIKE
(a WARN), never as a FAIL.
Resumed runs: judged like any other.
What it does not mean: the spike's cause; look at the learning rate and gradient norm at
that step.
"""

# The noise scale is estimated on at most this many points: a scale, not an exact statistic,
# and a 200k-point log must not cost 200k small sorts. A longer log is sampled in blocks of
# consecutive points spread evenly over it: a loss that alternates (two data sources taking
# turns, every other step) shows both phases in every block, where an even stride of 2 would
# see one phase only, a noise of 0, and call its ordinary alternation a spike.
_NOISE_SAMPLE = 2000
_NOISE_BLOCK = 20


def _sample(first: int, n: int) -> Iterable[int]:
    """The indexes of [first, n) the noise is estimated on (see _NOISE_SAMPLE)."""
    if n - first <= _NOISE_SAMPLE:
        return range(first, n)
    blocks = _NOISE_SAMPLE // _NOISE_BLOCK
    step = (n - first) / blocks  # > _NOISE_BLOCK: the blocks do not overlap
    return (first + int(b * step) + j for b in range(blocks) for j in range(_NOISE_BLOCK))


def _residuals(v: Sequence[float], limits: LossLimits) -> list[tuple[int, float]]:
    """(index, ln(point / median of the points before it)) on the points _sample picks."""
    out = []
    for i in _sample(limits.min_before, len(v)):
        b = median(v[max(0, i - limits.before) : i])
        if b > 0 and v[i] > 0:
            out.append((i, math.log(v[i] / b)))
    return out


# Fewer residuals than this before a jump say nothing about the run's noise (a log's first
# five points are a noisy start, not a scale): the jump is then measured against the noise of
# the whole run instead.
MIN_NOISE_RESIDUALS = 8


def _noise_sigma(residuals: list[tuple[int, float]], upto: int) -> float:
    """Robust standard deviation (1.4826 x MAD) of the residuals before index `upto`: the
    run's own noise up to the jump (a run that blew up is noisy after, not before). With
    fewer than MIN_NOISE_RESIDUALS before it, the whole run's residuals: a single recovered
    jump in the first points is judged against the noise the run shows everywhere."""
    res = [r for i, r in residuals if i < upto]
    if len(res) < MIN_NOISE_RESIDUALS:
        res = [r for _, r in residuals]
    if len(res) < 3:
        return 0.0
    mid = median(res)
    return 1.4826 * median([abs(x - mid) for x in res])


def _loss_spikes(run: Run, limits: LossLimits) -> Iterator[tuple[int, float, float, bool | None]]:
    """(index, level before, level after, recovered?) for each spike start; recovered is
    None when the log ends before `recover_within` points came back or not."""
    loss = need(run, LOSS, limits.min_before + 1, "loss")
    v = loss.values
    n = len(v)
    # Cheap necessary condition first, in C (a spike exceeds above_max x the previous
    # point, which is <= the window's max), so a 200k-point log computes medians only
    # around real jumps.
    jumps = list(compress(count(1), map(gt, v[1:], map(mul, v, repeat(limits.above_max)))))
    if not jumps:
        return
    residuals: list[tuple[int, float]] | None = None
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
            if residuals is None:
                residuals = _residuals(v, limits)
            if math.log(v[i] / before) <= limits.noise_sigmas * _noise_sigma(residuals, i):
                i += 1
                continue
            after = v[i + 1 : i + 1 + limits.recover_within]
            # Recovery: any later window of up to 3 points back near the old level.
            recovered = any(
                median(after[j : j + 3]) <= limits.recover_ratio * before for j in range(len(after))
            )
            if not recovered and len(after) < limits.recover_within:
                yield i, before, median(after) if after else v[i], None
                return
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
    points_after = min(limits.recover_within, len(loss) - 1 - i)
    if recovered:
        state = "recovered"
    elif recovered is None:
        state = ("at the end of the log, recovery unknown" if points_after == 0 else
                 f"{points_after} point(s) after it before the log ends, at {fmt(after)}: recovery unknown")
    else:
        state = f"stays at {fmt(after)} over the next {points_after} points"
    yield Hit(
        message=(
            f"loss jumps to {fmt(loss.values[i])} at step {loss.steps[i]}, {times(ratio)} the level "
            f"{fmt(before)} before it (limit {limits.spike_ratio}x); {state}"
            + (f"; {len(found)} such spikes" if len(found) > 1 else "")
            + "; " + judged_on(run, loss, window=f"the level before a jump is the median of the {limits.before} "
                                                   f"points before it, recovery within {limits.recover_within}")
        ),
        evidence={"step": loss.steps[i], "value": loss.values[i], "level_before": before,
                  "ratio": ratio, "level_after": after, "spikes": len(found), "points_after": points_after},
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
    family=METRICS,
)
LOSS_SPIKE_UNRECOVERED_RULE = Rule(
    id="TP-LOSS-SPIKE-UNRECOVERED", name="loss-spike-unrecovered", level=Level.FAIL,
    doc=UNRECOVERED_DOC, limits=LossLimits, check=check_loss_spike_unrecovered, needs=(LOSS,),
    family=METRICS,
)
