"""TP-AT-CHANCE and TP-EVAL-ACC-AT-CHANCE at the edges tests/rule_cases/ does not reach: each
side of the 3% band below and above ln(C), of the shortest stay (`min_points`) and of the
third of the log (`min_fraction`), the band a noisy run widens, the eval accuracy beside the
loss and each limit of the eval-accuracy rule, with the whole message."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rule_cases.metrics import hits_of, run_of
from trainproof_lsp.core.model import Run
from trainproof_lsp.rules import Context, Skip
from trainproof_lsp.rules.chance import EvalAccuracyLimits, Limits, check, check_eval_accuracy

LN2 = math.log(2)
TWO = Context(num_classes=2, num_classes_source="--num-classes")
# The band of a still loss at ln 2: 3% of 0.6931.
BAND = 0.03 * LN2
TAIL = "classes from --num-classes; band the larger of 3% and 3 spreads of a 3-point median at the point noise 0)"


def hits(run: Run, ctx: Context = TWO) -> list[tuple[str, dict[str, Any], int, list[tuple[int, str]]]]:
    return hits_of(check, run, Limits(), ctx)


def acc_hits(run: Run, ctx: Context = TWO) -> list[tuple[str, dict[str, Any], int]]:
    return [(message, evidence, line) for message, evidence, line, _ in
            hits_of(check_eval_accuracy, run, EvalAccuracyLimits(), ctx)]


@pytest.mark.parametrize("ctx", [Context(), Context(num_classes=1, num_classes_source="config.json")])
def test_without_two_classes_it_says_where_the_number_comes_from(ctx):
    with pytest.raises(Skip) as skipped:
        list(check(run_of(loss=[LN2] * 12), Limits(), ctx))
    assert str(skipped.value) == ("number of classes unknown: pass --num-classes or --vocab-size, set num_classes or "
                                  "vocab_size in the config, or keep config.json beside the log")


def test_a_still_loss_at_ln2_is_at_chance_for_the_whole_log():
    assert hits(run_of(loss=[LN2] * 12)) == [(
        "loss stays at 0.6931, within 3.0% of ln(2) = 0.6931 (a uniform guess), for the whole log (12 of 12 "
        f"points, steps 10-120; {TAIL}",
        {"level": LN2, "uniform_bound": LN2, "ratio": 1.0, "num_classes": 2, "step": 10, "last_step": 120,
         "points": 12, "band": BAND}, 0, [])]


@pytest.mark.parametrize("factor,fires", [(1.029, True), (1.031, False), (0.971, True), (0.969, False)])
def test_the_band_is_3_percent_of_ln_c_on_each_side(factor, fires):
    found = hits(run_of(loss=[LN2 * factor] * 12))
    assert len(found) == fires
    if fires:
        assert found[0][1]["ratio"] == pytest.approx(factor)
        assert found[0][0].startswith(f"loss stays at {LN2 * factor:.4g}, within 3.0% of ln(2)")


def test_a_stay_of_ten_points_after_a_fall_is_judged_from_its_first_point():
    assert hits(run_of(loss=[2.0, 1.5, 1.0] + [LN2] * 10)) == [(
        "loss stays at 0.6931, within 3.0% of ln(2) = 0.6931 (a uniform guess), from step 40 to the end (10 of 13 "
        f"points, steps 40-130; {TAIL}",
        {"level": LN2, "uniform_bound": LN2, "ratio": 1.0, "num_classes": 2, "step": 40, "last_step": 130,
         "points": 10, "band": BAND}, 3, [])]


def test_nine_points_at_chance_after_a_fall_are_too_short_a_stay():
    assert hits(run_of(loss=[2.0, 1.5, 1.0] + [LN2] * 9)) == []


@pytest.mark.parametrize("before,fires", [(22, True), (23, False)])
def test_the_stay_covers_a_third_of_the_log(before, fires):
    # 11 points at ln 2 after 22 falling ones are a third of 33; after 23, less than a third of 34.
    run = run_of(loss=[2.0 - 0.01 * i for i in range(before)] + [LN2] * 11)
    found = hits(run)
    assert len(found) == fires
    if fires:
        assert found[0][1]["points"] == 11 and found[0][1]["step"] == 230 and found[0][2] == 22


def test_the_stay_starts_at_the_first_in_band_point_of_the_first_in_band_window():
    # The window of 3 ending at row 4 ([1.0, 0.69, 5.0]) has its median 1.0 outside; the one
    # ending at row 5 ([0.69, 5.0, 0.69]) is in, and its first in-band point is row 3.
    run = run_of(loss=[2.0, 1.5, 1.0, LN2, 5.0] + [LN2] * 9)
    ((message, evidence, line, _),) = hits(run)
    assert (evidence["step"], evidence["points"], line) == (40, 11, 3)
    assert "from step 40 to the end (11 of 14 points, steps 40-140;" in message


# A loss 0.03 above ln 2 with noise of sigma 0.08 (seeded draws, rounded).
NOISY = [0.703, 0.764, 0.705, 0.698, 0.649, 0.706, 0.812, 0.757, 0.806, 0.743, 0.755, 0.738, 0.59, 0.792, 0.764,
         0.763, 0.588, 0.584, 0.652, 0.686, 0.748, 0.719, 0.765, 0.672, 0.748, 0.755, 0.67, 0.861, 0.768, 0.819,
         0.674, 0.664, 0.696, 0.715, 0.774, 0.743, 0.687, 0.647, 0.681, 0.821]


def test_a_noisy_run_widens_the_band_to_three_spreads_of_its_window_median():
    ((message, evidence, line, _),) = hits(run_of(loss=NOISY))
    level = sorted(NOISY)[19:21]
    assert evidence["level"] == pytest.approx(sum(level) / 2)
    assert evidence["ratio"] > 1.03  # outside the fixed band: only the noise keeps it in
    assert evidence["band"] / LN2 > 0.03
    assert message.startswith(f"loss stays at {evidence['level']:.4g}, within {evidence['band'] / LN2:.1%} of ln(2)")
    assert "3 spreads of a 4-point median at the point noise" in message and line == 0
    # The same noise far above ln 2 is not at chance.
    assert hits(run_of(loss=[v + 0.5 for v in NOISY])) == []


@pytest.mark.parametrize("last,near", [(0.54, True), (0.56, False)])
def test_the_last_eval_accuracy_is_reported_beside_one_over_c(last, near):
    run = run_of(loss=[LN2] * 12, eval_accuracy=[None] * 5 + [0.6] + [None] * 4 + [last, None])
    ((message, evidence, _, related),) = hits(run)
    assert message.endswith(f"; eval accuracy {last} at step 110 is {'' if near else 'not '}near chance 1/2 = 0.5")
    assert (evidence["eval_accuracy"], evidence["chance_accuracy"], evidence["accuracy_at_chance"]) == (last, 0.5, near)
    assert related == [(10, f"eval accuracy {last} (chance 0.5)")]


def test_the_eval_loss_is_judged_when_the_train_loss_is_too_short():
    ((message, evidence, _, _),) = hits(run_of(loss=[1.0] * 3 + [None] * 9, eval_loss=[LN2] * 12))
    assert message.startswith("eval loss stays at 0.6931,") and evidence["series"] == "eval_loss"


def _evals(values: list[float]) -> Run:
    return run_of(eval_accuracy=values)


def test_one_accuracy_at_four_of_five_evals_is_a_model_that_predicts_one_class():
    assert acc_hits(_evals([0.62, 0.62, 0.7, 0.62, 0.62]), Context()) == [(
        "eval accuracy (5 evals, steps 10-50) is 0.62 at 4 of 5 evals (limit 80%): a model that predicts one "
        "class scores that class's share every time", {"value": 0.62, "repeats": 4, "evals": 5}, 4)]
    assert acc_hits(_evals([0.62, 0.62, 0.7, 0.71, 0.62]), Context()) == []


@pytest.mark.parametrize("value,fires", [(0.9499, True), (0.95, False)])
def test_a_constant_at_095_or_more_is_a_solved_eval_set(value, fires):
    assert len(acc_hits(_evals([value] * 5), Context())) == fires


def test_four_evals_are_too_few():
    with pytest.raises(Skip) as skipped:
        list(check_eval_accuracy(_evals([0.5] * 4), EvalAccuracyLimits(), TWO))
    assert str(skipped.value) == "4 finite eval accuracy point(s); this check needs at least 5"


def test_a_median_at_one_over_c_with_no_eval_well_above_it_is_at_chance():
    assert acc_hits(_evals([0.48, 0.52, 0.5, 0.47, 0.59])) == [(
        "eval accuracy (5 evals, steps 10-50) has median 0.5 and best 0.59: at chance 1/2 = 0.5 (limits: median "
        "within 0.05 of it, no eval 0.1 above it; classes from --num-classes)",
        {"median_accuracy": 0.5, "best_accuracy": 0.59, "chance_accuracy": 0.5, "num_classes": 2, "evals": 5}, 4)]


@pytest.mark.parametrize("values,fires", [
    ([0.48, 0.52, 0.5, 0.47, 0.6], False),  # one eval 0.1 above chance: it learned something
    ([0.54, 0.53, 0.56, 0.545, 0.57], True),  # median 0.545: within 0.05 above chance
    ([0.56, 0.57, 0.555, 0.58, 0.59], False),  # median 0.57: outside
    ([0.46, 0.45, 0.455, 0.43, 0.42], True),  # median 0.45: within 0.05 below chance
    ([0.44, 0.45, 0.445, 0.43, 0.42], False),  # median 0.44: outside
])
def test_each_limit_of_the_chance_band(values, fires):
    assert len(acc_hits(_evals(values))) == fires


def test_without_the_number_of_classes_only_a_constant_is_judged():
    assert acc_hits(_evals([0.48, 0.52, 0.5, 0.47, 0.59]), Context()) == []


# The band's edges computed as the check computes them: a level exactly on an edge is in.
LO, HI = LN2 - 0.03 * LN2, LN2 + 0.03 * LN2


@pytest.mark.parametrize("edge,words", [(LO, "0.6724"), (HI, "0.7139")])
def test_a_level_exactly_on_an_edge_of_the_band_is_in_it(edge, words):
    ((message, evidence, _, _),) = hits(run_of(loss=[edge] * 12))
    assert message.startswith(f"loss stays at {words}, within 3.0% of ln(2)") and evidence["points"] == 12


@pytest.mark.parametrize("before,edge", [([2.0, 1.5, 1.0], LO), ([0.2, 0.3, 0.4], HI)])
def test_a_stay_starts_at_a_point_exactly_on_an_edge(before, edge):
    # the first in-band window is [1.0, edge, edge] (or [0.4, ...]); its first in-band point is the edge at row 3
    ((_, evidence, line, _),) = hits(run_of(loss=before + [edge] * 10))
    assert (evidence["step"], evidence["points"], line) == (40, 10, 3)


def test_a_lone_high_first_point_is_inside_the_first_windows_level():
    # levels are medians of full windows: [5.0, ln 2, ln 2] is at ln 2, so the stay is the whole log
    ((message, evidence, line, _),) = hits(run_of(loss=[5.0] + [LN2] * 11))
    assert "for the whole log (12 of 12 points" in message and (evidence["step"], line) == (10, 0)


def test_a_stay_whose_first_window_is_the_second_starts_inside_it():
    # levels: [5, ln2, 5] -> 5 (out), [ln2, 5, ln2] -> ln 2 (in), ...: the stay starts at row 1
    ((message, evidence, line, _),) = hits(run_of(loss=[5.0, LN2, 5.0] + [LN2] * 9))
    assert "from step 20 to the end (11 of 12 points" in message and line == 1


def test_a_point_in_the_band_before_the_first_in_band_window_is_not_the_start():
    # the first in-band window ends at row 5 ([5, ln2, ln2]); the ln 2 at row 1 lies before it
    ((message, evidence, line, _),) = hits(run_of(loss=[2.0, LN2, 5.0, 5.0] + [LN2] * 10))
    assert "from step 50 to the end (10 of 14 points" in message and (evidence["step"], line) == (50, 4)


def test_a_long_log_is_judged_on_medians_of_at_most_20_points():
    ((message, *_),) = hits(run_of(loss=[LN2] * 220))
    assert "(220 of 220 points, steps 10-2200;" in message and "3 spreads of a 20-point median" in message


TEN = Context(num_classes=10, num_classes_source="--num-classes")


def test_an_eval_accuracy_exactly_005_from_chance_is_near_it():
    # 0.1 - 0.05 is exactly 0.05 in binary floating point: on the margin, which is near
    run = run_of(loss=[math.log(10)] * 12, eval_accuracy=[None] * 11 + [0.05])
    ((message, evidence, _, _),) = hits(run, TEN)
    assert message.endswith("; eval accuracy 0.05 at step 120 is near chance 1/10 = 0.1")
    assert evidence["accuracy_at_chance"] is True


def test_a_median_eval_accuracy_exactly_005_from_chance_is_at_chance():
    assert acc_hits(_evals([0.04, 0.05, 0.05, 0.06, 0.05]), TEN) == [(
        "eval accuracy (5 evals, steps 10-50) has median 0.05 and best 0.06: at chance 1/10 = 0.1 (limits: median "
        "within 0.05 of it, no eval 0.1 above it; classes from --num-classes)",
        {"median_accuracy": 0.05, "best_accuracy": 0.06, "chance_accuracy": 0.1, "num_classes": 10, "evals": 5}, 4)]
