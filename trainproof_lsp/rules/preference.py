"""Preference-optimisation runs (DPO family) judged by their reward margins and log-probs.

TRL's DPOTrainer (and KTO, ORPO, OpenRLHF's DPO) log, at every step, the implicit rewards
of the chosen and rejected answers (beta x the policy's log-prob gain over the reference),
their margin, the share of pairs ranked right, and the policy's log-probs of both
answers (core/objectives.py). Those say whether the run learns; the loss alone does not
(a DPO loss starts at ln 2 whatever the vocabulary). The generic loss rules that assume a
cross-entropy stand down for such runs (rules/objective.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Sequence

from ..core import objectives as ob
from ..core.model import LOSS, Hit, Level, Related, Run, Series
from ._stats import MAD_TO_SIGMA, mad, mann_kendall_z, median, point_noise
from .base import Context, METRICS, Rule, Skip, fmt, need

LN2 = math.log(2.0)

# Margins within this of 0 are "at 0": a margin of 0.01 moves the sigmoid DPO loss only
# 0.005 below ln 2, and a run that learns passes it within its first tens of steps
# (TRL's own tiny-model runs reach 0.1 in two steps at beta 0.1). Shared by TP-PREF-AT-LN2
# (which reports such margins) and TP-PREF-MARGINS-FLAT (which leaves them to it).
MARGIN_AT_ZERO = 0.01


def window_levels(values: Sequence[float]) -> tuple[int, float, float, float]:
    """(window, start level, end level, level noise): medians of the first and last window
    (a fifth of the run, 3 to 20 points) and the spread one such median has at the series'
    own point noise."""
    n = len(values)
    w = max(3, min(20, n // 5))
    noise = point_noise(values) if n >= 4 else MAD_TO_SIGMA * mad(values)
    return w, median(values[:w]), median(values[-w:]), noise / math.sqrt(w)


# --- TP-PREF-AT-LN2 ----------------------------------------------------------------------

AT_LN2_DOC = """A preference run stays at loss ln 2 with reward margins at 0: the policy never left its reference.

What it flags: a DPO-family log (reward margins logged) in which, after the first logged
step, at least `min_share` of the points have the loss within `loss_band` of ln 2 =
0.6931 and the reward margin within `margin_band` of 0 (at least `min_points` points).
Why it matters: the sigmoid DPO loss is -log sigmoid(margin); it is ln 2 exactly when the
policy ranks chosen and rejected answers no differently from the reference. A run that
stays there has learned nothing: the reference model is the policy itself (a reference
synced to the policy every step, the same weights passed twice through an adapter that is
never enabled) or beta is so small (1e-6) that no log-prob change moves the margin.
What it does not mean: a slow start; the first logged step is always at ln 2 (the policy
starts as the reference) and is not counted. Loss types that do not start at ln 2 (IPO,
hinge) are not flagged.
"""


@dataclass(frozen=True, kw_only=True)
class AtLn2Limits:
    # Five points after the first: fewer could be a warm-up that has not moved yet.
    min_points: int = 5
    # 0.005 of ln 2 (0.7%): the loss a margin of MARGIN_AT_ZERO gives; rounding a logged
    # 0.6931 is well inside it.
    loss_band: float = 0.005
    margin_band: float = MARGIN_AT_ZERO
    # 90% of the points: one noisy batch that strays does not hide a run stuck at ln 2.
    min_share: float = 0.9


def _at_ln2(loss: Series, margins: Series,
            limits: AtLn2Limits) -> tuple[int, int, float, float, int, int] | None:
    """(points judged, points at ln 2 with margins at 0, median loss, largest |margin|, and
    the loss indices of the first and last point judged) over the steps both series log,
    after the first; None when too few."""
    at = dict(zip(margins.steps, margins.values))
    judged = [i for i, s in enumerate(loss.steps) if s in at][1:]
    if len(judged) < limits.min_points:
        return None
    pairs = [(loss.values[i], at[loss.steps[i]]) for i in judged]
    inside = sum(1 for lv, m in pairs if abs(lv - LN2) <= limits.loss_band and abs(m) <= limits.margin_band)
    return len(pairs), inside, median([lv for lv, _ in pairs]), max(abs(m) for _, m in pairs), judged[0], judged[-1]


def check_at_ln2(run: Run, limits: AtLn2Limits, ctx: Context) -> Iterator[Hit]:
    loss = need(run, LOSS, limits.min_points + 1, "loss")
    margins = need(run, ob.REWARDS_MARGINS, limits.min_points + 1, "reward margins")
    got = _at_ln2(loss, margins, limits)
    if got is None:
        raise Skip(f"loss and reward margins share fewer than {limits.min_points + 1} logged steps")
    n, inside, level, top, first, last = got
    share = inside / n
    if share < limits.min_share:
        return
    yield Hit(
        message=(f"DPO loss stays at ln 2 = {LN2:.4f} (median {level:.4f}) with reward margins at 0 (largest "
                 f"|margin| {top:.3g}) at {inside} of {n} logged steps after the first (steps {loss.steps[first]}-"
                 f"{loss.steps[last]}; limits: loss within {limits.loss_band:g} of ln 2, |margin| <= "
                 f"{limits.margin_band:g}, at {limits.min_share:.0%} of the steps): the policy ranks the pairs no "
                 "differently from its reference — a reference that is the policy itself, a beta far too small, or "
                 "weights that no longer tell the answers apart"),
        evidence={"points": n, "at_ln2": inside, "share": share, "median_loss": level, "max_abs_margin": top},
        location=run.location(loss.records[first]),
        related=(Related(location=run.location(margins.records[-1]),
                         message=f"reward margin {margins.values[-1]:.3g} at the last step {margins.steps[-1]}"),),
    )


AT_LN2_RULE = Rule(id="TP-PREF-AT-LN2", name="preference-at-ln2", level=Level.FAIL, doc=AT_LN2_DOC,
                   limits=AtLn2Limits, check=check_at_ln2, needs=(LOSS, ob.REWARDS_MARGINS), family=METRICS)


# --- TP-PREF-MARGINS-FLAT ------------------------------------------------------------------

MARGINS_FLAT_DOC = """A preference run whose reward margins never rise: it does not learn to prefer the chosen answers.

What it flags: a reward-margins series of at least `min_points` points with no upward
trend (Mann-Kendall z below `min_trend_z`) and an end level (median of the last fifth)
less than `rise_noise` level-noises above its start level (median of the first fifth),
where the level noise is the series' own point noise over the square root of the window.
Why it matters: DPO and its relatives push the margin between the chosen and the rejected
answer's implicit reward up; a run whose margins do not move is not learning the
preferences — a learning rate too low to move the weights, pairs whose chosen and
rejected answers were shuffled or are interchangeable, or an objective that is not
reaching the weights.
Noisy logs: levels are window medians and the trend a rank test, both at the run's own noise.
What it does not mean: margins that stay at 0 with the loss at ln 2 — TP-PREF-AT-LN2 names
that; this rule leaves such a run to it. Margins that rise and then plateau pass.
"""


@dataclass(frozen=True, kw_only=True)
class MarginsFlatLimits:
    # The trend checks' minimum (as TP-DEAD-RUN's): a rank test on fewer says nothing.
    min_points: int = 10
    # z below 1: not even a weak (one-sigma) upward trend. A learning DPO run's margins rise
    # steadily (z of 4 and more over 20 steps).
    min_trend_z: float = 1.0
    # A rise under two level noises is within what two window medians of a flat series
    # differ by about 5% of the time.
    rise_noise: float = 2.0
    at_zero: float = MARGIN_AT_ZERO


def check_margins_flat(run: Run, limits: MarginsFlatLimits, ctx: Context) -> Iterator[Hit]:
    margins = need(run, ob.REWARDS_MARGINS, limits.min_points, "reward margins")
    values = margins.values
    if max(abs(v) for v in values) <= limits.at_zero:
        raise Skip(f"reward margins stay within {limits.at_zero:g} of 0: TP-PREF-AT-LN2 judges that")
    w, start, end, level_noise = window_levels(values)
    z = mann_kendall_z(values)
    rise = end - start
    if z >= limits.min_trend_z or rise > limits.rise_noise * level_noise:
        return
    yield Hit(
        message=(f"reward margins do not rise over {len(values)} logged steps (steps {margins.steps[0]}-"
                 f"{margins.steps[-1]}): {fmt(start)} at the start, {fmt(end)} at the end (medians of {w}), a rise of "
                 f"{fmt(rise)} against a level noise of {fmt(level_noise)} (limit {limits.rise_noise:g} noises), trend z "
                 f"{z:.2f} (limit {limits.min_trend_z:g}): the run is not learning the preferences"),
        evidence={"start_level": start, "end_level": end, "rise": rise, "level_noise": level_noise,
                  "trend_z": z, "points": len(values), "window": w},
        location=run.location(margins.records[-1]),
        related=(Related(location=run.location(margins.records[0]),
                         message=f"reward margin {values[0]:.3g} at the first step {margins.steps[0]}"),),
    )


MARGINS_FLAT_RULE = Rule(id="TP-PREF-MARGINS-FLAT", name="preference-margins-flat", level=Level.FAIL,
                         doc=MARGINS_FLAT_DOC, limits=MarginsFlatLimits, check=check_margins_flat,
                         needs=(ob.REWARDS_MARGINS,), family=METRICS)


# --- TP-PREF-ACC-AT-CHANCE --------------------------------------------------------------------

ACC_DOC = """A preference run whose reward accuracy stays at 0.5: it ranks the pairs no better than a coin.

What it flags: a `rewards/accuracies` series of at least `min_points` points whose mean
over the second half of the run is within a band of 0.5: the larger of `band` and
`noise_sigmas` standard errors of that mean at the series' own spread.
Why it matters: the accuracy is the share of pairs whose chosen answer gets the higher
implicit reward. A run that learns the preferences moves it well above 0.5 early; one that
stays there is ranking at random — pairs whose chosen and rejected sides are shuffled or
interchangeable, or a model that cannot tell them apart.
What it does not mean: a run at 0 accuracy with margins exactly 0 (every tie counts as
wrong in TRL): that is TP-PREF-AT-LN2. The band grows with the run's noise, so a small,
noisy batch is not called at chance on one value.
"""


@dataclass(frozen=True, kw_only=True)
class AccLimits:
    min_points: int = 10  # a median over the second half of at least five points
    # 0.05 around 0.5: the binomial spread of a guess over ~100 pairs per logged step is
    # 0.05; a run that learns is at 0.6-1.0 within its first hundred steps.
    band: float = 0.05
    noise_sigmas: float = 2.0  # ~95% of a guessing run's medians fall within two errors


def check_acc_at_chance(run: Run, limits: AccLimits, ctx: Context) -> Iterator[Hit]:
    acc = need(run, ob.REWARDS_ACCURACIES, limits.min_points, "reward accuracies")
    margins = run.get(ob.REWARDS_MARGINS)
    if margins is not None and len(margins.finite()) and max(abs(v) for v in margins.finite().values) <= MARGIN_AT_ZERO:
        raise Skip(f"reward margins stay within {MARGIN_AT_ZERO:g} of 0: TP-PREF-AT-LN2 judges that")
    half = list(acc.values[len(acc) // 2:])
    # The mean, not the median: each point is a share of a few pairs (quarters for a batch
    # of four), and a median of such steps sticks to one of them.
    level = sum(half) / len(half)
    spread = math.sqrt(sum((v - level) ** 2 for v in half) / (len(half) - 1))
    stderr = spread / math.sqrt(len(half))
    band = max(limits.band, limits.noise_sigmas * stderr)
    if abs(level - 0.5) > band:
        return
    first = len(acc) // 2
    yield Hit(
        message=(f"reward accuracy stays at chance: mean {level:.3g} over the second half of the run ({len(half)} "
                 f"points, steps {acc.steps[first]}-{acc.steps[-1]}), within {band:.3g} of 0.5 (the larger of "
                 f"{limits.band:g} and {limits.noise_sigmas:g} standard errors {stderr:.3g}): the chosen answers are "
                 "ranked above the rejected ones no more often than by chance"),
        evidence={"mean_accuracy": level, "band": band, "stderr": stderr, "points": len(half)},
        location=run.location(acc.records[first]),
    )


ACC_RULE = Rule(id="TP-PREF-ACC-AT-CHANCE", name="preference-accuracy-at-chance", level=Level.WARN, doc=ACC_DOC,
                limits=AccLimits, check=check_acc_at_chance, needs=(ob.REWARDS_ACCURACIES,), family=METRICS)


# --- TP-PREF-DISPLACEMENT ---------------------------------------------------------------------

DISPLACEMENT_DOC = """The chosen answers' log-probs fall with the rejected ones: likelihood displacement.

What it flags: `logps/chosen` and `logps/rejected` of at least `min_points` points that both
fall — a downward trend (Mann-Kendall z at most `max_trend_z`) and an end level more than
`fall_noise` level-noises below the start level — with the chosen log-prob below its start
level at `min_share` or more of the points after the first window.
Why it matters: DPO widens the gap between chosen and rejected; it can do so by lowering
both, the rejected faster. The margins then look healthy while the model grows less
likely to produce the answers it was taught to prefer, and probability mass moves to
answers that are in neither set. It is common with chosen and rejected answers that
differ in a few tokens.
What it does not mean: a broken run — the margins may be fine, and some fall of both is
usual late in DPO; it is a WARN to look at samples, or to add an SFT term (RPO,
`rpo_alpha`) or a length-normalised loss.
"""


@dataclass(frozen=True, kw_only=True)
class DisplacementLimits:
    min_points: int = 10  # the trend checks' minimum
    max_trend_z: float = -2.0  # a fall at 95% significance, for each series
    fall_noise: float = 2.0  # ... and larger than two level noises
    # "for most of the run": the chosen log-prob sits below where it started at 60% of the
    # points after the first window.
    min_share: float = 0.6


def _falls(series: Series, limits: DisplacementLimits) -> tuple[float, float, float, float] | None:
    values = series.values
    w, start, end, noise = window_levels(values)
    z = mann_kendall_z(values)
    if z <= limits.max_trend_z and start - end > limits.fall_noise * noise:
        return start, end, z, noise
    return None


def check_displacement(run: Run, limits: DisplacementLimits, ctx: Context) -> Iterator[Hit]:
    chosen = need(run, ob.LOGPS_CHOSEN, limits.min_points, "chosen log-probs")
    rejected = need(run, ob.LOGPS_REJECTED, limits.min_points, "rejected log-probs")
    c = _falls(chosen, limits)
    r = _falls(rejected, limits)
    if c is None or r is None:
        return
    w = window_levels(chosen.values)[0]
    after = chosen.values[w:]
    share = sum(1 for v in after if v < c[0]) / len(after) if after else 0.0
    if share < limits.min_share:
        return
    yield Hit(
        message=(f"chosen log-probs fall with the rejected ones: chosen {fmt(c[0])} -> {fmt(c[1])} (trend z {c[2]:.2f}), "
                 f"rejected {fmt(r[0])} -> {fmt(r[1])} (z {r[2]:.2f}), medians of {w} over steps {chosen.steps[0]}-"
                 f"{chosen.steps[-1]}; the chosen log-prob is below its start at {share:.0%} of the steps after the first "
                 f"{w} (limits: z <= {limits.max_trend_z:g}, a fall over {limits.fall_noise:g} level noises, "
                 f"{limits.min_share:.0%} of the steps): the margin grows by pushing both answers down"),
        evidence={"chosen_start": c[0], "chosen_end": c[1], "chosen_trend_z": c[2], "rejected_start": r[0],
                  "rejected_end": r[1], "rejected_trend_z": r[2], "share_below_start": share},
        location=run.location(chosen.records[-1]),
        related=(Related(location=run.location(chosen.records[0]),
                         message=f"chosen log-prob {chosen.values[0]:.4g} at the first step {chosen.steps[0]}"),),
    )


DISPLACEMENT_RULE = Rule(id="TP-PREF-DISPLACEMENT", name="likelihood-displacement", level=Level.WARN,
                         doc=DISPLACEMENT_DOC, limits=DisplacementLimits, check=check_displacement,
                         needs=(ob.LOGPS_CHOSEN, ob.LOGPS_REJECTED), family=METRICS)


# --- TP-REWARD-NONFINITE ----------------------------------------------------------------------

NONFINITE_DOC = """A reward, margin or log-prob series of a preference or RL run holds NaN or infinity.

What it flags: any NaN or infinite value in the implicit rewards, margins, accuracies or
log-probs of a DPO-family run, or in the reward and its spread of an RL run — train or
eval (`rewards/*`, `logps/*`, `reward`, `reward_std`, and their `eval_` forms). One finding,
at the earliest such point, naming every series that has one.
Why it matters: these are computed from the policy's log-probs; a non-finite one means the
forward pass overflowed (fp16 without scaling, a learning rate that blew the weights up, a
completion of length 0 divided by) and the run's updates from there on are garbage — as
with a NaN loss (TP-NAN), which may not show it when the loss is masked or averaged away.
What it does not mean: the KL series; TP-RL-KL-BLOWUP judges that.
"""

_NONFINITE_SERIES = (*ob.PREFERENCE_SERIES, *ob.EVAL_PREFERENCE_SERIES, ob.REWARD, ob.REWARD_STD,
                     ob.EVAL_PREFIX + ob.REWARD, ob.EVAL_PREFIX + ob.REWARD_STD)


def check_nonfinite(run: Run, limits: object, ctx: Context) -> Iterator[Hit]:
    present = [s for s in (run.get(n) for n in _NONFINITE_SERIES) if s is not None]
    if not present:
        raise Skip("no reward or log-prob series in the log")
    bad = []
    for s in present:
        if s.all_finite:
            continue
        idx = [i for i, v in enumerate(s.values) if not math.isfinite(v)]
        bad.append((s.records[idx[0]], s, idx))
    if not bad:
        return
    bad.sort(key=lambda b: (b[0], b[1].name))
    record, first, idx = bad[0]
    i = idx[0]
    names = ", ".join(f"{s.source_name} ({len(ix)} of {len(s)})" for _, s, ix in bad)
    total = sum(len(ix) for _, _, ix in bad)
    yield Hit(
        message=(f"{first.source_name} is {first.values[i]} at step {first.steps[i]}: {total} non-finite point(s) in "
                 f"{len(bad)} reward/log-prob series — {names}"),
        evidence={"series": ",".join(s.name for _, s, _ in bad), "first_series": first.name,
                  "first_step": first.steps[i], "points": total},
        location=run.location(record),
    )


NONFINITE_RULE = Rule(id="TP-REWARD-NONFINITE", name="reward-nonfinite", level=Level.FAIL, doc=NONFINITE_DOC,
                      check=check_nonfinite, family=METRICS)

RULES = (NONFINITE_RULE, AT_LN2_RULE, MARGINS_FLAT_RULE, ACC_RULE, DISPLACEMENT_RULE)
