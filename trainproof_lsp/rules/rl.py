"""RL-from-rewards runs (GRPO/PPO family) judged by their rewards, KL, entropy and lengths.

TRL's GRPOTrainer (and RLOO, verl, OpenRLHF) log per step the mean reward and its spread,
the share of prompt groups whose completions all scored the same, the KL from the
reference, the policy's entropy and the completions' lengths (core/objectives.py). Their
loss is a surrogate near 0 by construction, so the loss rules stand down for them
(rules/objective.py) and these judge the run instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Sequence

from ..core import objectives as ob
from ..core.model import Hit, Level, Related, Run
from ._stats import mann_kendall_z, median
from .base import Context, METRICS, Rule, Skip, fmt, need, times
from .objective import RL, objective_of
from .preference import window_levels


def _longest_stretch(values: Sequence[float], at_least: float) -> tuple[int, int]:
    """(first index, length) of the longest run of consecutive values >= at_least."""
    best = (0, 0)
    start = None
    for i, v in enumerate([*values, -math.inf]):
        if v >= at_least:
            if start is None:
                start = i
        elif start is not None:
            if i - start > best[1]:
                best = (start, i - start)
            start = None
    return best


# --- TP-RL-NO-SIGNAL ---------------------------------------------------------------------------

NO_SIGNAL_DOC = """Most prompt groups of an RL run get the same reward for every completion: no learning signal.

What it flags: `frac_reward_zero_std` (the share of groups whose completions all got the
same reward) at or above `near_one` for a stretch of consecutive logged steps at least
`min_stretch` long, and at least `stretch_share` of the run, while the reward over the
stretch is no more than `rise` above where the run started: the run never had a signal,
or lost it. (When the reward had risen first, the task is saturated: TP-RL-SATURATED.)
Why it matters: GRPO's advantage is each completion's reward minus its group's mean; a
group whose rewards are all equal has advantages 0 and adds nothing to the gradient. With
nearly every group like that the loss and the gradient sit near 0 and the policy does not
move, while the logs look calm — a reward function that returns the same score for
everything, prompts far too hard (all 0) or too easy (all 1), or a temperature so low the
completions of a group are identical.
What it does not mean: a stretch shorter than the limits; groups of easy and hard prompts
come and go.
"""


@dataclass(frozen=True, kw_only=True)
class NoSignalLimits:
    # 90% of the groups without a gradient: the run learns from a tenth of its batch at best.
    near_one: float = 0.9
    # Five logged steps in a row (and a tenth of a longer run): one or two batches of easy
    # prompts are normal; five in a row is the run, not the batch.
    min_stretch: int = 5
    stretch_share: float = 0.1
    # The reward over the stretch counts as risen when it is this share of its start level
    # (median of the first window) above it, and above it by more than its level noise.
    rise: float = 0.1


def _no_signal(run: Run, limits: NoSignalLimits) -> Hit | None:
    """The stretch without signal, as a hit (evidence `saturated` says which rule words it)."""
    frac = need(run, ob.FRAC_REWARD_ZERO_STD, limits.min_stretch, "frac_reward_zero_std")
    values = frac.values
    needed = max(limits.min_stretch, math.ceil(limits.stretch_share * len(values)))
    start, length = _longest_stretch(values, limits.near_one)
    if length < needed:
        return None
    end = start + length - 1
    level = median(values[start:end + 1])
    saturated, reward_text = False, ""
    reward = run.get(ob.REWARD)
    evidence: dict[str, float | int | str | bool | None] = {
        "stretch_points": length, "first_step": frac.steps[start], "last_step": frac.steps[end],
        "median_frac_reward_zero_std": level, "points": len(values)}
    if reward is not None and len(reward.finite()) >= 3:
        r = reward.finite()
        w, r_start, _, noise = window_levels(r.values)
        during = [v for s, v in zip(r.steps, r.values) if frac.steps[start] <= s <= frac.steps[end]]
        if during:
            r_level = median(during)
            saturated = start > 0 and r_level - r_start > max(limits.rise * abs(r_start), noise)
            reward_text = (f"; the reward over the stretch is {fmt(r_level)} against {fmt(r_start)} at the start "
                           f"(median of {w})" + (": it rose first, so the task looks saturated" if saturated else ""))
            evidence.update(reward_level=r_level, reward_start=r_start)
    evidence["saturated"] = saturated
    return Hit(
        message=(f"{level:.0%} of prompt groups (median) got one reward for all their completions over {length} logged "
                 f"steps in a row (steps {frac.steps[start]}-{frac.steps[end]} of {frac.steps[0]}-{frac.steps[-1]}; "
                 f"limits: frac_reward_zero_std >= {limits.near_one:g} for {needed} steps): their advantages are 0, so "
                 f"the policy gets no learning signal{reward_text}"),
        evidence=evidence,
        location=run.location(frac.records[start]),
        related=(Related(location=run.location(frac.records[end]),
                         message=f"frac_reward_zero_std {values[end]:.3g} at step {frac.steps[end]}, the stretch's end"),),
    )


def check_no_signal(run: Run, limits: NoSignalLimits, ctx: Context) -> Iterator[Hit]:
    hit = _no_signal(run, limits)
    if hit is not None and not hit.evidence["saturated"]:
        yield hit


def check_saturated(run: Run, limits: NoSignalLimits, ctx: Context) -> Iterator[Hit]:
    hit = _no_signal(run, limits)
    if hit is not None and hit.evidence["saturated"]:
        yield hit


NO_SIGNAL_RULE = Rule(id="TP-RL-NO-SIGNAL", name="rl-no-signal", level=Level.FAIL, doc=NO_SIGNAL_DOC,
                      limits=NoSignalLimits, check=check_no_signal, needs=(ob.FRAC_REWARD_ZERO_STD,), family=METRICS)

SATURATED_DOC = """Most prompt groups of an RL run score alike after its reward rose: the task is saturated.

What it flags: the stretch TP-RL-NO-SIGNAL looks for (`frac_reward_zero_std` at or above
`near_one` for `min_stretch` logged steps in a row and `stretch_share` of the run), when
the reward over it is more than `rise` of its start level (and its level noise) above
where the run started.
Why it matters: every completion of most prompts now gets the top reward, so their groups
give no gradient; further steps cost compute and teach nothing. Stop, or move on to
harder prompts.
What it does not mean: a broken run — it learned what these prompts teach.
"""

SATURATED_RULE = Rule(id="TP-RL-SATURATED", name="rl-saturated", level=Level.WARN, doc=SATURATED_DOC,
                      limits=NoSignalLimits, check=check_saturated, needs=(ob.FRAC_REWARD_ZERO_STD,), family=METRICS)


# --- TP-RL-REWARD-CONSTANT ------------------------------------------------------------------------

CONSTANT_DOC = """An RL run's reward is the same number at every logged step (often 0).

What it flags: a reward series of at least `min_points` points whose values all lie
within `max_spread` (relative to their size, and at least absolute `max_spread`) of each
other, with its spread (`reward_std`) 0 at every point when the log has it.
Why it matters: the reward is computed from fresh completions every step; one that never
changes is not reading them — a reward function that returns a constant, fails on every
completion and falls back to 0, or parses an answer format the model never produces.
The policy learns nothing, however the loss looks.
What it does not mean: a reward that varies within its batches but averages to the same
mean (`reward_std` above 0 somewhere) — that is not flagged.
"""


@dataclass(frozen=True, kw_only=True)
class ConstantLimits:
    min_points: int = 5  # as TP-FLAT: fewer cannot tell constant from slow
    # 1e-9: sampled completions move any reward that reads them by far more; a constant
    # function returns the same float bit for bit.
    max_spread: float = 1e-9


def check_reward_constant(run: Run, limits: ConstantLimits, ctx: Context) -> Iterator[Hit]:
    reward = need(run, ob.REWARD, limits.min_points, "reward")
    values = reward.values
    lo, hi = min(values), max(values)
    if hi - lo > limits.max_spread * max(1.0, abs(hi), abs(lo)):
        return
    std = run.get(ob.REWARD_STD)
    std_text = ""
    if std is not None:
        finite = std.finite()
        if len(finite):  # a reward_std of NaNs only says nothing of the spread: it is not cited
            if max(abs(v) for v in finite.values) > limits.max_spread:
                return
            std_text = f" and reward_std 0 at all {len(finite)} of its points"
    what = "identically 0" if hi == 0.0 and lo == 0.0 else f"constant at {fmt(hi)}"
    yield Hit(
        message=(f"reward is {what} over {len(values)} logged steps (steps {reward.steps[0]}-{reward.steps[-1]}; "
                 f"spread {hi - lo:.3g}, limit {limits.max_spread:g}){std_text}: the reward does not read the "
                 "completions, so the policy learns nothing"),
        evidence={"value": hi, "spread": hi - lo, "points": len(values)},
        location=run.location(reward.records[0]),
    )


CONSTANT_RULE = Rule(id="TP-RL-REWARD-CONSTANT", name="rl-reward-constant", level=Level.FAIL, doc=CONSTANT_DOC,
                     limits=ConstantLimits, check=check_reward_constant, needs=(ob.REWARD,), family=METRICS)


# --- TP-RL-CLIPPED ----------------------------------------------------------------------------

CLIPPED_DOC = """Nearly every completion of an RL run is cut at the maximum completion length.

What it flags: `completions/clipped_ratio` (the share of completions that hit the
length cap without an end-of-sequence token) whose level over the last part of the run
(median of the last quarter, at least 3 points) is `near_one` or more.
Why it matters: a cut completion never reaches its answer, so an answer-checking reward
scores the truncation, not the model; with `mask_truncated_completions` such completions
add no gradient at all. The usual cause is a `max_completion_length` far below what the
model writes (a cap of a few tokens, or reasoning models capped at a few hundred).
What it does not mean: a few long completions being cut; and when the lengths grew to the
cap over the run, TP-RL-LENGTH-HACKING says why.
"""


@dataclass(frozen=True, kw_only=True)
class ClippedLimits:
    min_points: int = 3  # a median of three: one batch of long answers is not the run
    # 90% of completions cut: what is left is too few finished answers to learn from.
    near_one: float = 0.9


def check_clipped(run: Run, limits: ClippedLimits, ctx: Context) -> Iterator[Hit]:
    clipped = need(run, ob.COMPLETION_CLIPPED_RATIO, limits.min_points, "completions/clipped_ratio")
    values = clipped.values
    w = max(limits.min_points, len(values) // 4)
    level = median(values[-w:])
    if level < limits.near_one:
        return
    cap = _cap(run)
    cap_text = f" of {cap:g} tokens" if cap is not None else ""
    yield Hit(
        message=(f"{level:.0%} of completions (median of the last {w} logged steps, {clipped.steps[-w]}-"
                 f"{clipped.steps[-1]}) end at the length cap{cap_text} without finishing (limit {limits.near_one:.0%}): "
                 "the rewards score cut-off text; raise max_completion_length"),
        evidence={"clipped_level": level, "window": w, "cap": cap},
        location=run.location(clipped.records[-w]),
    )


def _cap(run: Run) -> float | None:
    """The maximum completion length, as the longest completion any step logged."""
    longest = run.get(ob.COMPLETION_MAX_LENGTH)
    if longest is None or not len(longest.finite()):
        return None
    return max(longest.finite().values)


CLIPPED_RULE = Rule(id="TP-RL-CLIPPED", name="rl-completions-clipped", level=Level.WARN, doc=CLIPPED_DOC,
                    limits=ClippedLimits, check=check_clipped, needs=(ob.COMPLETION_CLIPPED_RATIO,), family=METRICS)


# --- TP-RL-KL-BLOWUP --------------------------------------------------------------------------

KL_DOC = """The KL of an RL run's policy from its reference turns NaN/infinite or grows without bound.

What it flags: any NaN or infinite KL value; or a KL whose level at the end (median of
the last fifth of at least `min_points` points, at least 3) is `max_level` nats per token
or more and at least `growth` times its value at the first logged step.
Why it matters: the KL term keeps the policy near the model it started from; a healthy
run's per-token KL stays around 0.001-0.1 and creeps up slowly. One at a nat per token or
more means every token's distribution has left the reference's — a learning rate far
too high, or a reward the policy found a way to game — and its completions degrade into
text no reward should trust (issue threads: "the reward became 0 and the KL became
extremely large").
What it does not mean: a KL that rises from 0 (the policy is the reference at the first
step) to a small plateau, as every run's does; nor a resumed log that starts high and
stays there (no growth within the log). Judged for RL runs only (KTO logs a `kl` of
another meaning).
"""


@dataclass(frozen=True, kw_only=True)
class KlLimits:
    min_points: int = 5  # an end window of three and two points before it to grow from
    # 1 nat per token: ten times the top of the usual range (0.001-0.1); each token's
    # distribution has moved at least as far as from a fair coin to 0.95/0.05.
    max_level: float = 1.0
    # Ten times its first value: grown within this log (the first step's KL is 0 in TRL,
    # whose policy starts as the reference), not a level a resumed run started at.
    growth: float = 10.0


def _rl_only(run: Run, what: str) -> None:
    """Skip unless the run is an RL run: SFT and DPO trainers log a token entropy too, and
    KTO a KL estimate of another meaning."""
    got = objective_of(run)
    if got is None or got[0] is not RL:
        raise Skip(f"{what} is judged for RL runs (a reward beside frac_reward_zero_std, reward_std, kl or "
                   "completion lengths); this log is not one")


def check_kl(run: Run, limits: KlLimits, ctx: Context) -> Iterator[Hit]:
    kl = run.get(ob.KL)
    if kl is None:
        raise Skip("no kl series in the log")
    _rl_only(run, "the KL")
    if not kl.all_finite:
        i = next(i for i, v in enumerate(kl.values) if not math.isfinite(v))
        count = sum(1 for v in kl.values if not math.isfinite(v))
        yield Hit(
            message=(f"KL is {kl.values[i]} at step {kl.steps[i]} ({count} non-finite of {len(kl)} points): the policy "
                     "has left the reference entirely (overflowing log-probs)"),
            evidence={"step": kl.steps[i], "nonfinite_points": count, "points": len(kl)},
            location=run.location(kl.records[i]),
        )
        return
    finite = need(run, ob.KL, limits.min_points, "kl")
    values = finite.values
    w = max(3, min(20, len(values) // 5))
    end = median(values[-w:])
    first = values[0]
    if end < limits.max_level or end < limits.growth * max(first, 0.0):
        return
    z = mann_kendall_z(values)
    peak = max(range(len(values)), key=values.__getitem__)
    yield Hit(
        message=(f"KL from the reference grows from {fmt(first)} at step {finite.steps[0]} to {fmt(end)} nats/token at "
                 f"the end (median of the last {w}, steps {finite.steps[-w]}-{finite.steps[-1]}), peak {fmt(values[peak])} "
                 f"at step {finite.steps[peak]}, trend z {z:.2f} (limits: end level >= {limits.max_level:g}, "
                 f"{times(limits.growth)} the first value): the policy is running away from its reference"),
        evidence={"first_value": first, "end_level": end, "peak": values[peak], "peak_step": finite.steps[peak],
                  "trend_z": z, "window": w},
        location=run.location(finite.records[-1]),
        related=(Related(location=run.location(finite.records[peak]),
                         message=f"KL {fmt(values[peak])} at step {finite.steps[peak]}"),),
    )


KL_RULE = Rule(id="TP-RL-KL-BLOWUP", name="rl-kl-blowup", level=Level.FAIL, doc=KL_DOC, limits=KlLimits,
               check=check_kl, needs=(ob.KL,), family=METRICS)


# --- TP-RL-ENTROPY-COLLAPSE ---------------------------------------------------------------------

ENTROPY_DOC = """An RL run's policy entropy collapses to ~0 early: it stops exploring.

What it flags: an entropy series of at least `min_points` points that falls to at most
`collapse` of its value at the first logged step (the policy before any update), or below
`floor` nats, within the first `early` of the run, and does not recover: its end level
(median of the last fifth, at least 3 points) stays at most `stays` of the first value.
Why it matters: GRPO and PPO learn by comparing sampled completions; a policy whose
per-token entropy is ~0 samples the same completion every time, so groups score alike
(TP-RL-NO-SIGNAL follows) and nothing new is tried. An early collapse is the signature of a
learning rate too high or a reward that one short answer maximises.
What it does not mean: a slow decline over the whole run, which is what RL does to a
policy; only a collapse in its first part is flagged. Judged for RL runs only: an SFT or
DPO run's token entropy (TRL logs it too) falls as it fits its data.
"""


@dataclass(frozen=True, kw_only=True)
class EntropyLimits:
    min_points: int = 6  # a first half of three points and an end window of three
    # 5% of the first value: a sampled token distribution keeps far more than that while it
    # still explores (healthy GRPO runs lose tens of percent over thousands of steps).
    collapse: float = 0.05
    floor: float = 0.05  # nats per token: one token at ~99% of the distribution
    early: float = 0.5  # within the first half of the logged run
    # ...and still under 10% of the first value at the end: it did not come back.
    stays: float = 0.1


def check_entropy(run: Run, limits: EntropyLimits, ctx: Context) -> Iterator[Hit]:
    _rl_only(run, "the entropy")
    ent = need(run, ob.ENTROPY, limits.min_points, "entropy")
    values = ent.values
    n = len(values)
    first = values[0]
    if first <= limits.floor:
        raise Skip(f"entropy starts at {fmt(first)}, already at the floor {limits.floor:g}")
    bound = max(limits.collapse * first, limits.floor)
    at = next((i for i in range(1, n) if values[i] <= bound), None)
    w = max(3, min(20, n // 5))
    end = median(values[-w:])
    if at is None or at >= limits.early * n or end > limits.stays * first:
        return
    yield Hit(
        message=(f"entropy collapses from {fmt(first)} at step {ent.steps[0]} to {fmt(values[at])} nats/token by step "
                 f"{ent.steps[at]} (point {at + 1} of {n}) and ends at {fmt(end)} (median of the last {w}; limits: "
                 f"{fmt(bound)}, the larger of {limits.collapse:.0%} of the first value and {limits.floor:g}, within the "
                 f"first {limits.early:.0%} of the run, ending under {limits.stays:.0%} of it): the policy samples one "
                 "completion and stops exploring"),
        evidence={"first_value": first, "collapsed_value": values[at], "collapse_step": ent.steps[at],
                  "end_level": end, "bound": bound},
        location=run.location(ent.records[at]),
    )


ENTROPY_RULE = Rule(id="TP-RL-ENTROPY-COLLAPSE", name="rl-entropy-collapse", level=Level.WARN, doc=ENTROPY_DOC,
                    limits=EntropyLimits, check=check_entropy, needs=(ob.ENTROPY,), family=METRICS)


# --- TP-RL-LENGTH-HACKING ---------------------------------------------------------------------

LENGTH_DOC = """An RL run's completions grow steadily longer until they hit the length cap: length hacking.

What it flags: `completions/mean_length` of at least `min_points` points with a rising
trend (Mann-Kendall z at least `min_trend_z`), an end level (median of the last fifth)
at least `growth` times its start level, and at least `near_cap` of the cap — the longest
completion logged (`completions/max_length`), or, without it, a clipped share
(`completions/clipped_ratio`) of at least `near_cap` at the end.
Why it matters: when a longer answer scores better — a reward that counts steps, words or
format tokens, or a judge that prefers long answers — the policy learns to ramble until
every completion is cut at the cap; the reward rises while the answers get worse.
What it does not mean: reasoning runs do grow their answers as they learn; the growth is a
WARN only when it runs into the cap.
"""


@dataclass(frozen=True, kw_only=True)
class LengthLimits:
    min_points: int = 6  # a start and an end window of three, apart
    min_trend_z: float = 2.0  # a rise at 95% significance
    growth: float = 1.25  # a quarter longer at the end than at the start
    near_cap: float = 0.9  # the mean completion within 10% of the cap: most are cut


def check_length(run: Run, limits: LengthLimits, ctx: Context) -> Iterator[Hit]:
    length = need(run, ob.COMPLETION_MEAN_LENGTH, limits.min_points, "completions/mean_length")
    values = length.values
    w, start, end, _ = window_levels(values)
    z = mann_kendall_z(values)
    if z < limits.min_trend_z or end < limits.growth * start:
        return
    cap = _cap(run)
    if cap is not None:
        if end < limits.near_cap * cap:
            return
        cap_text = f"at {end / cap:.0%} of the longest completion logged, {cap:g} tokens (the cap)"
    else:
        clipped = run.get(ob.COMPLETION_CLIPPED_RATIO)
        if clipped is None or not len(clipped.finite()):
            raise Skip("no completions/max_length or completions/clipped_ratio to tell the cap")
        cv = clipped.finite().values
        c_end = median(cv[-w:])
        if c_end < limits.near_cap:
            return
        cap_text = f"with {c_end:.0%} of completions cut at the cap"
    yield Hit(
        message=(f"mean completion length grows from {fmt(start)} to {fmt(end)} tokens (medians of {w}, steps "
                 f"{length.steps[0]}-{length.steps[-1]}, trend z {z:.2f}) and ends {cap_text} (limits: z >= "
                 f"{limits.min_trend_z:g}, {times(limits.growth)} the start, {limits.near_cap:.0%} of the cap): the policy is "
                 "learning to write longer, not better — check what the reward pays for"),
        evidence={"start_level": start, "end_level": end, "trend_z": z, "cap": cap},
        location=run.location(length.records[-1]),
        related=(Related(location=run.location(length.records[0]),
                         message=f"mean completion length {fmt(values[0])} at the first step {length.steps[0]}"),),
    )


LENGTH_RULE = Rule(id="TP-RL-LENGTH-HACKING", name="rl-length-hacking", level=Level.WARN, doc=LENGTH_DOC,
                   limits=LengthLimits, check=check_length, needs=(ob.COMPLETION_MEAN_LENGTH,), family=METRICS)

RULES = (NO_SIGNAL_RULE, SATURATED_RULE, CONSTANT_RULE, KL_RULE, CLIPPED_RULE, ENTROPY_RULE, LENGTH_RULE)
