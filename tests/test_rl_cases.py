"""rules/rl.py, case by case: each TP-RL-* finding whole (message, evidence, line, related
places and their messages), each skip's reason exactly, each limit met exactly and passed
just, several stretches in one log, and the series other stacks log under their own keys
read as TRL's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import judge_file
from trainproof_lsp.rules import rl
from trainproof_lsp.rules._stats import mann_kendall_z

from rule_cases.metrics import INF, NAN, grpo, hits_of, nones, ones, run_of, skip_of, steady


NOT_RL = ("is judged for RL runs (a reward beside frac_reward_zero_std, reward_std, kl or completion lengths); "
          "this log is not one")


# --- TP-RL-NO-SIGNAL / TP-RL-SATURATED ---------------------------------------------------------

def _stretch_text(pct: int, length: int, first: int, last: int, span: str = "10-200") -> str:
    return (f"{pct}% of prompt groups (median) got one reward for all their completions over {length} logged steps in "
            f"a row (steps {first}-{last} of {span}; limits: frac_reward_zero_std >= 0.9 for 5 steps): their "
            "advantages are 0, so the policy gets no learning signal")


def test_of_two_stretches_as_long_the_first_is_reported_with_its_end_as_related():
    frac = [0.95] * 5 + [0.2] * 3 + [0.95] * 5 + [0.2] * 7
    assert hits_of(rl.check_no_signal, grpo(20, frac_reward_zero_std=frac, reward=ones(20, 0.5)), rl.NoSignalLimits()) == [(
        _stretch_text(95, 5, 10, 50) + "; the reward over the stretch is 0.5 against 0.5 at the start (median of 4)",
        {"stretch_points": 5, "first_step": 10, "last_step": 50, "median_frac_reward_zero_std": 0.95, "points": 20,
         "reward_level": 0.5, "reward_start": 0.5, "saturated": False}, 0,
        [(4, "frac_reward_zero_std 0.95 at step 50, the stretch's end")])]


def test_the_longest_of_several_stretches_is_reported_wherever_it_lies():
    # a stretch of 5, one of 6, one of 2 at the end: the 6 in the middle
    frac = [0.95] * 5 + [0.2] * 3 + [0.95] * 6 + [0.2] * 4 + [0.97, 0.91]
    ((message, evidence, line, related),) = hits_of(
        rl.check_no_signal, grpo(20, frac_reward_zero_std=frac, reward=ones(20, 0.5)), rl.NoSignalLimits())
    assert message.startswith(_stretch_text(95, 6, 90, 140))
    assert (evidence["stretch_points"], evidence["first_step"], evidence["last_step"], line) == (6, 90, 140, 8)
    assert related == [(13, "frac_reward_zero_std 0.95 at step 140, the stretch's end")]


def test_a_stretch_that_runs_to_the_last_step_is_closed_there():
    frac = [0.2] * 14 + [0.9, 0.92, 0.99, 1.0, 0.93, 0.9]
    ((message, evidence, line, related),) = hits_of(
        rl.check_no_signal, grpo(20, frac_reward_zero_std=frac, reward=ones(20, 0.5)), rl.NoSignalLimits())
    assert message.startswith(_stretch_text(92, 6, 150, 200))
    assert evidence["median_frac_reward_zero_std"] == pytest.approx(0.925) and line == 14
    assert related == [(19, "frac_reward_zero_std 0.9 at step 200, the stretch's end")]


def test_a_stretch_from_the_first_step_has_no_earlier_reward_to_rise_from():
    # the reward climbs inside the stretch, but the stretch starts at the run's first step:
    # it never had a signal, so it is TP-RL-NO-SIGNAL, not saturation
    run = grpo(20, frac_reward_zero_std=ones(20, 0.95), reward=[0.1 * i for i in range(20)])
    assert hits_of(rl.check_saturated, run, rl.NoSignalLimits()) == []
    ((message, evidence, line, related),) = hits_of(rl.check_no_signal, run, rl.NoSignalLimits())
    assert message == (_stretch_text(95, 20, 10, 200) + "; the reward over the stretch is 0.95 against 0.15 at the "
                       "start (median of 4)")
    assert evidence["saturated"] is False and line == 0 and related[0][0] == 19


def test_a_stretch_from_the_second_step_after_a_rise_is_saturation():
    run = grpo(20, frac_reward_zero_std=[0.2] + ones(19, 0.95), reward=[0.1 * i for i in range(20)])
    assert hits_of(rl.check_no_signal, run, rl.NoSignalLimits()) == []
    assert hits_of(rl.check_saturated, run, rl.NoSignalLimits()) == [(
        _stretch_text(95, 19, 20, 200) + "; the reward over the stretch is 1 against 0.15 at the start (median of 4): "
        "it rose first, so the task looks saturated",
        {"stretch_points": 19, "first_step": 20, "last_step": 200, "median_frac_reward_zero_std": 0.95, "points": 20,
         "reward_level": 1.0, "reward_start": pytest.approx(0.15), "saturated": True}, 1,
        [(19, "frac_reward_zero_std 0.95 at step 200, the stretch's end")])]


@pytest.mark.parametrize(("during", "saturated"), [(-0.95, False), (-0.85, True)])
def test_the_rise_is_a_share_of_the_size_of_a_negative_start(during, saturated):
    # from -1: a rise of 0.05 is half the 10% of |start|, a rise of 0.15 is more
    run = grpo(20, frac_reward_zero_std=ones(10, 0.2) + ones(10, 0.95), reward=ones(10, -1.0) + ones(10, during))
    ((_, evidence, _, _),) = hits_of(rl.check_saturated if saturated else rl.check_no_signal, run, rl.NoSignalLimits())
    assert (evidence["reward_level"], evidence["reward_start"], evidence["saturated"]) == (during, -1.0, saturated)


def test_a_rise_of_the_limit_exactly_is_not_saturation():
    # 1.25 -> 1.375: a rise of 0.125, 10% of 1.25 exactly (both exact in binary), at a level noise of 0
    run = grpo(20, frac_reward_zero_std=ones(10, 0.2) + ones(10, 0.95), reward=ones(10, 1.25) + ones(10, 1.375))
    ((message, evidence, _, _),) = hits_of(rl.check_no_signal, run, rl.NoSignalLimits())
    assert (evidence["reward_level"], evidence["reward_start"], evidence["saturated"]) == (1.375, 1.25, False)
    assert message.endswith("; the reward over the stretch is 1.375 against 1.25 at the start (median of 4)")


def test_a_log_without_a_reward_is_judged_on_its_share_of_groups_alone():
    run = run_of(loss=ones(10, 0.0), frac_reward_zero_std=ones(4, 0.2) + ones(6, 0.95))
    assert hits_of(rl.check_no_signal, run, rl.NoSignalLimits()) == [(
        _stretch_text(95, 6, 50, 100, span="10-100"),
        {"stretch_points": 6, "first_step": 50, "last_step": 100, "median_frac_reward_zero_std": 0.95, "points": 10,
         "saturated": False}, 4, [(9, "frac_reward_zero_std 0.95 at step 100, the stretch's end")])]


def test_the_level_is_the_median_of_the_stretch_alone():
    # the stretch 0.9-0.94 (median 0.92) is followed by a 0: a median one point longer would be 0.915
    frac = ones(3, 0.2) + [0.9, 0.91, 0.92, 0.93, 0.94] + [0.0] * 4
    ((message, evidence, _, _),) = hits_of(rl.check_no_signal, grpo(12, frac_reward_zero_std=frac, reward=ones(12, 0.5)),
                                         rl.NoSignalLimits())
    assert evidence["median_frac_reward_zero_std"] == 0.92 and message.startswith(_stretch_text(92, 5, 40, 80, "10-120"))


def test_the_rise_must_pass_the_rewards_own_level_noise():
    # a reward that swings +-0.5 around 1.0: a rise of 0.2 (20%) is within its noise
    reward = [1.0 + 0.5 * (1 if i % 2 else -1) for i in range(10)] + [1.2 + 0.5 * (1 if i % 2 else -1) for i in range(10)]
    run = grpo(20, frac_reward_zero_std=ones(10, 0.2) + ones(10, 0.95), reward=reward)
    ((_, evidence, _, _),) = hits_of(rl.check_no_signal, run, rl.NoSignalLimits())
    assert evidence["saturated"] is False and evidence["reward_level"] == pytest.approx(1.2)
    assert hits_of(rl.check_saturated, run, rl.NoSignalLimits()) == []


def test_a_reward_of_three_points_is_read_and_of_two_is_not():
    frac = ones(10, 0.2) + ones(10, 0.95)
    three = grpo(20, frac_reward_zero_std=frac, reward=[0.5] + nones(11) + [0.5] + nones(6) + [0.5])
    ((message, evidence, _, _),) = hits_of(rl.check_no_signal, three, rl.NoSignalLimits())
    assert message.endswith("; the reward over the stretch is 0.5 against 0.5 at the start (median of 3)")
    assert (evidence["reward_level"], evidence["reward_start"]) == (0.5, 0.5)
    two = grpo(20, frac_reward_zero_std=frac, reward=[0.5] + nones(18) + [0.5])
    ((message, evidence, _, _),) = hits_of(rl.check_no_signal, two, rl.NoSignalLimits())
    assert message == _stretch_text(95, 10, 110, 200)
    assert "reward_level" not in evidence and evidence["saturated"] is False


def test_the_reward_over_the_stretch_includes_its_first_and_last_step_and_nothing_outside():
    frac = ones(10, 0.2) + ones(10, 0.95)  # the stretch is steps 110-200
    # reward points at 10, 20, 30 (1.0), at 100 (9.0: before), 110 and 200 (2.0 and 4.0)
    reward = [1.0, 1.0, 1.0] + nones(6) + [9.0, 2.0] + nones(8) + [4.0]
    ((_, evidence, _, _),) = hits_of(rl.check_saturated, grpo(20, frac_reward_zero_std=frac, reward=reward),
                                   rl.NoSignalLimits())
    assert (evidence["reward_level"], evidence["reward_start"]) == (3.0, 1.0)


def test_a_reward_logged_only_before_the_stretch_says_nothing_of_it():
    frac = ones(10, 0.2) + ones(10, 0.95)
    run = grpo(20, frac_reward_zero_std=frac, reward=[1.0, 1.0, 1.0, 1.0] + nones(16))
    ((message, evidence, _, _),) = hits_of(rl.check_no_signal, run, rl.NoSignalLimits())
    assert message == _stretch_text(95, 10, 110, 200) and "reward_level" not in evidence


def test_a_stretch_at_the_limits_exactly_and_just_under():
    # 5 points at exactly 0.9 fire; 4 do not; 0.9 less a hair does not
    def stretch(frac: list[float]) -> list[int]:
        run = grpo(12, frac_reward_zero_std=frac, reward=ones(12, 0.5))
        return [e["stretch_points"] for _, e, _, _ in hits_of(rl.check_no_signal, run, rl.NoSignalLimits())]
    assert stretch(ones(7, 0.2) + ones(5, 0.9)) == [5]
    assert stretch(ones(8, 0.2) + ones(4, 0.9)) == []
    assert stretch(ones(6, 0.2) + ones(6, 0.8999)) == []


@pytest.mark.parametrize(("k", "fires"), [(11, True), (10, False)])
def test_a_long_run_needs_a_tenth_of_it_rounded_up(k, fires):
    # 101 points: a tenth is 10.1, so 11 steps are needed
    run = grpo(101, frac_reward_zero_std=ones(101 - k, 0.2) + ones(k, 0.95), reward=ones(101, 0.5))
    hits = hits_of(rl.check_no_signal, run, rl.NoSignalLimits())
    assert [h[1]["stretch_points"] for h in hits] == ([k] if fires else [])
    if fires:
        assert "limits: frac_reward_zero_std >= 0.9 for 11 steps" in hits[0][0]


def test_a_stretch_of_one_step_is_found_when_the_limits_allow_it():
    limits = rl.NoSignalLimits(min_stretch=1, stretch_share=0.0)
    ((message, evidence, line, _),) = hits_of(rl.check_no_signal, grpo(6, frac_reward_zero_std=[0.2, 0.2, 0.95, 0.2, 0.2, 0.2],
                                                                   reward=ones(6, 0.5)), limits)
    assert (evidence["stretch_points"], evidence["first_step"], evidence["last_step"], line) == (1, 30, 30, 2)
    assert "limits: frac_reward_zero_std >= 0.9 for 1 steps" in message


def test_no_signal_skips_without_the_share_of_groups():
    assert skip_of(rl.check_no_signal, grpo(8), rl.NoSignalLimits()) == "no frac_reward_zero_std in the log"
    assert skip_of(rl.check_saturated, grpo(8, frac_reward_zero_std=ones(4, 1.0) + [NAN] * 4), rl.NoSignalLimits()) == (
        "4 finite frac_reward_zero_std point(s); this check needs at least 5")


# --- TP-RL-REWARD-CONSTANT ------------------------------------------------------------------------

def _constant_text(what: str, spread: str, std: str = "") -> str:
    return (f"reward is {what} over 6 logged steps (steps 10-60; spread {spread}, limit 1e-09){std}: the reward does not "
            "read the completions, so the policy learns nothing")


def test_a_reward_at_zero_and_a_hair_below_is_constant_at_zero_not_identically_zero():
    assert hits_of(rl.check_reward_constant, grpo(6, reward=[0.0] * 5 + [-1e-10], reward_std=ones(6, 0.0)),
                 rl.ConstantLimits()) == [(
        _constant_text("constant at 0", "1e-10", " and reward_std 0 at all 6 of its points"),
        {"value": 0.0, "spread": 1e-10, "points": 6}, 0, [])]


def test_the_spread_counts_only_the_finite_reward_std_points():
    assert hits_of(rl.check_reward_constant, grpo(6, reward=ones(6, 0.25), reward_std=[0.0, NAN, 0.0, 0.0, 0.0, 0.0]),
                 rl.ConstantLimits()) == [(
        _constant_text("constant at 0.25", "0", " and reward_std 0 at all 5 of its points"),
        {"value": 0.25, "spread": 0.0, "points": 6}, 0, [])]


def test_a_reward_std_with_no_finite_point_is_not_cited():
    ((message, _, _, _),) = hits_of(rl.check_reward_constant, grpo(6, reward=ones(6, 0.5), reward_std=[NAN] * 6),
                                  rl.ConstantLimits())
    assert message == _constant_text("constant at 0.5", "0")


@pytest.mark.parametrize(("last", "fires"), [(1e-9, True), (-1e-9, True), (2e-9, False), (-2e-9, False)])
def test_reward_std_at_its_limit_either_side_of_zero(last, fires):
    run = grpo(6, reward=ones(6, 0.5), reward_std=[0.0] * 5 + [last])
    assert len(hits_of(rl.check_reward_constant, run, rl.ConstantLimits())) == int(fires)


@pytest.mark.parametrize(("level", "spread", "fires"), [
    (1000.0, 5e-7, True), (1000.0, 2e-6, False), (-1000.0, 5e-7, True), (-1000.0, 2e-6, False),
    (0.5, 1e-9, True), (0.5, 1.5e-9, False)])
def test_the_spread_is_relative_to_the_size_of_the_reward_and_at_least_absolute(level, spread, fires):
    run = run_of(loss=ones(6, 0.01), reward=ones(5, level) + [level + spread])
    hits = hits_of(rl.check_reward_constant, run, rl.ConstantLimits())
    assert len(hits) == int(fires)
    if fires:
        assert hits[0][0].startswith(f"reward is constant at {level:.4g} over 6 logged steps")
        assert hits[0][0].endswith("limit 1e-09): the reward does not read the completions, so the policy learns nothing")


def test_a_spread_of_the_limit_exactly_is_constant():
    # 1e-9 - 0 is 1e-9 exactly (the check's sums with 0.5 above round): at the limit, not past it
    ((message, evidence, _, _),) = hits_of(rl.check_reward_constant, grpo(6, reward=[0.0] * 5 + [1e-9], reward_std=ones(6, 0.0)),
                                         rl.ConstantLimits())
    assert message == _constant_text("constant at 1e-09", "1e-09", " and reward_std 0 at all 6 of its points")
    assert evidence == {"value": 1e-9, "spread": 1e-9, "points": 6}


@pytest.mark.parametrize("values", [[0.0] * 5 + [5.0], [-5.0] + [0.0] * 5])
def test_the_spread_is_relative_to_the_larger_magnitude_of_the_two_ends(values):
    # a limit of 100% (not the default): a spread of 5 between 0 and +-5 is the limit exactly
    hits = hits_of(rl.check_reward_constant, run_of(loss=ones(6, 0.01), reward=values), rl.ConstantLimits(max_spread=1.0))
    assert [h[1]["spread"] for h in hits] == [5.0]


def test_reward_constant_skips_under_five_points():
    assert skip_of(rl.check_reward_constant, grpo(6, reward=ones(4, 0.0) + nones(2)), rl.ConstantLimits()) == (
        "4 finite reward point(s); this check needs at least 5")


# --- TP-RL-CLIPPED ----------------------------------------------------------------------------

CLIPPED = ones(12, 0.1) + [0.95, 0.9, 0.92, 0.97]  # 16 points: a window of 4, median 0.935


def _clipped_text(level: str, w: int, steps: str, cap: str = "") -> str:
    return (f"{level} of completions (median of the last {w} logged steps, {steps}) end at the length cap{cap} without "
            "finishing (limit 90%): the rewards score cut-off text; raise max_completion_length")


def test_clipped_over_a_quarter_of_the_run_without_a_cap():
    assert hits_of(rl.check_clipped, grpo(16, completions__clipped_ratio=CLIPPED), rl.ClippedLimits()) == [(
        _clipped_text("94%", 4, "130-160"), {"clipped_level": 0.935, "window": 4, "cap": None}, 12, [])]


def test_clipped_names_the_longest_finite_completion_as_the_cap():
    run = grpo(16, completions__clipped_ratio=CLIPPED, completions__max_length=[200.0, NAN, 256.0] + ones(13, 250.0))
    assert hits_of(rl.check_clipped, run, rl.ClippedLimits()) == [(
        _clipped_text("94%", 4, "130-160", " of 256 tokens"), {"clipped_level": 0.935, "window": 4, "cap": 256.0}, 12, [])]
    unstated = grpo(16, completions__clipped_ratio=CLIPPED, completions__max_length=[NAN] * 16)
    assert [h[1]["cap"] for h in hits_of(rl.check_clipped, unstated, rl.ClippedLimits())] == [None]


def test_clipped_window_is_at_least_three_points():
    run = grpo(15, completions__clipped_ratio=ones(11, 0.1) + [0.2, 0.9, 0.92, 0.97])
    assert hits_of(rl.check_clipped, run, rl.ClippedLimits()) == [(
        _clipped_text("92%", 3, "130-150"), {"clipped_level": 0.92, "window": 3, "cap": None}, 12, [])]


@pytest.mark.parametrize(("level", "fires"), [(0.9, True), (0.8999, False)])
def test_clipped_at_its_limit_exactly(level, fires):
    run = grpo(8, completions__clipped_ratio=ones(8, level))
    assert len(hits_of(rl.check_clipped, run, rl.ClippedLimits())) == int(fires)


def test_clipped_skips_without_its_series():
    assert skip_of(rl.check_clipped, grpo(8), rl.ClippedLimits()) == "no completions/clipped_ratio in the log"


# --- TP-RL-KL-BLOWUP --------------------------------------------------------------------------

def _kl_text(first: str, end: str, w: int, steps: str, peak: str, peak_step: int, z: str) -> str:
    return (f"KL from the reference grows from {first} at step 10 to {end} nats/token at the end (median of the last {w}, "
            f"steps {steps}), peak {peak} at step {peak_step}, trend z {z} (limits: end level >= 1, 10.00x the first "
            "value): the policy is running away from its reference")


def test_kl_skips_without_a_kl_and_for_runs_that_are_not_rl():
    assert skip_of(rl.check_kl, grpo(6), rl.KlLimits()) == "no kl series in the log"
    assert skip_of(rl.check_kl, run_of(loss=ones(6, 0.1), kl=ones(6, 2.0)), rl.KlLimits()) == "the KL " + NOT_RL
    dpo = run_of(loss=ones(6, 0.6), kl=ones(6, 2.0), cols={"rewards/margins": ones(6, 0.2)})
    assert skip_of(rl.check_kl, dpo, rl.KlLimits()) == "the KL " + NOT_RL


def test_kl_first_non_finite_point_and_every_one_counted():
    assert hits_of(rl.check_kl, grpo(6, kl=[0.0, 0.01, NAN, 0.02, -INF, 0.02]), rl.KlLimits()) == [(
        "KL is nan at step 30 (2 non-finite of 6 points): the policy has left the reference entirely "
        "(overflowing log-probs)", {"step": 30, "nonfinite_points": 2, "points": 6}, 2, [])]
    ((message, evidence, line, _),) = hits_of(rl.check_kl, grpo(6, kl=[0.0, 0.01, 0.02, INF, 0.02, 0.02]), rl.KlLimits())
    assert message.startswith("KL is inf at step 40 (1 non-finite of 6 points)") and line == 3


@pytest.mark.parametrize(("n", "w"), [(25, 5), (105, 20), (110, 20)])
def test_kl_end_window_is_a_fifth_of_the_run_up_to_twenty(n, w):
    kl = [0.0] * (n - w) + [2.0] * w
    ((message, evidence, line, related),) = hits_of(rl.check_kl, grpo(n, kl=kl), rl.KlLimits())
    first_end = 10 * (n - w + 1)
    assert evidence["window"] == w and line == n - 1
    assert f"(median of the last {w}, steps {first_end}-{10 * n})" in message
    assert related == [(n - w, f"KL 2 at step {first_end}")]


def test_kl_peak_is_its_first_highest_point_and_the_related_place():
    assert hits_of(rl.check_kl, grpo(6, kl=[0.0, 0.01, 3.0, 1.0, 3.0, 1.0]), rl.KlLimits()) == [(
        _kl_text("0", "1", 3, "40-60", "3", 30, "1.13"),
        {"first_value": 0.0, "end_level": 1.0, "peak": 3.0, "peak_step": 30, "trend_z": pytest.approx(1.1272037),
         "window": 3}, 5, [(2, "KL 3 at step 30")])]


@pytest.mark.parametrize(("first", "fires"), [(-0.01, True), (0.1, True), (0.11, False)])
def test_kl_growth_is_from_the_first_value_or_from_zero(first, fires):
    # the end level is 1: ten times 0.1 exactly; a first value below 0 grows from 0
    hits = hits_of(rl.check_kl, grpo(6, kl=[first, 0.01, 1.0, 3.0, 1.0, 1.0]), rl.KlLimits())
    assert [(h[1]["first_value"], h[1]["end_level"]) for h in hits] == ([(first, 1.0)] if fires else [])


@pytest.mark.parametrize(("end", "fires"), [(1.0, True), (0.9999, False)])
def test_kl_end_level_at_its_limit_exactly(end, fires):
    assert len(hits_of(rl.check_kl, grpo(6, kl=[0.0, 0.01, 0.05, end, end, end]), rl.KlLimits())) == int(fires)


def test_kl_skips_under_five_points():
    assert skip_of(rl.check_kl, grpo(6, kl=[0.0, 0.5, 1.0, 2.0] + nones(2)), rl.KlLimits()) == (
        "4 finite kl point(s); this check needs at least 5")


# --- TP-RL-ENTROPY-COLLAPSE ---------------------------------------------------------------------

def _entropy_text(first: str, value: str, step: int, at: int, n: int, end: str, w: int, bound: str) -> str:
    return (f"entropy collapses from {first} at step 10 to {value} nats/token by step {step} (point {at} of {n}) and "
            f"ends at {end} (median of the last {w}; limits: {bound}, the larger of 5% of the first value and 0.05, "
            "within the first 50% of the run, ending under 10% of it): the policy samples one completion and stops "
            "exploring")


def test_entropy_skips_at_the_floor_for_other_runs_and_with_too_few_points():
    assert skip_of(rl.check_entropy, grpo(6, entropy=[0.05] + ones(5, 0.01)), rl.EntropyLimits()) == (
        "entropy starts at 0.05, already at the floor 0.05")
    assert skip_of(rl.check_entropy, run_of(loss=ones(6), entropy=ones(6)), rl.EntropyLimits()) == "the entropy " + NOT_RL
    assert skip_of(rl.check_entropy, grpo(6, entropy=[2.0] + ones(4, 0.01) + [NAN]), rl.EntropyLimits()) == (
        "5 finite entropy point(s); this check needs at least 6")


def test_entropy_collapse_whole_at_the_bound_exactly_and_ending_at_its_limit():
    # bound 0.1 (5% of 2); the end (median of the last 3) at 0.2, 10% of 2
    assert hits_of(rl.check_entropy, grpo(6, entropy=[2.0, 1.0, 0.1, 0.1, 0.2, 0.2]), rl.EntropyLimits()) == [(
        _entropy_text("2", "0.1", 30, 3, 6, "0.2", 3, "0.1"),
        {"first_value": 2.0, "collapsed_value": 0.1, "collapse_step": 30, "end_level": 0.2, "bound": 0.1}, 2, [])]
    assert hits_of(rl.check_entropy, grpo(6, entropy=[2.0, 1.0, 0.1, 0.1, 0.21, 0.21]), rl.EntropyLimits()) == []
    assert hits_of(rl.check_entropy, grpo(6, entropy=[2.0, 1.0, 0.1001, 0.12, 0.12, 0.12]), rl.EntropyLimits()) == []


def test_entropy_bound_is_the_floor_for_a_low_first_value():
    # 5% of 0.5 is 0.025: the floor 0.05 is the bound
    assert hits_of(rl.check_entropy, grpo(6, entropy=[0.5, 0.05, 0.04, 0.04, 0.04, 0.04]), rl.EntropyLimits()) == [(
        _entropy_text("0.5", "0.05", 20, 2, 6, "0.04", 3, "0.05"),
        {"first_value": 0.5, "collapsed_value": 0.05, "collapse_step": 20, "end_level": 0.04, "bound": 0.05}, 1, [])]


@pytest.mark.parametrize(("values", "at"), [([2.0, 1.5, 0.1, 0.1, 0.1, 0.1], 3), ([2.0, 1.5, 1.2, 0.1, 0.1, 0.1], None)])
def test_entropy_collapse_must_come_before_half_the_run(values, at):
    # point 3 of 6 is index 2 (< 3, in the first half); index 3 is not
    hits = hits_of(rl.check_entropy, grpo(6, entropy=values), rl.EntropyLimits())
    assert [h[1]["collapse_step"] for h in hits] == ([10 * at] if at else [])


@pytest.mark.parametrize(("n", "w"), [(105, 20), (110, 20)])
def test_entropy_end_window_is_at_most_twenty_points(n, w):
    # a fifth of 105 is 21 and of 110 is 22: the window (named in the message) stays at 20
    values = [2.0, 1.0, 0.1] + ones(n - 23, 0.15) + ones(20, 0.1)
    ((message, evidence, _, _),) = hits_of(rl.check_entropy, grpo(n, entropy=values), rl.EntropyLimits())
    assert f"(median of the last {w}; limits" in message and evidence["end_level"] == 0.1


def test_entropy_end_window_is_a_fifth_of_a_longer_run():
    values = [2.0, 1.0, 0.1] + ones(17, 0.15) + [0.1, 0.1, 0.1, 0.3, 0.3]
    ((message, evidence, line, _),) = hits_of(rl.check_entropy, grpo(25, entropy=values), rl.EntropyLimits())
    assert message == _entropy_text("2", "0.1", 30, 3, 25, "0.1", 5, "0.1") and evidence["end_level"] == 0.1


# --- TP-RL-LENGTH-HACKING ---------------------------------------------------------------------

RISING = steady(20, 100.0, 160.0, 4)  # windows of 4 at 100 and 160, z 5.74


def _length_text(start: str, end: str, cap_text: str) -> str:
    return (f"mean completion length grows from {start} to {end} tokens (medians of 4, steps 10-200, trend z 5.74) and "
            f"ends {cap_text} (limits: z >= 2, 1.25x the start, 90% of the cap): the policy is learning to write longer, "
            "not better — check what the reward pays for")


def test_length_hacking_without_a_max_length_reads_the_clipped_share_over_the_same_window():
    run = grpo(20, completions__mean_length=RISING, completions__clipped_ratio=ones(16, 0.2) + [0.9, 0.95, 0.85, 0.92])
    assert hits_of(rl.check_length, run, rl.LengthLimits()) == [(
        _length_text("100", "160", "with 91% of completions cut at the cap"),
        {"start_level": 100.0, "end_level": 160.0, "trend_z": pytest.approx(5.7426383), "cap": None}, 19,
        [(0, "mean completion length 100 at the first step 10")])]
    under = grpo(20, completions__mean_length=RISING, completions__clipped_ratio=ones(16, 0.2) + [0.9, 0.95, 0.85, 0.89])
    assert hits_of(rl.check_length, under, rl.LengthLimits()) == []  # median 0.895
    at = grpo(20, completions__mean_length=RISING, completions__clipped_ratio=ones(16, 0.2) + [0.9, 0.95, 0.85, 0.9])
    ((message, _, _, _),) = hits_of(rl.check_length, at, rl.LengthLimits())  # median 0.9: the limit exactly
    assert message == _length_text("100", "160", "with 90% of completions cut at the cap")


def test_length_hacking_skips_without_anything_that_tells_the_cap():
    reason = "no completions/max_length or completions/clipped_ratio to tell the cap"
    assert skip_of(rl.check_length, grpo(20, completions__mean_length=RISING), rl.LengthLimits()) == reason
    assert skip_of(rl.check_length, grpo(20, completions__mean_length=RISING, completions__clipped_ratio=[NAN] * 20),
                 rl.LengthLimits()) == reason
    assert skip_of(rl.check_length, grpo(20), rl.LengthLimits()) == "no completions/mean_length in the log"


def test_length_hacking_with_a_trend_of_its_limit_exactly_and_its_first_length_cited():
    values = [90.0] + RISING[1:]
    z = mann_kendall_z(values)
    run = grpo(20, completions__mean_length=values, completions__max_length=ones(20, 170.0))
    ((message, evidence, line, related),) = hits_of(rl.check_length, run, rl.LengthLimits(min_trend_z=z))
    assert evidence["trend_z"] == z and related == [(0, "mean completion length 90 at the first step 10")]
    assert hits_of(rl.check_length, run, rl.LengthLimits(min_trend_z=z + 1e-9)) == []


def test_length_hacking_at_its_limits_exactly():
    at_cap = grpo(20, completions__mean_length=RISING, completions__max_length=ones(20, 160 / 0.9))
    ((message, evidence, _, _),) = hits_of(rl.check_length, at_cap, rl.LengthLimits())
    assert message == _length_text("100", "160", "at 90% of the longest completion logged, 177.778 tokens (the cap)")
    assert evidence["cap"] == pytest.approx(177.7777778)
    past_cap = grpo(20, completions__mean_length=RISING, completions__max_length=ones(20, 160 / 0.899))
    assert hits_of(rl.check_length, past_cap, rl.LengthLimits()) == []
    grown = grpo(20, completions__mean_length=steady(20, 100.0, 125.0, 4), completions__max_length=ones(20, 130.0))
    assert [h[1]["end_level"] for h in hits_of(rl.check_length, grown, rl.LengthLimits())] == [125.0]
    short = grpo(20, completions__mean_length=steady(20, 100.0, 124.9, 4), completions__max_length=ones(20, 130.0))
    assert hits_of(rl.check_length, short, rl.LengthLimits()) == []


# --- the keys other stacks log, judged as TRL's ----------------------------------------------------

def _judge(tmp_path: Path, rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return [(f.id, f.message) for f in judge_file(path, Config()).findings if f.id.startswith("TP-RL-")]


STACKS = {
    "trl": {"reward": "reward", "marker": "reward_std", "kl": "kl", "mean": "completions/mean_length",
            "max": "completions/max_length"},
    "trl-wandb": {"reward": "train/reward", "marker": "train/reward_std", "kl": "train/kl",
                  "mean": "train/completions/mean_length", "max": "train/completions/max_length"},
    "verl": {"reward": "critic/score/mean", "marker": "response_length/clip_ratio", "kl": "actor/kl_loss",
             "mean": "response_length/mean", "max": "response_length/max"},
    "openrlhf": {"reward": "env/reward_mean", "marker": "env/reward_std", "kl": "objective/kl",
                 "mean": "response_length", "max": "response_length/max"},
}


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_kl_and_length_hacking_read_each_stacks_keys(tmp_path, stack):
    keys = STACKS[stack]
    kl = [0.0, 0.01, 0.05, 0.1, 0.3, 0.8, 1.5, 3.0, 2.5, 4.0]
    mean = steady(10, 100.0, 160.0, 3)
    rows = [{"step": s, "loss": 0.0, keys["reward"]: 0.3 + 0.01 * (s % 3), keys["marker"]: 0.3, keys["kl"]: kl[s - 1],
             keys["mean"]: mean[s - 1], keys["max"]: 170.0} for s in range(1, 11)]
    found = dict(_judge(tmp_path, rows))
    assert sorted(found) == ["TP-RL-KL-BLOWUP", "TP-RL-LENGTH-HACKING"]
    assert found["TP-RL-KL-BLOWUP"].startswith("KL from the reference grows from 0 at step 1 to 3 nats/token at the end")
    assert "ends at 94% of the longest completion logged, 170 tokens (the cap)" in found["TP-RL-LENGTH-HACKING"]
