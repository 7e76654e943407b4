"""TP-DEAD-RUN with its whole messages at the edges tests/rule_cases/ does not reach: the loss
frozen at a uniform guess in a log too short for the trend test (5 points, 1e-4 spread, 1% of
ln 2 or ln C), each reason a level that did not fall is given, the eval-only judgement on each
side of its limits, the resumed run (first step past three logging intervals) that rises, the
crawl at ln(C) from 20 points, the learning rate at 1e-7, and a jump in the last points."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from rule_cases.metrics import hits_of, run_of, skip_of
from trainproof_lsp.core.model import Run
from trainproof_lsp.rules import Context
from trainproof_lsp.rules.dead import Limits, check

LN2 = math.log(2)
LN8 = math.log(8)
EIGHT = Context(num_classes=8, num_classes_source="config.json")
FROZEN = "a loss frozen at a uniform guess, too short for the trend test but not for this"
WINDOWS_12 = "levels: start the higher median of the first 3 and first 3 points, end the median of the last 3"
SHORT = "the trend checks need at least 7, up to 10 as the loss's own noise requires"
RESUMED = ("the log starts at step {}: a resumed run at its floor need not improve (its loss does not rise and its "
           "learning rate is not too small to learn)")


def hits(run: Run, ctx: Context = Context()) -> list[tuple[str, dict[str, Any], int]]:
    return [(message, evidence, line) for message, evidence, line, _ in hits_of(check, run, Limits(), ctx)]


def skip(run: Run, ctx: Context = Context()) -> str:
    return skip_of(check, run, Limits(), ctx)


# -- a short log frozen at a uniform guess


def test_five_equal_points_at_ln2_are_a_frozen_loss():
    assert hits(run_of(loss=[LN2] * 5)) == [(
        "loss is 0.6931 at all 5 points (steps 10-50; spread 0, limit 0.0001 of the level), +0.00% from ln 2 (a "
        f"binary guess) = 0.6931 (limit 1%): {FROZEN}",
        {"level": LN2, "points": 5, "spread": 0.0, "uniform_bound": LN2, "series": "loss"}, 4)]


def test_four_equal_points_are_too_few_even_at_ln2():
    assert skip(run_of(loss=[LN2] * 4)) == f"4 finite loss points; {SHORT}"


def test_ln_c_is_named_with_where_c_came_from():
    ((message, evidence, line),) = hits(run_of(loss=[LN8] * 6), EIGHT)
    assert message.startswith("loss is 2.079 at all 6 points (steps 10-60; spread 0, limit 0.0001 of the level), "
                              "+0.00% from ln(8) (classes from config.json) = 2.079 (limit 1%): ")
    assert (evidence["uniform_bound"], line) == (LN8, 5)


@pytest.mark.parametrize("factor,fires", [(1.0099, True), (1.0101, False), (0.9901, True), (0.9899, False)])
def test_the_frozen_level_is_within_1_percent_of_the_guess(factor, fires):
    run = run_of(loss=[LN2 * factor] * 5)
    if fires:
        assert hits(run)[0][0].startswith(f"loss is {LN2 * factor:.4g} at all 5 points")
    else:
        assert skip(run) == f"5 finite loss points; {SHORT}"


@pytest.mark.parametrize("rel,fires", [(0.99e-4, True), (1.01e-4, False)])
def test_equal_means_within_1e_4_of_the_level(rel, fires):
    run = run_of(loss=[LN2] * 4 + [LN2 * (1 + rel)])
    if fires:
        assert hits(run)[0][1]["spread"] == pytest.approx(LN2 * rel)
    else:
        assert skip(run) == f"5 finite loss points; {SHORT}"


def test_a_frozen_loss_elsewhere_is_too_short_to_judge():
    assert skip(run_of(loss=[2.0] * 5)) == f"5 finite loss points; {SHORT}"


def test_the_per_epoch_loss_is_read_before_the_per_step_one():
    ((message, evidence, _),) = hits(run_of(loss=[3.0] * 3, loss_epoch=[LN2] * 5))
    assert message.startswith("per-epoch train loss is 0.6931 at all 5 points") and evidence["series"] == "loss_epoch"


# -- the reasons a level did not fall


def test_a_flat_loss_has_no_downward_trend():
    assert hits(run_of(loss=[2.0] * 12)) == [(
        "loss level went from 2 to 2 over steps 10-120 (12 points; -0.0%; limit: a fall of at least 2%); no downward "
        f"trend (z 0.00 > -1.0); {WINDOWS_12}",
        {"start_level": 2.0, "end_level": 2.0, "drop": 0.0, "trend_z": 0.0, "level_noise": 0.0}, 11)]


@pytest.mark.parametrize("values,levels,fall,drop", [
    ([1.987, 2.228, 1.883, 1.733, 2.043, 2.1, 2.065, 2.086, 1.992, 1.921, 1.898, 1.98],
     "from 1.987 to 1.921 over steps 10-120 (12 points; -3.3%;", "a fall of 1.36 level noises (limit 2.0; level noise "
     "0.04857)", 0.066 / 1.987),
    # exactly min_drop (50 -> 49), inside its noise
    ([50.0, 50.5, 49.5, 50.1, 50.7, 49.3, 50.5, 51.4, 50.6, 49.0, 48.5, 49.5],
     "from 50 to 49 over steps 10-120 (12 points; -2.0%;", "a fall of 1.97 level noises (limit 2.0; level noise 0.5067)",
     0.02),
])
def test_a_fall_within_two_level_noises_and_no_trend_is_no_fall(values, levels, fall, drop):
    ((message, evidence, _),) = hits(run_of(loss=values))
    assert message == (f"loss level went {levels} limit: a fall of at least 2%); no downward trend (z -0.62 > -1.0) "
                       f"and {fall}; {WINDOWS_12}")
    assert evidence["drop"] == pytest.approx(drop)


def test_a_level_that_rose_did_not_fall():
    values = [2.0 - 0.002 * i + (0.05 if i % 2 else 0) for i in range(12)]
    ((message, evidence, _),) = hits(run_of(loss=values))
    assert "(12 points; +1.4%; limit: a fall of at least 2%); the level did not fall;" in message
    assert evidence["trend_z"] < -1.0  # a trend on ranks, but the levels rose


def test_a_steady_fall_under_half_a_percent_is_no_learning():
    ((message, evidence, _),) = hits(run_of(loss=[2.0 - 0.0002 * i for i in range(30)]))
    assert message == (
        "loss level went from 2 to 1.995 over steps 10-300 (30 points; -0.3%; limit: a fall of at least 2%); a fall "
        "under 0.5% is no learning; levels: start the higher median of the first 3 and first 6 points, end the "
        "median of the last 6")
    assert evidence["trend_z"] < -7


def test_a_steady_fall_over_half_a_percent_is_learning():
    assert hits(run_of(loss=[2.0 - 0.0004 * i for i in range(30)])) == []
    assert hits(run_of(loss=[2.0 - 0.05 * i for i in range(12)])) == []


# -- a jump in the last points


def test_a_run_that_fell_and_jumped_in_its_last_ten_points_is_the_spike_rules():
    assert hits(run_of(loss=[2.0 - 0.02 * i for i in range(30)] + [2.5] * 10)) == []


def test_a_jump_that_outlasts_the_last_ten_points_is_judged():
    ((message, _, line),) = hits(run_of(loss=[2.0 - 0.02 * i for i in range(30)] + [2.5] * 25))
    assert message.startswith("loss level went from 1.96 to 2.5 over steps 10-550 (55 points; +27.6%;") and line == 54


def test_in_a_log_of_twelve_the_head_without_its_last_quarter_is_too_short_to_clear_it():
    ((message, _, _),) = hits(run_of(loss=[2.0 - 0.02 * i for i in range(9)] + [2.5] * 3))
    assert message.startswith("loss level went from 1.98 to 2.5 over steps 10-120 (12 points; +26.3%;")


# -- judged on the evals


def _evals(values: list[float]) -> Run:
    return run_of(loss=[1.0] * 3 + [None] * (len(values) - 3), eval_loss=values)


def test_evals_that_never_improve_and_end_10_percent_worse():
    assert hits(_evals([1.0] + [1.1] * 11)) == [(
        "eval loss never improved on its first value 1 (step 10): the best of the next 11 evals is 1.1 (+10.0%; "
        "limit: a fall of at least 2%) and their median 1.1 is +10.0% worse (limit 10%); the train loss is too short "
        "to judge",
        {"start_level": 1.1, "end_level": 1.1, "drop": 0.0, "trend_z": pytest.approx(0.6857, abs=1e-4),
         "series": "eval_loss", "first_eval": 1.0, "best_later_eval": 1.1, "median_later_eval": 1.1, "evals": 12}, 11)]


@pytest.mark.parametrize("values,fires", [
    ([1.0, 0.981] + [1.2] * 10, True),  # the best later eval is 1.9% under the first: no fall of 2%
    ([1.0, 0.979] + [1.2] * 10, False),  # 2.1% under it: it improved once
    ([1.0] + [1.099] * 11, False),  # later evals 9.9% worse: within the noise of a fixed eval set
])
def test_each_limit_of_the_eval_judgement(values, fires):
    assert len(hits(_evals(values))) == fires


# -- resumed runs


def test_a_resumed_run_that_rises_got_worse():
    assert hits(run_of(loss=[2.0 + 0.01 * i for i in range(12)], first=1000)) == [(
        "resumed at step 1000, the loss got worse: level 2.01 -> 2.1 over steps 1000-1110 (+4.5%) with a rising "
        "trend (z 4.46 >= 2.0)",
        {"start_level": 2.01, "end_level": 2.1, "drop": pytest.approx(-0.09 / 2.01), "trend_z": pytest.approx(4.4572,
                                                                                                              abs=1e-4)},
        11)]


@pytest.mark.parametrize("first,resumed", [(31, False), (32, True)])
def test_a_run_is_resumed_when_its_first_step_is_past_three_logging_intervals(first, resumed):
    run = run_of(loss=[2.0] * 12, first=first)
    if resumed:
        assert skip(run) == RESUMED.format(first)
    else:
        assert hits(run)[0][0].startswith(f"loss level went from 2 to 2 over steps {first}-{first + 110} ")


def test_a_resumed_run_with_a_dead_learning_rate_is_still_judged():
    assert hits(run_of(loss=[2.0] * 12, first=1000, lr=[1e-8] * 12)) == [(
        "learning rate never above 1e-08 (limit 1e-07) and the loss shows no significant fall over steps 1000-1110: "
        "level 2 -> 2, z 0.00 > -2.0",
        {"start_level": 2.0, "end_level": 2.0, "drop": 0.0, "trend_z": 0.0, "max_lr": 1e-08}, 11)]


# -- a crawl at ln(C)


def _crawl(n: int) -> list[float]:
    return [LN8 * (1.05 - 0.001 * i) for i in range(n)]


def test_twenty_points_crawling_at_ln_c_are_a_uniform_guess():
    ((message, evidence, line),) = hits(run_of(loss=_crawl(20)), EIGHT)
    assert message == (
        "loss crawls at a uniform guess: level 2.181 -> 2.147 over steps 10-200 (20 points; -1.6%, limit: a fall of "
        "at least 3%), ending +3.2% from ln(8) = 2.079 (limit 10%; classes from config.json); levels: start the "
        "higher median of the first 3 and first 4 points, end the median of the last 4")
    assert (evidence["uniform_bound"], evidence["num_classes"], line) == (LN8, 8, 19)
    assert evidence["trend_z"] < -6  # a real trend: only the crawl rule sees it is no learning


def test_nineteen_points_or_no_class_count_are_no_crawl():
    assert hits(run_of(loss=_crawl(19)), EIGHT) == []
    assert hits(run_of(loss=_crawl(20))) == []


# -- the learning rate


V = [1.944, 2.003, 2.058, 2.062, 2.031, 1.953, 1.96, 1.915, 1.842, 1.882, 1.957, 1.905]  # a 4.9% fall, z -1.85


@pytest.mark.parametrize("lr,fires", [(1e-7, True), (1.1e-7, False)])
def test_a_learning_rate_of_1e_7_needs_a_significant_fall(lr, fires):
    found = hits(run_of(loss=V, lr=[lr] * 12))
    assert [h[0] for h in found] == ([
        "learning rate never above 1e-07 (limit 1e-07) and the loss shows no significant fall over steps 10-120: "
        "level 2.003 -> 1.905, z -1.85 > -2.0"] if fires else [])


def test_a_significant_fall_at_1e_7_is_learning():
    assert hits(run_of(loss=[2.0 - 0.05 * i for i in range(12)], lr=[1e-7] * 12)) == []


# -- exact limits and the paths a first mutation run found untested


def test_a_long_log_has_levels_of_at_most_20_points():
    ((message, _, line),) = hits(run_of(loss=[2.0] * 110))
    assert message.endswith("levels: start the higher median of the first 10 and first 20 points, end the median "
                            "of the last 20") and line == 109


def test_a_loss_at_0_throughout_did_not_fall():
    ((message, evidence, _),) = hits(run_of(loss=[0.0] * 12))
    assert message.startswith("loss level went from 0 to 0 over steps 10-120 (12 points; -0.0%;")
    assert evidence["drop"] == 0.0


def test_a_steady_fall_of_exactly_half_a_percent_is_learning():
    # levels 200 -> 199: a drop of 1/200, exactly the negligible_drop of 0.005, with a falling trend
    values = [200.2, 200.0, 199.9] + [199.9 - 0.08 * i for i in range(1, 10)] + [199.1, 199.0, 198.8]
    assert hits(run_of(loss=values)) == []


def test_a_trendless_fall_of_exactly_2_percent_is_learning():
    # levels 50 -> 49 (exactly min_drop), no trend, no noise to hide it in
    assert hits(run_of(loss=[50.0] * 3 + [52.0] * 6 + [49.0] * 3)) == []


def test_a_level_that_came_back_to_its_start_with_a_falling_rank_trend_did_not_fall():
    values = [2.1, 2.0, 1.9, 2.21, 2.13, 2.1, 2.13, 2.09, 1.86, 2.1, 2.0, 1.9]
    ((message, evidence, _),) = hits(run_of(loss=values))
    assert "(12 points; -0.0%; limit: a fall of at least 2%); the level did not fall;" in message
    assert evidence["drop"] == 0.0 and evidence["trend_z"] < -1.0


def test_fourteen_points_keep_a_head_of_ten_that_clears_a_jump_at_the_end():
    # the last quarter (4 points) set aside leaves 10, enough to judge: they fell
    assert hits(run_of(loss=[2.0 - 0.05 * i for i in range(10)] + [2.5] * 4)) == []


@pytest.mark.parametrize("first,resumed", [(5, True), (4, False)])
def test_a_log_every_step_is_resumed_past_step_4(first, resumed):
    run = run_of(loss=[2.0] * 12, first=first, every=1)
    if resumed:
        assert skip(run) == RESUMED.format(5)
    else:
        assert hits(run)[0][0].startswith("loss level went from 2 to 2 over steps 4-15 ")


def test_the_logging_interval_the_log_states_decides_a_resumption():
    run = run_of(loss=[2.0] * 12)  # first step 10: resumed when the log logs every step
    every_step = dataclasses.replace(run, meta=dataclasses.replace(run.meta, logging_steps=1))
    assert skip(every_step) == RESUMED.format(10)
    assert len(hits(run)) == 1


def test_two_classes_name_ln2_as_the_classes():
    two = Context(num_classes=2, num_classes_source="config.json")
    ((message, _, _),) = hits(run_of(loss=[LN2] * 5), two)
    assert "+0.00% from ln(2) (classes from config.json) = 0.6931 (limit 1%)" in message
    ((crawl, evidence, _),) = hits(run_of(loss=[LN2 * (1.05 - 0.001 * i) for i in range(20)]), two)
    assert crawl.startswith("loss crawls at a uniform guess: level 0.7271 -> 0.7157 over steps 10-200")
    assert evidence["num_classes"] == 2


@pytest.mark.parametrize("epoch", [[3.0] * 3 + [None] * 2, [3.0, 2.0, 3.0, 2.0, 3.0]])
def test_a_per_epoch_loss_too_short_or_not_frozen_leaves_the_per_step_one_to_judge(epoch):
    ((message, evidence, _),) = hits(run_of(loss=[LN2] * 5, loss_epoch=epoch))
    assert message.startswith("loss is 0.6931 at all 5 points") and evidence["series"] == "loss"


def test_a_learning_rate_with_no_finite_value_is_no_learning_rate():
    ((message, evidence, _),) = hits(run_of(loss=[2.0] * 12, lr=[math.nan] * 12))
    assert message.startswith("loss level went from 2 to 2") and "max_lr" not in evidence


def test_the_later_evals_median_leaves_out_only_the_first():
    evals = [1.0, 1.3, 1.1, 1.1, 1.1, 1.1, 1.3, 1.3, 1.3, 1.3, 1.1, 1.3]
    ((message, evidence, _),) = hits(_evals(evals))
    assert "and their median 1.3 is +30.0% worse (limit 10%)" in message and evidence["median_later_eval"] == 1.3


@pytest.mark.parametrize("best,fires", [(49.0, False), (49.01, True)])
def test_an_eval_exactly_2_percent_under_the_first_is_an_improvement(best, fires):
    found = hits(_evals([50.0, best] + [60.0] * 10))
    assert [m for m, _, _ in found] == ([
        "eval loss never improved on its first value 50 (step 10): the best of the next 11 evals is 49.01 (-2.0%; "
        "limit: a fall of at least 2%) and their median 60 is +20.0% worse (limit 10%); the train loss is too short "
        "to judge"] if fires else [])


def test_a_resumed_run_exactly_half_a_percent_worse_did_not_get_worse():
    # levels 200 -> 201: -1/200, exactly -negligible_drop, with a rising trend
    values = [199.9, 200.0, 200.05] + [200.05 + 0.09 * i for i in range(1, 10)] + [200.95, 201.0, 201.1]
    assert skip(run_of(loss=values, first=1000)) == RESUMED.format(1000)
