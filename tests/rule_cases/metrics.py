"""Cases for the metrics family: Runs built from value lists, judged as the engine judges a
log (judge_run) for the family's whole finding list."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Mapping, Sequence

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Finding, Hit, RecordSpans, Run, RunMeta, Series
from trainproof_lsp.judge.engine import judge_run
from trainproof_lsp.rules import Context
from trainproof_lsp.rules.base import Skip
from trainproof_lsp.rules._stats import point_noise

from . import Expect, FamilyCases, Fires, Quiet, RuleCases, straddle

NAN = math.nan
INF = math.inf
Values = Sequence[float | None]


def run_of(*, every: int = 10, first: int = 10, classes: int | None = None, steps: Sequence[int] | None = None,
           cols: Mapping[str, Values] | None = None, **series: Values) -> Run:
    """A run of one record per row: row i is step first + every*i (or steps[i]) on line i;
    a series holds a point at row i unless its value there is None. `classes` is the number
    of classes a config.json beside the log would give."""
    named = {**series, **(cols or {})}
    n = max(len(v) for v in named.values())
    at = list(steps) if steps is not None else [first + every * i for i in range(n)]
    built = {}
    for name, values in named.items():
        rows = [i for i, v in enumerate(values) if v is not None]
        built[name] = Series(name, name, [at[i] for i in rows], [float(v) for v in values if v is not None], rows)
    spans = RecordSpans(start_lines=range(n), start_chars=[0] * n, end_lines=range(n), end_chars=[1] * n)
    meta = RunMeta(vocab_size=classes, vocab_source="config.json" if classes else None)
    return Run(path="metrics.jsonl", format="metrics-jsonl", series=built, record_spans=spans, meta=meta)


def context(run: Run) -> Context:
    # As the engine's: the number of classes from the config.json beside the log.
    if run.meta.vocab_size:
        return Context(num_classes=run.meta.vocab_size, num_classes_source=run.meta.vocab_source)
    return Context()


def report(run: Run) -> list[Finding]:
    return list(judge_run(run, Config()).findings)


Check = Callable[[Run, Any, Context], Iterator[Hit]]


def hits_of(check: Check, run: Run, limits: Any,
            ctx: Context | None = None) -> list[tuple[str, dict[str, Any], int, list[tuple[int, str]]]]:
    """A check's findings on a run, each as (message, evidence, line, related (line, message));
    the context is an empty one unless given."""
    return [(h.message, dict(h.evidence), h.location.span.start_line,
             [(r.location.span.start_line, r.message) for r in h.related])
            for h in check(run, limits, ctx or Context())]


def skip_of(check: Check, run: Run, limits: Any, ctx: Context | None = None) -> str:
    """The reason a check gives for not judging a run (it must give one)."""
    try:
        list(check(run, limits, ctx or Context()))
    except Skip as e:
        return str(e)
    raise AssertionError("the check judged the run instead of skipping it")


def falling(n: int, start: float = 3.0, end: float = 1.0) -> list[float]:
    """A smooth exponential-like fall from `start` to `end` over n points, with a small
    deterministic wiggle, like a healthy loss."""
    out = []
    for i in range(n):
        t = i / (n - 1)
        out.append(end + (start - end) * math.exp(-4 * t) + 0.01 * ((i * 7) % 5 - 2) / 2)
    return out


def healthy(n: int = 60) -> list[float]:
    return falling(n, 2.5, 0.9)


def with_at(values: Sequence[float], at: dict[int, float]) -> list[float]:
    out = list(values)
    for i, v in at.items():
        out[i] = v
    return out


def ones(n: int, value: float = 1.0) -> list[float]:
    return [value] * n


def nones(n: int) -> list[float | None]:
    """n rows without a point of the series."""
    return [None] * n


def grad_streak(k: float, n: int = 12, at: int = 4) -> Run:
    """Gradient norms of 1.0 with a streak of k NaNs from point `at`, a healthy loss."""
    grads = with_at(ones(n), {at + j: NAN for j in range(int(k))})
    return run_of(loss=healthy(n), grad_norm=grads)


def zero_tail(k: float, n: int = 12) -> Run:
    return run_of(loss=healthy(n)[: n - int(k)] + [0.0] * int(k))


def collapse(ratio: float, start: float = 5.0, n: int = 20) -> Run:
    """A loss of `start` for its first window (4 points of 20), `start * ratio` for its last,
    falling geometrically between; ten classes."""
    end = start * ratio
    mid = [start * (ratio ** ((i + 1) / (n - 7))) for i in range(n - 8)]
    return run_of(loss=[start] * 4 + mid + [end] * 4, classes=10)


def alternating(rel: float, n: int = 10, level: float = 2.0) -> list[float]:
    """Around `level`, alternating +-rel of it: a relative spread (std/mean) of exactly rel."""
    return [level * (1 + rel * (1 if i % 2 else -1)) for i in range(n)]


def zero_lr_stretch(fraction: float, n: int = 100) -> Run:
    """A learning rate of 1e-4 with a stretch of zeros (fraction of the n points) in the middle."""
    k = round(fraction * n)
    return run_of(loss=healthy(n), lr=[1e-4] * 40 + [0.0] * k + [1e-4] * (n - 40 - k))


def repeats(fraction: float, n: int = 20) -> Run:
    """A loss whose step repeats its predecessor's at fraction of its n points."""
    k = round(fraction * n)
    steps = [10 * (i + 1) for i in range(n)]
    for j in range(k):
        steps[5 + 3 * j] = steps[4 + 3 * j]
        for i in range(6 + 3 * j, n):
            steps[i] = steps[i - 1] + 10
    return run_of(loss=healthy(n), steps=steps)


def cycle3(n: int, a: float = 0.1, level: float = 1.0) -> list[float]:
    """level, level*e^a, level*e^-a repeated: every median of 10 consecutive points is
    `level`, and the log-residuals {0, a, -a} have a robust sigma of exactly 1.4826 a."""
    return [level * math.exp(a * (0, 1, -1)[i % 3]) for i in range(n)]


def spike_at(value: float, *, n: int = 50, at: int = 30, up: int = 1, after: float = 1.0,
             base: list[float] | None = None) -> Run:
    """A flat loss of 1.0 (or `base`) that jumps to `value` at point `at`, stays there for
    `up` points, then sits at `after` (x its level) to the end."""
    values = list(base) if base is not None else ones(n)
    for j in range(up):
        values[at + j] = value
    for j in range(at + up, n):
        values[j] = values[j] * after
    return run_of(loss=values)


def spike_after_high(distance: float) -> Run:
    """A first point of 4.0 (before any spike can be judged), a flat 1.0, and a jump to 2.5
    `distance` points after the 4.0: inside a window of 10 the 4.0 is the window's maximum
    and 2.5 is not 1.5x it."""
    d = int(distance)
    values = [4.0] + ones(39)
    values[d] = 2.5
    return run_of(loss=values)


def grad_spikes(ratio: float, *, n: int = 40, at: tuple[int, ...] = (25, 26), bump: float = 0.0) -> Run:
    """Gradient norms of 1.0 with `ratio` at the points `at`, a healthy loss (+bump at them)."""
    loss = healthy(n)
    for i in at:
        loss[i] += bump
    return run_of(loss=loss, grad_norm=with_at(ones(n), {i: ratio for i in at}))


def grad_spikes_after_stretch(distance: float, n: int = 60, at: int = 40) -> Run:
    """Norms of 1.0 with a stretch of six at 9.0 (below 10x the median, so no spike itself)
    starting `distance` points before two norms of 60 at `at`: inside a window of 10 before
    them the stretch holds the window's median at 9, outside it at 5."""
    d = int(distance)
    grads = ones(n)
    for j in range(6):
        grads[at - d + j] = 9.0
    grads[at] = grads[at + 1] = 60.0
    return run_of(loss=healthy(n), grad_norm=grads)


def peak_with_loss_moving(k: float, n: int = 40, at: int = 25, b: float = 0.02) -> Run:
    """A single gradient norm of 500 at point `at` (100x past the median is needed alone) over
    a loss alternating +-b around 2.0 that, at the peak's step, moves k of its own point noises
    above its level before (the lower of the median of the 5 losses before and the last)."""
    base = [2.0 + b * (1 if i % 2 else -1) for i in range(n)]
    before = base[at - 5:at]
    level = min(sorted(before)[2], before[-1])
    loss = list(base)
    for _ in range(20):  # the bump moves the noise estimate a little: settle it
        loss[at] = level + k * point_noise(loss)
    return run_of(loss=loss, grad_norm=with_at(ones(n), {at: 500.0}))


def spike_pair_at(position: float, loss: list[float], n: int = 100) -> Run:
    """Two norms of 30 (30x the median; a pair, so neither lone nor a single-step peak) at
    points `position` and the next, beside `loss`."""
    i = int(position)
    return run_of(loss=loss, grad_norm=with_at(ones(n), {i: 30.0, i + 1: 30.0}))


def after_startup_cap(fraction: float, n: int = 100) -> Run:
    """A loss that makes half its fall only at mid-run, so the start-up phase ends at its cap;
    the spike pair at `fraction` of the norms."""
    return spike_pair_at(round(fraction * n), [3.0 - 2.0 * i / (n - 1) for i in range(n)], n)


def after_half_fall(fall: float, n: int = 100) -> Run:
    """A loss at 3.0 that drops to 3 - 2 x fall at point 5 and to its floor 1.0 at point 20,
    and a spike pair at points 7 and 8: after the start-up phase when the drop at 5 made at
    least half the fall (the phase ends there), inside it otherwise (it ends at its cap, 10)."""
    loss = [3.0] * 5 + [3.0 - 2.0 * fall] * 15 + ones(n - 20)
    return spike_pair_at(7, loss, n)


def peak_after_low_stretch(reach: float, n: int = 40, at: int = 25) -> Run:
    """A single norm of 500 at `at` while the loss (2.0, +-0.001) barely moves there, after
    three losses of 1.9 whose farthest lies `reach` points before the peak: a level taken
    from the last 5 losses sees them (the loss then rose: the peak counts), from fewer not."""
    far = int(reach)
    loss = [2.0 + 0.001 * (1 if i % 2 else -1) for i in range(n)]
    for j in range(far - 2, far + 1):
        loss[at - j] = 1.9
    loss[at] = 2.004
    return run_of(loss=loss, grad_norm=with_at(ones(n), {at: 500.0}))


def diverged(ratio: float = 1.6, *, start: float = 3.0, up: int = 30, n: int = 60, lead: int = 6,
             level: float = 1.0) -> Run:
    """`lead` points at `start`, a fall to 1.0 by point 20 (a third of a shorter log), then
    1.0 until the last `up` points, which sit at `ratio`; all of it times `level`."""
    to = min(20, n // 3)
    lead = min(lead, to // 2)
    fall = [start - (start - 1.0) * (i + 1) / (to - lead) for i in range(to - lead)]
    body = [start] * lead + fall + ones(n - to)
    return run_of(loss=[level * v for v in body[: n - up] + [ratio] * up])


def diverged_with_eval(gap: float, evals: int = 6) -> Run:
    """A diverged train loss whose last `evals` evals (every 10th point) fall and end `gap`
    above their best."""
    run = diverged()
    ev: list[float | None] = [None] * 60
    for k, i in enumerate(range(59 - 10 * (evals - 1), 60, 10)):
        ev[i] = 1.0 - 0.05 * k
    ev[59] = (1.0 - 0.05 * (evals - 2)) * (1 + gap)
    return run_of(loss=list(run.series["loss"].values), eval_loss=ev)


def at_ln(classes: int, values: Sequence[float]) -> list[float]:
    return [v * math.log(classes) for v in values]


def steady(n: int, start: float, end: float, w: int) -> list[float]:
    """`w` points at `start`, a straight fall, `w` points at `end`: its level windows read
    exactly start and end, and its trend is as strong as a trend gets."""
    return [start] * w + [start + (end - start) * (i + 1) / (n - 2 * w + 1) for i in range(n - 2 * w)] + [end] * w


def hump(drop: float, *, n: int = 40, w: int = 8, noise: float = 0.0) -> list[float]:
    """A first window at 1.0, a rise to 1.1 through the middle, a last window at 1 - drop:
    its level fell by `drop` with no downward trend (the rise outweighs it), +-noise
    alternating on every point."""
    mid = n - 2 * w
    values = [1.0] * w + [1.0 + 0.1 * (i + 1) / mid for i in range(mid)] + [1.0 - drop] * w
    return [v + noise * (1 if i % 2 else -1) for i, v in enumerate(values)]


def hump_in_noises(k: float, a: float = 0.02) -> Run:
    """`hump` whose fall is k level noises (point noise / sqrt of the 8-point window) of
    itself, and at least 2%."""
    drop = 0.05
    for _ in range(20):  # the noise moves a little with the drop: settle it
        drop = k * point_noise(hump(drop, noise=a)) / math.sqrt(8)
    return run_of(loss=hump(drop, noise=a))


def crawl(n: int = 40, *, near: float = 0.05, drop: float = 0.02, classes: int = 1000) -> Run:
    """A steady fall of `drop` ending `near` above ln(classes)."""
    w = max(3, min(20, n // 5))
    end = math.log(classes) * (1 + near)
    return run_of(loss=steady(n, end / (1 - drop), end, w), classes=classes)


def chance_noisy(z: float, *, a: float = 0.05, n: int = 31) -> Run:
    """A loss alternating +-a around a level whose 3-point medians sit z band-spreads
    (1.25 x point noise / sqrt 3, the noise from first differences) from ln 2."""
    spread = 1.25 * 1.4826 * 2 * a / math.sqrt(2) / math.sqrt(3)
    level = math.log(2) + z * spread - a
    return run_of(loss=[level + a * (1 if i % 2 else -1) for i in range(n)], classes=2)


def settles(k: float, n: int = 60, classes: int = 2) -> Run:
    """A fall from 3 x ln(C) that jumps to ln(C) for its last k points."""
    k = int(k)
    bound = math.log(classes)
    return run_of(loss=[3 * bound - bound * i / n for i in range(n - k)] + [bound] * k, classes=classes)


def accuracies(values: Sequence[float], classes: int | None = None, every: int = 10) -> Run:
    """Eval accuracies at every 10th row of a healthy run."""
    n = every * len(values)
    acc: list[float | None] = [None] * n
    for k, v in enumerate(values):
        acc[every * k + every - 1] = v
    return run_of(loss=healthy(n), eval_accuracy=acc, classes=classes)


def overfit(evals: Sequence[float], train: Sequence[float] | None = None, every: int = 10) -> Run:
    """Eval losses at every 10th row beside a train loss (a healthy fall by default)."""
    n = every * len(evals)
    ev: list[float | None] = [None] * n
    for k, v in enumerate(evals):
        ev[every * k + every - 1] = v
    return run_of(loss=list(train) if train is not None else healthy(n), eval_loss=ev)


OVERFIT_EVALS = [2.0, 1.7, 1.4, 1.2, 1.0, 1.0, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5]


def eval_rise_in_noises(k: float, a: float = 0.05) -> Run:
    """Evals alternating +-a around 1.0, then three at k eval noises above the lowest
    level (1 - a)."""
    base = [1.0 + a * (1 if i % 2 else -1) for i in range(12)]
    end = 1.3
    for _ in range(20):
        end = (1.0 - a) + k * point_noise(base + [end] * 3)
    return overfit(base + [end] * 3)


def train_fall_in_noises(k: float, b: float = 0.02) -> Run:
    """Evals that rise from step 50 on; a train loss alternating +-b whose last 5 points sit
    k level noises (point noise / sqrt 5) below the 5 before the best eval."""
    evals = [1.3, 1.2, 1.1, 1.0, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5]
    fall = 0.05
    for _ in range(20):
        train = [1.0 + b * (1 if i % 2 else -1) - (fall if i >= 95 else 0.0) for i in range(100)]
        fall = k * point_noise(train) / math.sqrt(5)
    train = [1.0 + b * (1 if i % 2 else -1) - (fall if i >= 95 else 0.0) for i in range(100)]
    return overfit(evals, train)


LN2 = math.log(2)


def dpo(loss: Values, margins: Values, **cols: Values) -> Run:
    return run_of(loss=loss, cols={"rewards/margins": margins, **{k.replace("__", "/"): v for k, v in cols.items()}})


def dpo_share(share: float, n: int = 20) -> Run:
    """A DPO log whose loss sits at ln 2 with margins 0 at `share` of its n steps after the first."""
    k = round(share * n)
    return dpo([LN2] * (k + 1) + [0.5] * (n - k), [0.0] * (k + 1) + [0.5] * (n - k))


def margins_hump(k: float, b: float = 0.05, n: int = 40, w: int = 8) -> Run:
    """Reward margins from 0 up to 1 and falling back to an end that is k level noises above
    the start (no upward trend), +-b alternating."""
    def build(end: float) -> list[float]:
        mid = n - 2 * w
        values = [0.0] * w + [1.0 - (1.0 - end) * (i + 1) / mid for i in range(mid)] + [end] * w
        return [v + b * (1 if i % 2 else -1) for i, v in enumerate(values)]
    end = 0.1
    for _ in range(20):
        end = k * point_noise(build(end)) / math.sqrt(w)
    return dpo(ones(n, 0.6), build(end))


def pref_accuracy(z: float, s: float = 0.3, m: int = 10) -> Run:
    """Reward accuracies whose second half (m points) alternates +-s around 0.5 + z
    standard errors of its mean."""
    spread = s * math.sqrt(m / (m - 1))
    level = 0.5 + z * spread / math.sqrt(m)
    half = [level + s * (1 if i % 2 else -1) for i in range(m)]
    return run_of(loss=falling(2 * m, LN2, 0.3), cols={"rewards/accuracies": ones(m, 0.6) + half})


def displaced(share: float = 1.0, n: int = 40, w: int = 8, noise: float = 0.0, fall: float = 20.0) -> Run:
    """Chosen and rejected log-probs that both fall by `fall`; the chosen one stays just
    above its start until `share` of the points after its first window are left."""
    after = n - w
    k = round(share * after)
    chosen = [-100.0] * w + [-99.9] * (after - k) + [-100.0 - fall * (i + 1) / (k - w) for i in range(k - w)] + [-100.0 - fall] * w
    rejected = [-100.0 - 20.0 * i / n for i in range(n)]
    chosen = [v + noise * (1 if i % 2 else -1) for i, v in enumerate(chosen)]
    return run_of(loss=falling(n, LN2, 0.3), cols={"logps/chosen": chosen, "logps/rejected": rejected})


def displaced_in_noises(k: float, b: float = 0.5) -> Run:
    """Both log-probs fall steadily; the chosen one by k of its level noises (+-b alternating)."""
    fall = 5.0
    for _ in range(20):
        fall = k * point_noise(displaced(n=100, w=20, noise=b, fall=fall).series["logps/chosen"].values) / math.sqrt(20)
    return displaced(n=100, w=20, noise=b, fall=fall)


def grpo(n: int = 20, **cols: Values) -> Run:
    """A GRPO log: a surrogate loss near 0, a reward and its spread, and the series given
    (their names with "/" written "__")."""
    series: dict[str, Values] = {"reward": falling(n, 0.2, 0.8), "reward_std": ones(n, 0.3)}
    series.update({k.replace("__", "/"): v for k, v in cols.items()})
    return run_of(loss=[0.01 * (i % 3) for i in range(n)], cols=series)


def no_signal(k: float = 10, *, n: int = 20, value: float = 0.95, rise: float = 0.0) -> Run:
    """frac_reward_zero_std at 0.2, then at `value` for its last k points; the reward is 1.0
    for its first window (a fifth of the run, 3 to 20 points) and 1 + rise after."""
    k, w = int(k), max(3, min(20, n // 5))
    return grpo(n, frac_reward_zero_std=ones(n - k, 0.2) + ones(k, value), reward=ones(w) + ones(n - w, 1.0 + rise))


def entropy(drop: float = 0.02, *, n: int = 20, first: float = 2.0, at: int = 5, end: float | None = None) -> Run:
    """Entropy from `first` down to `drop` x first at point `at`, then at `end` x first
    (drop by default) to the end."""
    e = drop if end is None else end
    values = [first * (1 - (1 - 0.5) * i / at) for i in range(at)] + [first * drop] + ones(n - at - 1, first * e)
    return grpo(n, entropy=values)


def lengths(growth: float = 1.6, *, near: float = 0.95, n: int = 20, cap: bool = True) -> Run:
    """Mean completion length from 100 to 100 x growth (steady, windows of 4), ending at
    `near` of the longest completion logged."""
    values = steady(n, 100.0, 100.0 * growth, 4)
    top = 100.0 * growth / near
    return grpo(n, completions__mean_length=values, completions__max_length=ones(n, top) if cap else nones(n),
                completions__clipped_ratio=ones(n, 0.95))


def to_trend_z(values: Sequence[float], z: float, keep: int) -> list[float]:
    """`values` (strictly monotone) with the points between the first and last `keep`
    reordered so that the series' Mann-Kendall z is `z` (to within one pair of points):
    z = (S -+ 1) / sd with S the ordered minus the disordered pairs, sd = sqrt(n(n-1)(2n+5)/18)
    (no ties). The end windows keep their points, so window levels stay where they were."""
    n = len(values)
    pairs = n * (n - 1) // 2
    sd = math.sqrt(n * (n - 1) * (2 * n + 5) / 18.0)
    s = z * sd + (1 if z > 0 else -1)
    rising = values[-1] > values[0]
    # S = +-(pairs - 2 x swapped pairs): the swaps each turn an ordered pair round.
    swaps = round((pairs - (s if rising else -s)) / 2)
    middle = list(values[keep:n - keep])
    assert 0 <= swaps <= len(middle) * (len(middle) - 1) // 2, "the middle cannot hold that many swapped pairs"
    out, left = [], swaps
    while middle:  # the j-th of the remaining points placed next swaps it with the j before it
        j = min(left, len(middle) - 1)
        out.append(middle.pop(j))
        left -= j
    return list(values[:keep]) + out + list(values[n - keep:])


def stepped(n: int, level: float, fall: float, wiggle: float = 0.0) -> list[float]:
    """`level` for the first half of n points and `level` x (1 - fall) for the second, each
    point moved by +-`wiggle` in turn (a part of a loss, judged by its end levels)."""
    return [level * (1 - fall * (i >= n // 2)) + wiggle * (1 if i % 2 else -1) for i in range(n)]


def parts(*, n: int = 30, part_fall: float = 0.0, kl_fall: float = 0.98, kl: float = 1.0, recon: float = 4.0,
          part: str = "recon_loss", other: str = "kl_loss", wiggle: float = 0.0) -> Run:
    """A composite loss: `part` (the task) falls by `part_fall` while `other` (a KL term)
    falls by `kl_fall`; the total is their sum."""
    task, reg = stepped(n, recon, part_fall, wiggle), stepped(n, kl, kl_fall)
    return run_of(loss=[a + b for a, b in zip(task, reg)],
                  cols={"loss_part:" + part: task, "loss_part:" + other: reg})


def composite(n: int = 30, unlogged: tuple[float, float] = (0.0, 0.0), **named: tuple[float, float]) -> Run:
    """A total loss made of named parts, each (level, fall) stepped at half-way, plus an
    `unlogged` (level, fall) share that no column shows."""
    cols = {"loss_part:" + name: stepped(n, level, fall) for name, (level, fall) in named.items()}
    rest = stepped(n, *unlogged)
    return run_of(loss=[sum(c[i] for c in cols.values()) + rest[i] for i in range(n)], cols=cols)


def parts_noise(ratio: float) -> Run:
    """A recon part that falls 10%, by `ratio` of its own level noise (the wiggle solved
    for it by bisection on the rule's own measure), while the KL term collapses."""
    from trainproof_lsp.rules.loss_parts import _fall

    def measured(w: float) -> float:
        f = _fall(list(parts(part_fall=0.1, wiggle=w).series["loss_part:recon_loss"].values))
        return (f.start - f.end) / f.noise
    lo, hi = 1e-3, 2.0  # measured() falls as the wiggle grows
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if measured(mid) > ratio else (lo, mid)
    return parts(part_fall=0.1, wiggle=(lo + hi) / 2)


CASES: dict[str, RuleCases] = {
    "TP-NAN": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=with_at(healthy(12), {3: NAN, 8: INF})),
                    hits=(Expect(message='loss is nan at step 40; 2 of 12 logged losses are not finite (limit 0)',
                           evidence={'first_step': 40, 'count': 2, 'points': 12}, line=3),),
                    family=('TP-NAN',)),
        quiet=Quiet(subject=lambda: run_of(loss=healthy(12))),
    ),
    "TP-NAN-GRAD": RuleCases(
        fires=Fires(subject=lambda: grad_streak(4), hits=(Expect(message='gradient norm is nan for 4 logged step(s) in a row from step 50 (limit: fewer than 3 in a row, and finite at the end)',
                           evidence={'first_step': 50, 'streak': 4, 'at_end': False}, line=4),),
                    family=('TP-NAN-GRAD',)),
        quiet=(Quiet(subject=lambda: grad_streak(1)), Quiet(subject=lambda: run_of(loss=healthy(12), grad_norm=ones(12)))),
        straddles=(straddle("max_streak", 3, grad_streak, fire=3, quiet=2),),
    ),
    "TP-GRAD-OVERFLOW": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=healthy(12), grad_norm=with_at(ones(12), {2: INF, 6: NAN, 7: NAN})),
                    hits=(Expect(message='2 isolated gradient-norm overflow(s) at step(s) 30, 70, each followed by finite steps: consistent with fp16 dynamic loss scaling skipping those steps',
                           evidence={'count': 2, 'first_step': 30, 'points': 12}, line=2),),
                    family=('TP-GRAD-OVERFLOW',)),
        quiet=Quiet(subject=lambda: grad_streak(4)),
        straddles=(straddle("max_streak", 3, grad_streak, fire=2, quiet=3),),
    ),
    "TP-ZERO-LOSS": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=[0.0] * 5), hits=(Expect(message='all 5 logged losses are exactly 0 (steps 10-50)',
                           evidence={'points': 5, 'first_step': 10, 'last_step': 50}, line=0),),
                    family=('TP-ZERO-LOSS',)),
        quiet=(Quiet(subject=lambda: run_of(loss=[0.0, 0.0, 1e-9])),
               Quiet(subject=lambda: run_of(loss=[0.0, 0.0]), skip="this check needs at least 3")),
    ),
    "TP-ZERO-LOSS-ONSET": RuleCases(
        fires=Fires(subject=lambda: zero_tail(4), hits=(Expect(message='loss is exactly 0 from step 90 to the end (4 points; limit 3); it was 1.035 at step 80',
                           evidence={'onset_step': 90, 'zero_points': 4, 'last_nonzero': 1.0355}, line=8),),
                    family=('TP-ZERO-LOSS-ONSET',)),
        quiet=(Quiet(subject=lambda: zero_tail(2)),
               Quiet(subject=lambda: run_of(loss=[0.0] * 6), skip="reported by TP-ZERO-LOSS")),
        straddles=(straddle("min_tail", 3, zero_tail, fire=3, quiet=2),),
    ),
    "TP-ZERO-GRAD": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=ones(30, 2.0), grad_norm=[0.0] * 30), hits=(Expect(message='all 30 logged gradient norms are exactly 0 (steps 10-300)',
                           evidence={'points': 30, 'first_step': 10, 'last_step': 300}, line=0),),
                    family=('TP-FLAT', 'TP-ZERO-GRAD', 'TP-DEAD-RUN')),
        quiet=(Quiet(subject=lambda: run_of(loss=healthy(30), grad_norm=[0.0] * 30), skip="the logged norm is not"),
               Quiet(subject=lambda: run_of(loss=healthy(30), grad_norm=[0.0] * 29 + [1e-3]))),
        straddles=(straddle("improved_z", -3.0, lambda z: run_of(
            loss=to_trend_z([2.0 - i / 19 for i in range(20)], z, keep=4), grad_norm=[0.0] * 20),
            fire=-2.9, quiet=-3.1, skip="the logged norm is not"),
                   straddle("improved_drop", 0.1, lambda d: run_of(
            loss=ones(10, 2.0) + [2.0 - 2.0 * d * (i + 1) / 11 for i in range(10)] + ones(10, 2.0 * (1 - d)),
            grad_norm=[0.0] * 30), fire=0.09, quiet=0.11, skip="the logged norm is not"),),
    ),
    "TP-NEGATIVE-LOSS": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=with_at(healthy(12), {5: -0.2, 9: -0.5, 10: -0.1}), classes=4),
                    hits=(Expect(message='train loss is negative at 3 of 12 points (steps 10-120), first -0.2 at step 60, lowest -0.5 at step 100: a cross-entropy over 4 classes (from config.json) is never below 0',
                           evidence={'count': 3, 'points': 12, 'first_step': 60, 'first_value': -0.2, 'min_value': -0.5, 'num_classes': 4}, line=5),),
                    family=('TP-NEGATIVE-LOSS',)),
        quiet=(Quiet(subject=lambda: run_of(loss=healthy(12), classes=4)),
               Quiet(subject=lambda: run_of(loss=with_at(healthy(12), {5: -0.2})), skip="number of classes unknown")),
    ),
    "TP-LOSS-COLLAPSE": RuleCases(
        fires=Fires(subject=lambda: collapse(1e-4), hits=(Expect(message='loss collapsed from 5 to 0.0005 over steps 10-200 (20 points; medians of the first and last 4): 0.0001 of its start (limit 0.001) and below 0.01; a real task keeps a floor — check for labels leaking into the inputs or a degenerate target',
                           evidence={'start_level': 5.0, 'end_level': 0.0005, 'ratio': 0.0001}, line=19),),
                    family=('TP-LOSS-COLLAPSE',)),
        quiet=(Quiet(subject=lambda: collapse(0.01)),
               Quiet(subject=lambda: run_of(loss=collapse(1e-4).series["loss"].values), skip="number of classes unknown")),
        straddles=(straddle("max_ratio", 1e-3, collapse, fire=0.9e-3, quiet=1.1e-3),
                   straddle("max_end", 0.01, lambda e: collapse(e / 20.0, start=20.0), fire=0.0099, quiet=0.0101)),
    ),
    "TP-FLAT": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=alternating(2e-5, 12)), hits=(Expect(message='loss stays at 2 over 12 points (steps 10-120): relative spread 2e-05 < limit 0.0001; judged on the train loss per logged point, points 1-12 of 12 (steps 10-120); the spread is over all its points',
                           evidence={'mean': 2.0, 'relative_spread': 2e-05, 'points': 12}, line=0),),
                    family=('TP-FLAT', 'TP-DEAD-RUN')),
        quiet=(Quiet(subject=lambda: run_of(loss=healthy(12))),
               Quiet(subject=lambda: run_of(loss=[0.0] * 8), skip="reported by TP-ZERO-LOSS")),
        straddles=(straddle("min_points", 5, lambda n: run_of(loss=ones(int(n), 2.0)), fire=5, quiet=4,
                            skip="this check needs at least 5"),
                   straddle("max_rel_spread", 1e-4, lambda r: run_of(loss=alternating(r)), fire=0.99e-4, quiet=1.01e-4)),
    ),
    "TP-LOSS-ABOVE-UNIFORM": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=falling(20, 5.0, 3.5), classes=10), hits=(Expect(message='loss level 3.532 at the end (steps 180-200) is 1.53x ln(10) = 2.303, the loss of a uniform guess; its best level was 3.532 (limit 1.15x, classes from config.json)',
                           evidence={'level': 3.532473, 'best_level': 3.532473, 'uniform_bound': 2.302585, 'ratio': 1.534134, 'num_classes': 10, 'step': 180, 'last_step': 200}, line=17),),
                    family=('TP-LOSS-ABOVE-UNIFORM',)),
        quiet=(Quiet(subject=lambda: run_of(loss=falling(20, 5.0, 1.5), classes=10)),
               Quiet(subject=lambda: run_of(loss=falling(20, 5.0, 3.5)), skip="number of classes unknown")),
        straddles=(straddle("margin", 1.15, lambda m: run_of(loss=ones(10, m * math.log(10)), classes=10),
                            fire=1.16, quiet=1.14),
                   straddle("min_points", 3, lambda n: run_of(loss=ones(int(n), 3.0), classes=10), fire=3, quiet=2,
                            skip="this check needs at least 3")),
    ),
    "TP-ZERO-LR": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=healthy(6), lr=[0.0] * 6), hits=(Expect(message='learning rate is 0 at all 6 logged steps (10-60)',
                           evidence={'points': 6, 'first_step': 10, 'last_step': 60}, line=0),),
                    family=('TP-ZERO-LR',)),
        quiet=(Quiet(subject=lambda: run_of(loss=healthy(6), lr=[0.0] * 5 + [1e-5])),
               Quiet(subject=lambda: run_of(lr=[0.0]), skip="this check needs at least 2")),
    ),
    "TP-ZERO-LR-PARTIAL": RuleCases(
        fires=Fires(subject=lambda: zero_lr_stretch(0.2), hits=(Expect(message='learning rate is 0 at 20 of 100 logged steps (20%; limit 10%), first at step 410; judged on the lr per logged step, points 1-100 of 100 (steps 10-1000); a lone zero between non-zero points is a restart boundary, not counted',
                           evidence={'zero_points': 20, 'points': 100, 'fraction': 0.2, 'first_step': 410}, line=40),),
                    family=('TP-ZERO-LR-PARTIAL',)),
        quiet=(Quiet(subject=lambda: run_of(lr=[0.0] + [1e-4, 5e-5, 0.0] * 10 + [0.0])),
               Quiet(subject=lambda: zero_lr_stretch(0.05))),
        straddles=(straddle("max_zero_fraction", 0.1, zero_lr_stretch, fire=0.11, quiet=0.09),),
    ),
    "TP-STEP-ORDER": RuleCases(
        fires=Fires(subject=lambda: repeats(0.15), hits=(Expect(message='train loss step repeats: 3 of 20 points log the step of the point before them, first 50 (limit: fewer than 10%); two writers may share this column',
                           evidence={'step': 50, 'repeats': 3, 'points': 20}, line=5),),
                    family=('TP-STEP-ORDER',)),
        quiet=Quiet(subject=lambda: repeats(0.0)),
        straddles=(straddle("max_repeat_fraction", 0.1, repeats, fire=0.1, quiet=0.05),),
    ),
    "TP-STEP-CLIFF": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=healthy(20), step_time=ones(10, 0.5) + ones(10, 1.5)),
                    hits=(Expect(message='step time rose from 0.5 s to 1.5 s (3.00x; limit 2.0x), slow from step 110',
                           evidence={'early_step_time': 0.5, 'late_step_time': 1.5, 'ratio': 3.0, 'slow_from_step': 110}, line=10),),
                    family=('TP-STEP-CLIFF', 'TP-THROUGHPUT')),
        quiet=(Quiet(subject=lambda: run_of(loss=healthy(20), step_time=ones(10, 0.5) + ones(10, 0.9))),
               Quiet(subject=lambda: run_of(loss=healthy(20), step_time=[0.0] * 20), skip="not positive")),
        straddles=(straddle("max_ratio", 2.0, lambda r: run_of(step_time=ones(10) + ones(10, r)), fire=2.02, quiet=1.98),
                   straddle("min_points", 6, lambda n: run_of(step_time=ones(int(n) // 2) + ones(int(n) - int(n) // 2, 3.0)),
                            fire=6, quiet=5, skip="this check needs at least 6")),
    ),
    "TP-LOADER-BOUND": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=healthy(8), step_time=ones(8, 0.2), data_time=[0.1, 0.12, 0.15, 0.19, 0.12, 0.11, 0.13, 0.12]),
                    hits=(Expect(message='data loading takes 60% of the median step (limit 50%); worst at step 40',
                           evidence={'median_fraction': 0.6, 'steps_compared': 8}, line=3),),
                    family=('TP-LOADER-BOUND', 'TP-THROUGHPUT')),
        quiet=(Quiet(subject=lambda: run_of(step_time=ones(8, 0.2), data_time=ones(8, 0.05))),
               Quiet(subject=lambda: run_of(step_time=ones(8, 0.2) + nones(8), data_time=[*nones(8), *ones(8, 0.2)]),
                     skip="too few steps with both")),
        straddles=(straddle("max_fraction", 0.5, lambda f: run_of(step_time=ones(6), data_time=ones(6, f)), fire=0.51, quiet=0.49),
                   straddle("min_points", 3, lambda n: run_of(step_time=ones(int(n)), data_time=ones(int(n), 0.9)),
                            fire=3, quiet=2, skip="this check needs at least 3")),
    ),
    "TP-THROUGHPUT": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=healthy(5), throughput=[100.0, 120.0, 110.0, None, 90.0]), hits=(Expect(message='throughput 105 (median of 4 point(s))',
                           evidence={'throughput': 105.0, 'unit': 'throughput', 'points': 4}, line=4),),
                    family=('TP-NOT-CHECKED', 'TP-THROUGHPUT')),
        quiet=(Quiet(subject=lambda: run_of(loss=healthy(5)), skip="no throughput or step-time values"),
               Quiet(subject=lambda: run_of(loss=healthy(5), step_time=[0.0] * 5), skip="no throughput or step-time values")),
    ),
    "TP-LOSS-SCALE-COLLAPSE": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=healthy(10), loss_scale=[65536.0, 131072.0, 2048.0, 512.0, 64.0, 32.0, 16.0, 4.0, 4.0, 2.0]),
                    hits=(Expect(message='loss scale fell 7 times in a row, from 1.311e+05 to 2, with no growth between; limits: 4 falls in a row ending at 8 or lower',
                           evidence={'falls': 7, 'from_scale': 131072.0, 'to_scale': 2.0, 'first_step': 30, 'last_step': 100}, line=2),),
                    family=('TP-LOSS-SCALE-COLLAPSE',)),
        quiet=(Quiet(subject=lambda: run_of(loss=healthy(10), loss_scale=[65536.0, 32768.0, 16384.0, 8192.0, 4096.0] * 2)),
               Quiet(subject=lambda: run_of(loss=healthy(10), loss_scale=[64.0, 32.0, 16.0, 8.0, 4.0, 2.0, 4.0, 4.0, 4.0, 4.0]))),
        straddles=(straddle("min_halvings", 4, lambda k: run_of(loss_scale=[8.0 * 2 ** (int(k) - j) for j in range(int(k) + 1)]),
                            fire=4, quiet=3),
                   straddle("max_scale", 8.0, lambda e: run_of(loss_scale=[e * 2 ** (5 - j) for j in range(6)]), fire=7.9, quiet=8.1)),
    ),
    "TP-LOSS-SCALE-MIN": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=healthy(8), loss_scale=[4.0, 2.0, 1.0, 1.0, 1.0, 1.0, None, None],
                                           loss_scale_at_minimum=[None] * 6 + [1.0, 1.0]), hits=(Expect(message='the loss scaler says the loss scale is already at its minimum and stops the run (the last loss scale stated before it: 1); 2 such line(s) (limit 0)',
                           evidence={'count': 2, 'step': 70}, line=6),),
                    family=('TP-LOSS-SCALE-MIN',)),
        quiet=Quiet(subject=lambda: run_of(loss=healthy(8), loss_scale=ones(8, 1.0)), skip="no loss_scale_at_minimum series"),
    ),
    "TP-LOSS-SPIKE": RuleCases(
        fires=Fires(subject=lambda: spike_at(3.0, up=2), hits=(Expect(message='loss jumps to 3 at step 310, 3.00x the level 1 before it (limit 2.0x); recovered; judged on the train loss per logged point, points 1-50 of 50 (steps 10-500); the level before a jump is the median of the 10 points before it, recovery within 10',
                           evidence={'step': 310, 'value': 3.0, 'level_before': 1.0, 'ratio': 3.0, 'level_after': 1.0, 'spikes': 1, 'points_after': 10}, line=30),),
                    family=('TP-DEAD-RUN', 'TP-LOSS-SPIKE')),
        quiet=(Quiet(subject=lambda: spike_at(3.0, up=12)), Quiet(subject=lambda: run_of(loss=cycle3(50, 0.3)))),
        straddles=(straddle("spike_ratio", 2.0, lambda r: spike_at(r), fire=2.05, quiet=1.95),
                   straddle("above_max", 1.5, lambda r: spike_at(1.6 * r, base=with_at(ones(50), {27: 1.6})), fire=1.52, quiet=1.48),
                   straddle("noise_sigmas", 6.0, lambda z: spike_at(math.exp(z * 1.4826 * 0.1), base=cycle3(50)),
                            fire=6.1, quiet=5.9),
                   straddle("recover_within", 10, lambda b: spike_at(3.0, up=int(b)), fire=10, quiet=11),
                   straddle("recover_ratio", 1.2, lambda r: spike_at(3.0, after=r), fire=1.19, quiet=1.21),
                   straddle("before", 10, spike_after_high, fire=11, quiet=10),
                   straddle("min_before", 3, lambda i: spike_at(3.0, at=int(i)), fire=3, quiet=2)),
    ),
    "TP-LOSS-SPIKE-UNRECOVERED": RuleCases(
        fires=Fires(subject=lambda: spike_at(3.0, up=4, after=1.5), hits=(Expect(message='loss jumps to 3 at step 310, 3.00x the level 1 before it (limit 2.0x); stays at 1.5 over the next 10 points; judged on the train loss per logged point, points 1-50 of 50 (steps 10-500); the level before a jump is the median of the 10 points before it, recovery within 10',
                           evidence={'step': 310, 'value': 3.0, 'level_before': 1.0, 'ratio': 3.0, 'level_after': 1.5, 'spikes': 1, 'points_after': 10}, line=30),),
                    family=('TP-LOSS-SPIKE-UNRECOVERED', 'TP-DEAD-RUN')),
        quiet=(Quiet(subject=lambda: spike_at(3.0, up=2)), Quiet(subject=lambda: spike_at(3.0, at=45, up=5))),
        straddles=(straddle("spike_ratio", 2.0, lambda r: spike_at(r, up=12), fire=2.05, quiet=1.95),
                   straddle("above_max", 1.5, lambda r: spike_at(1.6 * r, up=12, base=with_at(ones(50), {27: 1.6})),
                            fire=1.52, quiet=1.48),
                   straddle("noise_sigmas", 6.0, lambda z: spike_at(math.exp(z * 1.4826 * 0.1), up=12, base=cycle3(50)),
                            fire=6.1, quiet=5.9),
                   straddle("recover_within", 10, lambda b: spike_at(3.0, up=int(b)), fire=11, quiet=10),
                   straddle("recover_ratio", 1.2, lambda r: spike_at(3.0, after=r), fire=1.21, quiet=1.19),
                   straddle("before", 10, lambda d: run_of(loss=list(spike_after_high(d).series["loss"].values)[:12] + ones(20, 2.5)),
                            fire=11, quiet=10),
                   straddle("min_before", 3, lambda i: spike_at(3.0, at=int(i), up=20), fire=3, quiet=2)),
    ),
    "TP-GRAD-SPIKE": RuleCases(
        fires=Fires(subject=lambda: grad_spikes(30.0, at=(20, 21, 30)), hits=(Expect(message='gradient norm 30 at step 210 is 30.00x the median 1; 2 point(s) above the limit 10.0x after the start-up phase (to step 50); 1 single-step peak(s) the loss did not notice left out; judged on the grad norm per logged step, points 1-40 of 40 (steps 10-400); each norm also against the median of the 10 before it',
                           evidence={'max_grad_norm': 30.0, 'median': 1.0, 'ratio': 30.0, 'step': 210, 'spikes': 2, 'startup_end_step': 50, 'quiet_peaks': 1}, line=20),),
                    family=('TP-GRAD-SPIKE',)),
        quiet=(Quiet(subject=lambda: grad_spikes(50.0, at=(25,), bump=0.3)), Quiet(subject=lambda: grad_spikes(500.0, at=(25,))),
               Quiet(subject=lambda: grad_spikes(500.0, at=(1,), bump=0.3))),
        straddles=(straddle("max_ratio", 10.0, grad_spikes, fire=10.5, quiet=9.5),
                   straddle("lone_ratio", 100.0, lambda r: grad_spikes(r, at=(25,), bump=0.3), fire=101, quiet=99),
                   straddle("min_points", 6, lambda n: run_of(grad_norm=ones(int(n) - 2) + [200.0, 1.0]), fire=6, quiet=5,
                            skip="this check needs at least 6"),
                   straddle("before", 10, grad_spikes_after_stretch, fire=11, quiet=10),
                   straddle("quiet_sigmas", 3.0, peak_with_loss_moving, fire=3.1, quiet=2.9),
                   straddle("max_startup", 0.1, after_startup_cap, fire=0.11, quiet=0.1),
                   straddle("fallen", 0.5, after_half_fall, fire=0.5, quiet=0.45),
                   straddle("quiet_before", 5, peak_after_low_stretch, fire=5, quiet=6)),
    ),
    "TP-DIVERGE": RuleCases(
        fires=(Fires(subject=lambda: diverged(level=0.5, n=250, up=60), hits=(Expect(message='loss level 0.8 at the end (step 2500) is 1.60x its best level 0.5 (around step 200); limit 1.5x; judged on the train loss per logged point, points 1-250 of 250 (steps 10-2500); levels: rolling medians of 20 points, the end level the last 20',
                           evidence={'end_level': 0.8, 'best_level': 0.5, 'ratio': 1.6, 'best_step': 200, 'end_step': 2500, 'window': 20}, line=249),),
                    family=('TP-DIVERGE',)),
               Fires(subject=lambda: run_of(loss=[2.0, 1.9, 1.8] + [None] * 57, eval_loss=list(diverged().series["loss"].values)),
                     hits=(Expect(message='eval loss level 1.6 at the end (step 600) is 1.60x its best level 1 (around step 200); limit 1.5x; judged on the eval loss, points 1-60 of 60 (steps 10-600); levels: rolling medians of 6 points, the end level the last 6',
                           evidence={'end_level': 1.6, 'best_level': 1.0, 'ratio': 1.6, 'best_step': 200, 'end_step': 600, 'window': 6, 'series': 'eval_loss'}, line=59),),
                    family=('TP-DIVERGE',)),
               Fires(subject=lambda: run_of(loss=ones(30, 0.8) + ones(30, 1.3)), hits=(Expect(message='loss level 1.3 at the end (step 600) is 1.62x its best level 0.8 (around step 10); limit 1.5x; judged on the train loss per logged point, points 1-60 of 60 (steps 10-600); levels: rolling medians of 6 points, the end level the last 6',
                           evidence={'end_level': 1.3, 'best_level': 0.8, 'ratio': 1.625, 'best_step': 10, 'end_step': 600, 'window': 6}, line=59),),
                    family=('TP-DEAD-RUN', 'TP-DIVERGE')),
               # The best step cited is the lowest point of the best level's window: not one
               # before the window (a low point at 15 is outside it), nor one past its start (16).
               Fires(subject=lambda: run_of(loss=with_at(list(diverged().series["loss"].values), {15: 0.97})), hits=(Expect(message='loss level 1.6 at the end (step 600) is 1.60x its best level 1 (around step 200); limit 1.5x; judged on the train loss per logged point, points 1-60 of 60 (steps 10-600); levels: rolling medians of 6 points, the end level the last 6',
                           evidence={'end_level': 1.6, 'best_level': 1.0, 'ratio': 1.6, 'best_step': 200, 'end_step': 600, 'window': 6}, line=59),),
                    family=('TP-DIVERGE',)),
               Fires(subject=lambda: run_of(loss=with_at(list(diverged().series["loss"].values), {16: 0.97})), hits=(Expect(message='loss level 1.6 at the end (step 600) is 1.60x its best level 1 (around step 170); limit 1.5x; judged on the train loss per logged point, points 1-60 of 60 (steps 10-600); levels: rolling medians of 6 points, the end level the last 6',
                           evidence={'end_level': 1.6, 'best_level': 1.0, 'ratio': 1.6, 'best_step': 170, 'end_step': 600, 'window': 6}, line=59),),
                    family=('TP-DIVERGE',)),
               Fires(subject=lambda: run_of(loss=with_at(list(diverged().series["loss"].values), {12: 0.3})), hits=(Expect(message='loss level 1.6 at the end (step 600) is 1.60x its best level 1 (around step 200); limit 1.5x; judged on the train loss per logged point, points 1-60 of 60 (steps 10-600); levels: rolling medians of 6 points, the end level the last 6',
                           evidence={'end_level': 1.6, 'best_level': 1.0, 'ratio': 1.6, 'best_step': 200, 'end_step': 600, 'window': 6}, line=59),),
                    family=('TP-DIVERGE',)),
               Fires(subject=lambda: diverged(), hits=(Expect(message='loss level 1.6 at the end (step 600) is 1.60x its best level 1 (around step 200); limit 1.5x; judged on the train loss per logged point, points 1-60 of 60 (steps 10-600); levels: rolling medians of 6 points, the end level the last 6',
                           evidence={'end_level': 1.6, 'best_level': 1.0, 'ratio': 1.6, 'best_step': 200, 'end_step': 600, 'window': 6}, line=59),),
                    family=('TP-DIVERGE',))),
        quiet=(Quiet(subject=lambda: run_of(loss=healthy(60))), Quiet(subject=lambda: diverged(up=5)),
               Quiet(subject=lambda: diverged_with_eval(0.0), skip="the rise is train-side noise"),
               Quiet(subject=lambda: diverged_with_eval(0.0, evals=3), skip="the rise is train-side noise"),
               Quiet(subject=lambda: run_of(loss=[1.0 + 0.004 * i for i in range(60)])),
               Quiet(subject=lambda: run_of(loss=ones(10) + [0.0] * 20 + ones(30, 0.5)), skip="is not positive"),
               Quiet(subject=lambda: run_of(loss=ones(170) + ones(15, 0.5) + ones(15, 1.2)))),
        straddles=(straddle("max_ratio", 1.5, diverged, fire=1.55, quiet=1.5),
                   straddle("min_regain", 0.1, lambda g: diverged(1.625, start=1.0 + 0.625 / g), fire=0.1, quiet=0.09),
                   straddle("min_stay", 10, lambda p: diverged(up=int(p) + 1), fire=10, quiet=9),
                   straddle("min_stay_fraction", 0.25, lambda f: diverged(n=24, up=round(f * 24)), fire=0.25, quiet=0.2),
                   straddle("eval_tolerance", 0.05, diverged_with_eval, fire=0.06, quiet=0.05,
                            skip="the rise is train-side noise")),
    ),
    "TP-LOSS-PART-STALLED": RuleCases(
        fires=(Fires(subject=lambda: parts(), hits=(Expect(message='recon_loss does not fall: 4 -> 4 (+0.0%; its level noise 0, trend z 0.0) over steps 10-300, while the total loss falls 5 -> 4.02 (-19.6%); the fall is carried by kl_loss (1 -> 0.02, -98.0%); judged on the loss part recon_loss per logged step, points 1-30 of 30 (steps 10-300); levels are window medians at each end',
                            evidence={'part': 'recon_loss', 'part_start': 4.0, 'part_end': 4.0, 'part_fall': 0.0, 'part_noise': 0.0, 'part_trend_z': 0.0, 'total_start': 5.0, 'total_end': 4.02, 'total_fall': 0.196, 'carried_by': 'kl_loss', 'points': 30}, line=29),),
                     family=('TP-LOSS-PART-STALLED',)),
               Fires(subject=lambda: parts(kl=0.1, kl_fall=0.9), hits=(Expect(message='recon_loss does not fall: 4 -> 4 (+0.0%; its level noise 0, trend z 0.0) over steps 10-300, while kl_loss (0.1 -> 0.01, -90.0%) collapses and the total loss moves 4.1 -> 4.01 (-2.2%); judged on the loss part recon_loss per logged step, points 1-30 of 30 (steps 10-300); levels are window medians at each end',
                            evidence={'part': 'recon_loss', 'part_start': 4.0, 'part_end': 4.0, 'part_fall': 0.0, 'part_noise': 0.0, 'part_trend_z': 0.0, 'total_start': 4.1, 'total_end': 4.01, 'total_fall': 0.0219512195, 'carried_by': 'kl_loss', 'points': 30}, line=29),),
                     family=('TP-LOSS-PART-STALLED',)),
               # five parts: a small part named neither way, a task part that falls and two
               # regularisers pass; the rising task part is reported, carried by the part
               # whose level fell most (not the largest or last-named one)
               Fires(subject=lambda: composite(a_foo_loss=(0.2, 0.0), ce_loss=(2.0, 0.3), kl_loss=(3.0, 0.1 / 3),
                                               aux_loss=(1.0, 0.98), mel_loss=(1.5, -0.01)),
                     hits=(Expect(message='mel_loss does not fall: 1.5 -> 1.515 (+1.0%; its level noise 0, trend z 4.0) over steps 10-300, while the total loss falls 7.7 -> 6.035 (-21.6%); the fall is carried by aux_loss (1 -> 0.02, -98.0%); judged on the loss part mel_loss per logged step, points 1-30 of 30 (steps 10-300); levels are window medians at each end',
                                  evidence={'part': 'mel_loss', 'part_start': 1.5, 'part_end': 1.515, 'part_fall': -0.01, 'part_noise': 0.0, 'part_trend_z': 3.996390945, 'total_start': 7.7, 'total_end': 6.035, 'total_fall': 0.2162337662, 'carried_by': 'aux_loss', 'points': 30}, line=29),),
                     family=('TP-LOSS-PART-STALLED',)),
               # the only logged part stands still while the rest of the total (unlogged) falls
               Fires(subject=lambda: composite(unlogged=(1.0, 0.8), recon_loss=(4.0, 0.0)),
                     hits=(Expect(message='recon_loss does not fall: 4 -> 4 (+0.0%; its level noise 0, trend z 0.0) over steps 10-300, while the total loss falls 5 -> 4.2 (-16.0%); judged on the loss part recon_loss per logged step, points 1-30 of 30 (steps 10-300); levels are window medians at each end',
                                  evidence={'part': 'recon_loss', 'part_start': 4.0, 'part_end': 4.0, 'part_fall': 0.0, 'part_noise': 0.0, 'part_trend_z': 0.0, 'total_start': 5.0, 'total_end': 4.2, 'total_fall': 0.16, 'carried_by': None, 'points': 30}, line=29),),
                     family=('TP-LOSS-PART-STALLED',)),
               # ...beside a regulariser that stands still too: no part carried the fall
               Fires(subject=lambda: composite(unlogged=(1.0, 0.8), recon_loss=(4.0, 0.0), kl_loss=(0.5, 0.0)),
                     hits=(Expect(message='recon_loss does not fall: 4 -> 4 (+0.0%; its level noise 0, trend z 0.0) over steps 10-300, while the total loss falls 5.5 -> 4.7 (-14.5%); judged on the loss part recon_loss per logged step, points 1-30 of 30 (steps 10-300); levels are window medians at each end',
                                  evidence={'part': 'recon_loss', 'part_start': 4.0, 'part_end': 4.0, 'part_fall': 0.0, 'part_noise': 0.0, 'part_trend_z': 0.0, 'total_start': 5.5, 'total_end': 4.7, 'total_fall': 0.1454545455, 'carried_by': None, 'points': 30}, line=29),),
                     family=('TP-LOSS-PART-STALLED',)),
               # a part named neither way at exactly min_share of the total carries the task
               Fires(subject=lambda: composite(foo_loss=(1.0, 0.0), kl_loss=(9.0, 0.9)),
                     hits=(Expect(message='foo_loss does not fall: 1 -> 1 (+0.0%; its level noise 0, trend z 0.0) over steps 10-300, while the total loss falls 10 -> 1.9 (-81.0%); the fall is carried by kl_loss (9 -> 0.9, -90.0%); judged on the loss part foo_loss per logged step, points 1-30 of 30 (steps 10-300); levels are window medians at each end',
                                  evidence={'part': 'foo_loss', 'part_start': 1.0, 'part_end': 1.0, 'part_fall': 0.0, 'part_noise': 0.0, 'part_trend_z': 0.0, 'total_start': 10.0, 'total_end': 1.9, 'total_fall': 0.81, 'carried_by': 'kl_loss', 'points': 30}, line=29),),
                     family=('TP-LOSS-PART-STALLED',))),
        quiet=(Quiet(subject=lambda: parts(part_fall=0.3)),
               Quiet(subject=lambda: parts(part="aux_loss", other="ce_loss")),
               Quiet(subject=lambda: parts(part="gen_loss", other="disc_loss")),
               Quiet(subject=lambda: run_of(loss=healthy(30)), skip="no named parts of the loss"),
               Quiet(subject=lambda: parts(kl=0.1, kl_fall=0.4),
                     skip="the total loss does not fall clearly (4.1 -> 4.06, -1.0%) and no part of it collapses: "
                          "the total's own checks judge it"),
               # a part logged as 0 throughout (a term switched off) has no level to fall from
               Quiet(subject=lambda: composite(recon_loss=(4.0, 0.0), aux_loss=(0.0, 0.0)),
                     skip="no part of it collapses"),
               Quiet(subject=lambda: run_of(loss=healthy(30), cols={"loss_part:recon_loss": healthy(19)}),
                     skip="no part of the loss has 20 finite points")),
        straddles=(straddle("max_part_fall", 0.02, lambda f: parts(part_fall=f), fire=0.019, quiet=0.021),
                   # no part collapses (the KL term falls 40%): the total's fall decides
                   straddle("min_total_fall", 0.05, lambda f: parts(kl_fall=0.4, kl=f * 4.0 / (0.4 - f)),
                            fire=0.051, quiet=0.049, skip="does not fall clearly"),
                   # a small KL term: the total moves under 5%, the collapse decides
                   straddle("collapse_fall", 0.5, lambda f: parts(kl=0.1, kl_fall=f), fire=0.51, quiet=0.49,
                            skip="no part of it collapses"),
                   straddle("fall_noise", 2.0, parts_noise, fire=1.95, quiet=2.05),
                   # a part whose name says neither task nor regulariser: its share of the total
                   straddle("min_share", 0.1, lambda s: parts(part="foo_loss", recon=s / (1 - s)),
                            fire=0.11, quiet=0.09),
                   straddle("min_points", 20, lambda n: parts(n=int(n)), fire=20, quiet=19,
                            skip="this check needs at least 20")),
    ),
    "TP-DEAD-RUN": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=hump(0.01)), hits=(Expect(message='loss level went from 1 to 0.99 over steps 10-400 (40 points; -1.0%; limit: a fall of at least 2%); no downward trend (z 2.46 > -1.0); levels: start the higher median of the first 4 and first 8 points, end the median of the last 8',
                           evidence={'start_level': 1.0, 'end_level': 0.99, 'drop': 0.01, 'trend_z': 2.458368, 'level_noise': 0.0}, line=39),),
                    family=('TP-DEAD-RUN',)),
        quiet=(Quiet(subject=lambda: run_of(loss=healthy(40))), Quiet(subject=lambda: run_of(loss=hump(0.03))),
               Quiet(subject=lambda: run_of(loss=[1.0] * 6), skip="the trend checks need at least 7"),
               Quiet(subject=lambda: run_of(loss=hump(0.0), first=500), skip="a resumed run at its floor")),
        straddles=(straddle("min_drop", 0.02, lambda d: run_of(loss=hump(d)), fire=0.019, quiet=0.021),
                   straddle("negligible_drop", 0.005, lambda d: run_of(loss=steady(40, 1.0, 1.0 - d, 8)), fire=0.0049, quiet=0.0051),
                   straddle("fall_noise", 2.0, hump_in_noises, fire=1.9, quiet=2.1),
                   straddle("max_dead_lr", 1e-7, lambda m: run_of(loss=hump(0.05), lr=ones(40, m)), fire=0.99e-7, quiet=1.01e-7),
                   straddle("resumed_rise_z", 2.0, lambda z: run_of(loss=to_trend_z([1.0 + 0.1 * i / 19 for i in range(20)], z, keep=4),
                                                                      first=500), fire=2.1, quiet=1.9, skip="a resumed run at its floor"),
                   straddle("resumed_fall_z", -2.0, lambda z: run_of(loss=to_trend_z([1.1 - 0.1 * i / 19 for i in range(20)], z, keep=4),
                                                                       lr=ones(20, 5e-8), first=500), fire=-1.9, quiet=-2.1,
                            skip="a resumed run at its floor"),
                   straddle("eval_worse", 0.1, lambda x: run_of(loss=[2.0, 1.9, 1.8] + nones(97),
                            eval_loss=[None if i % 10 != 9 else (1.0 if i == 9 else 1.0 + x) for i in range(100)]),
                            fire=0.11, quiet=0.09),
                   straddle("near_uniform", 0.1, lambda u: crawl(near=u), fire=0.099, quiet=0.101),
                   straddle("crawl_drop", 0.03, lambda d: crawl(drop=d), fire=0.029, quiet=0.031),
                   straddle("crawl_min_points", 20, lambda n: crawl(int(n)), fire=20, quiet=19),
                   straddle("constant_points", 5, lambda n: run_of(loss=ones(int(n), math.log(2))), fire=5, quiet=4,
                            skip="the trend checks need at least 7"),
                   straddle("constant_spread", 1e-4, lambda r: run_of(loss=[math.log(2)] * 5 + [math.log(2) * (1 + r)]),
                            fire=0.99e-4, quiet=1.01e-4, skip="the trend checks need at least 7"),
                   straddle("constant_uniform", 0.01, lambda u: run_of(loss=ones(6, math.log(2) * (1 + u))),
                            fire=0.0099, quiet=0.0101, skip="the trend checks need at least 7")),
    ),
    "TP-AT-CHANCE": RuleCases(
        fires=Fires(subject=lambda: run_of(loss=settles(30).series["loss"].values, classes=2,
                                           eval_accuracy=[None] * 59 + [0.52]), hits=(Expect(message='loss stays at 0.6931, within 3.0% of ln(2) = 0.6931 (a uniform guess), from step 310 to the end (30 of 60 points, steps 310-600; classes from config.json; band the larger of 3% and 3 spreads of a 6-point median at the point noise 0.01211); eval accuracy 0.52 at step 600 is near chance 1/2 = 0.5',
                           evidence={'level': 0.6931472, 'uniform_bound': 0.6931472, 'ratio': 1.0, 'num_classes': 2, 'step': 310, 'last_step': 600, 'points': 30, 'band': 0.02079442, 'eval_accuracy': 0.52, 'chance_accuracy': 0.5, 'accuracy_at_chance': True}, line=30),),
                    family=('TP-AT-CHANCE',)),
        quiet=(Quiet(subject=lambda: run_of(loss=healthy(60), classes=2)), Quiet(subject=lambda: settles(15)),
               Quiet(subject=lambda: run_of(loss=ones(30, math.log(2))), skip="number of classes unknown")),
        straddles=(straddle("tolerance", 0.03, lambda t: run_of(loss=ones(30, math.log(2) * (1 + t)), classes=2),
                            fire=0.029, quiet=0.031),
                   straddle("noise_sigmas", 3.0, chance_noisy, fire=2.9, quiet=3.1),
                   straddle("min_fraction", 1 / 3, lambda f: settles(round(f * 60)), fire=20 / 60, quiet=19 / 60),
                   straddle("min_points", 10, lambda k: settles(k, n=24), fire=10, quiet=9)),
    ),
    "TP-EVAL-ACC-AT-CHANCE": RuleCases(
        fires=Fires(subject=lambda: accuracies([0.475, 0.525] * 5, classes=2), hits=(Expect(message='eval accuracy (10 evals, steps 100-1000) has median 0.5 and best 0.525: at chance 1/2 = 0.5 (limits: median within 0.05 of it, no eval 0.1 above it; classes from config.json)',
                           evidence={'median_accuracy': 0.5, 'best_accuracy': 0.525, 'chance_accuracy': 0.5, 'num_classes': 2, 'evals': 10}, line=99),),
                    family=('TP-LOSS-ABOVE-UNIFORM', 'TP-EVAL-ACC-AT-CHANCE')),
        quiet=(Quiet(subject=lambda: accuracies([0.5, 0.6, 0.7, 0.75, 0.8, 0.82], classes=2)),
               Quiet(subject=lambda: accuracies([0.51, 0.5, 0.49, 0.52, 0.5])),
               Quiet(subject=lambda: accuracies([0.5] * 4), skip="this check needs at least 5")),
        straddles=(straddle("min_evals", 5, lambda n: accuracies([0.5] * int(n)), fire=5, quiet=4,
                            skip="this check needs at least 5"),
                   straddle("constant_share", 0.8, lambda f: accuracies(
                       [0.7] * round(20 * f) + [0.71 + 0.01 * i for i in range(20 - round(20 * f))]), fire=0.8, quiet=0.75),
                   straddle("max_constant", 0.95, lambda v: accuracies([v] * 6), fire=0.94, quiet=0.96),
                   straddle("margin", 0.05, lambda m: accuracies([0.5 + m + 0.002 * (i - 4) for i in range(9)], classes=2),
                            fire=0.049, quiet=0.051)),
    ),
    "TP-OVERFIT": RuleCases(
        fires=Fires(subject=lambda: overfit([v + 0.01 * (-1) ** i for i, v in enumerate(OVERFIT_EVALS)]), hits=(Expect(message='eval loss (12 evals, steps 100-1200): its level (median of 3 evals) rose from its lowest 1.01 at step 500 to 1.41 over the last 3 evals (to step 1200; 1.40x, 66.1 times its eval-to-eval noise 0.006053; limits 1.4 noise and 5%), rising with z 2.97 (limit 0.5); the best eval 0.99 was at step 600; train loss fell from 1.142 to 0.9324 (median of 5 points each; 31.1 times its level noise, limit 2.0); no checkpoint from step 600 found beside the log',
                           evidence={'best_eval': 0.99, 'best_step': 600, 'best_level': 1.01, 'end_level': 1.41, 'last_eval': 1.49, 'last_step': 1200, 'ratio': 1.39604, 'eval_noise': 0.006052689, 'rise_z': 2.96923, 'train_at_best': 1.141897, 'train_end': 0.9324143, 'best_checkpoint_exists': False}, line=119),),
                    family=('TP-OVERFIT',)),
        quiet=(Quiet(subject=lambda: overfit([2.0, 1.7, 1.4, 1.2, 1.0, 0.9, 0.85, 0.8, 0.78, 0.77, 0.76, 0.75])),
               Quiet(subject=lambda: overfit(OVERFIT_EVALS, ones(120))),
               Quiet(subject=lambda: run_of(eval_loss=OVERFIT_EVALS), skip="no train loss")),
        straddles=(straddle("min_evals", 5, lambda n: overfit([1.2, 1.0, 1.0, 1.2, 1.3, 1.4][-int(n):]), fire=5, quiet=4,
                            skip="this check needs at least 5"),
                   straddle("min_rise", 0.05, lambda r: overfit([1.3, 1.2, 1.1, 1.0, 1.0, 1.0, 1.0, 1.0] + [1.0 + r] * 3),
                            fire=0.051, quiet=0.049),
                   straddle("rise_noise", 1.4, eval_rise_in_noises, fire=1.5, quiet=1.3),
                   straddle("several", 3, lambda k: overfit([1.3, 1.2, 1.1] + [1.0] * (8 - int(k)) + [1.2] * int(k)), fire=3, quiet=2),
                   straddle("smooth", 1, lambda width: overfit([1.2, 1.1] + [1.0] * 3 + [0.9] * int(width) + [1.0] * 3 + [1.04] * 3),
                            fire=2, quiet=1),
                   straddle("train_noise", 2.0, train_fall_in_noises, fire=2.2, quiet=1.8)),
    ),
    "TP-REWARD-NONFINITE": RuleCases(
        fires=Fires(subject=lambda: dpo(healthy(10), with_at(ones(10, 0.3), {3: NAN}), logps__chosen=with_at(ones(10, -50.0), {5: INF, 7: NAN})),
                    hits=(Expect(message='rewards/margins is nan at step 40: 3 non-finite point(s) in 2 reward/log-prob series — rewards/margins (1 of 10), logps/chosen (2 of 10)',
                           evidence={'series': 'rewards/margins,logps/chosen', 'first_series': 'rewards/margins', 'first_step': 40, 'points': 3}, line=3),),
                    family=('TP-REWARD-NONFINITE',)),
        quiet=(Quiet(subject=lambda: dpo(healthy(10), ones(10, 0.3))),
               Quiet(subject=lambda: run_of(loss=healthy(10)), skip="no reward or log-prob series")),
    ),
    "TP-PREF-AT-LN2": RuleCases(
        fires=Fires(subject=lambda: dpo([LN2] * 12, with_at([0.0] * 12, {5: 0.004, 9: -0.006})), hits=(Expect(message='DPO loss stays at ln 2 = 0.6931 (median 0.6931) with reward margins at 0 (largest |margin| 0.006) at 11 of 11 logged steps after the first (steps 20-120; limits: loss within 0.005 of ln 2, |margin| <= 0.01, at 90% of the steps): the policy ranks the pairs no differently from its reference — a reference that is the policy itself, a beta far too small, or weights that no longer tell the answers apart',
                           evidence={'points': 11, 'at_ln2': 11, 'share': 1.0, 'median_loss': 0.6931472, 'max_abs_margin': 0.006}, line=1),),
                    family=('TP-PREF-AT-LN2',)),
        quiet=(Quiet(subject=lambda: dpo(falling(12, LN2, 0.3), falling(12, 0.0, 2.0))),
               Quiet(subject=lambda: dpo([LN2] * 5, [0.0] * 5), skip="this check needs at least 6")),
        straddles=(straddle("loss_band", 0.005, lambda x: dpo([LN2 + x] * 11, [0.0] * 11), fire=0.0049, quiet=0.0051),
                   straddle("margin_band", 0.01, lambda m: dpo([LN2] * 11, [m] * 11), fire=0.0099, quiet=0.0101),
                   straddle("min_share", 0.9, dpo_share, fire=0.9, quiet=0.85),
                   straddle("min_points", 5, lambda k: dpo([LN2] * (int(k) + 1), [0.0] * (int(k) + 1)), fire=5, quiet=4,
                            skip="this check needs at least 6")),
    ),
    "TP-PREF-MARGINS-FLAT": RuleCases(
        fires=Fires(subject=lambda: dpo(ones(20, 0.69), [0.05 * (1 if i % 2 else -1) + 0.001 * (i % 3) for i in range(20)]),
                    hits=(Expect(message='reward margins do not rise over 20 logged steps (steps 10-200): 0.001 at the start, 0.001 at the end (medians of 4), a rise of 0 against a level noise of 0.06053 (limit 2 noises), trend z 0.29 (limit 1): the run is not learning the preferences',
                           evidence={'start_level': 0.001, 'end_level': 0.001, 'rise': 0.0, 'level_noise': 0.06052689, 'trend_z': 0.2919986, 'points': 20, 'window': 4}, line=19),),
                    family=('TP-PREF-MARGINS-FLAT',)),
        quiet=(Quiet(subject=lambda: dpo(falling(20, 0.69, 0.3), falling(20, 0.0, 2.0))),
               Quiet(subject=lambda: dpo([LN2] * 20, [0.0] * 20), skip="TP-PREF-AT-LN2 judges that")),
        straddles=(straddle("min_points", 10, lambda n: dpo(ones(int(n), 0.69), [0.05 * (1 if i % 2 else -1) for i in range(int(n))]),
                            fire=10, quiet=9, skip="this check needs at least 10"),
                   straddle("at_zero", 0.01, lambda a: dpo(ones(12, 0.69), [a * (1 if i % 2 else -1) for i in range(12)]),
                            fire=0.0101, quiet=0.0099, skip="TP-PREF-AT-LN2 judges that"),
                   straddle("rise_noise", 2.0, margins_hump, fire=1.9, quiet=2.1)),
    ),
    "TP-PREF-ACC-AT-CHANCE": RuleCases(
        fires=Fires(subject=lambda: pref_accuracy(0.5), hits=(Expect(message='reward accuracy stays at chance: mean 0.55 over the second half of the run (10 points, steps 110-200), within 0.2 of 0.5 (the larger of 0.05 and 2 standard errors 0.1): the chosen answers are ranked above the rejected ones no more often than by chance',
                           evidence={'mean_accuracy': 0.55, 'band': 0.2, 'stderr': 0.1, 'points': 10}, line=10),),
                    family=('TP-PREF-ACC-AT-CHANCE',)),
        quiet=(Quiet(subject=lambda: run_of(loss=ones(20, 0.6), cols={"rewards/accuracies": falling(20, 0.5, 0.9)})),
               Quiet(subject=lambda: run_of(loss=ones(20, 0.6), cols={"rewards/accuracies": ones(20, 0.5), "rewards/margins": [0.0] * 20}),
                     skip="TP-PREF-AT-LN2 judges that")),
        straddles=(straddle("band", 0.05, lambda x: run_of(loss=ones(20, 0.6), cols={"rewards/accuracies": [0.5 + x + 0.001 * (1 if i % 2 else -1) for i in range(20)]}),
                            fire=0.049, quiet=0.051),
                   straddle("noise_sigmas", 2.0, pref_accuracy, fire=1.9, quiet=2.1),
                   straddle("min_points", 10, lambda n: run_of(loss=ones(int(n), 0.6), cols={"rewards/accuracies": ones(int(n), 0.5)}),
                            fire=10, quiet=9, skip="this check needs at least 10")),
    ),
    "TP-PREF-DISPLACEMENT": RuleCases(
        fires=Fires(subject=lambda: displaced(), hits=(Expect(message='chosen log-probs fall with the rejected ones: chosen -100 -> -120 (trend z -8.33), rejected -101.8 -> -117.8 (z -9.08), medians of 8 over steps 10-400; the chosen log-prob is below its start at 100% of the steps after the first 8 (limits: z <= -2, a fall over 2 level noises, 60% of the steps): the margin grows by pushing both answers down',
                           evidence={'chosen_start': -100.0, 'chosen_end': -120.0, 'chosen_trend_z': -8.33049, 'rejected_start': -101.75, 'rejected_end': -117.75, 'rejected_trend_z': -9.076156, 'share_below_start': 1.0}, line=39),),
                    family=('TP-PREF-DISPLACEMENT',)),
        quiet=(Quiet(subject=lambda: run_of(loss=ones(40, 0.6), cols={"logps/chosen": ones(40, -100.0), "logps/rejected": falling(40, -100, -140)})),
               Quiet(subject=lambda: displaced(0.3))),
        straddles=(straddle("min_share", 0.6, displaced, fire=0.625, quiet=0.59375),
                   straddle("max_trend_z", -2.0, lambda z: run_of(loss=falling(20, LN2, 0.3), cols={
                       "logps/chosen": to_trend_z([-100.0 - 20.0 * i / 19 for i in range(20)], z, keep=4),
                       "logps/rejected": [-100.0 - 30.0 * i / 19 for i in range(20)]}), fire=-2.1, quiet=-1.9),
                   straddle("fall_noise", 2.0, displaced_in_noises, fire=2.2, quiet=1.8),
                   straddle("min_points", 10, lambda n: run_of(loss=ones(int(n), 0.6), cols={"logps/chosen": falling(int(n), -100, -120),
                                                                                            "logps/rejected": falling(int(n), -100, -130)}),
                            fire=10, quiet=9, skip="this check needs at least 10")),
    ),
    "TP-NAN-EVAL": RuleCases(
        fires=Fires(subject=lambda: overfit([2.0, 1.5, NAN, 1.2, INF, 1.1]), hits=(Expect(message='eval loss (eval_loss) is nan at step 300; 2 of 6 logged eval losses are not finite (limit 0)',
                           evidence={'first_step': 300, 'count': 2, 'points': 6}, line=29),),
                    family=('TP-NAN-EVAL',)),
        quiet=(Quiet(subject=lambda: overfit([2.0, 1.5, 1.3, 1.2, 1.1, 1.1])),
               Quiet(subject=lambda: run_of(loss=with_at(healthy(10), {4: NAN})), skip="no eval_loss series")),
    ),
    "TP-RL-NO-SIGNAL": RuleCases(
        fires=Fires(subject=lambda: no_signal(8), hits=(Expect(message='95% of prompt groups (median) got one reward for all their completions over 8 logged steps in a row (steps 130-200 of 10-200; limits: frac_reward_zero_std >= 0.9 for 5 steps): their advantages are 0, so the policy gets no learning signal; the reward over the stretch is 1 against 1 at the start (median of 4)',
                           evidence={'stretch_points': 8, 'first_step': 130, 'last_step': 200, 'median_frac_reward_zero_std': 0.95, 'points': 20, 'reward_level': 1.0, 'reward_start': 1.0, 'saturated': False}, line=12),),
                    family=('TP-RL-NO-SIGNAL',)),
        quiet=(Quiet(subject=lambda: no_signal(8, rise=0.5)), Quiet(subject=lambda: no_signal(4)),
               Quiet(subject=lambda: grpo(4, frac_reward_zero_std=ones(4)), skip="this check needs at least 5")),
        straddles=(straddle("near_one", 0.9, lambda v: no_signal(value=v), fire=0.91, quiet=0.89),
                   straddle("min_stretch", 5, no_signal, fire=5, quiet=4),
                   straddle("stretch_share", 0.1, lambda f: no_signal(round(100 * f), n=100), fire=0.1, quiet=0.09),
                   straddle("rise", 0.1, lambda x: no_signal(rise=x), fire=0.09, quiet=0.11)),
    ),
    "TP-RL-SATURATED": RuleCases(
        fires=Fires(subject=lambda: no_signal(8, rise=0.5), hits=(Expect(message='95% of prompt groups (median) got one reward for all their completions over 8 logged steps in a row (steps 130-200 of 10-200; limits: frac_reward_zero_std >= 0.9 for 5 steps): their advantages are 0, so the policy gets no learning signal; the reward over the stretch is 1.5 against 1 at the start (median of 4): it rose first, so the task looks saturated',
                           evidence={'stretch_points': 8, 'first_step': 130, 'last_step': 200, 'median_frac_reward_zero_std': 0.95, 'points': 20, 'reward_level': 1.5, 'reward_start': 1.0, 'saturated': True}, line=12),),
                    family=('TP-RL-SATURATED',)),
        quiet=(Quiet(subject=lambda: no_signal(8)), Quiet(subject=lambda: no_signal(4, rise=0.5))),
        straddles=(straddle("near_one", 0.9, lambda v: no_signal(value=v, rise=0.5), fire=0.91, quiet=0.89),
                   straddle("min_stretch", 5, lambda k: no_signal(k, rise=0.5), fire=5, quiet=4),
                   straddle("stretch_share", 0.1, lambda f: no_signal(round(100 * f), n=100, rise=0.5), fire=0.1, quiet=0.09),
                   straddle("rise", 0.1, lambda x: no_signal(rise=x), fire=0.11, quiet=0.09)),
    ),
    "TP-RL-REWARD-CONSTANT": RuleCases(
        fires=Fires(subject=lambda: grpo(8, reward=[0.0] * 8, reward_std=[0.0] * 8), hits=(Expect(message='reward is identically 0 over 8 logged steps (steps 10-80; spread 0, limit 1e-09) and reward_std 0 at all 8 of its points: the reward does not read the completions, so the policy learns nothing',
                           evidence={'value': 0.0, 'spread': 0.0, 'points': 8}, line=0),),
                    family=('TP-RL-REWARD-CONSTANT',)),
        quiet=(Quiet(subject=lambda: grpo(8)), Quiet(subject=lambda: grpo(8, reward=[0.0] * 8, reward_std=[0.0] * 7 + [0.2]))),
        straddles=(straddle("min_points", 5, lambda n: grpo(int(n), reward=[0.5] * int(n), reward_std=[0.0] * int(n)), fire=5, quiet=4,
                            skip="this check needs at least 5"),
                   straddle("max_spread", 1e-9, lambda x: grpo(8, reward=[0.0] * 7 + [x], reward_std=[0.0] * 8),
                            fire=0.9e-9, quiet=1.1e-9)),
    ),
    "TP-RL-KL-BLOWUP": RuleCases(
        fires=Fires(subject=lambda: grpo(10, kl=[0.01, 0.02, 0.05, 0.1, 0.3, 0.8, 1.5, 3.0, 2.5, 4.0]), hits=(Expect(message='KL from the reference grows from 0.01 at step 10 to 3 nats/token at the end (median of the last 3, steps 80-100), peak 4 at step 100, trend z 3.76 (limits: end level >= 1, 10.00x the first value): the policy is running away from its reference',
                           evidence={'first_value': 0.01, 'end_level': 3.0, 'peak': 4.0, 'peak_step': 100, 'trend_z': 3.756594, 'window': 3}, line=9),),
                    family=('TP-RL-KL-BLOWUP',)),
        quiet=(Quiet(subject=lambda: grpo(10, kl=falling(10, 0.01, 0.2))),
               Quiet(subject=lambda: run_of(loss=healthy(10), kl=ones(10, 5.0)), skip="judged for RL runs")),
        straddles=(straddle("max_level", 1.0, lambda e: grpo(10, kl=[0.01] * 7 + [e] * 3), fire=1.01, quiet=0.99),
                   straddle("growth", 10.0, lambda g: grpo(10, kl=[2.0 / g] * 7 + [2.0] * 3), fire=10.5, quiet=9.5),
                   straddle("min_points", 5, lambda n: grpo(int(n), kl=[0.01] + [2.0] * (int(n) - 1)), fire=5, quiet=4,
                            skip="this check needs at least 5")),
    ),
    "TP-RL-CLIPPED": RuleCases(
        fires=Fires(subject=lambda: grpo(12, completions__clipped_ratio=falling(12, 0.1, 0.95), completions__max_length=ones(12, 256.0)),
                    hits=(Expect(message='92% of completions (median of the last 3 logged steps, 100-120) end at the length cap of 256 tokens without finishing (limit 90%): the rewards score cut-off text; raise max_completion_length',
                           evidence={'clipped_level': 0.9227825, 'window': 3, 'cap': 256.0}, line=9),),
                    family=('TP-RL-CLIPPED',)),
        quiet=(Quiet(subject=lambda: grpo(12, completions__clipped_ratio=falling(12, 0.9, 0.1))),
               Quiet(subject=lambda: grpo(12, completions__clipped_ratio=ones(2, 1.0) + nones(10)), skip="this check needs at least 3")),
        straddles=(straddle("near_one", 0.9, lambda v: grpo(8, completions__clipped_ratio=ones(8, v)), fire=0.91, quiet=0.89),
                   straddle("min_points", 3, lambda n: grpo(8, completions__clipped_ratio=ones(int(n), 1.0) + nones(8 - int(n))),
                            fire=3, quiet=2, skip="this check needs at least 3")),
    ),
    "TP-RL-ENTROPY-COLLAPSE": RuleCases(
        fires=Fires(subject=lambda: entropy(), hits=(Expect(message='entropy collapses from 2 at step 10 to 0.04 nats/token by step 60 (point 6 of 20) and ends at 0.04 (median of the last 4; limits: 0.1, the larger of 5% of the first value and 0.05, within the first 50% of the run, ending under 10% of it): the policy samples one completion and stops exploring',
                           evidence={'first_value': 2.0, 'collapsed_value': 0.04, 'collapse_step': 60, 'end_level': 0.04, 'bound': 0.1}, line=5),),
                    family=('TP-RL-ENTROPY-COLLAPSE',)),
        quiet=(Quiet(subject=lambda: grpo(20, entropy=falling(20, 2.0, 1.2))),
               Quiet(subject=lambda: entropy(end=0.5)),
               Quiet(subject=lambda: grpo(20, entropy=ones(20, 0.04)), skip="already at the floor"),
               Quiet(subject=lambda: run_of(loss=healthy(20), entropy=falling(20, 2.0, 0.01)), skip="judged for RL runs")),
        straddles=(straddle("collapse", 0.05, entropy, fire=0.049, quiet=0.051),
                   straddle("floor", 0.05, lambda v: entropy(v / 0.5, first=0.5), fire=0.049, quiet=0.051),
                   straddle("early", 0.5, lambda f: entropy(n=100, at=round(100 * f)), fire=0.49, quiet=0.5),
                   straddle("stays", 0.1, lambda e: entropy(end=e), fire=0.09, quiet=0.11),
                   straddle("min_points", 6, lambda n: entropy(n=int(n), at=1), fire=6, quiet=5,
                            skip="this check needs at least 6")),
    ),
    "TP-RL-LENGTH-HACKING": RuleCases(
        fires=Fires(subject=lambda: lengths(), hits=(Expect(message='mean completion length grows from 100 to 160 tokens (medians of 4, steps 10-200, trend z 5.74) and ends at 95% of the longest completion logged, 168.421 tokens (the cap) (limits: z >= 2, 1.25x the start, 90% of the cap): the policy is learning to write longer, not better — check what the reward pays for',
                           evidence={'start_level': 100.0, 'end_level': 160.0, 'trend_z': 5.742638, 'cap': 168.4211}, line=19),),
                    family=('TP-RL-CLIPPED', 'TP-RL-LENGTH-HACKING')),
        quiet=(Quiet(subject=lambda: lengths(near=0.5)), Quiet(subject=lambda: lengths(1.1)),
               Quiet(subject=lambda: grpo(20, completions__mean_length=steady(20, 100.0, 160.0, 4)),
                     skip="no completions/max_length or completions/clipped_ratio")),
        straddles=(straddle("growth", 1.25, lengths, fire=1.26, quiet=1.24),
                   straddle("min_trend_z", 2.0, lambda z: grpo(20, completions__mean_length=to_trend_z(
                       [100.0 + 60.0 * i / 19 for i in range(20)], z, keep=4), completions__max_length=ones(20, 168.0)),
                            fire=2.1, quiet=1.9),
                   straddle("near_cap", 0.9, lambda c: lengths(near=c), fire=0.91, quiet=0.89),
                   straddle("min_points", 6, lambda n: grpo(int(n), completions__mean_length=[100.0 + 20 * i for i in range(int(n))],
                                                              completions__max_length=ones(int(n), 195.0)),
                            fire=6, quiet=5, skip="this check needs at least 6")),
    ),
}

FAMILY = FamilyCases(cases=CASES, context=context, report=report)
