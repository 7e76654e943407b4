"""TP-LOSS-SPIKE, TP-LOSS-SPIKE-UNRECOVERED and TP-GRAD-SPIKE with whole messages at the edges
tests/rule_cases/ does not reach (its straddles hold each limit): a jump at the last point and
one with fewer than 10 points after it (recovery unknown, at the level they reached), several
recovered spikes named together, a recovered and an unrecovered spike in one log each reported
by its own rule, a gradient norm without a scale, a run without a loss to tell a start-up by,
and the related places cut at five."""

from __future__ import annotations

from rule_cases.metrics import healthy, hits_of, ones, run_of, skip_of, spike_at
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
