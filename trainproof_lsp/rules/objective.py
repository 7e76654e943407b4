"""What a run optimises, from the series it logs, and which loss rules stand down for it.

A supervised run's loss is its learning curve: it starts near a uniform guess and falls.
Two families of runs log a loss that is not that curve:

- **RL from rewards** (GRPO, PPO, RLOO: TRL, verl, OpenRLHF) — the loss is a
  policy-gradient surrogate whose advantages are centred on each group's mean, so it sits
  near 0 (and goes negative) by construction however the run goes. Flat, dead, diverging,
  zero, negative or spiking, it says nothing about learning; the reward series do
  (rules/rl.py). Recognised by a reward series beside one that only such trainers log
  (`frac_reward_zero_std`, `reward_std`, `kl`, completion lengths).
- **Preference optimisation** (DPO, IPO, KTO, ORPO, SimPO) — the loss is a learning curve,
  but of a binary ranking, not a cross-entropy over C classes: DPO's starts at ln 2
  whatever the vocabulary. The uniform-guess rules (TP-AT-CHANCE, TP-LOSS-ABOVE-UNIFORM,
  TP-LOSS-COLLAPSE, TP-NEGATIVE-LOSS) do not apply, and whether it learns is judged on its
  reward margins (rules/preference.py: TP-PREF-AT-LN2, TP-PREF-MARGINS-FLAT) instead of
  TP-FLAT and TP-DEAD-RUN. Recognised by `rewards/margins`, or chosen and rejected rewards.

The rules that stand down are skipped with the reason (the report's coverage lists them),
never counted as passed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import objectives as ob
from ..core.model import Run

# The rules that read the loss as a learning curve (a cross-entropy falling from ln C).
_CURVE_RULES = frozenset({"TP-FLAT", "TP-DEAD-RUN", "TP-DIVERGE", "TP-AT-CHANCE", "TP-ZERO-LOSS",
                          "TP-ZERO-LOSS-ONSET", "TP-NEGATIVE-LOSS", "TP-LOSS-COLLAPSE", "TP-LOSS-SPIKE",
                          "TP-LOSS-SPIKE-UNRECOVERED", "TP-LOSS-ABOVE-UNIFORM", "TP-OVERFIT"})
# Those that assume a cross-entropy over C classes, or judge learning on the loss alone
# where a preference run's margins say it directly.
_CLASS_RULES = frozenset({"TP-AT-CHANCE", "TP-LOSS-ABOVE-UNIFORM", "TP-LOSS-COLLAPSE", "TP-NEGATIVE-LOSS",
                          "TP-FLAT", "TP-DEAD-RUN"})


@dataclass(frozen=True, kw_only=True)
class Objective:
    name: str  # "rl" or "preference"
    words: str  # how messages name the run
    # generic rule id -> why it stands down for this run
    stands_down: frozenset[str]
    reason: str
    # the id prefixes of the family's own rules; TP-REWARD-NONFINITE belongs to both
    prefixes: tuple[str, ...]


RL = Objective(
    name="rl", words="RL run (GRPO/PPO family)", stands_down=_CURVE_RULES, prefixes=("TP-RL-", "TP-REWARD-"),
    reason=("an RL run (GRPO/PPO family: reward and {marker} logged): its loss is a policy-gradient "
            "surrogate near 0 by construction, not a learning curve; the TP-RL-* rules judge its rewards"))
PREFERENCE = Objective(
    name="preference", words="preference run (DPO family)", stands_down=_CLASS_RULES, prefixes=("TP-PREF-", "TP-REWARD-"),
    reason=("a preference run (DPO family: {marker} logged): its loss ranks a chosen against a rejected "
            "answer (ln 2 at the start), not a cross-entropy over classes; the TP-PREF-* rules judge "
            "whether it learns from its reward margins"))

# Series only RL trainers log beside a reward (a reward alone could be anything's).
_RL_MARKERS = (ob.FRAC_REWARD_ZERO_STD, ob.REWARD_STD, ob.KL, ob.COMPLETION_MEAN_LENGTH,
               ob.COMPLETION_CLIPPED_RATIO)


def objective_of(run: Run) -> tuple[Objective, str] | None:
    """(the run's objective family, the series that showed it), or None for a run whose
    loss is its learning curve. Cached on the run (rules and the engine all ask)."""
    key = ("objective",)
    if key in run.memo:
        got: tuple[Objective, str] | None = run.memo[key]
        return got
    found: tuple[Objective, str] | None = None
    if run.get(ob.REWARD) is not None:
        marker = next((m for m in _RL_MARKERS if run.get(m) is not None), None)
        if marker is not None:
            found = (RL, marker)
    if found is None:
        if run.get(ob.REWARDS_MARGINS) is not None:
            found = (PREFERENCE, ob.REWARDS_MARGINS)
        elif run.get(ob.REWARDS_CHOSEN) is not None and run.get(ob.REWARDS_REJECTED) is not None:
            found = (PREFERENCE, f"{ob.REWARDS_CHOSEN} and {ob.REWARDS_REJECTED}")
    run.memo[key] = found
    return found


def stand_down(run: Run, rule_id: str) -> str | None:
    """Why a generic loss rule does not judge this run, or None when it does."""
    got = objective_of(run)
    if got is None:
        return None
    objective, marker = got
    if rule_id not in objective.stands_down:
        return None
    return objective.reason.format(marker=marker)


def leads(rule_id: str, run: Run) -> bool:
    """Whether a finding of this rule is one of the run's own objective findings, which lead
    its report among findings of the same level."""
    got = objective_of(run)
    return got is not None and rule_id.startswith(got[0].prefixes)


# An RL run's coverage: its rules judge stretches of at least five logged steps
# (TP-RL-NO-SIGNAL's min_stretch, TP-RL-REWARD-CONSTANT's min_points); fewer reward points
# and nothing has judged whether it learns.
RL_MIN_POINTS = 5


def too_short_for_rewards(run: Run) -> tuple[str, int | None] | None:
    """For an RL run, (reason, record of its last reward point) when its reward series is too
    short for the TP-RL-* rules; None otherwise (and for any other run)."""
    got = objective_of(run)
    if got is None or got[0] is not RL:
        return None
    reward = run.get(ob.REWARD)
    assert reward is not None  # objective_of tells an RL run by its reward series
    n = len(reward.finite())
    if n >= RL_MIN_POINTS:
        return None
    return (f"too short to judge the rewards: {n} finite reward point(s); the TP-RL-* checks need "
            f"{RL_MIN_POINTS} (the loss checks stand down for an RL run)", reward.records[-1])
