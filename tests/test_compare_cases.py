"""The comparison rules (rules/compare.py) and their alignment, proven piece by piece.

Runs are built in code from value lists (rule_cases.metrics.run_of); the run's log is
"run.jsonl" and the baseline's "base.jsonl", so every location says which side it points
at. Findings are asserted whole (message, evidence, line, related places and messages),
skips by their exact reason, and every limit on both sides: at the limit and just past it
(the limit set to the very number the rule computes, so `<=` and `<` cannot be confused).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Sequence

import pytest
from pytest import approx

from rule_cases.metrics import NAN, Values, run_of
from trainproof_lsp.core.model import (Artefact, Finding, Hit, Level, Location, Report, Run, RunMeta, Series, Span,
                                       Verdict)
from trainproof_lsp.rules.base import Context, NoLimits, Skip
from trainproof_lsp.rules.compare import (AlignLimits, DeficitLimits, EndLimits, EvalBestLimits, EvalEndLimits,
                                          FloorLimits, GradnormLimits, NegLimits, OverfitLimits, Pair, Uncomparable,
                                          Window, align, check_bad_baseline, check_deficit, check_end,
                                          check_eval_best, check_eval_end, check_floor, check_gradnorm, check_neg,
                                          check_overfit, in_step_order, interpolate, schedule_length)

CTX = Context()


def run(loss: Values | None = None, *, path: str = "run.jsonl", steps: Sequence[int] | None = None,
        max_steps: int | None = None, **cols: Values) -> Run:
    """A run of one record per row (row i: step 10 + 10 i, or steps[i]; line i)."""
    series = dict(cols)
    if loss is not None:
        series["loss"] = loss
    built = run_of(steps=steps, cols=series)
    return dataclasses.replace(built, path=path, meta=RunMeta(max_steps=max_steps))


def base(loss: Values | None = None, **kw: Any) -> Run:
    return run(loss, path="base.jsonl", **kw)


def pair(r: Run, b: Run, limits: AlignLimits = AlignLimits(), report: Report | None = None) -> Pair:
    return align(r, b, limits, baseline_report=report)


def line(loc: Location) -> tuple[str, int]:
    assert loc.span is not None
    return loc.path, loc.span.start_line


def whole(hits: Iterator[Hit]) -> list[tuple[str, dict[str, Any], tuple[str, int], list[tuple[tuple[str, int], str]]]]:
    """Every hit as (message, evidence, place, [(related place, related message)]), floats
    rounded to 9 places."""
    def r(v: Any) -> Any:
        return round(v, 9) if isinstance(v, float) else v
    return [(h.message, {k: r(v) for k, v in h.evidence.items()}, line(h.location),
             [(line(x.location), x.message) for x in h.related]) for h in hits]


def skip(check: Any, p: Pair, limits: Any) -> str:
    with pytest.raises(Skip) as e:
        list(check(p, limits, CTX))
    return str(e.value)


def falling(n: int, start: float = 4.0, step: float = 0.03) -> list[float]:
    return [round(start - step * i, 9) for i in range(n)]


# --- interpolate, schedule_length, in_step_order ------------------------------------------

def test_interpolate_reads_a_logged_point_and_lines_between_points_and_nothing_outside():
    xs, ys = [1.0, 5.0, 7.0], [10.0, 30.0, 20.0]
    assert interpolate(xs, ys, 1.0) == 10.0
    assert interpolate(xs, ys, 7.0) == 20.0  # the last point itself
    assert interpolate(xs, ys, 2.0) == 15.0  # a quarter of the way from 10 to 30
    assert interpolate(xs, ys, 6.5) == 22.5  # three quarters of the way from 30 to 20
    assert interpolate(xs, ys, 0.5) is None
    assert interpolate(xs, ys, 7.5) is None


def test_schedule_length_is_max_steps_unless_the_log_went_past_it():
    loss = [1.0] * 6
    assert schedule_length(run(loss, max_steps=1000)) == 1000.0  # logged up to step 60
    assert schedule_length(run(loss, max_steps=60)) == 60.0
    assert schedule_length(run(loss, max_steps=59)) == 60.0  # went past it: the last step
    assert schedule_length(run(loss)) == 60.0
    assert schedule_length(run(loss, max_steps=0)) == 60.0
    # the last step of any series, not only the loss
    assert schedule_length(run(loss + [None], eval_loss=[None] * 6 + [1.0])) == 70.0
    assert schedule_length(run([1.0], steps=[0])) == 1.0  # never a length of 0
    empty = Run(path="run.jsonl", format="metrics-jsonl", series={"loss": Series("loss", "loss", [], [], [])},
                record_spans=run([1.0]).record_spans)
    assert schedule_length(empty) == 1.0


def test_in_step_order_keeps_a_series_in_order_and_sorts_one_that_goes_back_stably():
    ordered = Series("loss", "train_loss", [10, 10, 20], [1.0, 2.0, 3.0], [0, 1, 2])
    assert in_step_order(ordered) is ordered  # equal steps are in order
    back = Series("loss", "train_loss", [30, 10, 20, 10], [3.0, 1.0, 2.0, 1.5], [0, 1, 2, 3])
    got = in_step_order(back)
    assert (got.name, got.source_name) == ("loss", "train_loss")
    assert (tuple(got.steps), tuple(got.values), tuple(got.records)) == ((10, 10, 20, 30), (1.0, 1.5, 2.0, 3.0),
                                                                         (1, 3, 2, 0))


# --- align: what cannot be compared -----------------------------------------------------------

def uncomparable(r: Run, b: Run, limits: AlignLimits = AlignLimits()) -> tuple[str, str]:
    with pytest.raises(Uncomparable) as e:
        align(r, b, limits)
    return str(e.value), e.value.side


def test_a_side_without_loss_is_uncomparable_and_named():
    g = {"grad_norm": [1.0] * 10}
    assert uncomparable(run(None, **g), base([1.0] * 10)) == ("the run logs no loss", "run")
    assert uncomparable(run([1.0] * 10), base(None, **g)) == ("the baseline logs no loss", "baseline")
    assert uncomparable(run(None, **g), base(None, **g)) == ("the run logs no loss", "run")


def test_each_side_needs_min_points_finite_losses_exactly():
    six, five = [2.0, 1.9, NAN, 1.8, 1.7, 1.6, 1.5], [2.0, 1.9, NAN, 1.8, 1.7, 1.6]
    assert uncomparable(run(five), base(six)) == (
        "the run has 5 finite loss point(s); a comparison needs at least 6", "run")
    assert uncomparable(run(six), base(five)) == (
        "the baseline has 5 finite loss point(s); a comparison needs at least 6", "baseline")
    assert uncomparable(run(five), base(five))[1] == "run"
    assert align(run(six), base(six), AlignLimits()).axis == "step"
    assert uncomparable(run(six), base(six), AlignLimits(min_points=7)) == (
        "the run has 6 finite loss point(s); a comparison needs at least 7", "run")


def test_logs_sharing_no_span_of_steps_nor_of_fractions_are_uncomparable():
    r = run([2.0] * 6, max_steps=1000)  # steps 10-60 of 1000: fractions 1%-6%
    b = base([2.0] * 6, steps=[100, 200, 300, 400, 500, 600])  # 17%-100%
    assert uncomparable(r, b) == (
        "the logs share too little: run loss at steps 10-60, baseline at 100-600; 6 points each must fall in a "
        "common span of steps or of schedule fractions", "run")


def test_the_step_axis_needs_min_points_of_each_side_in_the_common_steps_ends_included():
    r = run([2.0] * 10)  # steps 10-100
    six = align(r, base([2.0] * 10, steps=[50, 60, 70, 80, 90, 100, 110, 120, 130, 140]), AlignLimits())
    assert (six.axis, six.lo, six.hi, len(six.run.pos), len(six.base.pos)) == ("step", 50.0, 100.0, 6, 6)
    five = align(r, base([2.0] * 10, steps=[60, 70, 80, 90, 100, 110, 120, 130, 140, 150]), AlignLimits())
    # 5 common steps: the fraction axis (run 10%-100% of 100 steps, baseline 40%-100% of 150)
    assert (five.axis, five.lo, five.hi, len(five.run.pos), len(five.base.pos)) == ("fraction", 0.4, 1.0, 7, 10)
    assert five.run.pos[0] == 0.4 and five.base.pos[0] == 0.4


def test_the_step_axis_needs_min_points_on_both_sides_not_on_either():
    # Common steps 55-100: the baseline logs 10 points there, the run only 5.
    b = base([2.0] * 11, steps=[55, 60, 65, 70, 75, 80, 85, 90, 95, 100, 400])
    p = align(run([2.0] * 10), b, AlignLimits())
    assert (p.axis, p.lo, p.hi) == ("fraction", 55 / 400, 1.0)
    assert (len(p.run.pos), len(p.base.pos)) == (9, 11)


def test_a_common_span_of_one_step_is_no_span():
    # With min_points=1 the single common step 50 would hold a point of each: the span
    # must be wider than a point, so the fraction axis is used.
    r = run([2.0] * 5)  # steps 10-50
    b = base([2.0] * 5, steps=[50, 60, 70, 80, 90])
    p = align(r, b, AlignLimits(min_points=1, min_window_points=1))
    assert (p.axis, p.lo, p.hi) == ("fraction", 50 / 90, 1.0)
    assert p.run.pos == (0.6, 0.8, 1.0)


def test_a_non_positive_loss_in_the_common_span_is_uncomparable_and_the_first_is_named():
    good = falling(10)
    assert uncomparable(run(good[:4] + [-1.0, 0.0] + good[6:]), base(good)) == (
        "the run logs a loss of -1 in the common span: ratios of non-positive losses mean nothing", "run")
    assert uncomparable(run(good), base(good[:7] + [0.0] + good[8:])) == (
        "the baseline logs a loss of 0 in the common span: ratios of non-positive losses mean nothing", "baseline")
    assert uncomparable(run(good[:9] + [0.0]), base(good[:2] + [-2.0] + good[3:]))[1] == "run"
    # Before the common span (the baseline starts at step 30) a zero is not compared.
    p = align(run([0.0, 0.0] + good[2:]), base(good[2:], steps=list(range(30, 110, 10))), AlignLimits())
    assert (p.lo, p.hi, p.run.loss.values[0]) == (30.0, 100.0, good[2])


# --- align: windows, levels and ratios ----------------------------------------------------------

def test_windows_are_the_first_5_and_last_10_percent_of_the_span_widened_to_3_points():
    long = pair(run(falling(100)), base(falling(100)))  # span 10-1000: start to 59.5, end from 901
    assert (long.run_start, long.run_end) == (Window(lo=0, hi=5), Window(lo=90, hi=100))
    assert (long.base_start, long.base_end) == (Window(lo=0, hi=5), Window(lo=90, hi=100))
    short = pair(run(falling(20)), base(falling(20)))  # span 10-200: one point each, widened
    assert (short.run_start, short.run_end) == (Window(lo=0, hi=3), Window(lo=17, hi=20))
    assert (short.base_start, short.base_end) == (Window(lo=0, hi=3), Window(lo=17, hi=20))
    # Wider than the whole side: every point.
    six = pair(run(falling(6)), base(falling(6)), AlignLimits(min_window_points=8))
    assert (six.run_start, six.run_end, six.base_end) == (Window(lo=0, hi=6), Window(lo=0, hi=6), Window(lo=0, hi=6))
    # Each side's windows on its own points: the run logs twice as often as the baseline.
    mixed = pair(run(falling(100)), base(falling(50), steps=list(range(20, 1020, 20))))
    assert (mixed.lo, mixed.hi) == (20.0, 1000.0)
    assert (mixed.run_start, mixed.run_end) == (Window(lo=0, hi=5), Window(lo=89, hi=99))
    assert (mixed.base_start, mixed.base_end) == (Window(lo=0, hi=3), Window(lo=45, hi=50))


def test_start_and_end_ratios_are_medians_of_matched_ratios_and_levels_medians_of_windows():
    b = [2.0] * 100
    r = [2.0] * 100
    r[0:5] = [4.0, 8.0, 2.0, 6.0, 5.0]  # ratios 2, 4, 1, 3, 2.5: median 2.5
    r[90:100] = [1.0, 1.2, 1.4, 1.6, 1.8, 2.2, 2.4, 2.6, 2.8, 3.0]  # median ratio 1.0, median level 2.0
    b[0:5] = [2.0, 2.0, 2.0, 2.0, 4.0]  # baseline start level 2.0, last matched ratio 1.25
    p = pair(run(r), base(b))
    assert (p.run_start_level, p.base_start_level, p.run_end_level, p.base_end_level) == (5.0, 2.0, 2.0, 2.0)
    assert (p.start_ratio, p.end_ratio) == (2.0, 1.0)  # ratios 2, 4, 1, 3, 1.25
    assert p.base_improvement == 0.0
    assert p.run_improvement == 0.5


def test_without_a_baseline_point_at_the_runs_window_the_window_medians_stand_in():
    # The baseline logs nothing between step 5 and 200: the run's start window (10-50) has
    # no baseline point to be read against.
    r = run([2.0 + 0.01 * i for i in range(100)])
    b = base([1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3], steps=[5, 200, 300, 400, 500, 600, 700, 800, 900, 1000])
    p = pair(r, b)
    assert (p.run_start, p.base_start, p.base_end) == (Window(lo=0, hi=5), Window(lo=0, hi=3), Window(lo=6, hi=9))
    assert (p.run_start_level, p.base_start_level, p.run_end_level, p.base_end_level) == approx((2.02, 1.0, 2.945, 0.4))
    assert p.start_ratio == 2.02
    assert round(p.end_ratio, 9) == 8.538235294  # matched: the run at 910-1000 over the baseline's line 0.4 -> 0.3
    # Nor at its end window (the run's last points are 480, 490 and 1000; the baseline's 600-990).
    r2 = run([2.0 + 0.01 * i for i in range(51)], steps=list(range(10, 510, 10)) + [1000])
    b2 = base([1.5] + [1.0 - 0.01 * i for i in range(40)] + [0.2], steps=[5] + list(range(600, 1000, 10)) + [1010])
    p2 = pair(r2, b2)
    assert (p2.run_end, p2.base_end) == (Window(lo=48, hi=51), Window(lo=31, hi=40))
    assert (p2.run_start_level, p2.base_start_level, p2.run_end_level) == approx((2.02, 0.99, 2.49))
    assert round(p2.base_end_level, 9) == 0.65
    assert (round(p2.start_ratio, 9), round(p2.end_ratio, 9)) == (round(2.02 / 0.99, 9), round(2.49 / 0.65, 9))


def test_span_and_window_texts_on_each_axis():
    p = pair(run(falling(100)), base(falling(100)))
    assert p.span_text() == "steps 10-1000"
    assert p.span_text(20.4, 30.6) == "steps 20-31"
    assert p.window_text(p.run_start) == "steps 10-50"
    assert p.window_text(p.run_end) == "steps 910-1000"
    f = pair(run([2.0] * 10), base([2.0] * 10, steps=list(range(100, 1100, 100))))
    assert f.axis == "fraction"
    assert f.span_text() == "10%-100% of the schedule"
    assert f.window_text(f.run_start) == "10%-30% of the schedule"
    assert f.base_at(0.25) == 2.0 and f.base_at(0.05) is None


def test_base_at_interpolates_the_baselines_loss():
    p = pair(run(falling(10)), base([4.0, 3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]))
    assert (p.base_at(10), p.base_at(15), p.base_at(27.5), p.base_at(5), p.base_at(101)) == (4.0, 3.5, 2.25, None,
                                                                                               None)


# --- coverage: what the comparison did not see ---------------------------------------------------

def test_coverage_names_each_side_that_goes_on_past_the_span_and_where_its_loss_stopped_being_finite():
    nan_tail = pair(run(falling(100) + [NAN] * 10), base(falling(110, 4.0, 0.02)))
    assert nan_tail.coverage() == {
        "run_last_step": 1100, "baseline_last_step": 1100,
        "common_note": "compared over steps 10-1000 only: the run's loss goes on to step 1100 but is not finite "
                       "from step 1010 on; the baseline's loss goes on to step 1100"}
    some = run(falling(100) + [1.0, NAN, 1.0, NAN, 1.0])
    assert pair(some, base(falling(100))).coverage() == {
        "run_last_step": 1050, "baseline_last_step": 1000,
        "common_note": "compared over steps 10-1000 only: the run's loss goes on to step 1050 (2 of its 5 points "
                       "after the span are not finite)"}
    assert pair(run(falling(100)), base(falling(100) + [1.0, NAN, 1.0, NAN, 1.0])).coverage() == {
        "run_last_step": 1000, "baseline_last_step": 1050,
        "common_note": "compared over steps 10-1000 only: the baseline's loss goes on to step 1050 (2 of its 5 "
                       "points after the span are not finite)"}
    assert pair(run(falling(100)), base(falling(100))).coverage() == {
        "run_last_step": 1000, "baseline_last_step": 1000, "common_note": None}


def test_a_tail_of_up_to_5_percent_of_the_span_is_a_logging_offset():
    steps = list(range(0, 610, 10))  # span 0-600: 5% is 30 steps
    b = base(falling(61), steps=steps)
    at = pair(run(falling(62), steps=steps + [630]), b).coverage()
    assert at == {"run_last_step": 630, "baseline_last_step": 600, "common_note": None}
    past = pair(run(falling(62), steps=steps + [631]), b).coverage()
    assert past == {"run_last_step": 631, "baseline_last_step": 600,
                    "common_note": "compared over steps 0-600 only: the run's loss goes on to step 631"}
    # On the fraction axis, in fractions of the span: the run's schedule is 1000 steps.
    frac = pair(run([2.0] * 10, steps=[100, 200, 300, 400, 500, 600, 700, 800, 900, 1000], max_steps=1000),
                base([2.0] * 8, steps=[2, 3, 4, 5, 6, 7, 8, 9], max_steps=10))
    assert (frac.axis, frac.lo, frac.hi) == ("fraction", 0.2, 0.9)
    assert frac.coverage() == {"run_last_step": 1000, "baseline_last_step": 9,
                               "common_note": "compared over 20%-90% of the schedule only: the run's loss goes on to "
                                              "step 1000"}


def test_only_points_after_the_span_count_as_beyond_it():
    # A NaN logged at the span's last step (1000) is not after the span.
    r = run(falling(100) + [NAN, 1.0], steps=list(range(10, 1010, 10)) + [1000, 1100])
    assert pair(r, base(falling(100))).coverage() == {
        "run_last_step": 1100, "baseline_last_step": 1000,
        "common_note": "compared over steps 10-1000 only: the run's loss goes on to step 1100"}


# --- TP-FLOOR-RATIO ---------------------------------------------------------------------------------

FLOOR_RUN = [6.0 - 0.3 * i for i in range(10)] + [3.2, 3.0, 3.1, 3.0] + [3.5] * 16  # level 3.0 over rows 11-13
FLOOR_BASE = [3.0 - 2.0 * i / 25 for i in range(26)] + [1.0] * 4  # first reaches 1.0 at row 25


def test_floor_ratio_whole_finding_points_at_each_sides_lowest_point():
    p = pair(run(FLOOR_RUN), base(FLOOR_BASE))
    assert whole(check_floor(p, FloorLimits(), CTX)) == [(
        "loss floor 3 (around step 120) is 3.00x the baseline's floor 1 (around step 260) over steps 10-300; "
        "limit 2.0x",
        {"run_floor": 3.0, "baseline_floor": 1.0, "ratio": 3.0, "run_floor_step": 120, "baseline_floor_step": 260},
        ("run.jsonl", 11), [(("base.jsonl", 25), "baseline floor 1 around step 260")])]


def test_floor_ratio_limit_is_met_exactly_and_passed_just():
    p = pair(run(FLOOR_RUN), base(FLOOR_BASE))  # ratio 3.0 exactly
    assert whole(check_floor(p, FloorLimits(max_ratio=3.0), CTX)) == []
    assert [h[0][-11:] for h in whole(check_floor(p, FloorLimits(max_ratio=2.99), CTX))] == ["limit 2.99x"]


@pytest.mark.parametrize(("n", "level"), [(20, 1.1), (60, 1.2), (300, 1.65)])
def test_the_floor_window_is_a_tenth_of_the_points_clamped_to_3_and_20(n, level):
    # A V of distinct values whose bottom is 1.0 (falling 0.2 a point, rising 0.1): its
    # lowest level is the median of the window around the bottom, so it tells the window's
    # size (3 points: 1.1; 4: 1.15; 6: 1.2; 20: 1.65).
    v = [3.0] * n
    mid = n // 2
    for j in range(-9, 10):
        v[mid + j] = round(1.0 + (0.2 * -j if j < 0 else 0.1 * j), 9)
    p = pair(run(v), base([1.0] * n))
    (hit,) = whole(check_floor(p, FloorLimits(max_ratio=1.0), CTX))
    assert hit[1]["run_floor"] == approx(level) and hit[1]["run_floor_step"] == 10 + 10 * mid


# --- TP-END-RATIO -----------------------------------------------------------------------------------

def test_end_ratio_whole_finding_and_its_limit_on_both_sides():
    # The baseline logs every 20 steps on to 1200; the span ends at the run's last step, 1000.
    p = pair(run([3.0] * 100), base([1.0] * 60, steps=list(range(20, 1220, 20))))
    assert whole(check_end(p, EndLimits(), CTX)) == [(
        "loss over steps 910-1000 is 3.00x the baseline's at the same steps (median of matched ratios; levels 3 vs "
        "1); limit 2.0x",
        {"ratio": 3.0, "run_end_level": 3.0, "baseline_end_level": 1.0, "points": 10, "end_step": 1000},
        ("run.jsonl", 99), [(("base.jsonl", 49), "baseline loss level 1 at the end of the common span")])]
    assert whole(check_end(p, EndLimits(max_ratio=3.0), CTX)) == []
    assert len(whole(check_end(p, EndLimits(max_ratio=2.99), CTX))) == 1


# --- TP-NEG-IMPROVE ---------------------------------------------------------------------------------

def neg_pair() -> Pair:
    """The baseline flat at 2.0 from step 30; the run at 1.0 from step 10, at 1.5 over its last
    tenth: it went from 0.5x the baseline to 0.75x, a rise of 50%."""
    return pair(run([1.0] * 90 + [1.5] * 10), base([2.0] * 98, steps=list(range(30, 1010, 10))))


def test_neg_improve_whole_finding_relates_the_start_of_the_common_span():
    assert whole(check_neg(neg_pair(), NegLimits(), CTX)) == [(
        "loss rose 50.0% over steps 30-1000 while the baseline's fell 0.0% (2 -> 2); at matched steps its loss "
        "went from 0.50x the baseline's (steps 30-70) to 0.75x (steps 910-1000); limit: a rise of at most 2%",
        {"run_improvement": -0.5, "baseline_improvement": 0.0, "start_ratio": 0.5, "end_ratio": 0.75,
         "baseline_start_level": 2.0, "baseline_end_level": 2.0},
        ("run.jsonl", 99), [(("run.jsonl", 2), "start of the common span")])]


def test_neg_improve_tolerance_is_met_exactly_and_passed_just():
    assert whole(check_neg(neg_pair(), NegLimits(tolerance=0.5), CTX)) == []
    (hit,) = whole(check_neg(neg_pair(), NegLimits(tolerance=0.49), CTX))
    assert hit[0].endswith("limit: a rise of at most 49%")


def test_neg_improve_is_quiet_for_a_run_that_improved():
    p = pair(run([2.0] * 90 + [1.0] * 10), base([2.0] * 100))
    assert p.run_improvement == 0.5
    assert whole(check_neg(p, NegLimits(), CTX)) == []


# --- TP-IMPROVE-DEFICIT -----------------------------------------------------------------------------

def deficit_pair(run_end: float = 1.8) -> Pair:
    """The baseline falls 2.0 -> 1.0 (50%); the run 2.0 -> run_end over the same steps."""
    def steady(end: float) -> list[float]:
        return [2.0] * 10 + [2.0 + (end - 2.0) * (i + 1) / 81 for i in range(80)] + [end] * 10
    return pair(run(steady(run_end)), base(steady(1.0)))


def test_improve_deficit_whole_finding():
    assert whole(check_deficit(deficit_pair(), DeficitLimits(), CTX)) == [(
        "loss fell 10.0% over steps 10-1000 while the baseline's fell 50.0% (2 -> 1): 0.20x the baseline's "
        "improvement, limit 0.25x; at matched steps its loss went from 1.00x the baseline's (steps 10-50) to 1.80x "
        "(steps 910-1000)",
        {"run_improvement": 0.1, "baseline_improvement": 0.5, "start_ratio": 1.0, "end_ratio": 1.8,
         "baseline_start_level": 2.0, "baseline_end_level": 1.0, "fraction": 0.2},
        ("run.jsonl", 99), [(("run.jsonl", 0), "start of the common span")])]


def test_improve_deficit_limits_are_met_exactly_and_passed_just():
    p = deficit_pair()
    fraction = p.run_improvement / p.base_improvement
    assert whole(check_deficit(p, DeficitLimits(min_fraction=fraction), CTX)) == []
    assert len(whole(check_deficit(p, DeficitLimits(min_fraction=fraction + 1e-9), CTX))) == 1
    # The baseline's own improvement at the limit is judged; just under it, skipped.
    at = DeficitLimits(min_baseline_improvement=0.5)
    assert len(whole(check_deficit(p, at, CTX))) == 1
    assert skip(check_deficit, p, DeficitLimits(min_baseline_improvement=0.51)) == (
        "the baseline improved only 50.0% over steps 10-1000; a deficit needs a baseline that improved at least 51%")


def test_improve_deficit_skips_a_flat_baseline_and_is_quiet_for_a_run_that_kept_up():
    assert skip(check_deficit, neg_pair(), DeficitLimits()) == (
        "the baseline improved only 0.0% over steps 30-1000; a deficit needs a baseline that improved at least 5%")
    assert whole(check_deficit(deficit_pair(1.2), DeficitLimits(), CTX)) == []


# --- TP-GRADNORM-RATIO ------------------------------------------------------------------------------

def grad_pair(run_g: Values, base_g: Values, *, first: int = 10) -> Pair:
    """Flat losses; the baseline from step `first` on, so the span starts there."""
    n = len(base_g)
    return pair(run([2.0] * len(run_g), grad_norm=run_g),
                base([2.0] * n, grad_norm=base_g, steps=list(range(first, first + 10 * n, 10))))


def test_gradnorm_ratio_whole_finding_is_of_medians():
    p = grad_pair([8.0, 1.0, 9.0, 7.0, 30.0, 8.0, 8.5, 7.5, 100.0, 8.0],
                  [1.0, 0.5, 2.0, 1.0, 1.0, 1.0, 50.0, 1.5, 1.0, 0.9])
    assert whole(check_gradnorm(p, GradnormLimits(), CTX)) == [(
        "median gradient norm 8 over steps 10-100 is 8.00x the baseline's 1; limit 5.0x",
        {"run_median": 8.0, "baseline_median": 1.0, "ratio": 8.0}, ("run.jsonl", 9), [])]
    assert whole(check_gradnorm(p, GradnormLimits(max_ratio=8.0), CTX)) == []
    assert len(whole(check_gradnorm(p, GradnormLimits(max_ratio=7.99), CTX))) == 1


def test_gradnorm_counts_finite_norms_inside_the_span_on_each_side():
    # The baseline starts at step 30: the run's norms at 10 and 20 are outside the span.
    six = grad_pair([1.0, 1.0, 8.0, 8.0, NAN, 8.0, 8.0, 8.0, 8.0], [1.0] * 7, first=30)
    assert len(whole(check_gradnorm(six, GradnormLimits(), CTX))) == 1
    five = grad_pair([1.0, 1.0, 8.0, 8.0, NAN, 8.0, 8.0, 8.0, NAN], [1.0] * 7, first=30)
    assert skip(check_gradnorm, five, GradnormLimits()) == (
        "the run has 5 finite grad_norm point(s) in steps 30-90; this check needs at least 6")
    base5 = grad_pair([8.0] * 9, [1.0, 1.0, NAN, 1.0, 1.0, 1.0, None], first=30)
    assert skip(check_gradnorm, base5, GradnormLimits()) == (
        "the baseline has 5 finite grad_norm point(s) in steps 30-90; this check needs at least 6")
    assert len(whole(check_gradnorm(base5, GradnormLimits(min_points=5), CTX))) == 1


def test_gradnorm_skips_a_side_without_norms_and_a_baseline_whose_median_is_not_positive():
    flat = [2.0] * 8
    assert skip(check_gradnorm, pair(run(flat), base(flat, grad_norm=[1.0] * 8)), GradnormLimits()) == (
        "the run's log has no grad_norm series")
    assert skip(check_gradnorm, pair(run(flat, grad_norm=[1.0] * 8), base(flat)), GradnormLimits()) == (
        "the baseline's log has no grad_norm series")
    assert skip(check_gradnorm, grad_pair([1.0] * 8, [0.0] * 8), GradnormLimits()) == (
        "the baseline's median gradient norm is 0: a ratio is meaningless")
    assert skip(check_gradnorm, grad_pair([1.0] * 8, [-1.0] * 8), GradnormLimits()) == (
        "the baseline's median gradient norm is -1: a ratio is meaningless")


# --- the eval rules ---------------------------------------------------------------------------------

FLAT = [2.0] * 100
RUN_EVALS = [1.5, 1.3, 1.2, 1.2, 1.4, 1.6, 1.7, 1.8, 1.9, 2.0]  # best 1.2 first at step 300
BASE_EVALS = [1.4, 1.2, 1.0, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5]  # best 0.5 first at step 900


def every(values: Sequence[float | None], *, k: int = 10, off: int = 9, n: int = 100) -> list[float | None]:
    """An eval every k rows from row `off` (steps 100, 200, ... by default)."""
    out: list[float | None] = [None] * n
    for i, v in enumerate(values):
        out[off + k * i] = v
    return out


def eval_pair(run_evals: Sequence[float | None] = RUN_EVALS, base_evals: Sequence[float | None] = BASE_EVALS, *,
              base_loss: Values = FLAT, **kw: Any) -> Pair:
    return pair(run(FLAT, eval_loss=every(run_evals)), base(base_loss, eval_loss=every(base_evals, **kw)))


def test_eval_best_ratio_whole_finding_names_each_sides_first_best():
    assert whole(check_eval_best(eval_pair(), EvalBestLimits(), CTX)) == [(
        "best eval loss 1.2 (step 300) is 2.40x the baseline's best 0.5 (step 900) over steps 100-1000; limit 1.5x",
        {"run_best_eval": 1.2, "baseline_best_eval": 0.5, "ratio": 2.4, "run_best_step": 300,
         "baseline_best_step": 900},
        ("run.jsonl", 29), [(("base.jsonl", 89), "baseline best eval loss 0.5 at step 900")])]


def test_eval_best_ratio_limit_is_met_exactly_and_passed_just():
    p = eval_pair([2.0] * 10, [1.0] * 10)
    assert whole(check_eval_best(p, EvalBestLimits(max_ratio=2.0), CTX)) == []
    assert len(whole(check_eval_best(p, EvalBestLimits(max_ratio=1.99), CTX))) == 1


def test_eval_best_is_read_inside_the_span_both_eval_series_cover():
    # The baseline's evals stop at step 500, where the run's best (0.9 at 900) is not.
    p = eval_pair([1.5, 1.4, 1.3, 1.2, 1.1, 1.0, 1.0, 1.0, 0.9, 1.0], [1.0, 0.9, 0.8, 0.6, 0.5])
    (hit,) = whole(check_eval_best(p, EvalBestLimits(), CTX))
    assert hit[0] == ("best eval loss 1.1 (step 500) is 2.20x the baseline's best 0.5 (step 500) over steps 100-500; "
                      "limit 1.5x")
    assert hit[2] == ("run.jsonl", 49)


def test_eval_end_ratio_whole_finding_with_the_runs_own_best():
    assert whole(check_eval_end(eval_pair(), EvalEndLimits(), CTX)) == [(
        "last eval loss 2 (step 1000) is 4.00x the baseline's eval loss 0.5 at the same step; limit 1.5x (the run's "
        "own best was 1.2 at step 300)",
        {"run_last_eval": 2.0, "baseline_eval": 0.5, "ratio": 4.0, "step": 1000, "run_best_eval": 1.2,
         "run_best_step": 300},
        ("run.jsonl", 99), [(("base.jsonl", 99), "baseline eval loss 0.5 at step 1000")])]


def test_eval_end_reads_the_baseline_between_its_evals_and_relates_the_nearest():
    # Baseline evals at steps 50, 160, ..., 930: the run's last eval in the common span is
    # at 900, between the baseline's 820 (0.6) and 930 (0.5); 930 is the nearer.
    p = eval_pair(base_evals=BASE_EVALS[:9], off=4, k=11)
    assert whole(check_eval_end(p, EvalEndLimits(), CTX)) == [(
        "last eval loss 1.9 (step 900) is 3.60x the baseline's eval loss 0.5273 at the same step; limit 1.5x (the "
        "run's own best was 1.2 at step 300)",
        {"run_last_eval": 1.9, "baseline_eval": 0.527272727, "ratio": 3.603448276, "step": 900, "run_best_eval": 1.2,
         "run_best_step": 300},
        ("run.jsonl", 89), [(("base.jsonl", 92), "baseline eval loss 0.5 at step 930")])]


def test_eval_end_related_baseline_eval_on_a_tie_is_the_earlier():
    # Baseline evals at 50, 150, ..., 950: the run's last in the span, 900, lies 50 from
    # both 850 and 950.
    p = eval_pair(base_evals=BASE_EVALS, off=4, k=10)
    (hit,) = whole(check_eval_end(p, EvalEndLimits(), CTX))
    assert hit[3] == [(("base.jsonl", 84), "baseline eval loss 0.5 at step 850")]
    assert hit[1]["step"] == 900 and hit[1]["baseline_eval"] == approx(0.5)


def test_eval_end_ratio_limit_is_met_exactly_and_passed_just():
    p = eval_pair()
    assert whole(check_eval_end(p, EvalEndLimits(max_ratio=4.0), CTX)) == []
    assert len(whole(check_eval_end(p, EvalEndLimits(max_ratio=3.99), CTX))) == 1


@pytest.mark.parametrize("check", [check_eval_best, check_eval_end])
def test_eval_rules_skip_what_they_cannot_read(check):
    limits = EvalBestLimits() if check is check_eval_best else EvalEndLimits()
    assert skip(check, pair(run(FLAT), base(FLAT, eval_loss=every(BASE_EVALS))), limits) == "the run logs no eval loss"
    assert skip(check, pair(run(FLAT, eval_loss=every(RUN_EVALS)), base(FLAT)), limits) == (
        "the baseline logs no eval loss")
    assert skip(check, eval_pair([1.0, NAN]), limits) == (
        "the run has 1 finite eval loss point(s); this check needs at least 2")
    assert skip(check, eval_pair(base_evals=[1.0]), limits) == (
        "the baseline has 1 finite eval loss point(s); this check needs at least 2")
    assert skip(check, eval_pair([1.0, 0.0, 2.0]), limits) == "the run logs a non-positive eval loss: ratios mean nothing"
    assert skip(check, eval_pair(base_evals=[1.0, -0.5, 2.0]), limits) == (
        "the baseline logs a non-positive eval loss: ratios mean nothing")
    # Disjoint: run evals at 100-300, the baseline's at 500-700.
    assert skip(check, eval_pair([1.0, 1.0, 1.0], [None] * 4 + [1.0, 1.0, 1.0]), limits) == (
        "the two eval series share too little: run evals at steps 100-300, baseline at 500-700")
    # Overlapping at one eval only (300): fewer than 2 in the common span on each side.
    assert skip(check, eval_pair([1.0, 1.0, 1.0], [None, None, 1.0, 1.0]), limits) == (
        "the two eval series share too little: run evals at steps 100-300, baseline at 300-400")
    # Two each in the common span (300-400): judged.
    assert list(check(eval_pair([1.0, 1.0, 1.0, 1.0], [None, None, 1.0, 1.0, 1.0]), limits, CTX)) == []


def test_eval_rules_sort_evals_logged_out_of_order():
    steps = list(range(10, 1010, 10))
    steps[29], steps[39] = steps[39], steps[29]  # the evals at rows 29 and 39: steps 400 then 300
    r = run(FLAT, eval_loss=every([1.0, 1.0, 3.0, 1.0]), steps=steps)
    p = pair(r, base(FLAT, eval_loss=every([1.0, 1.0, 1.0, 1.0])))
    assert p.run.pos[28:31] == (290.0, 300.0, 310.0)  # the loss sorted too
    (hit,) = whole(check_eval_end(p, EvalEndLimits(), CTX))
    assert hit[1] == {"run_last_eval": 3.0, "baseline_eval": 1.0, "ratio": 3.0, "step": 400, "run_best_eval": 1.0,
                      "run_best_step": 100}
    assert hit[2] == ("run.jsonl", 29)


# --- TP-OVERFIT-VS-BASELINE -------------------------------------------------------------------------

def test_overfit_whole_finding_against_the_baselines_eval_loss():
    assert whole(check_overfit(eval_pair(), OverfitLimits(), CTX)) == [(
        "eval loss rose 1.67x from its best 1.2 (step 300) to 2 (step 1000) while the baseline's eval loss went "
        "0.50x over the same steps (1 -> 0.5): 3.33x the baseline's change; limit 1.2x",
        {"run_best_eval": 1.2, "run_best_step": 300, "run_last_eval": 2.0, "run_last_step": 1000,
         "run_rise": 1.666666667, "baseline_change": 0.5, "relative": 3.333333333, "baseline_reference": "eval_loss",
         "baseline_at_best": 1.0, "baseline_at_last": 0.5},
        ("run.jsonl", 99), [(("run.jsonl", 29), "best eval loss 1.2 at step 300"),
                            (("base.jsonl", 29), "baseline eval_loss 1 near step 300"),
                            (("base.jsonl", 99), "baseline eval_loss 0.5 near step 1000")])]


FALLING = [round(2.0 - 0.01 * i, 9) for i in range(100)]
LOSS_REFERENCE = [(
    "eval loss rose 1.67x from its best 1.2 (step 300) to 2 (step 1000) while the baseline's train loss level (it "
    "logs no eval loss at those steps) went 0.60x over the same steps (1.71 -> 1.03): 2.77x the baseline's change; "
    "limit 1.2x",
    {"run_best_eval": 1.2, "run_best_step": 300, "run_last_eval": 2.0, "run_last_step": 1000,
     "run_rise": 1.666666667, "baseline_change": 0.602339181, "relative": 2.766990291, "baseline_reference": "loss",
     "baseline_at_best": 1.71, "baseline_at_last": 1.03},
    ("run.jsonl", 99), [(("run.jsonl", 29), "best eval loss 1.2 at step 300"),
                        (("base.jsonl", 29), "baseline loss 1.71 near step 300"),
                        (("base.jsonl", 99), "baseline loss 1.03 near step 1000")])]


@pytest.mark.parametrize("base_evals", [
    None,  # no eval loss
    every([1.0]),  # one eval
    every([None] * 4 + [1.0] * 6),  # evals from step 500: none at the run's best (300)
    every([1.0] * 9),  # evals to step 900: none at the run's last (1000)
    every([1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),  # a zero eval loss
    every([NAN, NAN, 1.0]),  # one finite eval
], ids=["none", "one", "late", "early", "zero", "nan"])
def test_overfit_reads_the_baselines_train_loss_level_when_its_evals_cannot_be_read(base_evals):
    cols = {} if base_evals is None else {"eval_loss": base_evals}
    p = pair(run(FLAT, eval_loss=every(RUN_EVALS)), base(FALLING, **cols))
    assert whole(check_overfit(p, OverfitLimits(), CTX)) == LOSS_REFERENCE


def test_overfit_reads_the_baselines_evals_in_step_order():
    steps = list(range(10, 1010, 10))
    steps[9], steps[19] = steps[19], steps[9]  # evals at rows 9 and 19: steps 200 then 100
    p = pair(run(FLAT, eval_loss=every(RUN_EVALS)), base(FALLING, steps=steps, eval_loss=every(BASE_EVALS)))
    (hit,) = whole(check_overfit(p, OverfitLimits(), CTX))
    assert hit[1]["baseline_reference"] == "eval_loss"
    assert (hit[1]["baseline_at_best"], hit[1]["baseline_at_last"]) == (1.0, 0.5)


def test_overfit_widens_the_baselines_level_window_to_its_nearest_points():
    # The baseline logs its loss every 100 steps: a tenth of the span (900 steps) around 300
    # holds one point, so the three nearest are read (200, 300, 400: 1.9, 1.8, 1.0).
    b = base([2.0, 1.9, 1.8, 1.0, 1.0, 1.0, 1.0, 1.0, 1.3, 1.2], steps=list(range(100, 1100, 100)))
    p = pair(run(FLAT, eval_loss=every(RUN_EVALS)), b)
    assert whole(check_overfit(p, OverfitLimits(), CTX)) == [(
        "eval loss rose 1.67x from its best 1.2 (step 300) to 2 (step 1000) while the baseline's train loss level "
        "(it logs no eval loss at those steps) went 0.67x over the same steps (1.8 -> 1.2): 2.50x the baseline's "
        "change; limit 1.2x",
        {"run_best_eval": 1.2, "run_best_step": 300, "run_last_eval": 2.0, "run_last_step": 1000,
         "run_rise": 1.666666667, "baseline_change": 0.666666667, "relative": 2.5, "baseline_reference": "loss",
         "baseline_at_best": 1.8, "baseline_at_last": 1.2},
        ("run.jsonl", 99), [(("run.jsonl", 29), "best eval loss 1.2 at step 300"),
                            (("base.jsonl", 2), "baseline loss 1.8 near step 300"),
                            (("base.jsonl", 9), "baseline loss 1.2 near step 1000")])]


def overfit(run_evals: Sequence[float], limits: OverfitLimits) -> list[Any]:
    return whole(check_overfit(eval_pair(run_evals, [1.0] * len(run_evals)), limits, CTX))


def test_overfit_limits_are_met_exactly_and_passed_just():
    rising = [1.4, 1.2, 1.0, 1.1, 1.5, 1.5]  # a rise of 1.5x against a flat baseline
    assert len(overfit(rising, OverfitLimits())) == 1
    assert overfit(rising, OverfitLimits(max_ratio=1.5)) == []
    assert len(overfit(rising, OverfitLimits(max_ratio=1.49))) == 1
    assert overfit(rising, OverfitLimits(min_rise=0.5)) == []
    assert len(overfit(rising, OverfitLimits(min_rise=0.49))) == 1
    # Both of the last two evals must stay above best x (1 + min_rise): here the one before last is at it.
    second = [1.4, 1.2, 1.0, 1.1, 1.25, 1.5]
    assert overfit(second, OverfitLimits(min_rise=0.25)) == []
    assert len(overfit(second, OverfitLimits(min_rise=0.24))) == 1
    assert overfit([1.4, 1.2, 1.0, 1.1, 1.0, 1.5], OverfitLimits()) == []


def test_overfit_is_quiet_while_the_best_is_among_the_last_two_evals():
    # Even with a rise limit below 1 (every eval counts as risen): the best is the last.
    assert overfit([1.4, 1.2, 1.0, 1.1, 1.2, 0.95], OverfitLimits(min_rise=-0.5)) == []
    assert overfit([1.4, 1.2, 1.0, 1.1, 0.95, 1.2], OverfitLimits(min_rise=-0.5)) == []
    assert len(overfit([1.4, 1.2, 0.95, 1.1, 1.0, 1.2], OverfitLimits(min_rise=-0.5))) == 1


def test_overfit_needs_min_evals_inside_the_common_span_of_the_losses():
    # Run evals at steps 100-600; the baseline's loss starts at step 300 (4 evals in the
    # span) or 310 (3).
    def at(first: int) -> Pair:
        b = base([1.0] * 70, steps=list(range(first, first + 700, 10)))
        return pair(run(FLAT, eval_loss=every([1.4, 1.2, 1.0, 1.2, 1.5, 1.6])), b)
    assert len(whole(check_overfit(at(300), OverfitLimits(), CTX))) == 1
    assert skip(check_overfit, at(310), OverfitLimits()) == (
        "the run has 3 eval(s) in steps 310-1000; this check needs at least 4")
    assert skip(check_overfit, eval_pair([1.0, 1.2, 1.3]), OverfitLimits()) == (
        "the run has 3 finite eval loss point(s); this check needs at least 4")


# --- TP-BAD-BASELINE --------------------------------------------------------------------------------

def finding(rule_id: str, level: Level, at: int) -> Finding:
    return Finding(id=rule_id, level=level, message=f"{rule_id} at {at}", evidence={},
                   location=Location(path="base.jsonl", span=Span(start_line=at, start_char=0, end_line=at, end_char=1)))


def judged(verdict: Verdict, *findings: Finding) -> Report:
    return Report(artefact=Artefact(path="runs/base/metrics.jsonl", kind="metrics", format="metrics-jsonl"),
                  verdict=verdict, findings=findings, checks=())


def bad(report: Report | None) -> Pair:
    return pair(run(falling(10)), base(falling(10)), report=report)


def test_bad_baseline_whole_finding_lists_its_failing_rules_and_relates_the_first_three():
    report = judged(Verdict.FAIL, finding("TP-SPIKE", Level.WARN, 1), finding("TP-NAN", Level.FAIL, 7),
                    finding("TP-DIVERGE", Level.FAIL, 3), finding("TP-NAN", Level.FAIL, 9),
                    finding("TP-ZERO-LOSS", Level.FAIL, 5))
    assert whole(check_bad_baseline(bad(report), NoLimits(), CTX)) == [(
        "the baseline runs/base/metrics.jsonl fails its own checks (TP-DIVERGE, TP-NAN, TP-ZERO-LOSS): the "
        "comparison may be meaningless",
        {"baseline_fail_count": 4, "baseline_fail_ids": "TP-DIVERGE,TP-NAN,TP-ZERO-LOSS"},
        ("base.jsonl", 7), [(("base.jsonl", 7), "TP-NAN: TP-NAN at 7"), (("base.jsonl", 3), "TP-DIVERGE: TP-DIVERGE at 3"),
                            (("base.jsonl", 9), "TP-NAN: TP-NAN at 9")])]


def test_bad_baseline_is_quiet_for_a_baseline_that_only_warns_and_skipped_when_not_judged():
    assert whole(check_bad_baseline(bad(judged(Verdict.WARN, finding("TP-SPIKE", Level.WARN, 1))), NoLimits(),
                                    CTX)) == []
    assert whole(check_bad_baseline(bad(judged(Verdict.PASS)), NoLimits(), CTX)) == []
    assert skip(check_bad_baseline, bad(None), NoLimits()) == "the baseline was not judged on its own"


# --- the ranking table's numbers --------------------------------------------------------------------

def test_summary_holds_the_numbers_the_rules_judge():
    assert eval_pair().summary() == {
        "axis": "step", "common_from": 10, "common_to": 1000,
        "run_start_level": 2.0, "run_end_level": 2.0, "baseline_start_level": 2.0, "baseline_end_level": 2.0,
        "start_ratio": 1.0, "end_ratio": 1.0, "run_improvement": 0.0, "baseline_improvement": 0.0,
        "run_floor": 2.0, "baseline_floor": 2.0, "floor_ratio": 1.0, "eval_best_ratio": 2.4, "eval_end_ratio": 4.0,
        "run_last_step": 1000, "baseline_last_step": 1000, "common_note": None}


def test_summary_reads_floors_and_evals_of_each_side():
    p = pair(run(FLOOR_RUN), base(FLOOR_BASE))
    s = p.summary()
    assert (s["run_floor"], s["baseline_floor"], s["floor_ratio"]) == (3.0, 1.0, 3.0)
    assert (s["eval_best_ratio"], s["eval_end_ratio"]) == (None, None)
    # The baseline's evals stop at 900: the run's last eval read there is 1.9 against 0.5.
    e = eval_pair(base_evals=BASE_EVALS[:9]).summary()
    assert (e["eval_best_ratio"], e["eval_end_ratio"]) == approx((1.2 / 0.5, 1.9 / 0.5))
    assert pair(run(FLAT, eval_loss=every(RUN_EVALS)), base(FLAT)).summary()["eval_best_ratio"] is None


def test_summary_common_span_on_the_fraction_axis_keeps_its_fractions():
    f = pair(run([2.0] * 10, steps=[100, 200, 300, 400, 500, 600, 700, 800, 900, 1000], max_steps=1000),
             base([2.0] * 8, steps=[2, 3, 4, 5, 6, 7, 8, 9], max_steps=10)).summary()
    assert (f["axis"], f["common_from"], f["common_to"]) == ("fraction", 0.2, 0.9)
    assert type(f["common_from"]) is float
    s = pair(run(falling(100)), base(falling(100))).summary()
    assert type(s["common_from"]) is int and type(s["common_to"]) is int


# --- edges: the level window's ends, two baseline evals, one common eval step, a floor at the start ---

def test_the_baselines_level_window_holds_the_points_at_its_ends():
    # Span 0-1000: a tenth of it is 100 steps, 50 each side; around 300 the window is
    # steps 250-350 (11 points, median at 300: 1.7), around 1000 it is 950-1000 (6 points).
    steps = list(range(0, 1010, 10))
    b = base([round(2.0 - 0.01 * i, 9) for i in range(101)], steps=steps)
    p = pair(run([2.0] * 101, steps=steps, eval_loss=every(RUN_EVALS, off=10, n=101)), b)
    (hit,) = whole(check_overfit(p, OverfitLimits(), CTX))
    assert (hit[1]["baseline_at_best"], hit[1]["baseline_at_last"]) == (1.7, 1.025)
    assert hit[3][1:] == [(("base.jsonl", 30), "baseline loss 1.7 near step 300"),
                          (("base.jsonl", 100), "baseline loss 1.025 near step 1000")]


def test_two_baseline_evals_around_the_runs_best_and_last_are_enough_to_read_its_eval_loss():
    p = pair(run(FLAT, eval_loss=every(RUN_EVALS)), base(FALLING, eval_loss=every([None, 1.0] + [None] * 7 + [0.5])))
    (hit,) = whole(check_overfit(p, OverfitLimits(), CTX))
    assert hit[1]["baseline_reference"] == "eval_loss"
    assert (hit[1]["baseline_at_best"], hit[1]["baseline_at_last"]) == (0.9375, 0.5)  # 300: 1/8 of 200 -> 1000
    assert hit[3][1:] == [(("base.jsonl", 19), "baseline eval_loss 0.9375 near step 300"),
                          (("base.jsonl", 99), "baseline eval_loss 0.5 near step 1000")]


def test_two_evals_each_at_one_common_step_are_compared():
    # Both logs hold two evals, both at step 300 (a repeated step): a span of one step.
    steps = list(range(10, 1010, 10))
    steps[30] = 300
    evals: list[float | None] = [None] * 100
    p = pair(run(FLAT, steps=steps, eval_loss=evals[:29] + [2.0, 2.0] + evals[31:]),
             base(FLAT, steps=steps, eval_loss=evals[:29] + [1.0, 1.0] + evals[31:]))
    assert whole(check_eval_best(p, EvalBestLimits(), CTX)) == [(
        "best eval loss 2 (step 300) is 2.00x the baseline's best 1 (step 300) over steps 300-300; limit 1.5x",
        {"run_best_eval": 2.0, "baseline_best_eval": 1.0, "ratio": 2.0, "run_best_step": 300, "baseline_best_step": 300},
        ("run.jsonl", 29), [(("base.jsonl", 29), "baseline best eval loss 1 at step 300")])]


def test_a_floor_at_the_very_start_points_at_the_first_point():
    p = pair(run([3.0 + 0.1 * i for i in range(30)]), base([1.0] * 30))
    (hit,) = whole(check_floor(p, FloorLimits(), CTX))
    assert hit[1] == {"run_floor": 3.1, "baseline_floor": 1.0, "ratio": 3.1, "run_floor_step": 10,
                      "baseline_floor_step": 10}
    assert hit[2] == ("run.jsonl", 0)


def test_each_side_keeps_its_loss_series_names():
    p = pair(run(falling(10)), base(falling(10)))
    assert (p.run.loss.name, p.run.loss.source_name, p.base.loss.name, p.base.loss.source_name) == (
        "loss", "loss", "loss", "loss")
    assert p.run.run.path == "run.jsonl" and p.base.run.path == "base.jsonl"
    assert p.run.length == 100.0 and p.run.position(50, "fraction") == 0.5 and p.run.position(50, "step") == 50.0


def test_gradnorm_ratio_divides_by_a_baseline_median_other_than_one():
    p = grad_pair([12.0] * 8, [2.0] * 8)
    assert whole(check_gradnorm(p, GradnormLimits(), CTX)) == [(
        "median gradient norm 12 over steps 10-80 is 6.00x the baseline's 2; limit 5.0x",
        {"run_median": 12.0, "baseline_median": 2.0, "ratio": 6.0}, ("run.jsonl", 7), [])]


def test_each_eval_series_needs_two_evals_in_the_common_span_whatever_the_other_holds():
    # Common span 200-300: the run holds one eval there (300), the baseline three.
    run_one = eval_pair([1.0, None, 1.0], [None, 1.0, 1.0, 1.0], off=4, k=5)
    assert skip(check_eval_best, run_one, EvalBestLimits()) == (
        "the two eval series share too little: run evals at steps 100-300, baseline at 100-200")
    # Common span 150-300: the run holds two evals there (200, 300), the baseline one (150).
    base_one = eval_pair([1.0, 1.0, 1.0], [1.0, 1.0], off=14, k=25)
    assert skip(check_eval_best, base_one, EvalBestLimits()) == (
        "the two eval series share too little: run evals at steps 100-300, baseline at 150-400")


def test_the_last_eval_read_at_a_common_span_of_one_step():
    steps = list(range(10, 1010, 10))
    steps[30] = 300
    evals: list[float | None] = [None] * 100
    p = pair(run(FLAT, steps=steps, eval_loss=evals[:29] + [2.0, 3.0] + evals[31:]),
             base(FLAT, steps=steps, eval_loss=evals[:29] + [1.0, 1.0] + evals[31:]))
    (hit,) = whole(check_eval_end(p, EvalEndLimits(), CTX))
    assert hit[1] == {"run_last_eval": 3.0, "baseline_eval": 1.0, "ratio": 3.0, "step": 300, "run_best_eval": 2.0,
                      "run_best_step": 300}
    assert hit[2] == ("run.jsonl", 30)
    s = p.summary()
    assert (s["eval_best_ratio"], s["eval_end_ratio"]) == (2.0, 3.0)


def test_the_summary_reads_evals_from_two_in_the_common_span():
    s = eval_pair([1.0, 2.0], [1.0, 1.0]).summary()
    assert (s["eval_best_ratio"], s["eval_end_ratio"]) == (1.0, 2.0)
