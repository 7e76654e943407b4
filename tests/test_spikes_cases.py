"""TP-LOSS-SPIKE, TP-LOSS-SPIKE-UNRECOVERED and TP-GRAD-SPIKE with whole messages at the edges
tests/rule_cases/ does not reach (its straddles hold each limit): a jump at the last point and
one with fewer than 10 points after it (recovery unknown, at the level they reached), several
recovered spikes named together, a recovered and an unrecovered spike in one log each reported
by its own rule, a gradient norm without a scale, a run without a loss to tell a start-up by,
and the related places cut at five. Below those, each limit of spikes.py from both sides, sitting
exactly on it where a float can: 10x the median and the recent level, 100x for a lone norm, the
fourth norm, the start-up phase and its cap, the loss a single-step peak is judged on, 2x / 1.5x /
6 sigmas for a jump, 1.2x for a recovery, 8 residuals and the noise's sample, and the episode and
jump bookkeeping of spikes close together."""

from __future__ import annotations

import math

import pytest

from rule_cases.metrics import NAN, cycle3, healthy, hits_of, ones, run_of, skip_of, spike_at, with_at
from trainproof_lsp.core.model import Run
from trainproof_lsp.rules.spikes import GradLimits, LossLimits, check_grad_spike, check_loss_spike, check_loss_spike_unrecovered

JUDGED_50 = ("judged on the train loss per logged point, points 1-50 of 50 (steps 10-500); the level before a jump "
             "is the median of the 10 points before it, recovery within 10")
JUDGED_80 = JUDGED_50.replace("1-50 of 50 (steps 10-500)", "1-80 of 80 (steps 10-800)")


def test_a_jump_at_the_last_point_has_an_unknown_recovery():
    assert hits_of(check_loss_spike, spike_at(3.0, at=49), LossLimits()) == [(
        "loss jumps to 3 at step 500, 3.00x the level 1 before it (limit 2.0x); at the end of the log, recovery "
        f"unknown; {JUDGED_50}",
        {"step": 500, "value": 3.0, "level_before": 1.0, "ratio": 3.0, "level_after": 3.0, "spikes": 1,
         "points_after": 0}, 49, [])]
    assert hits_of(check_loss_spike_unrecovered, spike_at(3.0, at=49), LossLimits()) == []


def test_a_jump_four_points_from_the_end_names_where_they_are():
    ((message, evidence, line, _),) = hits_of(check_loss_spike, spike_at(3.0, at=45, up=2, after=1.5), LossLimits())
    assert message == ("loss jumps to 3 at step 460, 3.00x the level 1 before it (limit 2.0x); 4 point(s) after it "
                       f"before the log ends, at 1.5: recovery unknown; {JUDGED_50}")
    assert (evidence["level_after"], evidence["points_after"], line) == (1.5, 4, 45)


def test_several_recovered_spikes_are_one_finding_at_the_largest():
    values = ones(80)
    values[20], values[40], values[60] = 3.0, 3.5, 3.0
    ((message, evidence, line, related),) = hits_of(check_loss_spike, run_of(loss=values), LossLimits())
    assert message == ("loss jumps to 3.5 at step 410, 3.50x the level 1 before it (limit 2.0x); recovered; 3 such "
                       f"spikes; {JUDGED_80}")
    assert (evidence["spikes"], line) == (3, 40)
    assert related == [(20, "loss spike to 3 at step 210"), (60, "loss spike to 3 at step 610")]


def test_a_recovered_and_an_unrecovered_spike_are_each_their_own_rules():
    values = ones(80)
    values[20] = 3.0
    values[40:] = [4.0] + [1.5] * 39
    run = run_of(loss=values)
    ((recovered, r_evidence, _, _),) = hits_of(check_loss_spike, run, LossLimits())
    assert recovered.startswith("loss jumps to 3 at step 210, 3.00x the level 1 before it (limit 2.0x); recovered; judged")
    assert r_evidence["spikes"] == 1
    ((stayed, s_evidence, line, _),) = hits_of(check_loss_spike_unrecovered, run, LossLimits())
    assert stayed == ("loss jumps to 4 at step 410, 4.00x the level 1 before it (limit 2.0x); stays at 1.5 over the "
                      f"next 10 points; {JUDGED_80}")
    assert (s_evidence["level_after"], line) == (1.5, 40)


def test_a_zero_median_norm_has_no_scale():
    assert skip_of(check_grad_spike, run_of(grad_norm=[0.0] * 5 + [5.0] + [0.0] * 2), GradLimits()) == (
        "median gradient norm is 0: no scale to measure a spike against")


def test_norms_with_no_loss_beside_them_start_being_judged_at_once():
    norms = ones(60)
    norms[30] = norms[31] = 20.0
    ((message, evidence, line, related),) = hits_of(check_grad_spike, run_of(grad_norm=norms), GradLimits())
    assert message == ("gradient norm 20 at step 310 is 20.00x the median 1; 2 point(s) above the limit 10.0x after the "
                       "start-up phase (to step 10); judged on the grad norm per logged step, points 1-60 of 60 (steps "
                       "10-600); each norm also against the median of the 10 before it")
    assert (evidence["startup_end_step"], evidence["quiet_peaks"], line, related) == (
        10, 0, 30, [(31, "gradient norm 20 at step 320")])


def test_eight_spikes_that_moved_the_loss_are_named_at_the_largest_with_five_others():
    norms, loss = ones(60), healthy(60)
    for at in range(20, 60, 5):
        norms[at] = 300.0
        loss[at] += 0.5
    norms[45] = 400.0
    ((message, evidence, line, related),) = hits_of(check_grad_spike, run_of(loss=loss, grad_norm=norms), GradLimits())
    assert message.startswith("gradient norm 400 at step 460 is 400.00x the median 1; 8 point(s) above the limit "
                              "10.0x after the start-up phase (to step 70); judged on")
    assert (evidence["spikes"], line) == (8, 45)
    assert related == [(at, f"gradient norm 300 at step {at * 10 + 10}") for at in (20, 25, 30, 35, 40)]


def test_a_norm_at_half_the_run_cannot_be_ten_times_its_median():
    assert hits_of(check_grad_spike, run_of(grad_norm=[1.0] * 3 + [50.0] * 5), GradLimits()) == []


# --- Each limit of spikes.py from both sides, at the exact boundary where a float can sit on it.

def loss_judged(n: int) -> str:
    return (f"judged on the train loss per logged point, points 1-{n} of {n} (steps 10-{10 * n}); the level "
            "before a jump is the median of the 10 points before it, recovery within 10")


def grad_judged(n: int, first: int = 10, last: int | None = None) -> str:
    return (f"judged on the grad norm per logged step, points 1-{n} of {n} (steps {first}-{last or 10 * n}); each "
            "norm also against the median of the 10 before it")


def grad_evidence(top: float, med: float, step: int, spikes: int, startup: int, quiet: int = 0) -> dict[str, float]:
    return {"max_grad_norm": top, "median": med, "ratio": top / med, "step": step, "spikes": spikes,
            "startup_end_step": startup, "quiet_peaks": quiet}


@pytest.mark.parametrize(("run", "reason"), [
    (run_of(loss=healthy(10)), "no gradient norm in the log"),
    (run_of(grad_norm=ones(5) + [NAN]), "5 finite gradient norm point(s); this check needs at least 6"),
    (run_of(grad_norm=[0.0] * 8), "median gradient norm is 0: no scale to measure a spike against"),
])
def test_norms_too_few_or_without_a_scale_are_not_checked_with_the_reason(run, reason):
    assert skip_of(check_grad_spike, run, GradLimits()) == reason


@pytest.mark.parametrize(("tens", "hits"), [
    # 6 of 12 norms reach top/10: the median (5.5) is not, so the two 100s are judged
    (4, [("gradient norm 100 at step 70 is 18.18x the median 5.5; 2 point(s) above the limit 10.0x after the "
          f"start-up phase (to step 10); {grad_judged(12)}",
          grad_evidence(100.0, 5.5, 70, 2, 10), 6, [(7, "gradient norm 100 at step 80")])]),
    # 7 of 12 reach it: the median does too, so nothing can be 10x it
    (5, []),
])
def test_norms_reaching_a_tenth_of_the_top_at_exactly_half_the_run_are_still_judged(tens, hits):
    norms = ones(10 - tens) + [100.0, 100.0] + ones(tens, 10.0)
    assert hits_of(check_grad_spike, run_of(grad_norm=norms), GradLimits()) == hits


def test_a_run_with_a_median_norm_below_one_is_measured_in_multiples_of_it():
    norms = ones(40, 0.5)
    norms[20] = norms[21] = 10.0
    assert hits_of(check_grad_spike, run_of(loss=ones(40), grad_norm=norms), GradLimits()) == [(
        "gradient norm 10 at step 210 is 20.00x the median 0.5; 2 point(s) above the limit 10.0x after the start-up "
        f"phase (to step 10); {grad_judged(40)}",
        grad_evidence(10.0, 0.5, 210, 2, 10), 20, [(21, "gradient norm 10 at step 220")])]


@pytest.mark.parametrize(("value", "spikes"), [(10.0, 2), (10.5, 4)])
def test_a_norm_exactly_ten_times_the_run_median_is_not_a_spike(value, spikes):
    # after a stretch at half the median, so the recent level alone would let it through
    norms = ones(40)
    norms[15:25] = ones(10, 0.5)
    norms[25] = norms[26] = value
    norms[32] = norms[33] = 20.0
    ((message, evidence, line, _),) = hits_of(check_grad_spike, run_of(grad_norm=norms), GradLimits())
    assert message == (f"gradient norm 20 at step 330 is 20.00x the median 1; {spikes} point(s) above the limit 10.0x "
                       f"after the start-up phase (to step 10); {grad_judged(40)}")
    assert (evidence, line) == (grad_evidence(20.0, 1.0, 330, spikes, 10), 32)


@pytest.mark.parametrize(("value", "hits"), [
    (20.0, []),
    (20.5, [("gradient norm 20.5 at step 260 is 20.50x the median 1; 2 point(s) above the limit 10.0x after the "
             f"start-up phase (to step 10); {grad_judged(40)}",
             grad_evidence(20.5, 1.0, 260, 2, 10), 25, [(26, "gradient norm 20.5 at step 270")])]),
])
def test_a_norm_exactly_ten_times_its_recent_level_is_not_a_spike(value, hits):
    norms = ones(40)
    norms[15:25] = ones(10, 2.0)
    norms[25] = norms[26] = value
    assert hits_of(check_grad_spike, run_of(grad_norm=norms), GradLimits()) == hits


@pytest.mark.parametrize(("at", "hits"), [
    ((2, 3), []),  # the third norm is never judged: only the fourth is, so one lone 20x spike
    ((3, 4), [("gradient norm 20 at step 40 is 20.00x the median 1; 2 point(s) above the limit 10.0x after the "
               f"start-up phase (to step 10); {grad_judged(20)}",
               grad_evidence(20.0, 1.0, 40, 2, 10), 3, [(4, "gradient norm 20 at step 50")])]),
])
def test_norms_are_judged_from_the_fourth_one(at, hits):
    assert hits_of(check_grad_spike, run_of(grad_norm=with_at(ones(20), {i: 20.0 for i in at})), GradLimits()) == hits


def test_the_recent_level_of_an_early_norm_counts_the_first_norm():
    # before the fourth norm: 1, 1, 3 (median 1, so 15 is a spike), not 1, 3 (median 2)
    norms = with_at(ones(20), {2: 3.0, 3: 15.0, 15: 15.0})
    assert hits_of(check_grad_spike, run_of(grad_norm=norms), GradLimits()) == [(
        "gradient norm 15 at step 40 is 15.00x the median 1; 2 point(s) above the limit 10.0x after the start-up "
        f"phase (to step 10); {grad_judged(20)}",
        grad_evidence(15.0, 1.0, 40, 2, 10), 3, [(15, "gradient norm 15 at step 160")])]


@pytest.mark.parametrize(("value", "hits"), [
    (99.0, []),
    (100.0, [("gradient norm 100 at step 260 is 100.00x the median 1; 1 point(s) above the limit 10.0x after the "
              f"start-up phase (to step 10); {grad_judged(40)}", grad_evidence(100.0, 1.0, 260, 1, 10), 25, [])]),
])
def test_a_lone_norm_counts_from_exactly_a_hundred_times_the_median(value, hits):
    assert hits_of(check_grad_spike, run_of(grad_norm=with_at(ones(40), {25: value})), GradLimits()) == hits


LONE_500_AT_260 = ("gradient norm 500 at step 260 is 500.00x the median 1; {n} point(s) above the limit 10.0x "
                   f"after the start-up phase (to step 10); {grad_judged(40)}")


@pytest.mark.parametrize(("beside", "value", "spikes"), [
    (24, 10.0, 0), (26, 10.0, 0),  # a neighbour exactly at the limit: still a single-step peak
    (24, 10.5, 2), (26, 10.5, 2),
])
def test_a_peak_is_single_step_while_its_neighbours_are_at_most_the_limit(beside, value, spikes):
    # over a flat loss (no point noise: it does not move at all), a single-step peak is left out
    norms = with_at(ones(40), {25: 500.0, beside: value})
    hits = hits_of(check_grad_spike, run_of(loss=ones(40), grad_norm=norms), GradLimits())
    assert hits == ([] if not spikes else [(
        LONE_500_AT_260.format(n=spikes), grad_evidence(500.0, 1.0, 260, spikes, 10), 25,
        [(beside, f"gradient norm 10.5 at step {beside * 10 + 10}")])])


PAIR_30_AT_210 = ("gradient norm 30 at step 210 is 30.00x the median 1; 2 point(s) above the limit 10.0x after the "
                  "start-up phase (to step 10); {left}" + grad_judged(40))


@pytest.mark.parametrize(("peaks", "loss_at", "hits"), [
    # a peak at the last norm: the loss from its step to the end of the log did not move
    ({20: 30.0, 21: 30.0, 39: 500.0}, {},
     [(PAIR_30_AT_210.format(left="1 single-step peak(s) the loss did not notice left out; "),
       grad_evidence(30.0, 1.0, 210, 2, 10, quiet=1), 20, [(21, "gradient norm 30 at step 220")])]),
    # a pair at the last two norms is no single-step peak
    ({38: 30.0, 39: 30.0}, {},
     [(PAIR_30_AT_210.format(left="").replace("210", "390"), grad_evidence(30.0, 1.0, 390, 2, 10), 38,
       [(39, "gradient norm 30 at step 400")])]),
    # a peak at the last norm but one is judged up to the last norm's step, where the loss then moves
    ({20: 30.0, 21: 30.0, 38: 500.0}, {39: 2.0},
     [(PAIR_30_AT_210.format(left="1 single-step peak(s) the loss did not notice left out; "),
       grad_evidence(30.0, 1.0, 210, 2, 10, quiet=1), 20, [(21, "gradient norm 30 at step 220")])]),
])
def test_single_step_peaks_at_the_end_of_the_log(peaks, loss_at, hits):
    run = run_of(loss=with_at(ones(40), loss_at), grad_norm=with_at(ones(40), peaks))
    assert hits_of(check_grad_spike, run, GradLimits()) == hits


def peak_with_loss_logged_at(loss_every: int, grad_every: int, moved_at: int | None) -> Run:
    """Losses of 1.0 and norms of 1.0 on 60 rows (steps 10-600), logged every `loss_every` and
    `grad_every` rows; a pair of norms of 30 at row 10 and the next norm, a peak of 500 at row
    31 (norms on every row) or 30, and the loss 1.0 higher at row `moved_at`."""
    loss = [1.0 if i % loss_every == 0 else None for i in range(60)]
    if moved_at is not None:
        loss[moved_at] = 2.0
    norms = [1.0 if i % grad_every == 0 else None for i in range(60)]
    peak = 31 if grad_every == 1 else 30
    norms[10] = norms[10 + grad_every] = 30.0
    norms[peak] = 500.0
    return run_of(loss=loss, grad_norm=norms)


def pair_and_peak(judged: str, peak_counted: bool, peak_line: int, peak_step: int, related: list[tuple[int, str]],
                  startup: int = 10):
    """The finding on a pair of norms of 30 (the first at line 10, step 110) and a peak of 500:
    at the peak when it counts, else at the pair with the peak left out."""
    if peak_counted:
        return [(f"gradient norm 500 at step {peak_step} is 500.00x the median 1; 3 point(s) above the limit 10.0x "
                 f"after the start-up phase (to step {startup}); {judged}",
                 grad_evidence(500.0, 1.0, peak_step, 3, startup), peak_line, related)]
    return [("gradient norm 30 at step 110 is 30.00x the median 1; 2 point(s) above the limit 10.0x after the start-up "
             f"phase (to step {startup}); 1 single-step peak(s) the loss did not notice left out; {judged}",
             grad_evidence(30.0, 1.0, 110, 2, startup, quiet=1), 10, related[1:])]


PAIR_AT_10_11 = [(10, "gradient norm 30 at step 110"), (11, "gradient norm 30 at step 120")]


@pytest.mark.parametrize(("moved_at", "counted"), [
    (30, True),   # at the peak's own step
    (31, True),   # between the peak and the next norm
    (32, False),  # at the next norm's step: that loss belongs to the next norm
    (40, False),  # later in the log
])
def test_a_peak_is_judged_on_the_loss_logged_from_its_step_to_the_next_norm(moved_at, counted):
    run = peak_with_loss_logged_at(1, 2, moved_at)
    related = [(10, "gradient norm 30 at step 110"), (12, "gradient norm 30 at step 130")]
    assert hits_of(check_grad_spike, run, GradLimits()) == pair_and_peak(
        grad_judged(30, last=590), counted, 30, 310, related)


@pytest.mark.parametrize(("moved_at", "counted"), [
    (None, False),
    (32, True),   # the first loss logged after the peak (none is logged before the next norm)
    (34, False),  # only the first one counts
])
def test_a_peak_with_no_loss_before_the_next_norm_is_judged_on_the_first_loss_after_it(moved_at, counted):
    run = peak_with_loss_logged_at(2, 1, moved_at)
    assert hits_of(check_grad_spike, run, GradLimits()) == pair_and_peak(
        grad_judged(60), counted, 31, 320, PAIR_AT_10_11)


def pair_at_410(startup: int, n: int = 100) -> str:
    return ("gradient norm 30 at step 410 is 30.00x the median 1; 2 point(s) above the limit 10.0x after the start-up "
            f"phase (to step {startup}); {grad_judged(n)}")


@pytest.mark.parametrize(("loss", "startup"), [
    ([3.0, 1.0], 10),                              # two losses tell no start-up: the first norm
    ([3.0, None, None, None, 1.0, None, None, None, 1.0], 50),  # three do: levels 3, 2, 1 (half the fall at the second)
    ([3.0] + ones(99), 20),                        # levels (medians of 3) 3, 2, 1
    ([3.0, 3.0] + ones(98), 40),                   # levels 3, 3, 3, 1: the third loss is not yet half the fall
    (ones(100), 10),                               # no fall: the phase ends at the first norm, not before
])
def test_the_start_up_phase_ends_where_the_loss_level_made_half_its_fall(loss, startup):
    run = run_of(loss=loss, grad_norm=with_at(ones(100), {40: 30.0, 41: 30.0}))
    assert hits_of(check_grad_spike, run, GradLimits()) == [(
        pair_at_410(startup), grad_evidence(30.0, 1.0, 410, 2, startup), 40, [(41, "gradient norm 30 at step 420")])]


@pytest.mark.parametrize(("max_startup", "hits"), [
    # the loss makes half its fall only after the last norm: a phase capped at all the norms leaves none
    (1.0, []),
    (0.5, [("gradient norm 1000 at step 200 is 1,000x the median 1; 1 point(s) above the limit 10.0x after the "
            f"start-up phase (to step 110); {grad_judged(20)}", grad_evidence(1000.0, 1.0, 200, 1, 110), 19, [])]),
])
def test_the_start_up_phase_is_capped_at_a_fraction_of_the_norms(max_startup, hits):
    run = run_of(loss=[3.0] * 19 + [5.0] + [3.0] * 5 + ones(5), grad_norm=ones(19) + [1000.0])
    assert hits_of(check_grad_spike, run, GradLimits(max_startup=max_startup)) == hits


@pytest.mark.parametrize(("losses_before", "counted"), [(2, True), (3, False)])
def test_a_peak_needs_three_losses_before_it_to_tell_the_loss_did_not_move(losses_before, counted):
    loss = [None] * (25 - losses_before) + ones(15 + losses_before)
    run = run_of(loss=loss, grad_norm=with_at(ones(40), {10: 30.0, 11: 30.0, 25: 500.0}))
    assert hits_of(check_grad_spike, run, GradLimits()) == pair_and_peak(
        grad_judged(40), counted, 25, 260, PAIR_AT_10_11, startup=50)


@pytest.mark.parametrize(("last_before", "moved_at", "counted"), [
    (2.0, None, False),
    (1.5, None, True),  # the level before is the last loss when lower: 2.0 at the peak is 0.5 above it
    (2.0, 25, True),    # at the peak's own step
])
def test_the_level_before_a_peak_is_the_last_loss_when_lower(last_before, moved_at, counted):
    loss = with_at(ones(40, 2.0), {24: last_before} | ({moved_at: 3.0} if moved_at else {}))
    run = run_of(loss=loss, grad_norm=with_at(ones(40), {10: 30.0, 11: 30.0, 25: 500.0}))
    assert hits_of(check_grad_spike, run, GradLimits()) == pair_and_peak(
        grad_judged(40), counted, 25, 260, PAIR_AT_10_11)


@pytest.mark.parametrize(("moved_at", "counted"), [(25, True), (27, False)])
def test_a_peak_whose_next_norm_repeats_its_step_is_judged_on_the_loss_at_its_step(moved_at, counted):
    steps = [10 * (i + 1) for i in range(26)] + [10 * i for i in range(26, 40)]  # rows 25 and 26: step 260
    run = run_of(steps=steps, loss=with_at(ones(40), {moved_at: 2.0}),
                 grad_norm=with_at(ones(40), {10: 30.0, 11: 30.0, 25: 500.0}))
    assert hits_of(check_grad_spike, run, GradLimits()) == pair_and_peak(
        grad_judged(40, last=390), counted, 25, 260, PAIR_AT_10_11)


# --- Loss spikes


def test_a_loss_of_three_points_is_not_checked_with_the_count():
    assert skip_of(check_loss_spike, run_of(loss=[1.0, 1.0, 3.0]), LossLimits()) == (
        "3 finite loss point(s); this check needs at least 4")


def loss_hit(value: float, at: int, before: float, state: str, n: int, *, after: float | None = None,
             spikes: int = 1, points_after: int = 10, related: list[tuple[int, str]] | None = None):
    ratio = value / before
    return (f"loss jumps to {value:.4g} at step {10 * at + 10}, {ratio:.2f}x the level {before:.4g} before it (limit "
            f"2.0x); {state}" + (f"; {spikes} such spikes" if spikes > 1 else "") + f"; {loss_judged(n)}",
            {"step": 10 * at + 10, "value": value, "level_before": before, "ratio": ratio,
             "level_after": before if after is None else after, "spikes": spikes, "points_after": points_after},
            at, related or [])


@pytest.mark.parametrize(("loss", "hits"), [
    # four points: the jump at the last one has no noise to be measured against
    ([1.0, 1.0, 1.0, 3.0], [loss_hit(3.0, 3, 1.0, "at the end of the log, recovery unknown", 4, after=3.0,
                                     points_after=0)]),
    # five: two residuals, still no noise scale
    ([1.0, 1.0, 1.0, 0.5, 3.0], [loss_hit(3.0, 4, 1.0, "at the end of the log, recovery unknown", 5, after=3.0,
                                          points_after=0)]),
    # six: three residuals (-0.69, 1.1, 0) make a noise of 1.03, and ln 3 is within 6 of it
    ([1.0, 1.0, 1.0, 0.5, 3.0, 1.0], []),
])
def test_the_noise_of_a_short_log_needs_three_residuals(loss, hits):
    assert hits_of(check_loss_spike, run_of(loss=loss), LossLimits()) == hits


def flat_then_noisy(at: int, n: int = 52, lead_zeros: int = 0) -> list[float]:
    """A flat 1.0 up to a jump to 3.0 at `at`, then noise of robust sigma 0.44 (ln 3 is 2.5 of
    it); the first `lead_zeros` points 0.0 (no level)."""
    values = [0.0] * lead_zeros + ones(at - lead_zeros) + [3.0]
    return values + cycle3(n - at - 1, 0.3)


@pytest.mark.parametrize(("at", "lead_zeros", "fires"), [
    (10, 0, False),  # 7 residuals before the jump: it is judged against the noise of the whole run
    (11, 0, True),   # 8: against the flat run before it
    (12, 2, True),   # the first two losses are 0: residuals start at the fifth point, 8 of them
    (11, 2, False),  # ...7 of them
])
def test_a_jump_is_judged_against_the_noise_before_it_from_eight_residuals(at, lead_zeros, fires):
    hits = hits_of(check_loss_spike, run_of(loss=flat_then_noisy(at, lead_zeros=lead_zeros)), LossLimits())
    assert hits == ([loss_hit(3.0, at, 1.0, "recovered", 52)] if fires else [])


def test_the_noise_of_a_long_log_is_sampled_in_blocks_of_consecutive_points():
    from trainproof_lsp.rules.spikes import _sample

    assert list(_sample(3, 2003)) == list(range(3, 2003))  # 2000 points: every one
    assert list(_sample(3, 1999)) == list(range(3, 1999))  # fewer: every one too
    longer = list(_sample(3, 2004))  # 100 blocks of 20, 20.01 points apart
    assert len(longer) == 2000 and longer[:22] == [*range(3, 23), 23, 24] and longer[-20:] == list(range(1983, 2003))
    spread = list(_sample(3, 4003))  # 40 points apart
    assert spread[18:22] == [21, 22, 43, 44] and spread[-20:] == list(range(3963, 3983))


def test_a_loss_that_alternates_every_step_is_not_a_spike_at_its_own_alternation():
    # 5000 points taking turns between 1 and 2 (two data sources), and one point of 3.3:
    # 2.2x the level 1.5 and 1.65x the window's highest, but 1.5 sigmas of the alternation
    # itself. An even stride of 2 sees one phase only (a noise of 0) and calls it a spike.
    values = [1.0 + (i % 2) for i in range(5000)]
    values[3001] = 3.3
    run = run_of(loss=values)
    assert hits_of(check_loss_spike, run, LossLimits()) == []
    assert hits_of(check_loss_spike_unrecovered, run, LossLimits()) == []


def test_losses_at_or_below_zero_are_left_out_of_the_noise():
    loss = ones(60)
    loss[20:26] = [0.0] * 6  # a level of 0 before the 1.0 after them, and points of 0 after a level of 1
    loss[45] = 3.0
    assert hits_of(check_loss_spike, run_of(loss=loss), LossLimits()) == [loss_hit(3.0, 45, 1.0, "recovered", 60)]


def test_a_jump_exactly_at_the_noise_limit_is_not_a_spike():
    from trainproof_lsp.rules.spikes import _noise_sigma, _residuals

    values = cycle3(50)
    values[30] = 3.0
    sigma = _noise_sigma(_residuals(values, LossLimits()), 30)
    at_limit = math.log(3.0) / sigma
    assert at_limit * sigma == math.log(3.0)  # on the limit, not a rounding beside it
    run = run_of(loss=values)
    assert hits_of(check_loss_spike, run, LossLimits(noise_sigmas=at_limit)) == []
    assert hits_of(check_loss_spike, run, LossLimits(noise_sigmas=math.nextafter(at_limit, 0.0))) == [
        loss_hit(3.0, 30, 1.0, "recovered", 50)]


@pytest.mark.parametrize(("value", "window_high", "fires"), [
    (2.0, None, False), (2.25, None, True),  # spike_ratio: exactly 2x the level is not a spike
    (3.0, 2.0, False), (3.25, 2.0, True),    # above_max: exactly 1.5x the window's highest is not either
])
def test_a_jump_exactly_at_a_ratio_limit_is_not_a_spike(value, window_high, fires):
    base = with_at(ones(50), {27: window_high}) if window_high else None
    hits = hits_of(check_loss_spike, spike_at(value, base=base), LossLimits())
    assert hits == ([loss_hit(value, 30, 1.0, "recovered", 50)] if fires else [])


@pytest.mark.parametrize(("after", "rule", "state"), [
    (1.2, check_loss_spike, "recovered"),
    (1.25, check_loss_spike_unrecovered, "stays at 1.25 over the next 10 points"),
])
def test_a_level_exactly_one_point_two_times_the_old_one_is_a_recovery(after, rule, state):
    assert hits_of(rule, spike_at(3.0, after=after), LossLimits()) == [loss_hit(3.0, 30, 1.0, state, 50, after=after)]
    other = check_loss_spike_unrecovered if rule is check_loss_spike else check_loss_spike
    assert hits_of(other, spike_at(3.0, after=after), LossLimits()) == []


@pytest.mark.parametrize(("back", "recovered"), [(2, True), (1, False)])
def test_two_of_three_points_back_at_the_level_are_a_recovery(back, recovered):
    loss = ones(30) + [3.0] + ones(back) + ones(19 - back, 2.0)
    spike = hits_of(check_loss_spike, run_of(loss=loss), LossLimits())
    stayed = hits_of(check_loss_spike_unrecovered, run_of(loss=loss), LossLimits())
    if recovered:
        assert (spike, stayed) == ([loss_hit(3.0, 30, 1.0, "recovered", 50, after=2.0)], [])
    else:
        assert (spike, stayed) == ([], [loss_hit(3.0, 30, 1.0, "stays at 2 over the next 10 points", 50, after=2.0)])


@pytest.mark.parametrize(("episode", "spikes"), [
    ([1.2, 5.0], (30, 32, 45)),       # back at exactly 1.2x the level: the episode ends, the 5.0 is a spike
    ([1.25, 5.0], (30, 45)),          # still above it: the 5.0 belongs to the first spike
    ([1.0, 5.0], (30, 32, 45)),       # a spike right after the episode
    ([2.0, 1.0, 5.0], (30, 33, 45)),  # ...after a two-point episode
])
def test_a_spike_episode_ends_where_the_loss_is_back_within_one_point_two_times_its_level(episode, spikes):
    loss = ones(50)
    loss[30:30 + 1 + len(episode)] = [3.0] + episode
    loss[45] = 6.0
    assert hits_of(check_loss_spike, run_of(loss=loss), LossLimits()) == [loss_hit(
        6.0, 45, 1.0, "recovered", 50, spikes=len(spikes), points_after=4,  # 4 points left, back at once
        related=[(i, f"loss spike to {loss[i]:.4g} at step {10 * i + 10}") for i in spikes[:-1]])]


def test_a_jump_within_the_noise_does_not_hide_a_spike_right_after_it():
    loss = cycle3(50, 0.3)  # robust sigma 0.44: ln 3 is 2.5 of it, ln 40 8.3
    loss[20:22] = [3.0, 40.0]
    assert hits_of(check_loss_spike, run_of(loss=loss), LossLimits()) == [
        loss_hit(40.0, 21, 1.0, "recovered", 50)]


def test_a_rise_in_two_steps_is_a_spike_at_the_second():
    loss = with_at(ones(50), {30: 1.6, 31: 3.0})  # 1.6 is below 2x; 3.0 is 1.875x the 1.6 before it
    assert hits_of(check_loss_spike, run_of(loss=loss), LossLimits()) == [loss_hit(3.0, 31, 1.0, "recovered", 50)]


def test_a_jump_before_the_fourth_point_does_not_stop_the_scan():
    loss = with_at(ones(50), {1: 2.0, 30: 3.0})
    assert hits_of(check_loss_spike, run_of(loss=loss), LossLimits()) == [loss_hit(3.0, 30, 1.0, "recovered", 50)]


def test_a_loss_below_one_is_measured_in_multiples_of_its_level():
    loss = ones(50, 0.25)
    loss[30:33] = [4.0, 1.0, 8.0]  # the 8.0 is inside the first spike's episode (1.0 is 4x the level)
    assert hits_of(check_loss_spike, run_of(loss=loss), LossLimits()) == [
        loss_hit(4.0, 30, 0.25, "recovered", 50, after=0.25)]


def test_the_finding_is_at_the_largest_jump_over_its_level_before():
    loss = ones(80)
    loss[20] = 3.0                    # 3x its level
    loss[40:60] = ones(20, 2.0)
    loss[60] = 5.0                    # higher, but 2.5x its level of 2 (and back to 1 after)
    assert hits_of(check_loss_spike, run_of(loss=loss), LossLimits()) == [
        loss_hit(3.0, 20, 1.0, "recovered", 80, spikes=2, related=[(60, "loss spike to 5 at step 610")])]


def test_the_related_spikes_are_cut_at_five():
    loss = with_at(ones(90), {at: 3.0 for at in range(10, 70, 11)} | {76: 4.0})  # 11 apart: one per window
    assert hits_of(check_loss_spike, run_of(loss=loss), LossLimits()) == [loss_hit(
        4.0, 76, 1.0, "recovered", 90, spikes=7,
        related=[(at, f"loss spike to 3 at step {at * 10 + 10}") for at in (10, 21, 32, 43, 54)])]


def test_one_run_judged_with_other_limits_is_scanned_again():
    run = spike_at(3.0)
    assert hits_of(check_loss_spike, run, LossLimits()) == [loss_hit(3.0, 30, 1.0, "recovered", 50)]
    assert hits_of(check_loss_spike, run, LossLimits(spike_ratio=4.0)) == []
