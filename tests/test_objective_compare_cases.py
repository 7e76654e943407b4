"""rules/objective_compare.py, case by case: which series a run is compared on, how two
runs are aligned (every reason they cannot be, the common span, the windows, step order),
and TP-CMP-REWARD-BELOW's finding whole with each of its limits on both sides."""

from __future__ import annotations

import math

import pytest

from trainproof_lsp.core import objectives as ob
from trainproof_lsp.rules.base import Context, Skip
from trainproof_lsp.rules.compare import Uncomparable
from trainproof_lsp.rules.objective_compare import (BelowLimits, ObjectivePair, align_objective, check_below,
                                                     compared_series)

from rule_cases.metrics import run_of


def _ramp(n: int, start: float, end: float) -> list[float]:
    return [start + (end - start) * i / (n - 1) for i in range(n)]


def test_the_series_compared_is_the_reward_of_rl_and_the_margins_of_preference():
    assert compared_series(run_of(**{ob.REWARD: [0.1] * 4, ob.KL: [0.0] * 4})) == ob.REWARD
    assert compared_series(run_of(**{ob.REWARDS_MARGINS: [0.1] * 4})) == ob.REWARDS_MARGINS
    # a reward without any RL series beside it is not an RL run; a plain loss is neither
    assert compared_series(run_of(**{ob.REWARD: [0.1] * 4})) is None
    assert compared_series(run_of(loss=[1.0] * 4)) is None


@pytest.mark.parametrize("run,baseline,reason,side", [
    (run_of(loss=[1.0] * 8), run_of(reward=[1.0] * 8), "the run logs no reward", "run"),
    (run_of(reward=[1.0] * 8), run_of(loss=[1.0] * 8), "the baseline logs no reward", "baseline"),
    (run_of(reward=[math.nan] * 8), run_of(reward=[1.0] * 8), "the run logs no finite reward", "run"),
    (run_of(reward=[1.0] * 8), run_of(reward=[math.nan] * 8), "the baseline logs no finite reward", "baseline"),
    # the baseline covers steps 10-80, the run 60-130: 3 and 3 points in 60-80
    (run_of(reward=[1.0] * 8, first=60), run_of(reward=[1.0] * 8),
     "the run has 3 finite reward point(s) in the steps both logs cover (60-80); a comparison needs at least 6",
     "run"),
    # the baseline logs every 20 steps: 5 points in 10-90, the run 9
    (run_of(reward=[1.0] * 10), run_of(reward=[1.0] * 5, every=20),
     "the baseline has 5 finite reward point(s) in the steps both logs cover (10-90); a comparison needs at "
     "least 6", "baseline"),
])
def test_every_reason_two_runs_cannot_be_aligned(run, baseline, reason, side):
    with pytest.raises(Uncomparable) as e:
        align_objective(run, baseline, ob.REWARD, BelowLimits())
    assert (str(e.value), e.value.side) == (reason, side)


def test_six_points_each_in_the_common_span_are_enough():
    pair = align_objective(run_of(reward=[1.0] * 6), run_of(reward=[2.0] * 6), ob.REWARD, BelowLimits())
    assert (pair.lo, pair.hi, pair.window, pair.run_end, pair.base_end) == (10, 60, 3, 1.0, 2.0)


def test_alignment_keeps_the_common_span_in_step_order_with_windows_of_a_tenth():
    # run: steps 10..400 (40 points); baseline: steps 110..600 (50 points) -> common 110..400
    run = run_of(reward=_ramp(40, 0.0, 3.9))
    baseline = run_of(reward=_ramp(50, 1.0, 5.9), first=110)
    pair = align_objective(run, baseline, ob.REWARD, BelowLimits())
    assert (pair.lo, pair.hi) == (110, 400)
    assert (len(pair.run_series), len(pair.base_series)) == (30, 30)
    assert pair.window == 3  # ceil(0.1 x 30)
    assert pair.run_series.steps[0] == 110 and pair.base_series.steps[-1] == 400
    assert pair.run_series.records[0] == 10 and pair.base_series.records[-1] == 29
    assert (pair.run_start, pair.run_end) == pytest.approx((1.1, 3.8))
    assert (pair.base_start, pair.base_end) == pytest.approx((1.1, 3.8))
    assert pair.summary() == {"axis": "step", "compared_series": ob.REWARD, "common_from": 110, "common_to": 400,
                              "run_start_level": pair.run_start, "run_end_level": pair.run_end,
                              "baseline_start_level": pair.base_start, "baseline_end_level": pair.base_end,
                              "run_gain": pair.run_end - pair.run_start,
                              "baseline_gain": pair.base_end - pair.base_start}
    # 31 points each: the window grows to ceil(3.1) = 4
    assert align_objective(run_of(reward=[1.0] * 31), run_of(reward=[1.0] * 31), ob.REWARD,
                           BelowLimits()).window == 4


def test_a_log_whose_steps_go_back_is_aligned_in_step_order():
    run = run_of(reward=[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], steps=[10, 20, 30, 40, 80, 50, 60, 70])
    pair = align_objective(run, run_of(reward=[1.0] * 8), ob.REWARD, BelowLimits())
    assert list(pair.run_series.steps) == [10, 20, 30, 40, 50, 60, 70, 80]
    assert pair.run_end == 6.0  # median of the values at steps 60, 70, 80: 6, 7, 4


def _pair(run_end: float, *, base_start: float = 0.0, base_end: float = 1.0, run_noise: float = 0.0,
          base_noise: float = 0.0) -> ObjectivePair:
    run, baseline = run_of(reward=[0.0] * 10), run_of(reward=[float(i) for i in range(12)], first=5)
    return ObjectivePair(run=run, baseline=baseline, series=ob.REWARD, run_series=run.series[ob.REWARD],
                         base_series=baseline.series[ob.REWARD], lo=10, hi=100, window=3, run_start=0.0,
                         run_end=run_end, base_start=base_start, base_end=base_end, run_noise=run_noise,
                         base_noise=base_noise)


def _below(pair: ObjectivePair) -> list[tuple]:
    return [(h.message, dict(h.evidence), h.location.span.start_line,
             [(r.location.span.start_line, r.message) for r in h.related])
            for h in check_below(pair, BelowLimits(), Context())]


def test_a_run_short_of_its_baseline_is_reported_whole():
    assert _below(_pair(0.5, run_noise=0.03, base_noise=0.04)) == [(
        "reward ends at 0.5 against the baseline's 1 over steps 10-100 (medians of the last 3): 0.5 short, 50% of "
        "the baseline's gain 1 (limits: 25% of it, and 2 x the level noise 0.05)",
        {"series": ob.REWARD, "run_end_level": 0.5, "baseline_end_level": 1.0, "shortfall": 0.5,
         "baseline_gain": 1.0, "noise": pytest.approx(0.05)},
        9, [(11, "baseline reward 11 at step 115")])]


def test_a_quarter_of_the_gain_short_is_the_limit():
    assert _below(_pair(0.75)) == []
    ((message, evidence, _, _),) = _below(_pair(0.74))
    assert evidence["shortfall"] == pytest.approx(0.26)


def test_two_level_noises_are_the_limit():
    # shortfall 0.5; the combined noise hypot(0.15, 0.2) = 0.25, twice that is 0.5
    assert _below(_pair(0.5, run_noise=0.15, base_noise=0.2)) == []
    assert len(_below(_pair(0.5, run_noise=0.15, base_noise=0.19))) == 1


def test_a_baseline_that_did_not_rise_holds_the_run_to_nothing():
    flat = ("the baseline's reward did not rise over steps 10-100 (1 -> 1.2, level noise 0.1): nothing to hold "
            "the run to")
    with pytest.raises(Skip) as e:
        _below(_pair(0.0, base_start=1.0, base_end=1.2, base_noise=0.1))  # a gain of exactly 2 noises
    assert str(e.value) == flat
    assert len(_below(_pair(0.0, base_start=1.0, base_end=1.21, base_noise=0.1))) == 1
    with pytest.raises(Skip, match=r"did not rise over steps 10-100 \(1 -> 1, level noise 0\)"):
        _below(_pair(0.0, base_start=1.0, base_end=1.0))  # no gain at all, and no noise


def test_compare_objective_gives_the_checks_and_summary_whole_or_why_it_could_not():
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.core.model import Check
    from trainproof_lsp.judge.compare_objective import compare_objective

    rl = run_of(**{ob.REWARD: [0.1 * i for i in range(12)], ob.KL: [0.0] * 12})
    assert compare_objective(rl, run_of(loss=[1.0] * 12), Config()) == (
        [], [Check(group="TP-CMP-REWARD-BELOW", ran=False,
                   reason="cannot compare reward with baseline metrics.jsonl: the baseline logs no reward")],
        {"compared_series": "reward"})
    assert compare_objective(rl, run_of(**{ob.REWARD: [0.1 * i for i in range(12)], ob.KL: [0.0] * 12}),
                             Config()) == (
        [], [Check(group="TP-CMP-REWARD-BELOW", ran=True, reason="")],
        {"axis": "step", "compared_series": "reward", "common_from": 10, "common_to": 120,
         "run_start_level": pytest.approx(0.1), "run_end_level": pytest.approx(1.0),
         "baseline_start_level": pytest.approx(0.1), "baseline_end_level": pytest.approx(1.0),
         "run_gain": pytest.approx(0.9), "baseline_gain": pytest.approx(0.9)})
    assert compare_objective(run_of(loss=[1.0] * 12), rl, Config()) is None  # a loss run: its loss is compared
