"""rules/timing.py, case by case: TP-STEP-CLIFF's windows (size at each clamp, the late one
at the end) and its limit met exactly, TP-LOADER-BOUND's limit and skip reasons, and
TP-THROUGHPUT's wording with each source. Runs are built from value lists."""

from __future__ import annotations

import pytest

from trainproof_lsp.core.model import THROUGHPUT, Series
from trainproof_lsp.rules.base import Context, NoLimits, Skip
from trainproof_lsp.rules.timing import CliffLimits, LoaderLimits, check_cliff, check_loader, check_throughput

from rule_cases.metrics import run_of


def _cliff(values: list[float]) -> list[tuple]:
    run = run_of(step_time=values)
    return [(h.evidence["early_step_time"], h.evidence["late_step_time"], h.evidence["slow_from_step"],
             h.location.span.start_line) for h in check_cliff(run, CliffLimits(), Context())]


@pytest.mark.parametrize("values,hits", [
    # 6 points: windows of 2 (the lower clamp); the late median exactly 2x is not a cliff ...
    ([1, 1, 1, 3, 1, 3], []),
    # ... and past it is, from the first point above 2x (the point at exactly 2x is not slow)
    ([1, 1, 2, 3, 1, 3.2], [(1.0, 2.1, 40, 3)]),
    # 30 points: windows of 30 // 5 = 6; the late window's median is exactly 2x
    ([1] * 24 + [1, 1, 1, 3, 3, 3], []),
    # the late window is the last 6 points, not everything after the first 6
    ([1] * 24 + [3] * 6, [(1.0, 3.0, 250, 24)]),
    # 300 points: windows clamped to 50; the last 50 have a median of exactly 2x
    ([1] * 249 + [3] + [1] * 25 + [3] * 25, []),
])
def test_cliff_windows_and_limit(values, hits):
    assert _cliff([float(v) for v in values]) == hits


def test_cliff_skip_reasons():
    with pytest.raises(Skip, match=r"^5 finite step time point\(s\); this check needs at least 6$"):
        _cliff([1.0] * 5)
    with pytest.raises(Skip, match=r"^no step time in the log$"):
        list(check_cliff(run_of(loss=[1.0] * 8), CliffLimits(), Context()))
    with pytest.raises(Skip, match=r"^early step time is not positive$"):
        _cliff([0.0] * 6 + [1.0] * 6)


def _loader(step_time: list[float], data_time: list[float]) -> list[tuple]:
    run = run_of(step_time=step_time, data_time=data_time)
    return [(h.message, dict(h.evidence), h.location.span.start_line)
            for h in check_loader(run, LoaderLimits(), Context())]


def test_loader_limit_met_exactly_is_quiet_and_past_it_fires():
    assert _loader([1.0] * 3, [0.5] * 3) == []
    assert _loader([1.0] * 3, [0.5, 0.51, 0.6]) == [
        ("data loading takes 51% of the median step (limit 50%); worst at step 30",
         {"median_fraction": 0.51, "steps_compared": 3}, 2)]


def test_loader_skip_reasons():
    with pytest.raises(Skip, match=r"^no step time in the log$"):
        list(check_loader(run_of(data_time=[0.5] * 3), LoaderLimits(), Context()))
    with pytest.raises(Skip, match=r"^no data-loading time in the log$"):
        list(check_loader(run_of(step_time=[1.0] * 3), LoaderLimits(), Context()))
    with pytest.raises(Skip, match=r"^too few steps with both step time and data-loading time$"):
        _loader([1.0, 0.0, 0.0], [0.9] * 3)


def _throughput(run) -> list[tuple]:
    return [(h.message, dict(h.evidence), h.location.span.start_line)
            for h in check_throughput(run, NoLimits(), Context())]


def test_throughput_names_the_logs_unit_unless_it_only_says_throughput():
    run = run_of(throughput=[10.0, 12.0, 14.0], step_time=[1.0] * 3)
    assert _throughput(run) == [("throughput 12 (median of 3 point(s))",
                                 {"throughput": 12.0, "unit": "throughput", "points": 3}, 2)]
    run.series[THROUGHPUT] = Series(THROUGHPUT, "train_samples_per_second", [10, 20, 30], [10.0, 12.0, 14.0],
                                    [0, 1, 2])
    assert _throughput(run) == [("throughput 12 train_samples_per_second (median of 3 point(s))",
                                 {"throughput": 12.0, "unit": "train_samples_per_second", "points": 3}, 2)]


def test_throughput_from_step_times_is_steps_per_second_at_the_last_step():
    assert _throughput(run_of(step_time=[0.25, 0.5, 0.5, 0.5, 0.75])) == [
        ("2 steps/s (median step time 0.5 s over 5 steps)",
         {"steps_per_second": 2.0, "median_step_time": 0.5, "points": 5}, 4)]
    with pytest.raises(Skip, match=r"^no throughput or step-time values in the log$"):
        _throughput(run_of(step_time=[0.0] * 3))
