"""Every metric rule, judged through `judge_file` on small JSONL logs written to tmp_path.

Each rule has a case that fires (exact ID, level, 0-based line of the cited log line,
related lines and evidence numbers) and one that must not. Lines are found in the file
text (`line_of`), never taken from the reader, so the positions are checked for real.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path
from typing import Any, Sequence

import pytest

from conftest import (falling, ids, judge, judge_rows, line_with, none_of, only, ran, skip_reason,
                      start_line)
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, Verdict
from trainproof_lsp.rules import metric_rules

NAN = math.nan
INF = math.inf


def rows_of(losses: Sequence[float | None] | None = None, *, first: int = 10, every: int = 10,
            n: int | None = None, **columns: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per logged step: {"step": first + every*i, "loss": ..., <column>: ...}.

    A None value leaves the key out of that row."""
    n = n if n is not None else len(losses) if losses is not None else len(next(iter(columns.values())))
    rows = []
    for i in range(n):
        row: dict[str, Any] = {"step": first + every * i}
        if losses is not None and losses[i] is not None:
            row["loss"] = losses[i]
        for key, values in columns.items():
            if values[i] is not None:
                row[key] = values[i]
        rows.append(row)
    return rows


def line_of(path: Path, row: dict[str, Any]) -> int:
    """0-based line of the file that holds exactly this row."""
    return line_with(path, json.dumps(row))


def step_row(rows: list[dict[str, Any]], step: int, key: str = "loss") -> dict[str, Any]:
    (row,) = [r for r in rows if r["step"] == step and key in r]
    return row


# Every metric rule with a check has a firing and a non-firing case in this module.
COVERED = {
    "TP-NAN", "TP-NAN-GRAD", "TP-GRAD-OVERFLOW", "TP-ZERO-LOSS", "TP-ZERO-LOSS-ONSET",
    "TP-ZERO-GRAD", "TP-FLAT", "TP-DEAD-RUN", "TP-DIVERGE", "TP-LOSS-SPIKE",
    "TP-LOSS-SPIKE-UNRECOVERED", "TP-GRAD-SPIKE", "TP-LOSS-ABOVE-UNIFORM", "TP-ZERO-LR",
    "TP-ZERO-LR-PARTIAL", "TP-OVERFIT", "TP-STEP-ORDER", "TP-STEP-CLIFF", "TP-LOADER-BOUND",
    "TP-THROUGHPUT", "TP-NAN-EVAL",
    "TP-AT-CHANCE",  # its firing and quiet cases: tests/test_verdicts_real_shapes.py
    # Their firing and quiet cases: tests/test_verdict_classes.py
    "TP-NEGATIVE-LOSS", "TP-LOSS-COLLAPSE", "TP-EVAL-ACC-AT-CHANCE",
    # Their firing and quiet cases and each side of each limit: tests/test_stdout_logs.py
    "TP-LOSS-SCALE-COLLAPSE", "TP-LOSS-SCALE-MIN",
    # Their firing and quiet cases (logs the real TRL DPO and GRPO trainers wrote) and each
    # side of their limits: tests/test_preference_rl.py
    "TP-REWARD-NONFINITE", "TP-PREF-AT-LN2", "TP-PREF-MARGINS-FLAT", "TP-PREF-ACC-AT-CHANCE", "TP-PREF-DISPLACEMENT",
    "TP-RL-NO-SIGNAL", "TP-RL-SATURATED", "TP-RL-REWARD-CONSTANT", "TP-RL-KL-BLOWUP", "TP-RL-CLIPPED",
    "TP-RL-ENTROPY-COLLAPSE", "TP-RL-LENGTH-HACKING",
    # Its firing and quiet cases and each side of each limit: tests/rule_cases/metrics.py;
    # on logs Lightning's CSVLogger and transformers' TrainerState wrote: tests/test_loss_parts.py
    "TP-LOSS-PART-STALLED",
}


def test_every_metric_rule_in_the_registry_has_cases_here():
    assert {r.id for r in metric_rules()} == COVERED


def test_healthy_run_passes_with_every_check_accounted_for(tmp_path, healthy_rows):
    _, report = judge_rows(tmp_path, healthy_rows)
    assert report.verdict is Verdict.PASS
    assert report.findings == ()
    assert {c.group for c in report.checks} == COVERED
    assert all(c.reason for c in report.checks if not c.ran)


# --- non-finite values ------------------------------------------------------------------

def test_nan_loss_points_at_the_first_nan_line_and_counts_the_rest(tmp_path):
    losses: list[float] = falling(30)
    losses[3] = NAN  # step 40
    losses[20] = NAN  # step 210
    rows = rows_of(losses)
    # Blank lines before and among the records: the finding's line is a file line, not
    # a record index.
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n" + "".join(json.dumps(r) + "\n" for r in rows[:10]) + "\n\n"
                    + "".join(json.dumps(r) + "\n" for r in rows[10:]), encoding="utf-8")
    report = judge(path)
    f = only(report, "TP-NAN")
    assert f.level is Level.FAIL
    assert report.verdict is Verdict.FAIL
    assert start_line(f) == line_of(path, rows[3]) == 4
    assert f.evidence == {"first_step": 40, "count": 2, "points": 30}
    assert "step 40" in f.message and "2 of 30" in f.message


def test_nan_eval_loss_fails_whatever_the_train_loss_does(tmp_path, healthy_rows):
    rows = [dict(r) for r in healthy_rows]
    for i, value in ((4, 2.1), (9, 1.9), (14, NAN), (19, INF), (24, NAN)):  # steps 50..250
        rows[i]["eval_loss"] = value
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-NAN-EVAL")
    assert f.level is Level.FAIL and report.verdict is Verdict.FAIL
    assert start_line(f) == line_of(path, rows[14]) == 14
    assert f.evidence == {"first_step": 150, "count": 3, "points": 5}
    assert f.message == ("eval loss (eval_loss) is nan at step 150; 3 of 5 logged eval losses are not "
                         "finite (limit 0)")
    none_of(report, "TP-NAN")  # the train loss is healthy


def test_finite_eval_loss_does_not_fire_nan_eval(tmp_path, healthy_rows):
    rows = [dict(r, eval_loss=2.0 - 0.01 * i) if i % 5 == 4 else r for i, r in enumerate(healthy_rows)]
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-NAN-EVAL")
    none_of(report, "TP-NAN-EVAL")
    assert report.verdict is Verdict.PASS


def test_finite_loss_does_not_fire_nan(tmp_path, healthy_rows):
    _, report = judge_rows(tmp_path, healthy_rows)
    assert ran(report, "TP-NAN")
    none_of(report, "TP-NAN")


def test_nan_grad_streak_fires_at_its_first_step(tmp_path):
    grads: list[float] = [1.0] * 20
    grads[8:11] = [NAN, NAN, NAN]  # steps 90-110
    rows = rows_of(falling(20), grad_norm=grads)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-NAN-GRAD")
    assert f.level is Level.FAIL
    assert start_line(f) == line_of(path, step_row(rows, 90))
    assert f.evidence == {"first_step": 90, "streak": 3, "at_end": False}
    # A streak is not an isolated overflow.
    none_of(report, "TP-GRAD-OVERFLOW")


def test_nan_grad_at_the_last_step_fires_even_alone(tmp_path):
    grads: list[float] = [1.0] * 12
    grads[-1] = NAN
    rows = rows_of(falling(12), grad_norm=grads)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-NAN-GRAD")
    assert start_line(f) == line_of(path, rows[-1])
    assert f.evidence == {"first_step": 120, "streak": 1, "at_end": True}
    none_of(report, "TP-GRAD-OVERFLOW")


def test_short_nan_grad_streak_is_an_overflow_not_a_broken_run(tmp_path):
    grads: list[float] = [1.0] * 20
    grads[8:10] = [NAN, NAN]
    rows = rows_of(falling(20), grad_norm=grads)
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-NAN-GRAD")
    none_of(report, "TP-NAN-GRAD")
    assert only(report, "TP-GRAD-OVERFLOW").evidence["first_step"] == 90
    # ...until the limit says two in a row is already a streak.
    _, strict = judge_rows(tmp_path, rows, Config(limits={"TP-NAN-GRAD": {"max_streak": 2}}))
    assert only(strict, "TP-NAN-GRAD").evidence == {"first_step": 90, "streak": 2, "at_end": False}
    assert only(strict, "TP-NAN-GRAD").limits == {"max_streak": 2}


def test_isolated_grad_overflows_are_info_with_related_lines(tmp_path):
    # Skipped fp16 steps are the loss scaler doing its job: said, but the run PASSes.
    grads: list[float] = [1.0] * 20
    grads[4] = INF  # step 50
    grads[12] = INF  # step 130
    rows = rows_of(falling(20), grad_norm=grads)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-GRAD-OVERFLOW")
    assert f.level is Level.INFO
    assert report.verdict is Verdict.PASS
    assert start_line(f) == line_of(path, step_row(rows, 50))
    assert f.evidence == {"count": 2, "first_step": 50, "points": 20}
    assert len(f.related) == 1
    assert start_line(f.related[0]) == line_of(path, step_row(rows, 130))
    assert f.related[0].message == "overflow at step 130"
    none_of(report, "TP-NAN-GRAD")


def test_finite_grad_norms_do_not_fire_overflow(tmp_path, healthy_rows):
    _, report = judge_rows(tmp_path, healthy_rows)
    assert ran(report, "TP-GRAD-OVERFLOW") and ran(report, "TP-NAN-GRAD")
    none_of(report, "TP-GRAD-OVERFLOW")
    none_of(report, "TP-NAN-GRAD")


# --- exact zeros ----------------------------------------------------------------------

def test_all_zero_loss_fails_at_the_first_point(tmp_path):
    rows = rows_of([0.0] * 5)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-ZERO-LOSS")
    assert f.level is Level.FAIL
    assert start_line(f) == line_of(path, rows[0]) == 0
    assert f.evidence == {"points": 5, "first_step": 10, "last_step": 50}
    # The rules that would say the same thing stand down and say why.
    assert "TP-ZERO-LOSS" in skip_reason(report, "TP-FLAT")
    assert "TP-ZERO-LOSS" in skip_reason(report, "TP-ZERO-LOSS-ONSET")


def test_a_loss_with_one_nonzero_value_is_not_all_zero(tmp_path):
    _, report = judge_rows(tmp_path, rows_of([0.0, 0.0, 0.0, 0.1, 0.0]))
    assert ran(report, "TP-ZERO-LOSS")
    none_of(report, "TP-ZERO-LOSS")


def test_zero_loss_onset_points_at_the_first_zero_of_the_tail(tmp_path):
    losses = falling(10) + [0.0] * 4
    rows = rows_of(losses)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-ZERO-LOSS-ONSET")
    assert f.level is Level.FAIL
    assert start_line(f) == line_of(path, step_row(rows, 110)) == 10
    assert f.evidence == {"onset_step": 110, "zero_points": 4, "last_nonzero": losses[9]}
    none_of(report, "TP-ZERO-LOSS")


def test_two_trailing_zeros_are_not_an_onset_unless_the_limit_says_so(tmp_path):
    rows = rows_of(falling(10) + [0.0, 0.0])
    path, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-ZERO-LOSS-ONSET")
    none_of(report, "TP-ZERO-LOSS-ONSET")
    _, strict = judge_rows(tmp_path, rows, Config(limits={"TP-ZERO-LOSS-ONSET": {"min_tail": 2}}))
    f = only(strict, "TP-ZERO-LOSS-ONSET")
    assert f.evidence["zero_points"] == 2 and f.evidence["onset_step"] == 110
    assert start_line(f) == line_of(path, step_row(rows, 110))


def _noisy_flat(n: int, level: float = 2.0) -> list[float]:
    """A loss that wobbles around `level` (+-5%) with no trend: a run that learns nothing."""
    return [round(level * (1 + 0.05 * ((i * 7) % 5 - 2) / 2), 6) for i in range(n)]


def test_zero_grad_norm_fails_when_the_loss_does_not_move(tmp_path):
    rows = rows_of(_noisy_flat(20), grad_norm=[0.0] * 20)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-ZERO-GRAD")
    assert f.level is Level.FAIL
    assert start_line(f) == line_of(path, rows[0])
    assert f.evidence == {"points": 20, "first_step": 10, "last_step": 200}


def test_zero_grad_norm_stands_down_when_the_loss_clearly_fell(tmp_path):
    rows = rows_of(falling(30), grad_norm=[0.0] * 30)
    _, report = judge_rows(tmp_path, rows)
    none_of(report, "TP-ZERO-GRAD")
    assert not ran(report, "TP-ZERO-GRAD")
    reason = skip_reason(report, "TP-ZERO-GRAD")
    assert "gradient norms are all 0 but the loss fell from" in reason
    assert "not the gradient the optimizer used" in reason


def test_nonzero_grad_norms_do_not_fire_zero_grad(tmp_path, healthy_rows):
    _, report = judge_rows(tmp_path, healthy_rows)
    assert ran(report, "TP-ZERO-GRAD")
    none_of(report, "TP-ZERO-GRAD")


# --- flat and dead runs ---------------------------------------------------------------

def test_constant_loss_is_flat(tmp_path):
    rows = rows_of([2.5] * 10)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-FLAT")
    assert f.level is Level.FAIL
    assert start_line(f) == line_of(path, rows[0])
    assert f.evidence == {"mean": 2.5, "relative_spread": 0.0, "points": 10}


def test_a_moving_loss_is_not_flat_and_min_points_can_skip_the_check(tmp_path, healthy_rows):
    _, report = judge_rows(tmp_path, healthy_rows)
    assert ran(report, "TP-FLAT")
    none_of(report, "TP-FLAT")
    _, short = judge_rows(tmp_path, rows_of([2.5] * 10), Config(limits={"TP-FLAT": {"min_points": 11}}))
    none_of(short, "TP-FLAT")
    assert skip_reason(short, "TP-FLAT") == "10 finite loss point(s); this check needs at least 11"


def test_a_run_without_a_downward_trend_is_dead(tmp_path):
    losses = _noisy_flat(30, 2.3)
    rows = rows_of(losses)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-DEAD-RUN")
    assert f.level is Level.FAIL
    assert start_line(f) == line_of(path, rows[-1]) == 29  # the end of the log
    w = 6  # 30 points // 5
    # The start level is the higher of the first 3 points' and the first 6 points' medians,
    # so a fall inside the first window is not hidden in its median.
    assert f.evidence["start_level"] == max(statistics.median(losses[:3]), statistics.median(losses[:w]))
    assert f.evidence["end_level"] == statistics.median(losses[-w:])
    assert f.evidence["trend_z"] > -1.0


def test_dead_run_stands_down_on_a_log_that_starts_late(tmp_path):
    # The same flat curve, but the log begins at step 5000: a resumed run at its floor.
    rows = rows_of(_noisy_flat(30, 2.3), first=5000)
    _, report = judge_rows(tmp_path, rows)
    none_of(report, "TP-DEAD-RUN")
    assert "the log starts at step 5000" in skip_reason(report, "TP-DEAD-RUN")


def test_a_learning_run_is_not_dead(tmp_path, healthy_rows):
    _, report = judge_rows(tmp_path, healthy_rows)
    assert ran(report, "TP-DEAD-RUN")
    none_of(report, "TP-DEAD-RUN")


# --- divergence -------------------------------------------------------------------------

# Falls 3.0 -> 1.1 over 20 points, sits at 1.0 for 4, then plateaus at 4.0 for 16.
# 40 points: window 4; best rolling median 1.0 (window ending at index 22), whose lowest
# point is index 20 = step 210; end level 4.0; ratio 4.0.
DIVERGING = [3.0 - 0.1 * i for i in range(20)] + [1.0] * 4 + [4.0] * 16


def test_divergence_points_at_the_end_with_the_best_step_related(tmp_path):
    rows = rows_of(DIVERGING)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-DIVERGE")
    assert f.level is Level.FAIL
    assert start_line(f) == line_of(path, step_row(rows, 400))
    assert f.evidence == {"end_level": 4.0, "best_level": 1.0, "ratio": 4.0, "best_step": 210,
                          "end_step": 400, "window": 4}
    (rel,) = f.related
    assert start_line(rel) == line_of(path, step_row(rows, 210))
    assert "step 210" in rel.message
    assert f.limits == {"min_points": 10, "max_ratio": 1.5, "min_regain": 0.1, "min_stay": 10,
                        "min_stay_fraction": 0.25, "eval_tolerance": 0.05}


def test_divergence_limit_override_changes_the_outcome(tmp_path):
    rows = rows_of(DIVERGING)
    _, report = judge_rows(tmp_path, rows, Config(limits={"TP-DIVERGE": {"max_ratio": 5.0}}))
    assert ran(report, "TP-DIVERGE")
    none_of(report, "TP-DIVERGE")
    _, report = judge_rows(tmp_path, rows, Config(limits={"TP-DIVERGE": {"max_ratio": 3.0}}))
    assert only(report, "TP-DIVERGE").limits["max_ratio"] == 3.0


def _with_evals(rows: list[dict[str, Any]], evals: dict[int, float]) -> list[dict[str, Any]]:
    out = list(rows)
    for step, v in evals.items():
        i = max(j for j, r in enumerate(out) if r["step"] <= step)
        out.insert(i + 1, {"step": step, "eval_loss": v})
    return out


def test_divergence_is_overruled_by_an_eval_loss_still_at_its_best(tmp_path):
    rows = _with_evals(rows_of(DIVERGING), {100: 2.0, 200: 1.5, 300: 1.2, 400: 1.1})
    _, report = judge_rows(tmp_path, rows)
    none_of(report, "TP-DIVERGE")
    reason = skip_reason(report, "TP-DIVERGE")
    assert "4.00x" in reason and "eval loss ends at 1.1" in reason and "best 1.1" in reason


def test_divergence_is_not_overruled_by_an_eval_loss_that_rose_too(tmp_path):
    rows = _with_evals(rows_of(DIVERGING), {100: 1.0, 200: 1.2, 300: 1.6, 400: 2.5})
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-DIVERGE")
    assert start_line(f) == line_of(path, step_row(rows, 400))
    assert f.evidence["ratio"] == 4.0


def test_long_noisy_healthy_run_does_not_diverge(tmp_path):
    # 2000 points, +-40% seeded noise around a curve falling slowly from 3.0 to 2.0,
    # eval improving every 100 steps: nothing is wrong with this run.
    rng = random.Random(20240601)
    rows: list[dict[str, Any]] = []
    for i in range(2000):
        base = 3.0 - 1.0 * i / 1999
        rows.append({"step": i + 1, "loss": round(base * (1 + rng.uniform(-0.4, 0.4)), 5),
                     "learning_rate": 3e-4})
        if (i + 1) % 100 == 0:
            rows.append({"step": i + 1, "eval_loss": round(2.9 - 0.04 * ((i + 1) // 100), 4)})
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-DIVERGE")
    none_of(report, "TP-DIVERGE")
    assert [f.id for f in report.findings if f.level in (Level.FAIL, Level.WARN)] == []
    assert report.verdict is Verdict.PASS


# --- spikes ------------------------------------------------------------------------------

# A spike to 8.0 at index 8 (step 90) over a level of 1.5 (the points before it all sit
# at 1.5, so the level does not depend on how many of them the rule takes), then back to
# 1.4 at once, or staying near 7.65.
RECOVERED_SPIKE = [1.5] * 8 + [8.0, 1.4, 1.3, 1.2, 1.1, 1.0, 0.95, 0.9]
UNRECOVERED_SPIKE = [1.5] * 8 + [8.0, 7.5, 7.8, 7.6, 7.7, 7.9, 7.4, 7.6, 7.5, 7.7, 7.8]


def test_recovered_loss_spike_warns_at_the_spike(tmp_path):
    rows = rows_of(RECOVERED_SPIKE)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-LOSS-SPIKE")
    assert f.level is Level.WARN
    assert report.verdict is Verdict.WARN
    assert start_line(f) == line_of(path, step_row(rows, 90)) == 8
    assert f.evidence == {"step": 90, "value": 8.0, "level_before": 1.5, "ratio": 8.0 / 1.5,
                          "level_after": 1.1, "spikes": 1, "points_after": 7}
    assert "recovered" in f.message
    none_of(report, "TP-LOSS-SPIKE-UNRECOVERED")


def test_loss_spike_limit_override_and_a_smooth_curve(tmp_path, healthy_rows):
    _, report = judge_rows(tmp_path, rows_of(RECOVERED_SPIKE),
                           Config(limits={"TP-LOSS-SPIKE": {"spike_ratio": 6.0}}))
    none_of(report, "TP-LOSS-SPIKE")
    _, report = judge_rows(tmp_path, healthy_rows)
    assert ran(report, "TP-LOSS-SPIKE")
    none_of(report, "TP-LOSS-SPIKE")


def test_unrecovered_loss_spike_fails_at_the_spike(tmp_path):
    rows = rows_of(UNRECOVERED_SPIKE)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-LOSS-SPIKE-UNRECOVERED")
    assert f.level is Level.FAIL
    assert start_line(f) == line_of(path, step_row(rows, 90)) == 8
    assert f.evidence == {"step": 90, "value": 8.0, "level_before": 1.5, "ratio": 8.0 / 1.5,
                          "level_after": 7.65, "spikes": 1, "points_after": 10}
    assert "stays at 7.65 over the next 10 points" in f.message
    none_of(report, "TP-LOSS-SPIKE")


def test_a_recovered_spike_is_not_unrecovered(tmp_path):
    _, report = judge_rows(tmp_path, rows_of(RECOVERED_SPIKE))
    assert ran(report, "TP-LOSS-SPIKE-UNRECOVERED")
    none_of(report, "TP-LOSS-SPIKE-UNRECOVERED")


def test_grad_spike_points_at_the_largest_and_relates_the_others(tmp_path):
    grads = [1.0] * 20
    grads[7] = 50.0  # step 80
    grads[15] = 20.0  # step 160
    loss = falling(20)
    loss[7] *= 1.3  # the loss notices both batches: a peak it does not notice is no spike
    loss[15] *= 1.3
    rows = rows_of(loss, grad_norm=grads)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-GRAD-SPIKE")
    assert f.level is Level.WARN
    assert start_line(f) == line_of(path, step_row(rows, 80))
    # The start-up phase would last until the loss level has made half its fall (step 60),
    # but is capped at the first 10% of the 20 logged norms: it ends at step 30.
    assert f.evidence == {"max_grad_norm": 50.0, "median": 1.0, "ratio": 50.0, "step": 80, "spikes": 2,
                          "startup_end_step": 30, "quiet_peaks": 0}
    (rel,) = f.related
    assert start_line(rel) == line_of(path, step_row(rows, 160))
    assert rel.message == "gradient norm 20 at step 160"


def test_grad_spike_under_the_limit_does_not_fire(tmp_path):
    grads = [1.0] * 20
    grads[5] = 5.0
    _, report = judge_rows(tmp_path, rows_of(falling(20), grad_norm=grads))
    assert ran(report, "TP-GRAD-SPIKE")
    none_of(report, "TP-GRAD-SPIKE")
    grads[5] = 50.0
    _, report = judge_rows(tmp_path, rows_of(falling(20), grad_norm=grads),
                           Config(limits={"TP-GRAD-SPIKE": {"max_ratio": 60.0}}))
    none_of(report, "TP-GRAD-SPIKE")


# --- loss above a uniform guess ------------------------------------------------------------

def _config_json(folder: Path, **cfg: Any) -> Path:
    path = folder / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


# Falls from 9.0 but settles at 6.0, above 1.15 x ln(64) = 4.78: where the run ends up is
# worse than a uniform guess.
ABOVE_UNIFORM = [9.0, 8.0, 7.0, 6.5, 6.2, 6.0, 6.1, 5.9, 6.0, 6.1]


def test_loss_above_uniform_uses_the_vocab_of_the_adjacent_config(tmp_path):
    config = _config_json(tmp_path, architectures=["GPT2LMHeadModel"], vocab_size=64)
    rows = rows_of(ABOVE_UNIFORM)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-LOSS-ABOVE-UNIFORM")
    assert f.level is Level.FAIL
    # The end level is the median of the last 3 points (steps 80-100): 6.0; the finding
    # points at the window's first entry, the best level (also 6.0, first reached in the
    # window ending at step 80) is related.
    assert start_line(f) == line_of(path, step_row(rows, 80))
    assert f.evidence == {"level": 6.0, "best_level": 6.0, "uniform_bound": math.log(64),
                          "ratio": 6.0 / math.log(64), "num_classes": 64, "step": 80, "last_step": 100}
    assert f"classes from {config}" in f.message
    (rel,) = f.related
    assert start_line(rel) == line_of(path, step_row(rows, 80))


def test_a_high_start_that_falls_below_ln_v_is_not_above_uniform(tmp_path):
    # An mT5-like fine-tune: starts at 21.8, far above ln(250112) = 12.4, falls to 2.2.
    _config_json(tmp_path, architectures=["MT5ForConditionalGeneration"], vocab_size=250112)
    losses = [21.8, 19.5, 16.0] + falling(30, start=12.0, end=2.2)
    _, report = judge_rows(tmp_path, rows_of(losses))
    assert ran(report, "TP-LOSS-ABOVE-UNIFORM")
    none_of(report, "TP-LOSS-ABOVE-UNIFORM")
    assert report.verdict is Verdict.PASS


def test_a_transient_excursion_above_ln_v_is_not_above_uniform(tmp_path):
    _config_json(tmp_path, architectures=["GPT2LMHeadModel"], vocab_size=64)
    losses = [4.2, 4.1, 4.0, 6.0, 6.5, 6.2, 4.0, 3.9, 3.8, 3.7, 3.6, 3.5]
    _, report = judge_rows(tmp_path, rows_of(losses))
    assert ran(report, "TP-LOSS-ABOVE-UNIFORM")
    none_of(report, "TP-LOSS-ABOVE-UNIFORM")


def test_a_from_scratch_run_starting_at_ln_v_is_not_above_uniform(tmp_path):
    _config_json(tmp_path, architectures=["GPT2LMHeadModel"], vocab_size=64)
    ln_v = math.log(64)
    losses = [round(ln_v * 1.05, 4), round(ln_v, 4)] + falling(20, start=ln_v, end=2.0)
    _, report = judge_rows(tmp_path, rows_of(losses))
    assert ran(report, "TP-LOSS-ABOVE-UNIFORM")
    none_of(report, "TP-LOSS-ABOVE-UNIFORM")


def test_loss_above_uniform_is_skipped_when_the_vocab_is_unknown(tmp_path):
    _, report = judge_rows(tmp_path, rows_of(ABOVE_UNIFORM))
    none_of(report, "TP-LOSS-ABOVE-UNIFORM")
    assert skip_reason(report, "TP-LOSS-ABOVE-UNIFORM").startswith("number of classes unknown")


def test_configured_vocab_size_wins_over_the_adjacent_config(tmp_path):
    _config_json(tmp_path, architectures=["GPT2LMHeadModel"], vocab_size=64)
    rows = rows_of(ABOVE_UNIFORM)
    _, report = judge_rows(tmp_path, rows, Config(vocab_size=1000, vocab_source="--vocab-size"))
    none_of(report, "TP-LOSS-ABOVE-UNIFORM")  # ln(1000) = 6.9: 6.2 is under it
    (tmp_path / "config.json").unlink()
    _, report = judge_rows(tmp_path, rows, Config(vocab_size=64, vocab_source="--vocab-size"))
    f = only(report, "TP-LOSS-ABOVE-UNIFORM")
    assert f.evidence["num_classes"] == 64 and "classes from --vocab-size" in f.message
    _, report = judge_rows(tmp_path, rows, Config(vocab_size=64, vocab_source="--vocab-size",
                                                  limits={"TP-LOSS-ABOVE-UNIFORM": {"margin": 1.5}}))
    none_of(report, "TP-LOSS-ABOVE-UNIFORM")


# --- learning rate -------------------------------------------------------------------------

def test_zero_learning_rate_everywhere_fails(tmp_path):
    rows = rows_of(_noisy_flat(10), learning_rate=[0.0] * 10)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-ZERO-LR")
    assert f.level is Level.FAIL
    assert start_line(f) == line_of(path, rows[0])
    assert f.evidence == {"points": 10, "first_step": 10, "last_step": 100}
    none_of(report, "TP-ZERO-LR-PARTIAL")


def test_a_positive_learning_rate_is_not_zero(tmp_path, healthy_rows):
    _, report = judge_rows(tmp_path, healthy_rows)
    assert ran(report, "TP-ZERO-LR")
    none_of(report, "TP-ZERO-LR")


def test_a_stretch_of_zero_learning_rate_warns_at_its_start(tmp_path):
    lrs = [1e-3] * 20
    lrs[5:10] = [0.0] * 5  # steps 60-100
    rows = rows_of(falling(20), learning_rate=lrs)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-ZERO-LR-PARTIAL")
    assert f.level is Level.WARN
    assert start_line(f) == line_of(path, step_row(rows, 60))
    assert f.evidence == {"zero_points": 5, "points": 20, "fraction": 0.25, "first_step": 60}
    _, lenient = judge_rows(tmp_path, rows, Config(limits={"TP-ZERO-LR-PARTIAL": {"max_zero_fraction": 0.3}}))
    none_of(lenient, "TP-ZERO-LR-PARTIAL")


@pytest.mark.parametrize("lrs", [
    pytest.param([1e-3 * (1 - i / 19) for i in range(20)], id="decays-to-0-at-the-last-of-20-steps"),
    pytest.param([1e-3, 7.5e-4, 5e-4, 2.5e-4, 0.0], id="decays-to-0-at-the-last-of-5-steps"),
    pytest.param([0.0] + [1e-3] * 19, id="warm-up-logs-0-first-of-20-steps"),
    pytest.param([0.0, 1e-3, 1e-3, 1e-3, 1e-3], id="warm-up-logs-0-first-of-5-steps"),
    pytest.param([0.0, 1e-3, 6e-4, 3e-4, 0.0], id="warm-up-from-0-and-decay-to-0-in-5-steps"),
])
def test_a_schedule_endpoint_at_zero_is_not_a_stretch(tmp_path, lrs):
    # HF logs lr 0 at step 1 of a warm-up and a linear decay reaches 0 at the last step:
    # one point at an end of the schedule, however short the log (the rule's doc).
    rows = rows_of(falling(len(lrs)), learning_rate=lrs)
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-ZERO-LR-PARTIAL")
    none_of(report, "TP-ZERO-LR-PARTIAL")
    none_of(report, "TP-ZERO-LR")


# --- overfitting -------------------------------------------------------------------------

OVERFIT_EVALS = {40: 2.0, 80: 1.5, 120: 1.9, 160: 2.2, 200: 2.4}


def _overfit_rows() -> list[dict[str, Any]]:
    return _with_evals(rows_of(falling(20)), OVERFIT_EVALS)


def _eval_line(path: Path, rows: list[dict[str, Any]], step: int) -> int:
    return line_of(path, step_row(rows, step, "eval_loss"))


def test_overfit_names_the_best_checkpoint_when_it_exists(tmp_path):
    (tmp_path / "checkpoint-80").mkdir()
    (tmp_path / "checkpoint-200").mkdir()
    rows = _overfit_rows()
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-OVERFIT")
    assert f.level is Level.WARN
    assert report.verdict is Verdict.WARN
    assert start_line(f) == _eval_line(path, rows, 200)
    (rel,) = f.related
    assert start_line(rel) == _eval_line(path, rows, 80)
    assert f.evidence["best_eval"] == 1.5 and f.evidence["best_step"] == 80
    assert f.evidence["last_eval"] == 2.4 and f.evidence["last_step"] == 200
    # Levels are medians of an eval and its neighbours: the lowest before the last three
    # evals is median(2.0, 1.5) = 1.75 (step 40), the end level median(1.9, 2.2, 2.4) = 2.2.
    assert f.evidence["best_level"] == 1.75 and f.evidence["end_level"] == 2.2
    assert f.evidence["ratio"] == 2.2 / 1.75
    assert f.evidence["train_end"] < f.evidence["train_at_best"]
    assert f.evidence["best_checkpoint_exists"] is True
    assert "checkpoint-80 exists beside the log" in f.message


def test_overfit_says_when_the_best_checkpoint_was_not_saved(tmp_path):
    (tmp_path / "checkpoint-40").mkdir()
    (tmp_path / "checkpoint-120").mkdir()
    _, report = judge_rows(tmp_path, _overfit_rows())
    f = only(report, "TP-OVERFIT")
    assert f.evidence["best_checkpoint_exists"] is False
    assert "no checkpoint from step 80 beside the log (saved: 40, 120)" in f.message


def test_overfit_without_any_checkpoint_folder(tmp_path):
    _, report = judge_rows(tmp_path, _overfit_rows())
    f = only(report, "TP-OVERFIT")
    assert f.evidence["best_checkpoint_exists"] is False
    assert "no checkpoint from step 80 found beside the log" in f.message


def test_improving_eval_loss_is_not_overfitting(tmp_path):
    rows = _with_evals(rows_of(falling(20)), {40: 2.0, 80: 1.8, 120: 1.6, 160: 1.5, 200: 1.4})
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-OVERFIT")
    none_of(report, "TP-OVERFIT")
    # The rising run with the rise limit raised above its 1.26x: quiet (the noise limit on
    # each side: tests/test_verdict_classes.py).
    _, lenient = judge_rows(tmp_path, _overfit_rows(), Config(limits={"TP-OVERFIT": {"min_rise": 0.3}}))
    none_of(lenient, "TP-OVERFIT")


# --- steps and timing ---------------------------------------------------------------------

def test_steps_going_back_warn_at_the_rewind_with_the_earlier_point_related(tmp_path):
    # A resume from the checkpoint at step 30 re-logs 30-50: one run that rewound (not back
    # to its start, so not an appended run).
    rows = [{"step": s, "loss": v} for s, v in zip([10, 20, 30, 40, 50, 30, 40, 50, 60], falling(9))]
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-STEP-ORDER")
    assert f.level is Level.WARN
    assert start_line(f) == line_of(path, rows[5]) == 5
    assert f.evidence == {"step": 30, "previous_step": 50, "rewinds": 1, "overlap": 3}
    assert "goes back to 30 after step 50" in f.message and "re-logs 3 step(s)" in f.message
    assert report.segments == ()
    (rel,) = f.related
    assert start_line(rel) == line_of(path, rows[2]) == 2


def test_eval_entries_at_a_train_step_are_not_out_of_order(tmp_path):
    rows = _with_evals(rows_of(falling(20)), {40: 2.0, 80: 1.8, 120: 1.6, 160: 1.5, 200: 1.4})
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-STEP-ORDER")
    none_of(report, "TP-STEP-ORDER")


def test_step_time_cliff_points_at_the_first_slow_step(tmp_path):
    rows = rows_of(falling(20), step_time=[0.5] * 10 + [1.5] * 10)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-STEP-CLIFF")
    assert f.level is Level.WARN
    assert start_line(f) == line_of(path, step_row(rows, 110))
    assert f.evidence == {"early_step_time": 0.5, "late_step_time": 1.5, "ratio": 3.0, "slow_from_step": 110}
    _, lenient = judge_rows(tmp_path, rows, Config(limits={"TP-STEP-CLIFF": {"max_ratio": 4.0}}))
    none_of(lenient, "TP-STEP-CLIFF")


def test_a_slow_first_step_is_not_a_cliff(tmp_path):
    _, report = judge_rows(tmp_path, rows_of(falling(20), step_time=[5.0] + [0.5] * 19))
    assert ran(report, "TP-STEP-CLIFF")
    none_of(report, "TP-STEP-CLIFF")


def test_loader_bound_run_warns_at_its_worst_step(tmp_path):
    data = [0.7] * 10
    data[6] = 0.9  # step 70
    rows = rows_of(falling(10), step_time=[1.0] * 10, data_time=data)
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-LOADER-BOUND")
    assert f.level is Level.WARN
    assert start_line(f) == line_of(path, step_row(rows, 70))
    assert f.evidence == {"median_fraction": 0.7, "steps_compared": 10}


def test_a_fast_loader_is_not_loader_bound(tmp_path):
    rows = rows_of(falling(10), step_time=[1.0] * 10, data_time=[0.1] * 10)
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-LOADER-BOUND")
    none_of(report, "TP-LOADER-BOUND")
    rows = rows_of(falling(10), step_time=[1.0] * 10, data_time=[0.7] * 10)
    _, lenient = judge_rows(tmp_path, rows, Config(limits={"TP-LOADER-BOUND": {"max_fraction": 0.8}}))
    none_of(lenient, "TP-LOADER-BOUND")


def test_throughput_is_reported_as_info_without_changing_the_verdict(tmp_path):
    rows = rows_of(falling(10), samples_per_second=[100.0, None, 120.0, None, 110.0, None, None, None, None, None])
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-THROUGHPUT")
    assert f.level is Level.INFO
    assert report.verdict is Verdict.PASS
    assert start_line(f) == line_of(path, step_row(rows, 50))  # the last point that states it
    assert f.evidence == {"throughput": 110.0, "unit": "samples_per_second", "points": 3}


def test_throughput_falls_back_to_step_time_and_is_skipped_without_either(tmp_path, healthy_rows):
    rows = rows_of(falling(10), step_time=[0.5] * 10)
    _, report = judge_rows(tmp_path, rows)
    assert only(report, "TP-THROUGHPUT").evidence == {"steps_per_second": 2.0, "median_step_time": 0.5,
                                                      "points": 10}
    _, report = judge_rows(tmp_path, healthy_rows)
    none_of(report, "TP-THROUGHPUT")
    assert skip_reason(report, "TP-THROUGHPUT") == "no throughput or step-time values in the log"


# --- select / ignore ----------------------------------------------------------------------

def _broken_rows() -> list[dict[str, Any]]:
    losses: list[float] = falling(20)
    losses[10:] = [NAN] * 10
    return rows_of(losses, grad_norm=[1.0] * 10 + [NAN] * 10)


def test_select_runs_only_the_named_rules(tmp_path):
    _, everything = judge_rows(tmp_path, _broken_rows())
    assert {"TP-NAN", "TP-NAN-GRAD"} <= set(ids(everything))
    _, report = judge_rows(tmp_path, _broken_rows(), Config(select=frozenset({"TP-NAN"})))
    assert ids(report) == ["TP-NAN"]
    assert [c.group for c in report.checks if c.ran] == ["TP-NAN"]
    assert skip_reason(report, "TP-NAN-GRAD") == "disabled by configuration"


def test_ignore_drops_a_rule_and_keeps_the_rest(tmp_path):
    _, report = judge_rows(tmp_path, _broken_rows(), Config(ignore=frozenset({"TP-NAN"})))
    assert "TP-NAN" not in ids(report)
    assert skip_reason(report, "TP-NAN") == "disabled by configuration"
    assert only(report, "TP-NAN-GRAD").evidence == {"first_step": 110, "streak": 10, "at_end": True}
    assert report.verdict is Verdict.FAIL
