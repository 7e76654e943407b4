"""rules/objective.py, the objective a run's series show, with each marker on each side: a
reward alone is nobody's, a reward beside each RL-only series is an RL run (the first marker
in order is named), margins or chosen-and-rejected rewards are a preference run; what stands
down for each, which findings lead, and the RL run too short for its reward rules (4 and 5
points)."""

from __future__ import annotations

import pytest

from rule_cases.metrics import NAN, run_of
from trainproof_lsp.rules.objective import PREFERENCE, RL, leads, objective_of, stand_down, too_short_for_rewards

RL_REASON = ("an RL run (GRPO/PPO family: reward and {} logged): its loss is a policy-gradient surrogate near 0 by "
             "construction, not a learning curve; the TP-RL-* rules judge its rewards")
PREF_REASON = ("a preference run (DPO family: {} logged): its loss ranks a chosen against a rejected answer (ln 2 "
               "at the start), not a cross-entropy over classes; the TP-PREF-* rules judge whether it learns from "
               "its reward margins")


@pytest.mark.parametrize("marker", ["frac_reward_zero_std", "reward_std", "kl", "completions/mean_length",
                                    "completions/clipped_ratio"])
def test_a_reward_beside_each_rl_only_series_is_an_rl_run(marker):
    run = run_of(cols={"reward": [0.1, 0.2], marker: [0.5, 0.5]}, loss=[0.0, 0.0])
    assert objective_of(run) == (RL, marker)
    assert stand_down(run, "TP-FLAT") == RL_REASON.format(marker)


def test_the_first_marker_in_order_is_the_one_named():
    run = run_of(cols={"reward": [0.1], "kl": [0.0], "completions/mean_length": [9.0], "reward_std": [0.2]})
    assert objective_of(run) == (RL, "reward_std")


def test_a_reward_alone_or_a_marker_alone_is_nobodys():
    assert objective_of(run_of(cols={"reward": [0.1, 0.2]}, loss=[1.0, 0.9])) is None
    assert objective_of(run_of(cols={"kl": [0.1, 0.2]}, loss=[1.0, 0.9])) is None


def test_margins_or_chosen_and_rejected_rewards_are_a_preference_run():
    assert objective_of(run_of(cols={"rewards/margins": [0.1]})) == (PREFERENCE, "rewards/margins")
    both = run_of(cols={"rewards/chosen": [0.1], "rewards/rejected": [0.0]})
    assert objective_of(both) == (PREFERENCE, "rewards/chosen and rewards/rejected")
    assert stand_down(both, "TP-AT-CHANCE") == PREF_REASON.format("rewards/chosen and rewards/rejected")
    assert objective_of(run_of(cols={"rewards/chosen": [0.1]})) is None
    assert objective_of(run_of(cols={"rewards/rejected": [0.1]})) is None


def test_an_rl_run_that_also_logs_margins_is_judged_as_rl():
    run = run_of(cols={"reward": [0.1], "kl": [0.0], "rewards/margins": [0.1]})
    assert objective_of(run) == (RL, "kl")


@pytest.mark.parametrize("rule_id,rl,preference", [
    ("TP-FLAT", True, True), ("TP-DEAD-RUN", True, True), ("TP-AT-CHANCE", True, True),
    ("TP-LOSS-COLLAPSE", True, True), ("TP-NEGATIVE-LOSS", True, True), ("TP-LOSS-ABOVE-UNIFORM", True, True),
    ("TP-DIVERGE", True, False), ("TP-LOSS-SPIKE", True, False), ("TP-OVERFIT", True, False),
    ("TP-ZERO-LOSS", True, False), ("TP-NAN", False, False), ("TP-NAN-GRAD", False, False),
])
def test_which_loss_rules_stand_down_for_each_objective(rule_id, rl, preference):
    rl_run = run_of(cols={"reward": [0.1], "kl": [0.0]})
    pref_run = run_of(cols={"rewards/margins": [0.1]})
    assert (stand_down(rl_run, rule_id) is not None, stand_down(pref_run, rule_id) is not None) == (rl, preference)
    assert stand_down(run_of(loss=[1.0]), rule_id) is None


def test_the_objectives_own_findings_lead():
    rl_run = run_of(cols={"reward": [0.1], "kl": [0.0]})
    pref_run = run_of(cols={"rewards/margins": [0.1]})
    assert [leads(i, rl_run) for i in ("TP-RL-NO-SIGNAL", "TP-REWARD-NONFINITE", "TP-PREF-AT-LN2", "TP-NAN")] == [
        True, True, False, False]
    assert [leads(i, pref_run) for i in ("TP-RL-NO-SIGNAL", "TP-REWARD-NONFINITE", "TP-PREF-AT-LN2", "TP-NAN")] == [
        False, True, True, False]
    assert leads("TP-RL-NO-SIGNAL", run_of(loss=[1.0])) is False


def test_an_rl_run_needs_five_finite_reward_points():
    four = run_of(cols={"reward": [0.1, 0.2, NAN, 0.3, 0.4, None], "kl": [0.0] * 6})
    assert too_short_for_rewards(four) == (
        "too short to judge the rewards: 4 finite reward point(s); the TP-RL-* checks need 5 (the loss checks "
        "stand down for an RL run)", 4)
    five = run_of(cols={"reward": [0.1, 0.2, NAN, 0.3, 0.4, 0.5], "kl": [0.0] * 6})
    assert too_short_for_rewards(five) is None


def test_only_an_rl_run_is_too_short_for_rewards():
    assert too_short_for_rewards(run_of(cols={"rewards/margins": [0.1]})) is None
    assert too_short_for_rewards(run_of(loss=[1.0])) is None


def test_the_objective_is_worked_out_once_per_run():
    run = run_of(cols={"reward": [0.1], "kl": [0.0]})
    assert objective_of(run) == (RL, "kl") and run.memo[("objective",)] == (RL, "kl")
    run.memo[("objective",)] = None  # what a later call reads is what the first one stored
    assert objective_of(run) is None
