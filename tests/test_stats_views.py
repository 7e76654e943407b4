"""The shared statistics (rules/_stats.py) and series views (rules/_views.py) on small inputs
whose results can be worked out by hand: each median, window, trend score and noise below is
the number the comment beside it derives."""

from __future__ import annotations

import math

import pytest

from rule_cases.metrics import run_of
from trainproof_lsp.rules import Skip
from trainproof_lsp.rules._stats import (bucket_medians, centred_medians, mad, mann_kendall_z, median, point_noise,
                                         rolling_levels, window_for)
from trainproof_lsp.rules._views import (expected_trend_z, is_too_short, judged_on, points_needed, recent_points,
                                         too_short_reason, trend_series, view_words)


def test_median_of_odd_even_and_no_values():
    assert (median([3, 1, 2]), median([4, 1, 3, 2]), math.isnan(median([]))) == (2, 2.5, True)


@pytest.mark.parametrize("n,window", [(10, 3), (50, 5), (500, 20), (35, 3)])
def test_window_for_is_n_over_the_divisor_clamped(n, window):
    assert window_for(n, divisor=10, lo=3, hi=20) == window


def test_rolling_levels_with_and_without_the_head():
    # windows of 3 over 5,1,3,2,4: [5] [5,1] [5,1,3] [1,3,2] [3,2,4]
    assert rolling_levels([5, 1, 3, 2, 4], 3) == [(0, 5), (1, 3.0), (2, 3), (3, 2), (4, 3)]
    assert rolling_levels([5, 1, 3, 2, 4], 3, head=False) == [(2, 3), (3, 2), (4, 3)]
    assert rolling_levels([], 3) == []


def test_rolling_levels_of_a_long_series_are_strided_and_end_at_the_last_point():
    # 10 points at most 4 windows: stride 2 (ends 0, 2, 4, 6, 8), then the last window [7, 8, 9]
    assert rolling_levels(list(range(10)), 3, max_windows=4) == [(0, 0), (2, 1), (4, 3), (6, 5), (8, 7), (9, 8)]


def test_bucket_medians():
    assert bucket_medians([1, 2, 3], 5) == [1, 2, 3]  # shorter than the buckets: itself
    assert bucket_medians(list(range(10)), 3) == [1, 4, 7.5]  # [0-2] [3-5] [6-9]
    # 50 points a bucket, 10 of them: 0, 5, ..., 45 -> (20 + 25) / 2
    assert bucket_medians(list(range(100)), 2, per_bucket=10) == [22.5, 72.5]


def test_mann_kendall_z():
    # four points in order: S = 6, var = 4 x 3 x 13 / 18, z = (6 - 1) / sqrt(var)
    z = 5 / math.sqrt(4 * 3 * 13 / 18)
    assert (mann_kendall_z([1, 2, 3, 4]), mann_kendall_z([4, 3, 2, 1])) == (pytest.approx(z), pytest.approx(-z))
    assert mann_kendall_z([1, 3, 2]) == 0.0  # S = 1, corrected to 0
    assert mann_kendall_z([1, 1, 1]) == 0.0 and mann_kendall_z([1, 2]) == 0.0
    # a long series is scored on its bucket medians: 1,000 rising points as 120 in order
    n = 120
    assert mann_kendall_z(list(range(1000))) == pytest.approx((n * (n - 1) / 2 - 1) / math.sqrt(n * (n - 1) * (2 * n + 5) / 18))


def test_mad():
    assert mad([1, 2, 3, 4, 100]) == 1  # deviations from 3: 2, 1, 0, 1, 97
    assert mad([5]) == 0.0


def test_point_noise_from_second_differences():
    # 0,1,0,1,0,1: second differences -2, 2, -2, 2; their MAD is 2
    assert point_noise([0, 1, 0, 1, 0, 1]) == pytest.approx(1.4826 * 2 / math.sqrt(6))
    assert point_noise([1, 2, 3, 4, 5]) == 0.0  # a straight line has none
    assert point_noise([1, 2, 3]) == 0.0  # fewer than 4 points
    # a long series is strided: 10,002 points of 0,1,... at most 4 differences, stride 2500
    assert point_noise([i % 2 for i in range(10002)], max_points=4) == 0.0  # every strided difference is -2


def test_centred_medians():
    assert centred_medians([5, 1, 3, 2, 4], 1) == [3.0, 3, 2, 3, 3.0]


def test_expected_trend_z():
    assert expected_trend_z(2, 1.0, 1.0) == 0.0
    # noiseless: every pair in order, as mann_kendall_z of a sorted series
    assert expected_trend_z(4, 1.0, 0.0) == pytest.approx(mann_kendall_z([4, 3, 2, 1]) * -1)
    assert expected_trend_z(10, 0.1, 0.1) == pytest.approx(3.4130, abs=1e-4)


def test_points_needed():
    assert points_needed([1.0] * 12, 10) == (10, 0.0)  # long enough: the minimum
    assert points_needed([1.0] * 6, 10) == (10, 0.0)  # under SHORT_FLOOR: the minimum
    assert points_needed([2.0 - 0.1 * i for i in range(8)], 10)[0] == 7  # noiseless fall: from 7
    needed, noise = points_needed([2.0 + 0.3 * (-1) ** i for i in range(8)], 10)
    assert (needed, noise) == (10, pytest.approx(1.4826 * 1.2 / math.sqrt(6)))  # noise 0.73: all 10


@pytest.mark.parametrize("n,recent", [(100, 10), (12, 3), (4, 3), (13, 4)])
def test_recent_points_are_ten_or_a_quarter_and_at_least_three(n, recent):
    assert recent_points(n, 10, 0.25) == recent


def test_trend_series_order():
    epoch = run_of(loss=[1.0] * 12, loss_epoch=[2.0] * 10 + [None] * 2)
    assert trend_series(epoch, 10).name == "loss_epoch"
    step = run_of(loss=[1.0] * 12, loss_epoch=[2.0] * 3 + [None] * 9)
    assert trend_series(step, 10).name == "loss"
    ev = run_of(loss=[1.0] * 3 + [None] * 9, eval_loss=[2.0] * 12)
    assert trend_series(ev, 10).name == "eval_loss"


def test_too_short_says_how_many_points_there_were():
    run = run_of(loss=[1.0] * 3 + [None] * 3, eval_loss=[2.0] * 6)
    assert too_short_reason(run, 10) == ("3 finite loss points and 6 finite eval loss points; the trend checks need "
                                         "at least 7, up to 10 as the loss's own noise requires")
    assert too_short_reason(run_of(loss=[1.0]), 10) == ("1 finite loss point; the trend checks need at least 7, up "
                                                        "to 10 as the loss's own noise requires")
    assert too_short_reason(run_of(lr=[1.0]), 10).startswith("no finite loss point;")
    with pytest.raises(Skip):
        trend_series(run, 10)
    assert is_too_short(run_of(loss=[1.0] * 12), 10) is None


def test_too_short_from_seven_points_says_what_the_noise_needs():
    run = run_of(loss=[2.0 + 0.3 * (-1) ** i for i in range(8)])
    assert too_short_reason(run, 10) == (
        "8 finite loss points; at the loss's own noise (0.726) the trend test reaches z 2 on a fall at its pace, or of "
        "2%, only from 10 points (the trend checks judge from 7 points when the noise allows, always from 10)")
    assert is_too_short(run, 10) == too_short_reason(run, 10)


def test_view_words():
    plain = run_of(loss=[1.0, 0.9])
    assert view_words(plain, plain.series["loss"]) == "train loss per logged point"
    per_epoch = run_of(loss=[1.0, 0.9, 0.8], epoch=[1.0, 2.0, 3.0])
    assert view_words(per_epoch, per_epoch.series["loss"]) == "train loss per epoch"
    skipping = run_of(loss=[1.0, 0.9, 0.8], epoch=[1.0, 3.0, 4.0])
    assert view_words(skipping, skipping.series["loss"]) == "train loss per step"
    fractional = run_of(loss=[1.0, 0.9], epoch=[0.5, 1.0])
    assert view_words(fractional, fractional.series["loss"]) == "train loss per step"
    both = run_of(loss=[1.0, 0.9], loss_epoch=[1.0, None])
    assert [view_words(both, both.series[n]) for n in ("loss", "loss_epoch")] == [
        "train loss per step", "train loss per epoch"]
    other = run_of(eval_loss=[1.0], grad_norm=[1.0], cols={"loss_part:kl": [0.1]})
    assert [view_words(other, other.series[n]) for n in ("eval_loss", "grad_norm", "loss_part:kl")] == [
        "eval loss", "grad norm per logged step", "loss part kl per logged step"]


def test_judged_on_names_the_points_and_steps():
    run = run_of(loss=[1.0, 0.9, 0.8, 0.7])
    assert judged_on(run, run.series["loss"]) == "judged on the train loss per logged point, points 1-4 of 4 (steps 10-40)"
    assert judged_on(run, run.series["loss"], 1, 2, window="levels: medians of 3") == (
        "judged on the train loss per logged point, points 2-3 of 4 (steps 20-30); levels: medians of 3")


# -- rules/base.py's helpers


def test_times_writes_every_ratio_one_way():
    from trainproof_lsp.rules.base import times
    assert [times(x) for x in (1.2549, 999.994, 1000.0, 159968.74, -0.001, math.inf, math.nan)] == [
        "1.25x", "999.99x", "1,000x", "159,969x", "0.00x", "infx", "nanx"]


def test_need_says_what_is_missing_or_short():
    from trainproof_lsp.rules.base import need
    run = run_of(grad_norm=[1.0, math.nan, 2.0])
    assert need(run, "grad_norm", 2, "gradient norm").values == [1.0, 2.0]
    with pytest.raises(Skip, match=r"^2 finite gradient norm point\(s\); this check needs at least 3$"):
        need(run, "grad_norm", 3, "gradient norm")
    with pytest.raises(Skip, match=r"^no learning rate in the log$"):
        need(run, "lr", 1, "learning rate")


def test_all_zero_and_whole_series_hit():
    from trainproof_lsp.rules.base import all_zero, whole_series_hit
    run = run_of(lr=[0.0, 0.0, 0.0], loss=[0.0, 1.0, 0.0])
    assert (all_zero(run.series["lr"]), all_zero(run.series["loss"])) == (True, False)
    hit = whole_series_hit(run, run.series["lr"], "lr is 0 at all {points} points (steps {first_step}-{last_step})")
    assert (hit.message, dict(hit.evidence), hit.location.span.start_line) == (
        "lr is 0 at all 3 points (steps 10-30)", {"points": 3, "first_step": 10, "last_step": 30}, 0)


def test_a_rules_summary_and_limits():
    from trainproof_lsp.rules import BY_ID
    from trainproof_lsp.rules.chance import Limits
    rule = BY_ID["TP-AT-CHANCE"]
    assert rule.summary == "The loss stays at ln(C): the model predicts no better than a uniform guess."
    assert rule.applies_to == "metrics"
    assert rule.limits_dict(Limits())["min_points"] == 10 and rule.limits_dict(Limits) == {}


# -- what a first mutation run of rules/_stats.py left


def test_the_smallest_inputs_each_statistic_scores():
    # three points in order: S = 3, var = 3 x 2 x 11 / 18, z = (3 - 1) / sqrt(var)
    assert mann_kendall_z([1, 2, 3]) == pytest.approx(2 / math.sqrt(3 * 2 * 11 / 18))
    assert mad([1, 3]) == 1  # deviations 1, 1 from the median 2
    # four points 0,1,0,1: second differences -2, 2; their MAD is 2
    assert point_noise([0, 1, 0, 1]) == pytest.approx(1.4826 * 2 / math.sqrt(6))


def test_rolling_levels_of_a_series_shorter_than_its_window():
    assert rolling_levels([5, 1], 3, head=False) == [(1, 3.0)]
    # strided windows that miss the last point: the last level is the median of the whole series
    assert rolling_levels([9, 0, 1, 2, 3, 4, 5, 6, 7, 8], 20, max_windows=4)[-1] == (9, 4.5)


def test_rolling_levels_keep_to_1000_windows():
    assert len(rolling_levels(list(range(2000)), 3)) == 1001  # stride 2: 1000 windows and the last point


def test_bucket_strides_are_taken_within_each_bucket():
    # 128 squares in one bucket of at most 64 points: every other one, i = 0, 2, ..., 126
    assert bucket_medians([i * i for i in range(128)], 1) == [(62 ** 2 + 64 ** 2) / 2]
    # the second bucket of 50: stride 5 from i = 50 (50, 55, ..., 95), not a stride from the whole series
    assert bucket_medians([i * i for i in range(100)], 2, per_bucket=10)[1] == (70 ** 2 + 75 ** 2) / 2


def test_point_noise_keeps_to_4000_differences():
    # 8,002 points of 0,1,...: stride 2 takes every odd point, whose second differences are all -2
    assert point_noise([i % 2 for i in range(8002)]) == 0.0
    assert point_noise([i % 2 for i in range(8000)]) == pytest.approx(1.4826 * 2 / math.sqrt(6))  # stride 1


# -- what a first mutation run of rules/_views.py left


def test_expected_trend_z_of_three_points_and_of_no_fall():
    assert expected_trend_z(3, 1.0, 0.0) == pytest.approx(mann_kendall_z([3, 2, 1]) * -1)
    assert expected_trend_z(5, 0.0, 1.0) == 0.0  # pairs in order half the time: no trend expected


def test_too_short_names_the_eval_loss_when_it_is_the_longer_series():
    run = run_of(loss=[1.0] * 3 + [None] * 5, eval_loss=[2.0 + 0.3 * (-1) ** i for i in range(8)])
    assert too_short_reason(run, 10) == (
        "3 finite loss points and 8 finite eval loss points; at the eval loss's own noise (0.726) the trend test "
        "reaches z 2 on a fall at its pace, or of 2%, only from 10 points (the trend checks judge from 7 points when "
        "the noise allows, always from 10)")


def test_too_short_counts_one_eval_point_and_a_per_epoch_loss():
    assert too_short_reason(run_of(loss=[1.0] * 3, eval_loss=[2.0, None, None]), 10) == (
        "3 finite loss points and 1 finite eval loss point; the trend checks need at least 7, up to 10 as the loss's "
        "own noise requires")
    assert too_short_reason(run_of(loss_epoch=[1.0] * 3), 10).startswith("3 finite loss points; the trend checks")


def test_seven_points_are_judged_by_their_noise():
    assert too_short_reason(run_of(loss=[2.0 + 0.3 * (-1) ** i for i in range(7)]), 10).startswith(
        "7 finite loss points; at the loss's own noise (0) the trend test reaches z 2")
