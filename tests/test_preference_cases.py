"""rules/preference.py, case by case: each TP-PREF-* finding and TP-REWARD-NONFINITE whole
(message, evidence, line, related places and their messages), each skip's reason exactly,
each limit met exactly and passed just, series that log at other steps than the loss,
several non-finite series in one log, and the keys other stacks log read as TRL's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Mapping

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Run, Series
from trainproof_lsp.judge.engine import judge_file
from trainproof_lsp.rules import preference as pf
from trainproof_lsp.rules._stats import mann_kendall_z, point_noise
from trainproof_lsp.rules.base import NoLimits

from rule_cases.metrics import INF, LN2, NAN, dpo, hits_of, ones, run_of, skip_of



def _sourced(run: Run, sources: Mapping[str, str]) -> Run:
    """The run with the named series read from other keys (as a reader maps them)."""
    series = {k: Series(s.name, sources.get(k, s.source_name), s.steps, s.values, s.records) for k, s in run.series.items()}
    return dataclasses.replace(run, series=series)


LEFT_TO_AT_LN2 = "reward margins stay within 0.01 of 0: TP-PREF-AT-LN2 judges that"


# --- window_levels --------------------------------------------------------------------------

def test_window_levels_are_a_fifth_of_the_run_from_three_to_twenty_points():
    assert pf.window_levels([1.0, 2.0, 3.0])[:3] == (3, 2.0, 2.0)
    assert pf.window_levels([float(i) for i in range(25)])[:3] == (5, 2.0, 22.0)
    assert pf.window_levels([float(i) for i in range(105)])[:3] == (20, 9.5, 94.5)
    # under four points the noise is the MAD's sigma: |1-3|, |3-3|, |7-3| -> MAD 2
    w, _, _, noise = pf.window_levels([1.0, 3.0, 7.0])
    assert noise == pytest.approx(1.4826 * 2 / 3 ** 0.5)
    # from four points on, the point noise (of second differences), not the MAD's sigma (2.2239)
    assert pf.window_levels([1.0, 2.0, 4.0, 8.0])[3] == pytest.approx(point_noise([1.0, 2.0, 4.0, 8.0]) / 3 ** 0.5)
    assert point_noise([1.0, 2.0, 4.0, 8.0]) == pytest.approx(0.3026345)


# --- TP-PREF-AT-LN2 ----------------------------------------------------------------------

def _ln2_text(top: str, inside: int, n: int, steps: str) -> str:
    return (f"DPO loss stays at ln 2 = 0.6931 (median 0.6931) with reward margins at 0 (largest |margin| {top}) at "
            f"{inside} of {n} logged steps after the first (steps {steps}; limits: loss within 0.005 of ln 2, |margin| <= "
            "0.01, at 90% of the steps): the policy ranks the pairs no differently from its reference — a reference that "
            "is the policy itself, a beta far too small, or weights that no longer tell the answers apart")


def test_at_ln2_counts_only_the_steps_both_series_log_and_names_them():
    # margins missing at steps 20 and 90: the judged steps are 30-80, the first of them on line 2
    run = run_of(loss=ones(9, LN2), cols={"rewards/margins": [0.0, None, 0.0, 0.0, 0.0, 0.0, 0.0, 0.002, None]})
    assert hits_of(pf.check_at_ln2, run, pf.AtLn2Limits()) == [(
        _ln2_text("0.002", 6, 6, "30-80"),
        {"points": 6, "at_ln2": 6, "share": 1.0, "median_loss": pytest.approx(LN2), "max_abs_margin": 0.002}, 2,
        [(7, "reward margin 0.002 at the last step 80")])]


def test_at_ln2_skips_when_the_series_share_too_few_steps():
    run = run_of(loss=[LN2, None, LN2, LN2, LN2, LN2, LN2], cols={"rewards/margins": [0.0, 0.0, None, 0.0, 0.0, 0.0, 0.0]})
    assert skip_of(pf.check_at_ln2, run, pf.AtLn2Limits()) == "loss and reward margins share fewer than 6 logged steps"
    assert skip_of(pf.check_at_ln2, run_of(loss=ones(8, LN2)), pf.AtLn2Limits()) == "no reward margins in the log"
    assert skip_of(pf.check_at_ln2, dpo(ones(5, LN2), ones(8, 0.0)), pf.AtLn2Limits()) == (
        "5 finite loss point(s); this check needs at least 6")
    assert skip_of(pf.check_at_ln2, dpo(ones(8, LN2), ones(5, 0.0) + [NAN] * 3), pf.AtLn2Limits()) == (
        "5 finite reward margins point(s); this check needs at least 6")


def test_at_ln2_leaves_out_the_first_step_wherever_it_stands():
    # the first step off ln 2 and its margin 0.5: not counted, not the largest margin
    assert hits_of(pf.check_at_ln2, dpo([0.5] + ones(6, LN2), [0.5] + ones(6, 0.0)), pf.AtLn2Limits()) == [(
        _ln2_text("0", 6, 6, "20-70"),
        {"points": 6, "at_ln2": 6, "share": 1.0, "median_loss": pytest.approx(LN2), "max_abs_margin": 0.0}, 1,
        [(6, "reward margin 0 at the last step 70")])]


@pytest.mark.parametrize(("margins", "inside"), [
    ([0.0] * 10 + [0.01], 10),               # a margin at its band exactly is inside
    ([0.0] * 10 + [-0.01], 10),
    ([0.0] * 10 + [0.0101], 9),             # 9 of 10: the share at its limit exactly
    ([0.0] * 9 + [0.0101, -0.0101], None),  # 8 of 10
])
def test_at_ln2_margin_band_and_share_at_their_limits(margins, inside):
    hits = hits_of(pf.check_at_ln2, dpo(ones(11, LN2), margins), pf.AtLn2Limits())
    assert [(h[1]["at_ln2"], h[1]["points"]) for h in hits] == ([(inside, 10)] if inside else [])
    if inside:
        assert hits[0][3] == [(10, f"reward margin {margins[-1]:.3g} at the last step 110")]


def test_at_ln2_a_loss_exactly_at_its_band_is_inside():
    band = abs(0.7 - LN2)  # a band (not the default) that 0.7 meets exactly
    hits = hits_of(pf.check_at_ln2, dpo(ones(11, 0.7), ones(11, 0.0)), pf.AtLn2Limits(loss_band=band))
    assert [(h[1]["at_ln2"], h[1]["median_loss"]) for h in hits] == [(10, 0.7)]
    assert hits_of(pf.check_at_ln2, dpo(ones(11, 0.7), ones(11, 0.0)), pf.AtLn2Limits(loss_band=band * 0.999)) == []


@pytest.mark.parametrize(("offset", "fires"), [(0.0049, True), (-0.0049, True), (0.0051, False), (-0.0051, False)])
def test_at_ln2_loss_band_either_side_of_ln2(offset, fires):
    hits = hits_of(pf.check_at_ln2, dpo(ones(6, LN2) + ones(5, LN2 + offset), ones(11, 0.0)), pf.AtLn2Limits())
    assert [h[1]["at_ln2"] for h in hits] == ([10] if fires else [])


# --- TP-PREF-MARGINS-FLAT ------------------------------------------------------------------

def _flat_text(n: int, steps: str, start: str, end: str, w: int, rise: str, noise: str, z: str) -> str:
    return (f"reward margins do not rise over {n} logged steps (steps {steps}): {start} at the start, {end} at the end "
            f"(medians of {w}), a rise of {rise} against a level noise of {noise} (limit 2 noises), trend z {z} (limit 1): "
            "the run is not learning the preferences")


def test_margins_flat_whole_over_the_finite_points():
    margins = [0.5, 0.3, NAN, 0.6, 0.4, 0.5, 0.3, 0.6, 0.4, 0.5, 0.45, 0.4]
    assert hits_of(pf.check_margins_flat, dpo(ones(12, 0.69), margins), pf.MarginsFlatLimits()) == [(
        _flat_text(11, "10-120", "0.5", "0.45", 3, "-0.05", "0.1048", "-0.16"),
        {"start_level": 0.5, "end_level": 0.45, "rise": pytest.approx(-0.05), "level_noise": pytest.approx(0.1048357),
         "trend_z": pytest.approx(-0.1556998), "points": 11, "window": 3}, 11,
        [(0, "reward margin 0.5 at the first step 10")])]


def test_margins_flat_at_zero_is_left_to_at_ln2_up_to_the_band_exactly():
    assert skip_of(pf.check_margins_flat, dpo(ones(10, 0.69), [0.01] * 9 + [-0.01]), pf.MarginsFlatLimits()) == LEFT_TO_AT_LN2
    ((message, evidence, line, _),) = hits_of(pf.check_margins_flat, dpo(ones(10, 0.69), [0.01] * 9 + [-0.0101]),
                                            pf.MarginsFlatLimits())
    assert message == _flat_text(10, "10-100", "0.01", "0.01", 3, "0", "0", "-0.72") and line == 9


def test_margins_with_a_trend_of_the_limit_exactly_are_not_flat():
    margins = [0.5, 0.3, 0.6, 0.4, 0.5, 0.3, 0.6, 0.4, 0.5, 0.45, 0.4, 0.7]
    z = mann_kendall_z(margins)
    run = dpo(ones(12, 0.69), margins)
    assert hits_of(pf.check_margins_flat, run, pf.MarginsFlatLimits(min_trend_z=z)) == []
    assert [h[1]["trend_z"] for h in hits_of(pf.check_margins_flat, run, pf.MarginsFlatLimits(min_trend_z=z + 1e-9))] == [z]


def test_margins_flat_skips_under_ten_points():
    assert skip_of(pf.check_margins_flat, dpo(ones(9, 0.69), ones(9, 0.3)), pf.MarginsFlatLimits()) == (
        "9 finite reward margins point(s); this check needs at least 10")


def test_margins_that_end_above_their_start_by_more_than_two_noises_are_not_flat():
    # no trend (a hump), the end 0.1 above the start; the noise is 0 (straight pieces): any rise passes
    margins = [0.0] * 3 + [1.0, 2.0, 3.0, 2.0, 1.0] + [0.1] * 3
    assert hits_of(pf.check_margins_flat, dpo(ones(11, 0.69), margins), pf.MarginsFlatLimits()) == []
    # back to its start exactly, at a noise of 0: a rise of 0 is not above two noises of 0
    level = [0.0] * 3 + [1.0, 2.0, 3.0, 2.0, 1.0] + [0.0] * 3
    assert [(h[1]["rise"], h[1]["level_noise"]) for h in hits_of(pf.check_margins_flat, dpo(ones(11, 0.69), level),
                                                                 pf.MarginsFlatLimits())] == [(0.0, 0.0)]


# --- TP-PREF-ACC-AT-CHANCE --------------------------------------------------------------------

def _acc(values: list[float | None], **cols: list[float | None]) -> Run:
    return run_of(loss=ones(len(values), 0.6), cols={"rewards/accuracies": values, **{k.replace("__", "/"): v
                                                                                   for k, v in cols.items()}})


def _acc_text(mean: str, n: int, steps: str, band: str, stderr: str) -> str:
    return (f"reward accuracy stays at chance: mean {mean} over the second half of the run ({n} points, steps {steps}), "
            f"within {band} of 0.5 (the larger of 0.05 and 2 standard errors {stderr}): the chosen answers are ranked "
            "above the rejected ones no more often than by chance")


def test_accuracy_at_chance_over_the_second_half_of_an_even_run():
    assert hits_of(pf.check_acc_at_chance, _acc([0.9] * 5 + [0.5, 0.5, 0.55, 0.45, 0.5]), pf.AccLimits()) == [(
        _acc_text("0.5", 5, "60-100", "0.05", "0.0158"),
        {"mean_accuracy": pytest.approx(0.5), "band": 0.05, "stderr": pytest.approx(0.0158114), "points": 5}, 5, [])]


def test_accuracy_at_chance_over_the_larger_second_half_of_an_odd_run():
    ((message, evidence, line, _),) = hits_of(pf.check_acc_at_chance, _acc([0.9] * 5 + [0.5, 0.5, 0.55, 0.45, 0.5, 0.5]),
                                            pf.AccLimits())
    assert message == _acc_text("0.5", 6, "60-110", "0.05", "0.0129") and line == 5 and evidence["points"] == 6


@pytest.mark.parametrize(("level", "fires"), [(0.45, True), (0.44, False), (0.549, True), (0.551, False)])
def test_accuracy_band_either_side_of_one_half(level, fires):
    hits = hits_of(pf.check_acc_at_chance, _acc(ones(10, level)), pf.AccLimits())
    assert [h[1]["mean_accuracy"] for h in hits] == ([pytest.approx(level)] if fires else [])


def test_accuracy_at_the_edge_of_a_band_wider_than_its_floor():
    # a second half with mean 0.25 and standard error 0.125: 0.25 from 0.5, the band (two errors) exactly
    half = [0.0625, 0.0625, 0.0625, 0.375, 0.6875]
    assert hits_of(pf.check_acc_at_chance, _acc(ones(5, 0.6) + half), pf.AccLimits()) == [(
        _acc_text("0.25", 5, "60-100", "0.25", "0.125"),
        {"mean_accuracy": 0.25, "band": 0.25, "stderr": 0.125, "points": 5}, 5, [])]


def test_accuracy_with_margins_at_zero_is_left_to_at_ln2_and_with_margins_that_moved_is_judged():
    assert skip_of(pf.check_acc_at_chance, _acc(ones(10, 0.5), rewards__margins=[0.0] * 9 + [-0.01]),
                 pf.AccLimits()) == LEFT_TO_AT_LN2
    moved = hits_of(pf.check_acc_at_chance, _acc(ones(10, 0.5), rewards__margins=[0.0] * 9 + [-0.02]), pf.AccLimits())
    assert [h[1]["mean_accuracy"] for h in moved] == [0.5]
    # margins without a finite point say nothing: the accuracy is judged
    unstated = hits_of(pf.check_acc_at_chance, _acc(ones(10, 0.5), rewards__margins=[NAN] * 10), pf.AccLimits())
    assert [h[1]["mean_accuracy"] for h in unstated] == [0.5]
    assert skip_of(pf.check_acc_at_chance, _acc(ones(9, 0.5)), pf.AccLimits()) == (
        "9 finite reward accuracies point(s); this check needs at least 10")


# --- TP-PREF-DISPLACEMENT ---------------------------------------------------------------------

REJECTED = [-100.0 - 3 * i for i in range(13)]


def _logps(chosen: list[float], rejected: list[float] = REJECTED) -> Run:
    return run_of(loss=ones(len(chosen), 0.6), cols={"logps/chosen": chosen, "logps/rejected": rejected})


def test_displacement_whole_with_the_share_at_its_limit_exactly():
    # 13 points, windows of 3: 6 of the 10 after the first window below -100
    chosen = [-100.0] * 3 + [-99.0] * 4 + [-101.0, -102.0, -103.0, -120.0, -120.0, -120.0]
    assert hits_of(pf.check_displacement, _logps(chosen), pf.DisplacementLimits()) == [(
        "chosen log-probs fall with the rejected ones: chosen -100 -> -120 (trend z -2.50), rejected -103 -> -133 "
        "(z -4.70), medians of 3 over steps 10-130; the chosen log-prob is below its start at 60% of the steps after "
        "the first 3 (limits: z <= -2, a fall over 2 level noises, 60% of the steps): the margin grows by pushing both "
        "answers down",
        {"chosen_start": -100.0, "chosen_end": -120.0, "chosen_trend_z": pytest.approx(-2.5013644),
         "rejected_start": -103.0, "rejected_end": -133.0, "rejected_trend_z": pytest.approx(-4.6976843),
         "share_below_start": 0.6}, 12, [(0, "chosen log-prob -100 at the first step 10")])]


def test_displacement_with_a_fall_of_its_trend_limit_exactly_and_its_first_log_prob_cited():
    chosen = [-99.0] + [-100.0] * 2 + [-100.0 - 2 * i for i in range(1, 8)] + [-115.0] * 3
    z = mann_kendall_z(chosen)
    hits = hits_of(pf.check_displacement, _logps(chosen), pf.DisplacementLimits(max_trend_z=z))
    assert [(h[1]["chosen_trend_z"], h[3]) for h in hits] == [(z, [(0, "chosen log-prob -99 at the first step 10")])]
    assert hits_of(pf.check_displacement, _logps(chosen), pf.DisplacementLimits(max_trend_z=z - 1e-9)) == []


def test_displacement_counts_points_below_the_start_not_at_it():
    chosen = [-100.0] * 3 + [-99.0] * 3 + [-100.0, -101.0, -102.0, -103.0, -120.0, -120.0, -120.0]
    assert [h[1]["share_below_start"] for h in hits_of(pf.check_displacement, _logps(chosen), pf.DisplacementLimits())] == [0.6]
    under = [-100.0] * 3 + [-99.0] * 5 + [-102.0, -103.0, -120.0, -120.0, -120.0]  # 5 of 10
    assert hits_of(pf.check_displacement, _logps(under), pf.DisplacementLimits()) == []


def test_displacement_needs_both_series_to_fall():
    chosen = [-100.0] * 3 + [-100.0 - 2 * i for i in range(1, 8)] + [-115.0] * 3
    assert len(hits_of(pf.check_displacement, _logps(chosen), pf.DisplacementLimits())) == 1
    assert hits_of(pf.check_displacement, _logps(chosen, ones(13, -100.0)), pf.DisplacementLimits()) == []
    assert hits_of(pf.check_displacement, _logps(ones(13, -100.0)), pf.DisplacementLimits()) == []


def test_displacement_needs_the_rejected_level_to_fall_not_only_its_trend():
    # the rejected log-prob falls through its middle (z -3.57) but ends where it started, at a noise of 0
    chosen = [-100.0] * 4 + [-100.0 - 20.0 * (i + 1) / 16 for i in range(15)] + [-120.0] * 4
    back = [-100.0] * 3 + [-80.0 - 2.5 * i for i in range(17)] + [-100.0] * 3
    assert hits_of(pf.check_displacement, _logps(chosen, back), pf.DisplacementLimits()) == []
    falling_too = [-100.0] * 3 + [-80.0 - 2.5 * i for i in range(17)] + [-130.0] * 3
    assert len(hits_of(pf.check_displacement, _logps(chosen, falling_too), pf.DisplacementLimits())) == 1


def test_displacement_of_a_run_no_longer_than_its_first_window_has_no_share_to_judge():
    # limits loosened so that three points fall: nothing comes after the first window of three
    limits = pf.DisplacementLimits(min_points=3, max_trend_z=-1.0, fall_noise=-1.0)
    assert hits_of(pf.check_displacement, _logps([-100.0, -110.0, -120.0], [-100.0, -110.0, -120.0]), limits) == []
    # one point more, after the window and below the start: the share is 1
    ((_, evidence, _, _),) = hits_of(pf.check_displacement, _logps([-100.0, -110.0, -120.0, -130.0],
                                                                 [-100.0, -110.0, -120.0, -130.0]), limits)
    assert evidence["share_below_start"] == 1.0


def test_displacement_skips_without_either_series():
    assert skip_of(pf.check_displacement, run_of(loss=ones(12), cols={"logps/rejected": REJECTED}),
                 pf.DisplacementLimits()) == "no chosen log-probs in the log"
    assert skip_of(pf.check_displacement, run_of(loss=ones(12), cols={"logps/chosen": REJECTED}),
                 pf.DisplacementLimits()) == "no rejected log-probs in the log"
    assert skip_of(pf.check_displacement, _logps(REJECTED[:9], REJECTED), pf.DisplacementLimits()) == (
        "9 finite chosen log-probs point(s); this check needs at least 10")
    assert skip_of(pf.check_displacement, _logps(REJECTED, REJECTED[:9]), pf.DisplacementLimits()) == (
        "9 finite rejected log-probs point(s); this check needs at least 10")


# --- TP-REWARD-NONFINITE ----------------------------------------------------------------------

def test_nonfinite_names_each_series_by_its_key_from_the_earliest_point():
    run = _sourced(run_of(loss=ones(6), reward=[0.1, NAN, 0.2, 0.2, 0.2, 0.2], reward_std=[0.1, 0.1, INF, 0.1, NAN, 0.1]),
                   {"reward": "critic/score/mean", "reward_std": "env/reward_std"})
    assert hits_of(pf.check_nonfinite, run, NoLimits()) == [(
        "critic/score/mean is nan at step 20: 3 non-finite point(s) in 2 reward/log-prob series — critic/score/mean "
        "(1 of 6), env/reward_std (2 of 6)",
        {"series": "reward,reward_std", "first_series": "reward", "first_step": 20, "points": 3}, 1, [])]


def test_nonfinite_orders_series_by_their_first_bad_record_then_by_name():
    # reward and eval_reward both bad first at row 2: eval_reward leads by name; reward_std's row 1 leads them all
    run = run_of(loss=ones(6), reward=[0.1, 0.2, NAN, 0.2, INF, 0.2],
                 cols={"eval_reward": [0.1, 0.1, NAN, 0.1, 0.1, 0.1], "reward_std": [0.1, -INF, 0.1, 0.1, 0.1, 0.1],
                       "logps/chosen": [-1.0, -1.0, -1.0, -1.0, -1.0, NAN]})
    assert hits_of(pf.check_nonfinite, run, NoLimits()) == [(
        "reward_std is -inf at step 20: 5 non-finite point(s) in 4 reward/log-prob series — reward_std (1 of 6), "
        "eval_reward (1 of 6), reward (2 of 6), logps/chosen (1 of 6)",
        {"series": "reward_std,eval_reward,reward,logps/chosen", "first_series": "reward_std", "first_step": 20,
         "points": 5}, 1, [])]


def test_nonfinite_leaves_the_kl_to_its_own_rule_and_passes_finite_series():
    assert skip_of(pf.check_nonfinite, run_of(loss=ones(6), kl=[NAN] * 6), NoLimits()) == (
        "no reward or log-prob series in the log")
    assert hits_of(pf.check_nonfinite, run_of(loss=ones(6), reward=ones(6), kl=[NAN] * 6), NoLimits()) == []
    # a finite series before it does not end the search
    assert hits_of(pf.check_nonfinite, run_of(loss=ones(6), cols={"rewards/margins": ones(6), "logps/chosen": ones(6, -1.0),
                                                                "eval_rewards/margins": [NAN] + ones(5)}), NoLimits()) == [(
        "eval_rewards/margins is nan at step 10: 1 non-finite point(s) in 1 reward/log-prob series — "
        "eval_rewards/margins (1 of 6)",
        {"series": "eval_rewards/margins", "first_series": "eval_rewards/margins", "first_step": 10, "points": 1}, 0, [])]


# --- the keys other stacks log, judged as TRL's ----------------------------------------------------

@pytest.mark.parametrize("margin_key", ["rewards/margins", "train/rewards/margins", "reward_margin", "train/reward_margin"])
def test_at_ln2_reads_each_stacks_margin_key(tmp_path: Path, margin_key: str) -> None:
    rows = [{"step": s, "loss": LN2, margin_key: 0.0} for s in range(1, 13)]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    found = [(f.id, f.message) for f in judge_file(path, Config()).findings if f.id.startswith("TP-PREF-")]
    assert found == [("TP-PREF-AT-LN2", _ln2_text("0", 11, 11, "2-12"))]
